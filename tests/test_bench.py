"""hloscope.bench: phases apart, first run apart, statistics, adaptive count, timers.

No timing targets here (they live in benchmarks/); these check what is measured and how.
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

import hloscope
from hloscope._bench._result import BenchResult
from hloscope._bench._stats import median_ci as _median_ci


def test_bench_measures_phases_first_run_and_steady_state_apart():
    import jax.numpy as jnp

    r = hloscope.bench(lambda x: jnp.sin(x) @ x.T, jnp.ones((64, 64)), warmup=2, iterations=15)
    s = r.stats
    assert s["runs"] == 15 and len(r.times) == 15 and s["warmup"] == 2
    assert set(r.report.timings) == {"trace", "lower", "compile"}
    assert r.first_run > 0 and r.first_run not in r.times
    assert s["min"] <= s["median"] <= s["max"] and s["median_ci95"][0] <= s["median"] <= s["median_ci95"][1]
    assert 0 < s["overhead_per_run"] < 1e-3
    assert r.to_dict()["schema"] == "hloscope.bench/1" and "median" in r.summary_line()


def test_devices_are_those_the_program_runs_on_not_those_jax_sees():
    """With 8 CPU devices visible, a program on one device ran on 1 (a trial: results.csv
    said 8, and plot drew one device's runs as an 8-device point of a scaling curve); one
    sharded over the 8 runs on 8."""
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    assert jax.device_count() == 8
    one = hloscope.bench(lambda x: x * 2, jnp.ones((64, 64)), warmup=1, iterations=3)
    assert one.metadata["device_count"] == 1 and one.devices == 1
    assert one.metadata["visible_devices"] == 8
    mesh = Mesh(jax.devices(), ("x",))
    x = jax.device_put(jnp.ones((64, 64)), NamedSharding(mesh, PartitionSpec("x")))
    eight = hloscope.bench(lambda x: x * 2, x, warmup=1, iterations=3)
    assert eight.metadata["device_count"] == 8


def test_a_busy_machine_is_said_beside_the_times(monkeypatch):
    """What other processes took while the runs were timed is kept, and said where it is
    much (a trial's four benchmarks back to back disagreed beyond their 95% intervals,
    while profile said the machine was busy and bench did not)."""
    import jax.numpy as jnp

    from hloscope._bench import _measure

    r = hloscope.bench(lambda x: x * 2, jnp.ones((8,)), warmup=1, iterations=3)
    assert "other_processes_cpus" in r.metadata and "busy_machine" not in r.metadata
    monkeypatch.setattr(_measure, "busy_machine", lambda a, b, what: f"the {what} shared")
    r = hloscope.bench(lambda x: x * 2, jnp.ones((8,)), warmup=1, iterations=3)
    assert r.metadata["busy_machine"] == "the benchmark shared"


def test_min_time_adds_runs_until_enough_is_measured():
    import jax.numpy as jnp

    r = hloscope.bench(lambda x: x * 2, jnp.ones(16), iterations=3, min_time=0.05)
    assert r.stats["runs"] >= 3 and sum(r.times) >= 0.05


def test_the_compile_is_timed_without_writing_xlas_dump_files(monkeypatch):
    # The analyses need XLA's dump files; the compile the program pays for writes none.
    # A dump made 3 s slower must not be in the compile time, and the compile timed
    # comes first (a second compile may reuse what the first cached).
    import time

    import jax.numpy as jnp

    calls = []
    compile_ = jax.stages.Lowered.compile

    def compile(self, compiler_options=None, **kw):
        calls.append(sorted(compiler_options or {}))
        if "xla_dump_to" in (compiler_options or {}):
            time.sleep(3)
        return compile_(self, compiler_options=compiler_options, **kw)

    monkeypatch.setattr(jax.stages.Lowered, "compile", compile)
    r = hloscope.bench(lambda x: x * 3, jnp.ones(8), iterations=2, warmup=0)
    assert calls == [[], ["xla_dump_to"]]
    assert r.timings["compile"] < 3 and r.report.buffer_assignment
    plain = hloscope.inspect(lambda x: x * 4, jnp.ones(8))  # inspect compiles once
    assert len(calls) == 3 and plain.timings["compile"] >= 3


def test_statistics_and_outliers():
    times = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 9.0, 1.02, 0.98]
    r = BenchResult("f", {}, times, first_run=20.0, warmup=1, overhead=1e-6)
    assert r.stats["outliers"] == [7]
    assert r.stats["median"] == pytest.approx(1.0)
    assert r.stats["max"] == 9.0 and r.stats["last"] == 0.98
    lo, hi = _median_ci(times)
    assert lo <= 1.0 <= hi


def test_timer_as_context_manager_and_decorator():
    import jax.numpy as jnp

    t = hloscope.timer("test-region")
    n0 = len(t.times)
    with t:
        t.result(jnp.ones(8) * 2)
    step = t(lambda x: jnp.tanh(x))
    step(jnp.ones(8))
    assert len(t.times) == n0 + 2 and all(x > 0 for x in t.times)
    assert hloscope.timer("test-region") is t
    assert repr(t).startswith("Timer('test-region': median ") and len(repr(t)) < 120
    with pytest.raises(ZeroDivisionError):  # a region that raised records nothing
        with t:
            1 / 0
    assert len(t.times) == n0 + 2
    with pytest.raises(hloscope.HloscopeError, match="inside a `with` block"):
        t.result(1)


def test_timer_measures_the_work_not_the_dispatch():
    """Against a kernel of known duration (measured here with block_until_ready): the
    documented uses measure it; a plain clock around the call measures only dispatch."""
    import time

    import jax
    import jax.numpy as jnp

    @jax.jit
    def known(x):
        return jax.lax.fori_loop(0, 30, lambda i, a: jnp.tanh(a @ a), x)

    x = jnp.ones((384, 384)) / 384
    known(x).block_until_ready()
    reference = []
    for _ in range(3):
        t0 = time.perf_counter()
        known(x).block_until_ready()
        reference.append(time.perf_counter() - t0)
    duration = min(reference)
    dispatches = []
    for _ in range(3):  # a busy machine can delay one dispatch past the kernel's time
        t0 = time.perf_counter()
        y = known(x)
        dispatches.append(time.perf_counter() - t0)
        y.block_until_ready()
    if min(dispatches) >= 0.25 * duration:
        pytest.skip("the kernel is not asynchronous here (or the machine too busy): no test")
    t = hloscope.Timer("known")
    with t:
        y = t.result(known(x))          # the README's form
    with t:
        y = known(x)                    # without result(): waits for live arrays
    timed = t(known)
    timed(x)                            # as a decorator
    for _ in range(5):  # the kernel's own time, as the least of many (load only adds)
        t0 = time.perf_counter()
        known(x).block_until_ready()
        reference.append(time.perf_counter() - t0)
    duration = min(reference)
    assert all(x >= 0.5 * duration for x in t.times), (t.times, duration)
