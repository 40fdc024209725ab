"""Plain-text rendering of report data: deterministic, no terminal needed.

Renderers take report data (never a module or its text) and return strings,
so the same input gives byte-identical output for golden tests.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from .._analysis._figures import optimized_note
from .._analysis._summary import ModuleSummary
from .._units import format_bytes
from ._term import fit, fit_columns, middle, safe, short_paths, tail

__all__ = ["format_bytes", "table", "table_left_out", "render_summary", "render_json",
           "render_module_list"]


_PATH_COLUMNS = frozenset({"source", "made by"})


# A shape with its layout, as HLO prints it: f32[512,512]{1,0}.
_LAID_OUT = re.compile(r"([a-z]\w*\[[\d,?<=\s]*\])\{[^{}]*\}")


def _cut_shape(cell: str, width: int) -> str:
    """A shape cut to `width`: without its layout where that is enough, else cut in the
    middle; another cell, cut in the middle."""
    bare = _LAID_OUT.sub(r"\1", cell) if _LAID_OUT.fullmatch(cell) else cell
    return bare if len(bare) <= width else middle(bare, width)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[int] = (),
          width: int | None = None, drop: Sequence[str] = (), indent: str = "  ") -> str:
    """A text table (`table_left_out` says which columns it left out to fit `width`)."""
    return table_left_out(headers, rows, right=right, width=width, drop=drop,
                          indent=indent)[0]


def table_left_out(headers: Sequence[str], rows: Sequence[Sequence[Any]], *,
                   right: Sequence[int] = (), width: int | None = None,
                   drop: Sequence[str] = (), indent: str = "  ",
                   whole: str | None = None) -> tuple[str, list[str]]:
    """A text table, and the `headers` of the columns it left out to fit `width` (in
    order; none without `width`).  Columns are left-aligned, those listed in `right`
    (numbers) right-aligned.

    Every cell is shown `safe`.  With `width`, each line fits in that many columns:
    the widest left-aligned columns are cut in the middle with an ellipsis, and when
    that is not enough the columns named in `drop` are left out, in that order (see
    `fit_columns`); in the ``source`` and ``made by`` columns a path inside an installed
    package is written from the package (``torch/nn/functional.py:3458``) and one under
    the working directory relative to it, and a ``source`` too long for its column keeps
    its end (the file's name and line).  With no `width` (``--wide``) every cell is
    whole.
    """
    heads = [safe(str(h)) for h in headers]
    cells = [_safe_row(row) for row in rows]
    if width is not None:  # source columns: the package's path or the project's (--wide: whole)
        cwd = os.getcwd()
        for k in (k for k, h in enumerate(heads) if h in _PATH_COLUMNS):
            for row in cells:
                if k < len(row):
                    row[k] = short_paths(row[k], cwd)
    natural = [len(h) for h in heads]
    if all(len(row) == len(heads) for row in cells):
        for k, column in enumerate(zip(*cells)):
            natural[k] = max(natural[k], max(map(len, column)))
    else:
        for row in cells:
            for k, c in enumerate(row):
                natural[k] = max(natural[k], len(c))
    sources = {k for k, h in enumerate(heads) if h == "source"}  # cut at the start
    keep, widths = list(range(len(heads))), natural
    if width is not None:
        room = width - len(indent)
        if cells and sum(natural) + 2 * (len(natural) - 1) > room:
            # a column with nothing in it ("-" in every row) goes before any cell is cut
            empty = [k for k in range(1, len(heads))
                     if all(k >= len(row) or row[k] in ("-", "") for row in cells)]
            if empty:
                kept = [k for k in range(len(heads)) if k not in empty]
                sub, gone = table_left_out(
                    [headers[k] for k in kept],
                    [[row[k] for k in kept if k < len(row)] for row in rows],
                    right=[kept.index(k) for k in right if k in kept], width=width,
                    drop=[d for d in drop if d in [headers[k] for k in kept]], indent=indent,
                    whole=whole)
                return sub, [h for k, h in enumerate(headers) if k in empty or h in gone]
        keep, widths = fit_columns(heads, natural, room, fixed=set(right),
                                   drop=[heads.index(d) for d in drop if d in heads],
                                   whole=heads.index(whole) if whole in heads else None)

    # Per column kept: its index, width, how a long cell is cut and how it is aligned.
    # A shape too long for its column loses its layout ({1,0}) before its dimensions.
    # (Judged on the first rows of the columns that are cut: a table may hold 10^6 rows.)
    shapes = {k for k, w in zip(keep, widths) if natural[k] > w and any(
        _LAID_OUT.fullmatch(row[k]) for row in cells[:64] if k < len(row))}
    columns = [(k, w, tail if k in sources else _cut_shape if k in shapes else middle,
                str.rjust if k in right else str.ljust) for k, w in zip(keep, widths)]

    def line(vals: Sequence[str]) -> str:
        return (indent + "  ".join([
            align(v if len(v := vals[k]) <= w else cut(v, w), w)
            for k, w, cut, align in columns])).rstrip()

    left_out = [h for k, h in enumerate(headers) if k not in keep]
    rule = (indent + "  ".join("-" * w for w in widths)).rstrip()
    if all(natural[k] <= w for k, w in zip(keep, widths)) and all(widths):
        # Nothing to cut (always so without `width`): each row laid out by one format
        # string, `ljust` and `rjust` as its fields (a table of 10^6 kernels).
        fmt = indent + "  ".join(("{:>%d}" if k in right else "{:<%d}") % w
                                 for k, w in zip(keep, widths))
        body = [fmt.format(*[r[k] for k in keep]).rstrip() for r in cells]
        return "\n".join([line(heads), rule, *body]), left_out
    return "\n".join([line(heads), rule] + [line(r) for r in cells]), left_out


def _safe_row(row: Sequence[Any]) -> list[str]:
    """The cells of `row` as text, each `safe` (one test for a row that needs nothing)."""
    vals = list(map(str, row))  # (a str is its own str)
    if "".join(vals).isprintable():
        return vals
    return [safe(v) for v in vals]


_FORMAT_NAMES = {"hlo": "HLO text", "markdown": "Markdown report", "glog": "glog log",
                 "notebook": "text with a module inside",
                 "stablehlo": "StableHLO, converted to HLO by XLA"}


def render_summary(s: ModuleSummary, *, top_opcodes: int = 12, width: int | None = None) -> str:
    """The summary as text, the way `hloscope summary` prints it, in `width` columns
    (None: every line whole)."""
    out: list[str] = []
    where = f"{s.file}:{s.first_line}" if s.first_line > 1 else s.file
    flags = [_FORMAT_NAMES.get(s.format, s.format)]
    flags.append("scheduled" if s.is_scheduled else "not scheduled")
    if s.num_partitions > 1:
        flags.append(f"{s.num_partitions} partitions, "
                     + ("partitioned (shapes are per device)" if s.partitioned
                        else "not yet partitioned (shapes are global)"))
    elif s.partitioned:  # an ..._spmd entry with no num_partitions (torch_xla for Neuron)
        flags.append("partitioned (shapes are per device)")
    if s.replica_count > 1:
        flags.append(f"{s.replica_count} replicas")
    out.append(f"Module {s.name}")
    out.append(f"  from {where} ({', '.join(flags)})")
    if s.frames or s.graph_hash:
        out.append(f"  torch_xla graph {s.torch_xla_graph or '-'}"
                   + (f", hash {s.graph_hash}" if s.graph_hash else ""))
        # The Python frames that made it, innermost first (as torch_xla saves them).
        out.extend(f"    at {short_paths(f) if width is not None else f}" for f in s.frames)
    if not s.optimized:
        out.append("  " + optimized_note(False))
    out.append(f"  {s.computations} computation{'' if s.computations == 1 else 's'}, "
               f"{s.instructions} instructions, "
               f"entry {s.entry}")
    out.append("")

    def values(title: str, vals: Sequence[Any], total: int, tables: int = 0) -> None:
        # XLA counts a tuple's pointer table in its output size, as `memory` does
        table_note = f" + the tuple's {format_bytes(tables)} pointer table" if tables else ""
        out.append(f"{title} ({len(vals)}, {format_bytes(total)}{table_note})")
        if not vals:
            out.append("  none")
            out.append("")
            return
        show_dev = any(v.per_device_shape != v.shape for v in vals)
        headers = ["#", "name", "shape", "bytes", "sharding"]
        if show_dev:
            headers += ["per device", "bytes/device"]
        rows = []
        for v in vals:
            row = [v.index, v.name, v.shape, format_bytes(v.bytes), v.sharding or "-"]
            if show_dev:
                row += [v.per_device_shape, format_bytes(v.per_device_bytes)]
            rows.append(row)
        out.append(table(headers, rows, right=(0, 3, 6), width=width,
                         drop=("sharding", "per device")))
        out.append("")

    values("Parameters", s.parameters, s.argument_bytes)
    values("Outputs", s.outputs, s.output_bytes, s.output_table_bytes)
    if s.input_output_alias:
        out.append("Aliased (output reuses a parameter's buffer)")
        out.append(table(["output", "parameter", "index", "kind"],
                         [list(a) for a in s.input_output_alias], width=width))
        out.append("")

    shown = s.opcodes[:top_opcodes]
    rest = s.opcodes[top_opcodes:]
    line = ", ".join(f"{safe(op)} {n}" for op, n in shown)
    if rest:
        n_rest = sum(n for _, n in rest)
        line += f", and {len(rest)} more ({n_rest} instruction{'s' if n_rest != 1 else ''})"
    out.append(f"Opcodes ({len(s.opcodes)} kinds)")
    out.append(f"  {line}")
    out.append("")
    out.append("Fusions: " + (", ".join(f"{safe(k)} {n}" for k, n in s.fusions) or "none"))
    out.append("Library calls (custom-call targets): "
               + (", ".join(f"{safe(t)} {n}" for t, n in s.custom_calls) or "none"))
    if s.annotations:
        out.append("Annotations (custom-calls XLA removes; no kernel, no memory): "
                   + ", ".join(f"{safe(t)} {n}" for t, n in s.annotations))
    out.append("")
    if s.collectives:
        total = sum(c.bytes for c in s.collectives)
        out.append(f"Collectives ({len(s.collectives)}, {format_bytes(total)} of results)")
        out.append(table(
            ["name", "opcode", "shape", "bytes", "replica groups", "source"],
            [[c.name, c.opcode, c.shape, format_bytes(c.bytes), groups_text(c.replica_groups),
              c.source or "-"] for c in s.collectives[:20]],
            right=(3,), width=width, drop=("replica groups", "opcode")))
        if len(s.collectives) > 20:
            out.append(f"  ... and {len(s.collectives) - 20} more (see --json)")
    else:
        out.append("Collectives: none")
    return fit("\n".join(out) + "\n", width)


_MESH_GROUPS = re.compile(r"mesh\[(?P<axes>[^\]]*)\]\s*\{(?P<over>[^}]*)\}")


def groups_text(groups: str | None) -> str:
    """Replica groups as a narrow column can show them: XLA's mesh form
    ``mesh['x'=4,'y'=2] {'y'}`` becomes ``y=2 of 8`` (the axes it collects over with their
    sizes, of the mesh's devices); other forms unchanged."""
    if not groups:
        return "-"
    m = _MESH_GROUPS.fullmatch(groups.strip())
    if m is None:
        return groups
    sizes: dict[str, int] = {}
    for item in m["axes"].split(","):
        name, _, size = item.partition("=")
        if not size.strip().isdigit():
            return groups
        sizes[name.strip().strip("'\"")] = int(size)
    over = [a.strip().strip("'\"") for a in m["over"].split(",") if a.strip()]
    if any(a not in sizes for a in over):
        return groups
    total = 1
    for n in sizes.values():
        total *= n
    return f"{','.join(f'{a}={sizes[a]}' for a in over) or '-'} of {total}"


def render_json(data: Any) -> str:
    """JSON with two-space indents, keys in the order the data gives them.

    Non-ASCII text stays as it is, except what JSON leaves raw and a terminal could
    act on (DEL, the C1 controls, bidi overrides and other unprintable characters):
    those are written as ``\\uXXXX`` escapes, which read back as the same string."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return text if text.isascii() else _NON_ASCII.sub(_json_escape, text)


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _json_escape(m: re.Match[str]) -> str:
    run = m.group()
    if run.isprintable():
        return run
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in run)


def render_module_list(path: str, rows: Sequence[dict[str, Any]], *,
                       width: int | None = None) -> str:
    """``hloscope summary --list``: the modules of an input, one row each, in `width`
    columns (None: every line whole)."""
    if not rows:
        return fit(f"{path}: no HLO module\n", width)
    has_graph = any(r.get("graph_hash") for r in rows)
    headers = ["#", "module", "phase", "instructions", "computations", "copies"]
    headers += ["graph hash", "made by"] if has_graph else ["from"]
    body = []
    for r in rows:
        name = str(r["module"]) + (" (JAX helper)" if r.get("jax_helper") else "")
        row = [r["index"], name, r.get("phase") or "-", f"{r['instructions']:,}",
               r["computations"], r["copies"]]
        if has_graph:
            row += [r.get("graph_hash") or "-", r.get("frame") or "-"]
        else:
            row += [r.get("dump") or f"{r['file']}:{r['line']}"]
        body.append(row)
    total = sum(int(r["copies"]) for r in rows)
    head = f"{path}: {len(rows)} module(s)"
    if total != len(rows):
        head += f" ({total} with identical copies counted)"
    return fit(head + "\n" + table(headers, body, right=(0, 3, 4, 5), width=width,
                                   drop=("computations", "copies", "phase")) + "\n", width)
