"""The commands that read HLO: summary, check, memory, kernels, lint, graph, report, diff,
and those that compile a JAX function or a built-in example: inspect, demo.

Every reading command takes the same inputs (a file, an XLA dump folder, a
Markdown report, a log, torch_xla's saved graphs) and the same ``--module`` /
``--function`` choice; see `hloscope._sources._inputs`.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import typer

from .. import _errors
from .._analysis._summary import SUMMARY_SCHEMA, is_optimized, summarize
from .._render._text import render_json, render_module_list, render_summary
from .._units import format_bytes
from .._write import write_text
from ._common import (FUNCTION_HELP, MODULE_HELP, app, fail, fail_user, load_inputs, pick,
                      pick_module)
from ._targets import (array_args, call_inputs, load_target, require_jax, static_hint,
                       static_kwargs)

_INPUT_HELP = ("HLO text, an XLA dump folder (--xla_dump_to), a Markdown report, a log, "
               "or torch_xla's saved graphs (XLA_SAVE_TENSORS_FILE).")


@app.command()
def summary(
    path: Path = typer.Argument(..., help=_INPUT_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.summary/1)."),
    list_: bool = typer.Option(False, "--list", help="List the modules in the input: index, "
                               "name, phase, size, copies, and for torch_xla the graph hash "
                               "and the Python frame that made it."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """What is in a module: computations, opcodes, fusions, library calls, collectives,
    parameters and outputs with shapes, bytes and shardings."""
    if list_:
        inputs = load_inputs(path)
        rows = inputs.listing()
        if json_out:
            sys.stdout.write(render_json({"schema": "hloscope.modules/1", "file": str(path),
                                          "modules": rows}))
        else:
            sys.stdout.write(render_module_list(str(path), rows))
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
    sys.stdout.write(render_summary(s))


@app.command()
def check(
    path: Path = typer.Argument(..., help="HLO text (or a report or log holding modules)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.check/1)."),
) -> None:
    """Check HLO text the way XLA's own parser does: exit 0 when XLA would accept every
    module, 2 with the first problem (file:line:column, the line and a caret) on the line
    XLA names.  The other commands are tolerant; this one is strict."""
    from .._sources._reader import check as check_file

    try:
        hf = check_file(path)
    except _errors.HloParseError as e:
        if json_out:
            sys.stdout.write(render_json({
                "schema": "hloscope.check/1", "file": str(path), "ok": False, "modules": [],
                "error": {"file": e.filename, "line": e.line, "column": e.column,
                          "message": e.reason, "line_text": e.line_text, "hint": e.hint}}))
            raise typer.Exit(2) from None
        fail(e)
    except _errors.HloscopeError as e:
        fail(e)
    mods = [{"module": m.name, "computations": len([c for c in m.computations if not c.origin]),
             "instructions": m.instruction_count, "line": m.first_line} for m in hf.modules]
    if json_out:
        sys.stdout.write(render_json({"schema": "hloscope.check/1", "file": str(path),
                                      "ok": True, "modules": mods, "error": None}))
        return
    for m in mods:
        sys.stdout.write(f"{path}:{m['line']}: module {m['module']}: ok ({m['computations']} "
                         f"computations, {m['instructions']} instructions)\n")


@app.command()
def memory(
    path: Path = typer.Argument(..., help=_INPUT_HELP + " Also XLA's *-buffer-assignment.txt, "
                                "*-live-range.txt or *-memory-usage-report.txt, or a log with "
                                "the SPMD partitioner's memory lists."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.memory/1)."),
    top: int = typer.Option(10, "--top", min=1, help="How many values to list at the peak."),
    plot: Path | None = typer.Option(None, "--plot", help="Write the timeline to a .png or .svg."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """What is alive at the memory peak and which line of code put it there: totals, the
    values live at the peak, a timeline, per-device sizes, XLA's own figures beside."""
    from .._analysis._memory import MEMORY_SCHEMA, analyze_memory, xla_figures
    from .._render._memory_text import render_memory, render_spmd_log, render_xla_dump

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
                "spmd_logs": [_spmd_dict(log) for log in inputs.spmd_logs]}
        sys.stdout.write(render_json(data))
        return
    parts = [render_memory(r, top=top) for r in reports]
    parts += [render_xla_dump(name, files.buffer_assignment, figs, top=max(top, 20))
              for name, files, figs in dumps]
    parts += [render_spmd_log(log, top=top) for log in inputs.spmd_logs]
    parts += [f"wrote {p}\n" for p in plotted]
    sys.stdout.write("\n".join(parts))


def _spmd_dict(log) -> dict:  # type: ignore[no-untyped-def]
    return {"file": log.path, "hbm": list(log.hbm),
            "sections": [{"title": s.title, "entries": [
                {"bytes": e.bytes, "instruction": e.name, "shape": e.shape, "opcode": e.opcode,
                 "line": e.line} for e in s.entries]} for s in log.sections]}


@app.command()
def kernels(
    path: Path = typer.Argument(..., help=_INPUT_HELP + " Ideally the optimized module "
                                "(compiled.as_text() or *after_optimizations.txt)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.kernels/1)."),
    device: str | None = typer.Option(None, "--device", help="Add a roofline time per kernel for "
                                      "a100, h100, v100, tpu-v4, tpu-v5e or tpu-v5p."),
    peak_flops: float | None = typer.Option(None, "--peak-flops", help="Your device's peak "
                                            "FLOP/s (with --bandwidth), instead of --device."),
    bandwidth: float | None = typer.Option(None, "--bandwidth", help="Your device's memory "
                                           "bandwidth in bytes/s."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """The kernels XLA launches: fusions and what is fused inside, library calls,
    collectives; the arrays passed between them; flops, bytes and roofline time."""
    from .._analysis._devices import Device
    from .._analysis._devices import device as find_device
    from .._analysis._kernels import KERNELS_SCHEMA, kernel_graph
    from .._render._kernels_text import render_kernels

    try:
        dev = None
        if peak_flops is not None or bandwidth is not None:
            if peak_flops is None or bandwidth is None:
                raise _errors.HloscopeError("--peak-flops and --bandwidth go together",
                                            hint="give both, or use --device NAME")
            dev = Device("custom", {"*": peak_flops}, bandwidth, "given on the command line")
        elif device is not None:
            dev = find_device(device)
    except _errors.HloscopeError as e:
        fail(e)
    m = pick_module(path, module, function)
    try:
        graph_ = kernel_graph(m)
    except _errors.HloscopeError as e:
        fail(e)
    if json_out:
        data = {"schema": KERNELS_SCHEMA, "file": str(path),
                "device": None if dev is None else {"name": dev.name, "source": dev.source},
                "modules": [graph_.to_dict()]}
        if dev is not None:
            for kd, k in zip(data["modules"][0]["kernels"], graph_.kernels):
                et = k.shape.split("[", 1)[0].lstrip("(")
                kd["roofline_seconds"] = k.roofline_seconds(dev, et)
        sys.stdout.write(render_json(data))
        return
    sys.stdout.write(render_kernels(graph_, device=dev, scheduled=is_optimized(m)))


@app.command()
def lint(
    path: Path = typer.Argument(..., help=_INPUT_HELP + " Ideally the optimized module."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.lint/1)."),
    fail_on: list[str] = typer.Option([], "--fail-on", help="Exit with status 1 when this rule "
                                      "fires (an id like HS101 or a name like reduction-split; "
                                      "'all' for any). Repeat for several."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """The advisor: what in the compiled program costs memory or time, with the evidence
    and the change to try in your code."""
    from .._analysis._advisor import ADVICE_SCHEMA, RULES, advise
    from .._render._kernels_text import render_findings

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
    m = pick_module(path, module, function)
    try:
        findings = advise(m)
    except _errors.HloscopeError as e:
        fail(e)
    if json_out:
        data = {"schema": ADVICE_SCHEMA, "file": str(path),
                "modules": [{"module": m.name, "findings": [f.to_dict() for f in findings]}]}
        sys.stdout.write(render_json(data))
    else:
        sys.stdout.write(render_findings(m.name, findings, optimized=is_optimized(m)))
    if {f.rule for f in findings} & wanted:
        raise typer.Exit(1)


@app.command()
def graph(
    path: Path = typer.Argument(..., help=_INPUT_HELP + " Ideally the optimized module."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write: .svg or .png."),
    max_kernels: int = typer.Option(300, "--max-kernels", help="Refuse larger graphs (the "
                                    "picture gets unreadable); raise it to draw anyway."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """Draw the kernel graph of a small module: kernels as boxes listing what is fused
    inside, arrays as arrows with shape and size, the arrays live at the memory peak in red,
    loops and branches as frames.  No Graphviz needed."""
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
    sys.stdout.write(f"wrote {out} ({len(g.kernels)} kernels)\n")


@app.command()
def report(
    path: Path = typer.Argument(..., help=_INPUT_HELP + " Also XLA's memory files alone."),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """One self-contained HTML page (no network; opens from disk): the summary, the memory
    timeline (hover to see what is live), the kernel graph (groups open on click, search,
    the HLO of each kernel) and the advisor's findings."""
    from .._analysis._advisor import advise
    from .._analysis._dataflow import analyze_dataflow
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
            data = report_data(m, summarize(m), graph_, memory_,
                               advise(m, graph=graph_, df=df, lr=lr))
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
    sys.stdout.write(f"wrote {output} ({format_bytes(len(text.encode('utf-8')))}, {n} "
                     f"kernel{'' if n == 1 else 's'})\n")


@app.command()
def diff(
    a: Path = typer.Argument(..., help="The first version: " + _INPUT_HELP),
    b: Path = typer.Argument(..., help="The second version."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.diff/1)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Also write an HTML page "
                                       "with the two kernel graphs, differences coloured."),
    module: str | None = typer.Option(None, "--module", "-m", help=MODULE_HELP + " Applies "
                                      "to both inputs."),
    function: str | None = typer.Option(None, "--function", help=FUNCTION_HELP),
) -> None:
    """What changed between two versions of a program: kernels matched by what they compute,
    arrays between kernels, the memory peak, collectives, flops, the advisor's findings."""
    from .._analysis._diff import DIFF_SCHEMA, diff_modules
    from .._render._diff_text import render_diff

    ma, mb = pick_module(a, module, function), pick_module(b, module, function)
    try:
        result = diff_modules(ma, mb)
        if output is not None:
            from .._render._diff_html import render_diff_html

            write_text(output, render_diff_html(result))
    except _errors.HloscopeError as e:
        fail(e)
    except OSError as e:
        fail(_errors.HloscopeError(f"cannot write {output}: {e.strerror}"))
    if json_out:
        sys.stdout.write(render_json({"schema": DIFF_SCHEMA, **result.to_dict()}))
        return
    sys.stdout.write(render_diff(result))


@app.command("inspect")
def inspect_cmd(
    target: str = typer.Argument(..., help="The function: FILE.py:FUNCTION or "
                                 "package.module:FUNCTION."),
    arg: list[str] = typer.Option([], "--arg", help="An argument's shape, e.g. f32[128,2] "
                                  "(zeros of that shape); repeat for each argument."),
    inputs: str | None = typer.Option(None, "--inputs", help="A call in the same file that "
                                      "returns the arguments (one, or a tuple of them: "
                                      "pytrees, sharded arrays), e.g. 'make_input(128)'; "
                                      "after any --arg."),
    static: list[str] = typer.Option([], "--static", help="A static keyword argument, "
                                     "NAME=VALUE (a Python literal); repeat."),
    devices: int | None = typer.Option(None, "--devices", help="Run on N virtual CPU devices."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the HTML report."),
    save: Path | None = typer.Option(None, "--save", help="Save the report as JSON "
                                     "(hloscope.load and every command read it)."),
) -> None:
    """Compile a JAX function once and show what XLA did: kernels, memory (beside XLA's
    figures), the advisor, and the time of each phase."""
    from .._jax._user import check_call
    from .._render._kernels_text import render_findings, render_kernels
    from .._render._memory_text import render_memory

    try:
        require_jax("inspect")
        if devices is not None:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(devices)
        kwargs = static_kwargs(static)
        fn = load_target(target)
        args = array_args(arg) + (call_inputs(target, inputs) if inputs else [])
        check_call(fn, len(args), kwargs, given="--arg" if not inputs else "argument(s)")
        from .._jax._inspect import inspect as run_inspect

        rep = run_inspect(fn, *args, static_argnames=tuple(kwargs), **kwargs)
        if output is not None:
            write_text(output, rep.html())
        if save is not None:
            rep.save(str(save))
    except _errors.HloscopeError as e:
        fail(e)
    except Exception as e:  # noqa: BLE001  (the user's code raised: theirs to see)
        fail_user(e, static_hint(static))
    t = rep.timings
    sys.stdout.write(rep.summary_line() + "\n")
    sys.stdout.write("timings: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in t.items())
                     + f"; {rep.device.get('count')} {rep.device.get('kind')} device(s); "
                     f"jax {rep.versions.get('jax')}\n\n")
    m = rep.module
    sys.stdout.write(render_kernels(rep.kernels, scheduled=is_optimized(m)) + "\n")
    sys.stdout.write(render_memory(rep.memory) + "\n")
    sys.stdout.write(render_findings(m.name, list(rep.findings), optimized=is_optimized(m)))


@app.command()
def demo(
    save: Path | None = typer.Option(None, "--save", help="Write the built-in module to this "
                                     "file instead, to try the other commands on it."),
) -> None:
    """Run hloscope on a built-in example: a 3-D FFT sharded over 8 devices: what is in
    it, its kernels, its memory peak, and the advisor."""
    from .._analysis._advisor import advise
    from .._analysis._kernels import kernel_graph
    from .._analysis._memory import analyze_memory
    from .._render._kernels_text import render_findings, render_kernels
    from .._render._memory_text import render_memory

    data = resources.files("hloscope") / "_data" / "fft_pencil_4x2.hlo"
    if save is not None:
        try:
            write_text(save, data.read_text(encoding="utf-8"))
        except _errors.HloscopeError as e:
            fail(e)
        sys.stdout.write(f"wrote {save}: try hloscope report {save} -o fft.html\n")
        return
    with resources.as_file(data) as p:
        m = pick_module(Path(p))
    name = "<built-in example fft_pencil_4x2.hlo>"
    parts = [
        ("hloscope summary", render_summary(summarize(m))),
        ("hloscope kernels", render_kernels(kernel_graph(m), scheduled=is_optimized(m))),
        ("hloscope memory", render_memory(analyze_memory(m), top=5)),
        ("hloscope lint", render_findings(m.name, advise(m), optimized=is_optimized(m))),
    ]
    for title, text in parts:
        sys.stdout.write(f"==> {title} {name}\n\n")
        sys.stdout.write(text.replace(str(p), name) + "\n")
    sys.stdout.write(
        "This is hloscope on a built-in module: a 32x32x32 FFT that JAX sharded over a 4x2\n"
        "mesh of CPU devices.  Next, the HTML report of the same module (opens from disk):\n"
        "  hloscope demo --save fft.hlo && hloscope report fft.hlo -o fft.html\n"
        "Then your own module: any HLO text works (compiled.as_text(), an XLA dump folder,\n"
        "a log); with JAX installed (pip install 'hloscope[jax]'), straight from a function:\n"
        "  hloscope inspect my_model.py:loss --arg f32[128,784] -o loss.html\n")
