"""The `hloscope` command.

Exit status: 0 on success; 2 when the input cannot be read (the error is
printed as one located message, never a traceback); 3 on an internal error
(a bug: rerun with HLOSCOPE_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path
from typing import NoReturn

import typer

from .. import _errors
from .._analysis._summary import SUMMARY_SCHEMA, summarize
from .._render._text import render_json, render_summary
from .._sources._reader import HloFile, read
from ._targets import array_args, load_target, static_kwargs

app = typer.Typer(
    name="hloscope",
    help="See what XLA did to your program: kernels, memory, collectives, timings.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

EXIT_INPUT = 2
EXIT_INTERNAL = 3


def _fail(err: _errors.HloscopeError) -> NoReturn:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    console.print(f"[bold red]error:[/] {escape(err.one_line())}")
    if isinstance(err, _errors.HloParseError):
        console.print(escape(err.get_context()))
        before = err.read_before()
        if before:
            console.print(f"read before the damage: {escape(before)}")
    if err.hint:
        console.print(f"[bold]hint:[/] {escape(err.hint)}")
    raise typer.Exit(EXIT_INPUT)


def _load(path: Path) -> HloFile:
    try:
        return read(path)
    except _errors.HloscopeError as e:
        _fail(e)


@app.command()
def summary(
    file: Path = typer.Argument(..., help="HLO text, a Markdown report, a glog log or notebook text."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.summary/1)."),
) -> None:
    """What is in a module: computations, opcodes, fusions, library calls, collectives,
    parameters and outputs with shapes, bytes and shardings."""
    hf = _load(file)
    try:
        summaries = [summarize(m) for m in hf.modules]
    except _errors.HloscopeError as e:
        _fail(e)
    if json_out:
        data = {"schema": SUMMARY_SCHEMA, "file": hf.path, "format": hf.format,
                "modules": [s.to_dict() for s in summaries]}
        sys.stdout.write(render_json(data))
        return
    sys.stdout.write("\n".join(render_summary(s) for s in summaries))


@app.command()
def memory(
    path: Path = typer.Argument(..., help="HLO text (scheduled or not), an XLA dump folder "
                                "(--xla_dump_to), an XLA *-buffer-assignment.txt, "
                                "*-live-range.txt or *-memory-usage-report.txt, or a log with "
                                "the SPMD partitioner's memory lists."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.memory/1)."),
    top: int = typer.Option(10, "--top", min=1, help="How many values to list at the peak."),
    plot: Path | None = typer.Option(None, "--plot", help="Write the timeline to a .png or .svg."),
) -> None:
    """What is alive at the memory peak and which line of code put it there: totals, the
    values live at the peak, a timeline, per-device sizes, XLA's own figures beside."""
    from .._analysis._memory import MEMORY_SCHEMA, analyze_memory, xla_figures
    from .._render._memory_text import render_memory, render_spmd_log, render_xla_dump
    from .._sources._memory_inputs import read_memory_inputs

    try:
        inputs = read_memory_inputs(path)
        reports = [analyze_memory(m, xla=x, top=max(top, 20)) for m, x in inputs.modules]
        dumps = [(name, files, xla_figures(files)) for name, files in inputs.dumps]
        plotted: list[str] = []
        if plot is not None:
            from .._render._plot import plot_memory_timeline

            if not reports:
                raise _errors.HloscopeError(
                    f"{path}: --plot needs the module, and this input has none",
                    hint="pass the HLO file or the dump folder that holds it")
            for k, r in enumerate(reports):
                target = str(plot) if len(reports) == 1 else \
                    f"{plot.with_suffix('')}-{k}-{r.module}{plot.suffix}"
                plotted.append(plot_memory_timeline(r, target))
    except _errors.HloscopeError as e:
        _fail(e)
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


def _modules(path: Path) -> list:  # type: ignore[type-arg]
    hf = _load(path)
    return list(hf.modules)


@app.command()
def kernels(
    file: Path = typer.Argument(..., help="HLO text, ideally the optimized module "
                                "(compiled.as_text() or *after_optimizations.txt)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.kernels/1)."),
    device: str | None = typer.Option(None, "--device", help="Add a roofline time per kernel for "
                                      "a100, h100, v100, tpu-v4, tpu-v5e or tpu-v5p."),
    peak_flops: float | None = typer.Option(None, "--peak-flops", help="Your device's peak "
                                            "FLOP/s (with --bandwidth), instead of --device."),
    bandwidth: float | None = typer.Option(None, "--bandwidth", help="Your device's memory "
                                           "bandwidth in bytes/s."),
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
        mods = _modules(file)
        graphs = [kernel_graph(m) for m in mods]
    except _errors.HloscopeError as e:
        _fail(e)
    if json_out:
        data = {"schema": KERNELS_SCHEMA, "file": str(file),
                "device": None if dev is None else {"name": dev.name, "source": dev.source},
                "modules": [g.to_dict() for g in graphs]}
        if dev is not None:
            for d, g in zip(data["modules"], graphs):
                for kd, k in zip(d["kernels"], g.kernels):
                    et = k.shape.split("[", 1)[0].lstrip("(")
                    kd["roofline_seconds"] = k.roofline_seconds(dev, et)
        sys.stdout.write(render_json(data))
        return
    sys.stdout.write("\n".join(render_kernels(g, device=dev, scheduled=m.is_scheduled)
                                for g, m in zip(graphs, mods)))


@app.command()
def lint(
    file: Path = typer.Argument(..., help="HLO text, ideally the optimized module."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.lint/1)."),
    fail_on: list[str] = typer.Option([], "--fail-on", help="Exit with status 1 when this rule "
                                      "fires (an id like HS101 or a name like reduction-split; "
                                      "'all' for any). Repeat for several."),
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
            _fail(_errors.HloscopeError(
                f"unknown rule {name!r} for --fail-on",
                hint="rules: " + ", ".join(f"{r.id} ({r.name})" for r in RULES)))
    try:
        mods = _modules(file)
        results = [(m, advise(m)) for m in mods]
    except _errors.HloscopeError as e:
        _fail(e)
    if json_out:
        data = {"schema": ADVICE_SCHEMA, "file": str(file),
                "modules": [{"module": m.name, "findings": [f.to_dict() for f in fs]}
                            for m, fs in results]}
        sys.stdout.write(render_json(data))
    else:
        sys.stdout.write("\n".join(render_findings(m.name, fs) for m, fs in results))
    fired = {f.rule for _m, fs in results for f in fs}
    if fired & wanted:
        raise typer.Exit(1)


@app.command()
def graph(
    file: Path = typer.Argument(..., help="HLO text, ideally the optimized module."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write: .svg or .png."),
    max_kernels: int = typer.Option(300, "--max-kernels", help="Refuse larger graphs (the "
                                    "picture gets unreadable); raise it to draw anyway."),
) -> None:
    """Draw the kernel graph of a small module: kernels as boxes listing what is fused
    inside, arrays as arrows with shape and size, the arrays live at the memory peak in red,
    loops and branches as frames.  No Graphviz needed."""
    from .._analysis._kernels import kernel_graph
    from .._render._graph_layout import layout_graph
    from .._render._svg import write_picture

    try:
        m = _one_module(file)
        g = kernel_graph(m)
        if len(g.kernels) > max_kernels:
            raise _errors.HloscopeError(
                f"{file}: {len(g.kernels)} kernels is too many for one picture "
                f"(--max-kernels {max_kernels})",
                hint="raise --max-kernels to draw it anyway, or list them with hloscope kernels")
        path = write_picture(layout_graph(g), str(output))
    except _errors.HloscopeError as e:
        _fail(e)
    except OSError as e:
        _fail(_errors.HloscopeError(f"cannot write {output}: {e.strerror}"))
    sys.stdout.write(f"wrote {path} ({len(g.kernels)} kernels)\n")


@app.command()
def report(
    path: Path = typer.Argument(..., help="HLO text, or an XLA dump folder (--xla_dump_to)."),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML file to write."),
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
    from .._sources._memory_inputs import read_memory_inputs

    try:
        inputs = read_memory_inputs(path)
        kernels_n = 0
        if inputs.modules:
            module, files = max(inputs.modules, key=lambda mf: mf[0].instruction_count)
            df = analyze_dataflow(module)
            lr = compute_live_ranges(df)
            graph_ = kernel_graph(module, df=df, lr=lr)
            kernels_n = len(graph_.kernels)
            memory_ = analyze_memory(module, xla=files, top=1 << 30, df=df, lr=lr)
            data = report_data(module, summarize(module), graph_, memory_,
                               advise(module, graph=graph_, df=df, lr=lr))
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
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except _errors.HloscopeError as e:
        _fail(e)
    except OSError as e:
        _fail(_errors.HloscopeError(f"cannot write {output}: {e.strerror}"))
    sys.stdout.write(f"wrote {output} ({len(text) / 2**20:.1f} MiB, {kernels_n} kernels)\n")


def _one_module(path: Path):  # type: ignore[no-untyped-def]
    mods = _modules(path)
    if len(mods) > 1:
        biggest = max(mods, key=lambda m: m.instruction_count)
        sys.stderr.write(f"note: {path} holds {len(mods)} modules; comparing the largest, "
                         f"{biggest.name}\n")
        return biggest
    return mods[0]


@app.command()
def diff(
    a: Path = typer.Argument(..., help="The first version: HLO text (optimized)."),
    b: Path = typer.Argument(..., help="The second version."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (schema hloscope.diff/1)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Also write an HTML page "
                                       "with the two kernel graphs, differences coloured."),
) -> None:
    """What changed between two versions of a program: kernels matched by what they compute,
    arrays between kernels, the memory peak, collectives, flops, the advisor's findings."""
    from .._analysis._diff import DIFF_SCHEMA, diff_modules
    from .._render._diff_text import render_diff

    try:
        result = diff_modules(_one_module(a), _one_module(b))
        if output is not None:
            from .._render._diff_html import render_diff_html

            with open(output, "w", encoding="utf-8") as f:
                f.write(render_diff_html(result))
    except _errors.HloscopeError as e:
        _fail(e)
    except OSError as e:
        _fail(_errors.HloscopeError(f"cannot write {output}: {e.strerror}"))
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
    static: list[str] = typer.Option([], "--static", help="A static keyword argument, "
                                     "NAME=VALUE (a Python literal); repeat."),
    devices: int | None = typer.Option(None, "--devices", help="Run on N virtual CPU devices."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the HTML report."),
    save: Path | None = typer.Option(None, "--save", help="Save the report as JSON "
                                     "(hloscope.load reads it)."),
) -> None:
    """Compile a JAX function once and show what XLA did: kernels, memory (beside XLA's
    figures), the advisor, and the time of each phase."""
    from .._render._kernels_text import render_findings, render_kernels
    from .._render._memory_text import render_memory

    try:
        if devices is not None:
            from .._jax._compare import use_cpu_devices

            use_cpu_devices(devices)
        fn = load_target(target)
        args = array_args(arg)
        kwargs = static_kwargs(static)
        from .._jax._inspect import inspect as run_inspect

        report = run_inspect(fn, *args, static_argnames=tuple(kwargs), **kwargs)
        if output is not None:
            with open(output, "w", encoding="utf-8") as f:
                f.write(report.html())
        if save is not None:
            report.save(str(save))
    except _errors.HloscopeError as e:
        _fail(e)
    except OSError as e:
        _fail(_errors.HloscopeError(f"cannot write: {e.strerror}"))
    t = report.timings
    sys.stdout.write(report.summary_line() + "\n")
    sys.stdout.write("timings: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in t.items())
                     + f"; {report.device.get('count')} {report.device.get('kind')} device(s); "
                     f"jax {report.versions.get('jax')}\n\n")
    m = report.module
    sys.stdout.write(render_kernels(report.kernels, scheduled=m.is_scheduled) + "\n")
    sys.stdout.write(render_memory(report.memory) + "\n")
    sys.stdout.write(render_findings(m.name, list(report.findings)))


@app.command()
def demo() -> None:
    """Run hloscope on a built-in example: a 3-D FFT sharded over 8 devices (from seed 000):
    what is in it, its kernels, its memory peak, and the advisor."""
    from .._analysis._advisor import advise
    from .._analysis._kernels import kernel_graph
    from .._analysis._memory import analyze_memory
    from .._render._kernels_text import render_findings, render_kernels
    from .._render._memory_text import render_memory

    data = resources.files("hloscope") / "_data" / "fft_pencil_4x2.hlo"
    with resources.as_file(data) as p:
        hf = _load(Path(p))
    m = hf.module
    name = "<built-in example fft_pencil_4x2.hlo>"
    parts = [
        ("hloscope summary", render_summary(summarize(m))),
        ("hloscope kernels", render_kernels(kernel_graph(m), scheduled=m.is_scheduled)),
        ("hloscope memory", render_memory(analyze_memory(m), top=5)),
        ("hloscope lint", render_findings(m.name, advise(m))),
    ]
    for title, text in parts:
        sys.stdout.write(f"==> {title} {name}\n\n")
        sys.stdout.write(text.replace(str(p), name) + "\n")
    sys.stdout.write(
        "This is hloscope on a built-in module: a 32x32x32 FFT that JAX sharded over a 4x2\n"
        "mesh of CPU devices.  Try it on your own module:\n"
        "  python -c \"import jax, jax.numpy as jnp; "
        "print(jax.jit(jnp.sin).lower(jnp.ones(8)).compile().as_text())\" > my.hlo\n"
        "  hloscope summary my.hlo; hloscope kernels my.hlo; hloscope memory my.hlo; "
        "hloscope lint my.hlo\n")


def main() -> None:
    """Entry point of the `hloscope` script."""
    try:
        app()
    except (typer.Exit, SystemExit):
        raise
    except _errors.HloscopeError as e:  # raised outside a command's own handling
        try:
            _fail(e)
        except typer.Exit as ex:
            sys.exit(ex.exit_code)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except Exception as e:  # a bug in hloscope, not a problem with the input
        if os.environ.get("HLOSCOPE_DEBUG"):
            raise
        sys.stderr.write(f"internal error: {type(e).__name__}: {e} "
                         "(a bug in hloscope; rerun with HLOSCOPE_DEBUG=1 for the traceback "
                         "and please report it)\n")
        sys.exit(EXIT_INTERNAL)


# The commands that time programs, plot results and run modules live in their own modules.
from . import _bench_cmds  # noqa: F401
from . import _run_cmd  # noqa: F401
