"""`hloscope kernels` and `hloscope lint` as text."""

from __future__ import annotations

import itertools

from .._analysis._advisor import Advice
from .._analysis._figures import optimized_note
from .._analysis._devices import Device, link_bandwidth, platform_of
from .._analysis._kernels import KernelGraph, ratio
from ._term import fit, safe
from .._units import format_count, format_seconds
from ._text import format_bytes, table

__all__ = ["format_count", "render_advice", "render_kernels"]


def _n(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _fused(k) -> str:  # type: ignore[no-untyped-def]
    if k.category == "library call":
        return k.target
    parts = [f"{op} {n}" if n > 1 else op for op, n in k.fused[:4]]
    if len(k.fused) > 4:
        parts.append(f"+{len(k.fused) - 4}")
    return ", ".join(parts) or "-"


# The kernel table's columns to leave out, in order, when the lines get too narrow; with a
# device its roofline time stands in for the flops.
_DROP = {False: ("inputs", "kind", "output"), True: ("inputs", "kind", "bound", "flops", "output")}


SORT_KEYS = ("order", "time", "bytes", "flops")
# The kernels the table lists without --top (the first, in the order asked for; a line
# says how many more there are): a million rows is more than anyone reads, and writing
# them costs more than the analysis.
MAX_ROWS = 20_000


def render_kernels(g: KernelGraph, *, device: Device | None = None, scheduled: bool = True,
                   top_edges: int = 20, width: int | None = None, sort: str = "order",
                   top: int | None = None, measured: dict[str, float] | None = None) -> str:
    """`hloscope kernels`: the kernels by group, the arrays between them, the collectives,
    in `width` columns (None: every line whole).  `sort` (``time``, ``bytes``, ``flops``)
    lists the kernels in one table, largest first (``time`` needs `device`); `top` keeps
    the first N.  `measured`: each kernel's measured time per run (seconds) from a
    profile, as a column."""
    out = [f"Module {safe(g.module)}", f"  from {safe(g.file)}"]
    if not scheduled:
        out.append("  " + optimized_note(False))
        out.append("  below, every operation counts as a kernel, as if the module ran as written")
    temps = g.temporaries
    peak = ""
    if g.peak_allocated_bytes is not None:  # as `hloscope memory`'s headline sizes it
        peak = (f", memory peak {format_bytes(g.peak_allocated_bytes)} (tiles padded; "
                f"unpadded {format_bytes(g.peak_bytes)})")
    elif g.peak_bytes is not None:
        peak = f", memory peak {format_bytes(g.peak_bytes)}"
    out.append(f"  {_n(len(g.kernels), 'kernel')}, {_n(len(temps), 'array')} passed between "
               f"kernels ({format_bytes(g.temporary_bytes)}){peak}")
    flops = sum(k.flops for k in g.kernels)
    moved = sum(k.bytes_accessed for k in g.kernels)
    out.append(f"  {format_count(flops)} flops, {format_bytes(moved)} accessed"
               + (f", intensity {ratio(flops, moved):.2f} flop/byte" if moved else ""))
    looped = any(g.runs_of(k.group) > 1 for k in g.kernels)
    if looped:
        f_run, b_run = g.per_run
        out.append(f"  (each kernel once; a loop's kernels run as often as the loop: "
                   f"{format_count(f_run)} flops, {format_bytes(b_run)} accessed per run)")
    if g.emitter_copies:
        each = ", ".join(f"{safe(c.value)} into {safe(c.kernel)} ({format_bytes(c.bytes)})"
                         for c in g.emitter_copies[:3])
        more = f", +{len(g.emitter_copies) - 3}" if len(g.emitter_copies) > 3 else ""
        out.append(f"  and {_n(len(g.emitter_copies), 'copy thunk')} XLA's GPU emitter runs "
                   f"before sorts, which sort in place in their output: {each}{more}")
    out.append("")
    if top is None and len(g.kernels) > MAX_ROWS:
        top = MAX_ROWS
    headers = ["kernel", "kind", "fused / target", "inputs", "output", "bytes", "flops"]
    per_run = looped and sort != "order"  # ranked per run: a loop's kernel times its runs
    if per_run:
        headers.insert(1, "runs")
    if device is not None:
        headers += [f"{device.name} time" + (" (estimated)" if measured is not None else ""),
                    "bound"]
    if measured is not None:
        from ._profile_text import format_time

        headers.append("measured")
    headers.append("source")
    right = (5, 6, 7) if device is not None else (5, 6)
    if per_run:
        right = (1,) + tuple(i + 1 for i in right)
    if measured is not None:
        right += (len(headers) - 2,)
    # A collective's time is its transfer at the link bandwidth, as the advisor prices it.
    sent = {c.name: c.sent_per_device or c.bytes for c in g.collectives}
    link = link_bandwidth(platform_of(device)) if device is not None else 0.0

    def seconds(k):  # type: ignore[no-untyped-def]
        t = k.roofline_seconds(device, k.element_type)
        return max(t, ratio(sent.get(k.name, 0), link))

    inputs: dict[str, dict[str, None]] = {}  # by kernel listed, what it reads (once each)

    def read_by(ks: list) -> None:  # type: ignore[type-arg]
        names = {k.name for k in ks}
        for e in g.edges:
            if e.dst in names and e.dst != "result":
                label = e.src if e.src_kind == "kernel" else f"{e.src_kind}:{e.src}"
                inputs.setdefault(e.dst, {})[label] = None

    def row(k):  # type: ignore[no-untyped-def]
        kind = k.category + (f" {k.fusion_kind}" if k.fusion_kind else "")
        ins = list(itertools.islice(inputs.get(k.name, {}), 4))
        cells = [k.name, kind, _fused(k), ", ".join(ins[:3]) + (" ..." if len(ins) > 3 else "")
                 or "-", k.shape, format_bytes(k.bytes_out), format_count(k.flops)]
        if per_run:
            cells.insert(1, f"x{g.runs_of(k.group)}")
        if device is not None:
            et = k.element_type
            t = k.roofline_seconds(device, et)
            peak = device.peak_flops(et)
            bound = "compute" if peak and ratio(k.flops, peak) >= ratio(
                k.bytes_accessed, device.bandwidth) else "memory"
            if ratio(sent.get(k.name, 0), link) > t:
                t, bound = sent[k.name] / link, "link"
            cells += [format_seconds(t), bound]
        if measured is not None:
            cells.append(format_time(measured[k.name]) if k.name in measured else "-")
        cells.append(k.source or "-")
        return cells

    def listed(title: str, ks: list) -> None:  # type: ignore[type-arg]
        out.append(title)
        out.append(table(headers, [row(k) for k in ks], right=right, width=width,
                         drop=_DROP[device is not None]))
        out.append("")

    kernels = list(g.kernels)
    if sort != "order":
        if sort == "time":
            assert device is not None, "sorting by time needs a device"
            key = seconds
        else:
            key = (lambda k: k.bytes_out) if sort == "bytes" else (lambda k: k.flops)
        kernels.sort(key=lambda k: key(k) * g.runs_of(k.group), reverse=True)
        shown = kernels[:top] if top is not None else kernels
        read_by(shown)
        what = {"time": "longest estimated time", "bytes": "most bytes written",
                "flops": "most flops"}[sort] + (" per run (a loop's kernels times its runs)"
                                                if per_run else "")
        listed(f"Kernels with the {what}: {len(shown)} of {len(kernels)}"
               + (f" ({device.name} estimates)" if sort == "time" and device else ""), shown)
    else:
        shown = kernels[:top] if top is not None else kernels
        read_by(shown)
        by_group: dict[str, list] = {}  # type: ignore[type-arg]
        for k in shown:
            by_group.setdefault(k.group, []).append(k)
        group_info = {gr.name: gr for gr in g.groups}
        for group, ks in by_group.items():
            gi = group_info.get(group)
            title = (f"{gi.kind} {group} (of {gi.caller} in {gi.parent})" if gi is not None
                     else f"entry {group}")
            listed(f"{safe(title)}: {_n(len(ks), 'kernel')}", ks)
    if len(shown) < len(kernels):
        out.insert(len(out) - 1, f"  ... and {len(kernels) - len(shown)} more kernels "
                                 "(--top N shows more)")
    temp_set = set(temps)
    passed = [e for e in g.edges if e.value in temp_set and e.dst != "result"]
    if passed:
        out.append("Arrays passed between kernels")
        rows = [[e.value, f"{e.src} -> {e.dst}", e.shape, format_bytes(e.bytes), e.kind,
                 "yes" if e.live_at_peak else "-"] for e in passed[:top_edges]]
        out.append(table(["array", "from -> to", "shape", "bytes", "kind", "at peak"], rows,
                         right=(3,), width=width, drop=("at peak", "kind")))
        if len(passed) > top_edges:
            out.append(f"  ... and {len(passed) - top_edges} more (see --json)")
        out.append("")
    if g.collectives:
        out.append(f"Collectives ({len(g.collectives)})")
        rows = [[c.name, c.opcode, c.shape, f"{len(c.groups) or 1} x {c.group_size}",
                 format_bytes(c.sent_per_device), format_bytes(c.received_per_device),
                 c.source or "-"] for c in g.collectives]
        out.append(table(["name", "opcode", "shape", "groups", "sent/device", "received/device",
                          "source"], rows, right=(4, 5), width=width,
                         drop=("opcode", "groups", "received/device")))
        out.append("")
    if device is not None:
        out.append(f"Roofline device {device.name}: {device.source}")
    return fit("\n".join(out).rstrip("\n") + "\n", width)


def render_advice(module: str, advice: Advice, *, top: int | None = 10,
                  width: int | None = None) -> str:
    """`hloscope lint`: the groups of findings, the largest saving first (the `top` ones;
    None for all), each with what it would save, its places and what to try, in `width`
    columns (None: every line whole); a module XLA has not optimized says so first."""
    groups = advice.groups
    n = sum(g.count for g in groups)
    shown = groups if top is None else groups[:top]
    head = f"Module {safe(module)}: {_n(len(groups), 'finding')}"
    if n != len(groups):
        head += f" ({n} places)"
    out = [head + (", ranked by what acting on each would save" if groups else "")]
    if not advice.optimized:
        out.append("  " + optimized_note(False))
        out.append("  only the rules about what survives compilation ran (constants, "
                   "donation, f64, upcasts, unrolled loops); compile it for the others")
    if advice.device:
        out.append(f"  times estimated for {safe(advice.device)}")
    for note in advice.notes:
        out.append(f"  note: {safe(note)}")
    below = advice.quiet - advice.explained  # (the others' notes say why they are out)
    if below > 0:
        out.append(f"  {_n(below, 'more place')} where a rule fired would save under 1% "
                   "of the program's peak or time: left out (--min-share 0 lists them)")
    for rank, g in enumerate(shown, 1):
        f = g.first
        out.append("")
        out.append(safe(f"{rank}. {g.rule} {g.kind}: {g.title}"
                        + (f" (x{g.count})" if g.count > 1 else "")))
        c = g.check
        share = g.share_text
        if c is not None and c.status == "checked":
            out.append(f"  saves {c.amount(c.saved)} of {c.figure} ({share})")
            out.append(f"  {safe(g.check_line(advice.device))}")
        elif g.basis.startswith("measured"):  # the saving estimated, the share measured
            out.append(f"  saves {g.saving.describe(advice.device)}, "
                       f"{safe(g.check_line(advice.device))} ({share})")
        else:
            out.append(f"  saves {g.saving.describe(advice.device)} ({share}), "
                       f"{safe(g.check_line(advice.device))}")
        out.append(f"  {safe(f.message)}")
        for op_name, source, count in g.places[:3]:
            where = ", ".join(safe(x) for x in (op_name, source) if x) or "-"
            out.append(f"  at {where}" + (f" (x{count})" if count > 1 else ""))
        if len(g.places) > 3:
            out.append(f"  and {_n(len(g.places) - 3, 'more place')}")
        for e in f.evidence[:4]:
            out.append(f"  - {e.what} {safe(e.name)} {safe(e.shape)} ({format_bytes(e.bytes)})")
        out.append(f"  try: {safe(f.suggestion)}")
    if top is not None and len(groups) > top:
        out.append("")
        out.append(f"{_n(len(groups) - top, 'more finding')} with smaller savings: --all "
                   "shows every one")
    return fit("\n".join(out) + "\n", width)
