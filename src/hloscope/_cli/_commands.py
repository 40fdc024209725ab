"""The commands that read HLO: summary, check, memory, kernels, lint, graph, report (diff
is in `_diff_cmd`; inspect, targets and demo, which compile or show a built-in example,
in `_inspect_cmds`).

Every reading command takes the same inputs (a file, an XLA dump folder, a
Markdown report, a log, torch_xla's saved graphs) and the same ``--module`` /
``--function`` choice; see `hloscope._sources._inputs`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from .. import _errors
from .._analysis._summary import SUMMARY_SCHEMA, is_optimized, summarize
from .._render._text import render_json, render_module_list, render_summary
from .._units import format_bytes
from .._write import write_text
from ._common import (INPUT_HELP, command, echo, fail, fail_user, load_inputs, pick,
                      pick_module, report_error, text_width)
from ._functions import compile_function
from ._help import at_least
from ._options import (ARG_OPT, DEVICES_OPT, FUNCTION_OPT, HW_OPT, INPUTS_OPT, MESH_OPT,
                       MODULE_OPT, NO_CHECK_OPT, SHARD_OPT, STATIC_OPT, WIDE_OPT)
from ._profile_cmd import PROFILE_HELP, profile_of, read_measured
from ._targets import is_function_target, static_hint


@command()
def summary(
    path: Path = typer.Argument(..., metavar="PATH", help=INPUT_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.summary/1)."),
    list_: bool = typer.Option(False, "--list", help="List the modules in PATH: index, "
                               "name, phase, size, copies, and for torch_xla the graph hash "
                               "and the Python frame that made it."),
    module: str | None = MODULE_OPT,
    function: str | None = FUNCTION_OPT,
    wide: bool = WIDE_OPT,
) -> None:
    """What is in a module: opcodes, fusions, library calls, collectives.

    Computations and instructions, the parameters and outputs with shapes, bytes
    and shardings, the opcodes, fusions, library calls and collectives.
    """
    width = text_width(wide)
    if list_:
        inputs = load_inputs(path)
        rows = inputs.listing()
        if json_out:
            sys.stdout.write(render_json({"schema": "hloscope.modules/1", "file": str(path),
                                          "modules": rows}))
        else:
            echo(render_module_list(str(path), rows, width=width))
        return
    _inputs, entry = pick(path, module, function)
    try:
        s = summarize(entry.module)
    except _errors.HloscopeError as e:
        fail(e)
    if json_out:
        data = {"schema": SUMMARY_SCHEMA, "file": str(path), "format": entry.module.format,
                "modules": [s.to_dict()]}
        sys.stdout.write(render_json(data))
        return
    echo(render_summary(s, width=width))


@command()
def check(
    path: Path = typer.Argument(..., metavar="PATH", help="An HLO text file, or a Markdown "
                                "report or a log with modules in it."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.check/1)."),
    wide: bool = WIDE_OPT,
) -> None:
    """Check HLO text strictly, the way XLA's own parser does.

    Exit 0 when XLA would accept every module; 2 with each problem (file:line:column,
    the line and a caret) on the line XLA names: a file of several modules is checked
    module by module.  The other commands are tolerant; this one is strict.
    """
    from .._sources._reader import check as check_file

    def as_json(e: _errors.HloParseError) -> dict[str, Any]:
        return {"file": e.filename, "line": e.line, "column": e.column, "message": e.reason,
                "line_text": e.line_text, "hint": e.hint}

    try:
        hf = check_file(path, keep_going=True)
    except _errors.HloParseError as e:
        if json_out:
            sys.stdout.write(render_json({
                "schema": "hloscope.check/1", "file": str(path), "ok": False, "modules": [],
                "error": as_json(e), "errors": [as_json(e)]}))
            raise typer.Exit(2) from None
        fail(e)
    except _errors.HloscopeError as e:
        fail(e)
    mods = [{"module": m.name, "computations": len([c for c in m.computations if not c.origin]),
             "instructions": m.instruction_count, "line": m.first_line} for m in hf.modules]
    bad = [e for e in hf.damaged if isinstance(e, _errors.HloParseError)]
    if json_out:
        sys.stdout.write(render_json({"schema": "hloscope.check/1", "file": str(path),
                                      "ok": not bad, "modules": mods,
                                      "error": as_json(bad[0]) if bad else None,
                                      "errors": [as_json(e) for e in bad]}))
        if bad:
            raise typer.Exit(2)
        return
    echo("".join(f"{path}:{m['line']}: module {m['module']}: ok ({m['computations']} "
                 f"computations, {m['instructions']} instructions)\n" for m in mods),
         text_width(wide))
    for e in bad:
        report_error(e)
    if bad:
        n = len(mods) + len(bad)
        fail(_errors.HloSourceError(
            f"{len(bad)} of {n} modules XLA's parser would refuse", path=str(path),
            hint="each one's problem is above, on the line XLA would name"))


@command()
def memory(
    path: Path = typer.Argument(..., metavar="PATH", help=INPUT_HELP + " Also XLA's "
                                "*-buffer-assignment.txt, *-live-range.txt or "
                                "*-memory-usage-report.txt, or a log with the SPMD "
                                "partitioner's memory lists."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.memory/1)."),
    top: int = typer.Option(10, "--top", metavar="N", callback=at_least(1),
                            help="How many values to list at the peak."),
    plot: Path | None = typer.Option(None, "--plot", metavar="FILE",
                                     help="Write the timeline to a .png or .svg."),
    module: str | None = MODULE_OPT,
    function: str | None = FUNCTION_OPT,
    wide: bool = WIDE_OPT,
) -> None:
    """What is alive at the memory peak, and which line of code put it there.

    Totals, the values live at the peak with their op_name and source line, a
    timeline, per-device sizes, and XLA's own figures beside when the dump has
    them.
    """
    from .._analysis._memory import MEMORY_SCHEMA, analyze_memory, xla_figures
    from .._analysis._oom import oom_summary
    from .._render._memory_text import render_memory, render_spmd_log, render_xla_dump
    from .._render._oom_text import render_oom

    inputs = load_inputs(path)
    reports = []
    if inputs.modules:
        _inputs, entry = pick(path, module, function, inputs=inputs)
        try:
            reports.append(analyze_memory(entry.module, xla=entry.xla, top=max(top, 20),
                                          memory_analysis=entry.memory_analysis))
        except _errors.HloscopeError as e:
            fail(e)
    try:
        dumps = [(name, files, xla_figures(files)) for name, files in inputs.dumps]
        plotted: list[str] = []
        if plot is not None:
            from .._render._plot import plot_memory_timeline

            if not reports:
                raise _errors.HloscopeError(
                    f"{path}: --plot needs the module, and this input has none",
                    hint="pass the HLO file or the dump folder that holds it")
            plotted.append(plot_memory_timeline(reports[0], str(plot)))
    except _errors.HloscopeError as e:
        fail(e)
    if json_out:
        data = {"schema": MEMORY_SCHEMA, "file": str(path),
                "modules": [r.to_dict() for r in reports],
                "xla_dumps": [{"file": name, **figs.to_dict()} for name, _f, figs in dumps],
                "spmd_logs": [_spmd_dict(log) for log in inputs.spmd_logs],
                "oom_reports": [oom_summary(o).to_dict() for o in inputs.oom_reports]}
        sys.stdout.write(render_json(data))
        return
    width = text_width(wide)
    parts = [render_memory(r, top=top, width=width) for r in reports]
    parts += [render_xla_dump(name, files.buffer_assignment, figs, top=max(top, 20),
                              width=width) for name, files, figs in dumps]
    parts += [render_spmd_log(log, top=top, width=width) for log in inputs.spmd_logs]
    parts += [render_oom(oom_summary(o), top=top, width=width) for o in inputs.oom_reports]
    parts += [f"wrote {p}\n" for p in plotted]
    echo("\n".join(parts), width)


def _spmd_dict(log) -> dict:  # type: ignore[no-untyped-def]
    return {"file": log.path, "hbm": list(log.hbm),
            "sections": [{"title": s.title, "entries": [
                {"bytes": e.bytes, "instruction": e.name, "shape": e.shape, "opcode": e.opcode,
                 "line": e.line} for e in s.entries]} for s in log.sections]}


@command()
def kernels(
    path: Path = typer.Argument(..., metavar="PATH", help=INPUT_HELP + " Ideally the "
                                "optimized module (compiled.as_text() or "
                                "*after_optimizations.txt)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.kernels/1)."),
    device: str | None = typer.Option(None, "--device", metavar="NAME", help="Add a roofline "
                                      "time per kernel for a100, h100, v100, tpu-v4, tpu-v5e "
                                      "or tpu-v5p."),
    peak_flops: float | None = typer.Option(None, "--peak-flops", metavar="FLOPS",
                                            help="Your device's peak FLOP/s (with "
                                            "--bandwidth), instead of --device."),
    bandwidth: float | None = typer.Option(None, "--bandwidth", metavar="BYTES",
                                           help="Your device's memory bandwidth in bytes/s."),
    sort: str = typer.Option("order", "--sort", metavar="KEY", help="order (the schedule's, "
                             "by group; the default), time (the roofline estimate, on "
                             "--device or the module's own device), bytes (written) or "
                             "flops: one table, largest first."),
    top: int | None = typer.Option(None, "--top", metavar="N",
                                   help="Show the first N kernels only."),
    profile: Path | None = typer.Option(None, "--profile", metavar="DIR", help=PROFILE_HELP),
    module: str | None = MODULE_OPT,
    function: str | None = FUNCTION_OPT,
    wide: bool = WIDE_OPT,
) -> None:
    """The kernels XLA launches, and the arrays passed between them.

    Fusions and what is fused inside, library calls, collectives; the arrays
    passed between kernels; flops, bytes and, with --device, roofline time.
    """
    from .._analysis._devices import Device
    from .._analysis._devices import device as find_device
    from .._analysis._kernels import KERNELS_SCHEMA, kernel_graph
    from .._render._kernels_text import SORT_KEYS, render_kernels

    try:
        dev = None
        if peak_flops is not None or bandwidth is not None:
            if peak_flops is None or bandwidth is None:
                raise _errors.HloscopeError("--peak-flops and --bandwidth go together",
                                            hint="give both, or use --device NAME")
            dev = Device("custom", {"*": peak_flops}, bandwidth, "given on the command line")
        elif device is not None:
            dev = find_device(device)
        if top is not None and top < 1:
            raise _errors.HloscopeError(f"--top {top}: give a number of kernels, 1 or more")
        if sort not in SORT_KEYS:
            raise _errors.HloscopeError(f"--sort {sort!r}: not a way to sort kernels",
                                        hint="use one of " + ", ".join(SORT_KEYS))
    except _errors.HloscopeError as e:
        fail(e)
    m = pick_module(path, module, function)
    if sort == "time" and dev is None:
        from .._analysis._devices import module_device

        dev = module_device(m)
    try:
        graph_ = kernel_graph(m)
    except _errors.HloscopeError as e:
        fail(e)
    profile = profile_of(path, profile)
    times = read_measured(profile, m, dev) if profile is not None else None
    measured = {k.name: k.median for k in times.kernels} if times is not None else None
    if json_out:
        data = {"schema": KERNELS_SCHEMA, "file": str(path),
                "device": None if dev is None else {"name": dev.name, "source": dev.source},
                "modules": [graph_.to_dict()]}
        for kd, k in zip(data["modules"][0]["kernels"], graph_.kernels):
            if dev is not None:
                kd["roofline_seconds"] = k.roofline_seconds(dev, k.element_type)
            if measured is not None:
                kd["measured_seconds"] = measured.get(k.name)
        if times is not None:
            data["profile"] = times.to_dict()
        sys.stdout.write(render_json(data))
        return
    text = render_kernels(graph_, device=dev, scheduled=is_optimized(m), width=text_width(wide),
                          sort=sort, top=top, measured=measured)
    if times is not None:
        from .._render._profile_text import render_profile

        text += "\n" + render_profile(times, width=text_width(wide))
    echo(text)


def _saved_checks(advice: Any, entry: Any) -> Any:
    """`advice` as checked when its saved report was written (`apply_saved_checks`): the
    savings XLA's compiles of the fixes gave, not the estimates again."""
    if entry.advice_checks is None:
        return advice
    from .._analysis._advisor import apply_saved_checks

    try:
        return apply_saved_checks(advice, entry.advice_checks)
    except ValueError as e:
        raise _errors.HloSourceError(f"field {e}", path=entry.file,
                                     hint="re-create it with hloscope inspect --save") from None


def _advice_device(dev: Any, target: dict[str, Any] | None) -> dict[str, Any]:
    """What the advisor weighs findings for: the device given (--device), else a saved
    inspect report's target device, as `inspect` itself does (one figure, not two)."""
    from .._analysis._devices import target_device, target_label

    if dev is not None:
        return {"device": dev}
    tdev = target_device(target)
    return {"device": tdev, "device_label": target_label(target, tdev)} if tdev else {}


@command()
def lint(
    path: Path = typer.Argument(..., metavar="PATH", help=INPUT_HELP + " Ideally the "
                                "optimized module."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.lint/3): "
                                  "every group with its findings and savings."),
    show_all: bool = typer.Option(False, "--all", help="Show every group of findings, not "
                                  "the 10 that would save the most."),
    min_share: float | None = typer.Option(None, "--min-share", metavar="FRACTION",
                                           help="Keep the groups that would save at "
                                           "least this share of the program's peak or "
                                           "estimated time (default 0.01; 0 keeps every one)."),
    device: str | None = typer.Option(None, "--device", metavar="NAME", help="Estimate times "
                                      "for this device (a100, h100, v100, tpu-v4, tpu-v5e, "
                                      "tpu-v5p, cpu; default: assumed from the module)."),
    fail_on: list[str] = typer.Option([], "--fail-on", metavar="RULE", help="Exit with "
                                      "status 1 when this rule fires (an id like HS101 or a "
                                      "name like reduction-split; 'all' for any). Repeat for "
                                      "several."),
    profile: Path | None = typer.Option(None, "--profile", metavar="DIR", help=PROFILE_HELP
                                        + " Groups are ranked by the measured time of "
                                        "their kernels."),
    module: str | None = MODULE_OPT,
    function: str | None = FUNCTION_OPT,
    arg: list[str] = ARG_OPT,
    inputs: str | None = INPUTS_OPT,
    static: list[str] = STATIC_OPT,
    devices: int | None = DEVICES_OPT,
    hw: str | None = HW_OPT,
    mesh: str | None = MESH_OPT,
    shard: list[str] = SHARD_OPT,
    no_check: bool = NO_CHECK_OPT,
    wide: bool = WIDE_OPT,
) -> None:
    """The advisor: what in the compiled program costs memory or time, and how much.

    Findings of one rule on one pattern (one per layer of a deep model) are grouped and
    ranked by what acting on them would save (peak memory, memory traffic, kernels,
    time); each comes with its places (op_name, source line) and the change to try.
    PATH may be a JAX function, FILE.py:FUNCTION with --arg or --inputs (and --target):
    it is compiled, and each saving whose fix is mechanical (donation, XLA flags, remat
    of a scan body, an upcast matmul) is checked by compiling the fix; on a file the
    savings are estimated.
    """
    from .._analysis._advisor import ADVICE_SCHEMA, RULES, advise_groups
    from .._analysis._devices import device as find_device
    from .._render._kernels_text import render_advice

    known = {r.id.lower(): r.id for r in RULES} | {r.name: r.id for r in RULES}
    wanted: set[str] = set()
    for name in fail_on:
        if name.lower() == "all":
            wanted |= {r.id for r in RULES}
        elif name.lower() in known:
            wanted.add(known[name.lower()])
        else:
            fail(_errors.HloscopeError(
                f"unknown rule {name!r} for --fail-on",
                hint="rules: " + ", ".join(f"{r.id} ({r.name})" for r in RULES)))
    if min_share is not None and not min_share >= 0:
        fail(_errors.HloscopeError(f"--min-share {min_share}: give a share of 0 or more",
                                   hint="0.01 keeps what saves 1% of the peak or time"))
    try:
        dev = find_device(device) if device is not None else None
    except _errors.HloscopeError as e:
        fail(e)
    times = None
    if is_function_target(str(path)):
        if profile is not None:
            fail(_errors.HloscopeError(
                "--profile is for a module file; PATH is a function",
                hint="hloscope profile FILE.py:FUNCTION measures a function's kernels"))
        advice, m = _lint_function(str(path), arg, inputs, static, devices, hw, mesh, shard,
                                   not no_check, dev, min_share)
    else:
        if arg or inputs or static or devices is not None or hw or mesh or shard:
            fail(_errors.HloscopeError(
                "--arg, --inputs, --static, --devices, --target, --mesh and --shard are for "
                "a function; PATH is a file", hint="give FILE.py:FUNCTION"))
        _inputs, entry = pick(path, module, function)
        m = entry.module
        profile = profile_of(path, profile)
        times = read_measured(profile, m, dev) if profile is not None else None
        try:
            kw = _advice_device(dev, entry.target)
            if times is None:
                advice = _saved_checks(advise_groups(m, min_share=min_share, **kw), entry)
            else:
                from .._profile._rank import rank_measured

                advice = rank_measured(
                    _saved_checks(advise_groups(m, min_share=0, **kw), entry), times,
                    min_share=0.01 if min_share is None else min_share)
        except _errors.HloscopeError as e:
            fail(e)
    if json_out:
        data = {"schema": ADVICE_SCHEMA, "file": str(path),
                "modules": [{"module": m.name, **advice.to_dict()}]}
        if times is not None:
            data["profile"] = times.to_dict()
        sys.stdout.write(render_json(data))
    else:
        echo(render_advice(m.name, advice, top=None if show_all else 10,
                           width=text_width(wide)))
    if {g.rule for g in advice.groups} & wanted:
        raise typer.Exit(1)


def _lint_function(target: str, arg: list[str], inputs: str | None, static: list[str],
                   devices: int | None, hw: str | None, mesh: str | None, shard: list[str],
                   check: bool, dev, min_share: float | None):  # type: ignore[no-untyped-def]
    """`hloscope lint FILE.py:FUNCTION`: the function compiled, its advice (checked
    unless `check` is off) and its module."""
    try:
        rep = compile_function("lint", target, arg, inputs, static, devices, hw, mesh,
                                shard, False)
        if dev is None and min_share is None:
            advice = rep.advice  # with `with_room` applied, as inspect's
        else:
            from .._analysis._advisor import advise_groups, with_room
            from .._analysis._devices import target_label

            df, lr = rep._flow()  # noqa: SLF001
            tdev = rep.roofline_device()
            # (as inspect labels its own advice: "h100 (h100x8)")
            label = target_label(rep.target, tdev) if dev is None and tdev else None
            advice = advise_groups(rep.module, graph=rep.kernels, df=df, lr=lr,
                                   device=dev or tdev, device_label=label,
                                   min_share=min_share)
            fit = rep.fit
            if fit is not None and min_share is None:  # --min-share 0 lists all
                advice = with_room(advice, fit.need_bytes, fit.usable_bytes, fit.device)
        if check:
            from .._checked._compare import check_advice

            program = rep._cache["program"]  # noqa: SLF001
            advice = check_advice(rep, program, advice)
        return advice, rep.module
    except _errors.HloscopeError as e:
        fail(e)
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        fail_user(e, static_hint(static))


@command()
def graph(
    path: Path = typer.Argument(..., metavar="PATH", help=INPUT_HELP + " Ideally the "
                                "optimized module."),
    output: Path = typer.Option(..., "-o", "--output", metavar="FILE",
                                help="Where to write: .svg or .png (a .png needs "
                                     "matplotlib)."),
    max_kernels: int = typer.Option(300, "--max-kernels", metavar="N", help="Refuse larger "
                                    "graphs (the picture gets unreadable); raise it to draw "
                                    "anyway."),
    module: str | None = MODULE_OPT,
    function: str | None = FUNCTION_OPT,
) -> None:
    """Draw the kernel graph of a small module as SVG or PNG.

    Kernels as boxes listing what is fused inside, arrays as arrows with shape
    and size, the arrays live at the memory peak in red, loops and branches as
    frames.  No Graphviz needed (a .png needs matplotlib, the plot extra).
    """
    from .._analysis._kernels import kernel_count, kernel_graph
    from .._render._graph_layout import layout_graph
    from .._render._svg import write_picture

    m = pick_module(path, module, function)
    try:
        n = kernel_count(m)  # cheap: refuse before the analyses run
        if n > max_kernels:
            raise _errors.HloscopeError(
                f"{path}: {n} kernels is too many for one picture "
                f"(--max-kernels {max_kernels})",
                hint="raise --max-kernels to draw it anyway, or list them with hloscope kernels")
        g = kernel_graph(m)
        out = write_picture(layout_graph(g), str(output))
    except _errors.HloscopeError as e:
        fail(e)
    except OSError as e:
        fail(_errors.HloscopeError(f"cannot write {output}: {e.strerror}"))
    n = len(g.kernels)
    echo(f"wrote {out} ({n} kernel{'' if n == 1 else 's'})\n")


@command()
def report(
    path: Path = typer.Argument(..., metavar="PATH", help=INPUT_HELP + " Also XLA's memory "
                                "files alone."),
    output: Path = typer.Option(..., "-o", "--output", metavar="FILE",
                                help="The HTML file to write."),
    device: str | None = typer.Option(None, "--device", metavar="NAME", help="Estimate "
                                      "kernels' times for this device (a100, h100, v100, "
                                      "tpu-v4, tpu-v5e, tpu-v5p, cpu; default: the one the "
                                      "module was compiled for)."),
    profile: Path | None = typer.Option(None, "--profile", metavar="DIR", help=PROFILE_HELP),
    module: str | None = MODULE_OPT,
    function: str | None = FUNCTION_OPT,
) -> None:
    """One self-contained HTML page: summary, memory, kernel graph, advice.

    No network; it opens from disk.  The memory timeline (hover to see what is
    live), the kernel graph (groups open on click, search, the HLO of each
    kernel) and the advisor's findings.
    """
    from .._analysis._advisor import advise_groups
    from .._analysis._dataflow import analyze_dataflow
    from .._analysis._devices import device as find_device
    from .._analysis._kernels import kernel_graph
    from .._analysis._liverange import compute_live_ranges
    from .._analysis._memory import analyze_memory, xla_figures
    from .._render._html import render_html
    from .._render._report_data import dump_report_data, report_data

    inputs = load_inputs(path)
    kernels_n = 0
    try:
        if inputs.modules:
            _inputs, entry = pick(path, module, function, inputs=inputs)
            m = entry.module
            df = analyze_dataflow(m)
            lr = compute_live_ranges(df)
            graph_ = kernel_graph(m, df=df, lr=lr)
            kernels_n = len(graph_.kernels)
            memory_ = analyze_memory(m, xla=entry.xla, top=1 << 30, df=df, lr=lr,
                                     memory_analysis=entry.memory_analysis)
            dev = find_device(device) if device else None
            profile = profile_of(path, profile)
            times = read_measured(profile, m) if profile is not None else None
            advice = _saved_checks(advise_groups(m, graph=graph_, df=df, lr=lr,
                                                 min_share=None if times is None else 0,
                                                 **_advice_device(dev, entry.target)), entry)
            if times is not None:
                from .._profile._rank import rank_measured

                advice = rank_measured(advice, times)
            from .._analysis._devices import target_device

            data = report_data(m, summarize(m), graph_, memory_, advice,
                               device=dev or target_device(entry.target), times=times)
        elif inputs.dumps:
            name, files = inputs.dumps[0]
            ba = files.buffer_assignment
            shapes = {v.label: v.shape for a in ba.allocations for v in a.values} if ba else {}
            data = dump_report_data(name, xla_figures(files), shapes)
        else:
            raise _errors.HloscopeError(f"{path}: nothing to report on",
                                        hint="pass HLO text, an XLA dump folder or XLA's "
                                             "memory files")
        text = render_html(data)
        write_text(output, text)
    except _errors.HloscopeError as e:
        fail(e)
    except OSError as e:
        fail(_errors.HloscopeError(f"cannot write {output}: {e.strerror}"))
    n = kernels_n
    echo(f"wrote {output} ({format_bytes(len(text.encode('utf-8')))}, {n} "
         f"kernel{'' if n == 1 else 's'})\n")
