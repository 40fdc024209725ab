"""`repr` and `print` of every public object stay a few lines (issue 15, item 4).

Builds one instance of every public class hloscope exports, from real modules, and checks
each repr against `REPR_LIMIT`.  A public class added later without an instance here fails
`test_every_public_class_is_covered`.
"""

from __future__ import annotations

import inspect as pyinspect
from pathlib import Path

import pytest
from conftest import DATA, GENERATED, SEEDS

import hloscope
from hloscope._repr import REPR_LIMIT

ERRORS = {name for name in dir(hloscope)
          if isinstance(getattr(hloscope, name), type)
          and issubclass(getattr(hloscope, name), BaseException)}


def _core_objects() -> list[object]:
    f = hloscope.read(GENERATED / "f_for_loop.hlo")
    m = f.module
    inst = m.entry.root
    sharded = hloscope.read(SEEDS / "torch_xla_02_IrToHlo.19_sharded.hlo").module
    spmd = hloscope.read(Path(hloscope.__file__).parent / "_data" / "fft_pencil_4x2.hlo").module
    mem = hloscope.analyze_memory(m)
    graph = hloscope.kernel_graph(spmd)
    advice = hloscope.advise_groups(hloscope.read(GENERATED / "f_fft3d.hlo").module)
    findings = advice.findings
    dump = hloscope.read_memory_inputs(GENERATED / "f_for_loop.dump")
    files = dump.modules[0][1]
    objs: list[object] = [
        f, m, m.entry, inst, inst.shape, inst.shape.layout, inst.metadata,
        hloscope.parse_sharding("{devices=[2,2]0,1,2,3}"),
        mem, mem.peak_values[0], mem.figures, hloscope.analyze_memory(sharded).sharded,
        graph, graph.kernels[0], graph.edges[0], findings[0], advice, advice.groups[0],
        findings[0].saving, findings[0].evidence[0],
        next(iter(hloscope.DEVICES.values())),
        hloscope.diff_modules(m, spmd), hloscope.draw(m), dump,
        hloscope.timer("repr-test"),
    ]
    objs += [graph.collectives[0], files, hloscope.xla_figures(files)]
    from hloscope._analysis._dataflow import analyze_dataflow
    from hloscope._analysis._fit import hbm_fit
    from hloscope._analysis._hardware import hardware_view
    from hloscope._analysis._liverange import compute_live_ranges

    df = analyze_dataflow(spmd)
    objs += [hbm_fit(mem, 80 << 30, "a device"),
             hardware_view(spmd, df, compute_live_ranges(df), graph)]
    if m.stack_frames is not None:
        objs.append(m.stack_frames)
    loc = next(i.source for c in m.computations for i in c.instructions if i.source)
    objs += [loc, *loc.frames[:1]]
    objs += hloscope.load_results(DATA / "bench" / "fft_pencil_64.json")[:1]
    return objs


def _jax_objects() -> list[object]:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def f(x, n=2):
        for _ in range(n):
            x = jnp.sin(x) @ x
        return x

    x = jnp.ones((64, 64))
    r = hloscope.inspect(f, x)
    sweep = hloscope.sweep(f, x, n=[1, 2])
    comparison = hloscope.compare({"a": (f, (x,)), "b": (jax.jit(jnp.cos), (x,))})
    run = hloscope.run_module(hloscope.read(GENERATED / "f_barrier.hlo").module, iterations=2)
    bench = hloscope.bench(f, x, warmup=1, iterations=3)
    profile = hloscope.profile(f, x, runs=2, warmup=0)
    check = hloscope.Check("checked", fix="jax.jit(..., donate_argnums=(0,))",
                           figure="XLA's footprint", before=8_781_856, after=6_029_344)
    return [r, sweep, comparison, run, bench, profile, profile.times, profile.times.kernels[0],
            check]


@pytest.fixture(scope="module")
def objects() -> list[object]:
    return _core_objects() + _jax_objects()


def test_reprs_are_short(objects):
    for obj in objects:
        text = repr(obj)
        assert len(text) <= REPR_LIMIT, (type(obj).__name__, len(text), text[:200])
        assert "\n" not in text, type(obj).__name__


def test_print_is_a_few_lines(objects):
    # The model's str is its HLO text, by design; everything else prints a summary.
    for obj in objects:
        if isinstance(obj, (hloscope.Module, hloscope.Computation, hloscope.Instruction)):
            continue
        text = str(obj)
        if type(obj).__name__ == "Profile":
            # A profile's notes depend on how the machine ran it (rounds that never
            # settled on a busy machine add one: a suite run of 2026-11-28 printed 41): the
            # table is held to the limit, each note to a few lines of its own.
            notes = text[len(str(obj.times)):]  # type: ignore[attr-defined]
            assert all(n.count("\n") <= 6 for n in notes.split("note: ")), notes
            text = str(obj.times)  # type: ignore[attr-defined]
        assert len(text) <= 4000 and text.count("\n") <= 40, (type(obj).__name__, len(text))


def test_every_public_class_is_covered(objects):
    covered = {type(o).__name__ for o in objects}
    public = {name for name in dir(hloscope) if not name.startswith("_")
              and pyinspect.isclass(getattr(hloscope, name))} - ERRORS
    missing = sorted(public - covered)
    assert not missing, f"no instance of {missing} in this test"
