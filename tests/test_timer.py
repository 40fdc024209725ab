"""Timing the user's own code into the same results as `bench`: `Timer.to_result`,
`Timer.save`, `hloscope.time_call` for any callable (NumPy included), and an inactive
timer that does nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import hloscope
from hloscope._bench._timer import Timer


def test_a_timers_times_become_a_result_with_the_first_run_apart(tmp_path):
    t = Timer("step")
    for _ in range(5):
        with t:
            t.result(np.ones((64, 64)) @ np.ones((64, 64)))
    r = t.to_result(x=64, y=64, z=1, px=1, py=1, precision="float64", backend="cpu")
    assert r.name == "step" and r.first_run == t.times[0] and r.times == t.times[1:]
    assert r.params["Function"] == "step" and r.params["X"] == 64 and r.devices == 1
    assert r.source == "hloscope.timer"
    written = t.save(str(tmp_path), x=64, px=1, py=1)
    assert {p.rsplit(".", 1)[1] for p in written} == {"md", "json", "html", "csv"}
    (back,) = hloscope.load_results(next(tmp_path.glob("*.json")))
    assert back.times == r.times and back.first_run == r.first_run
    assert "## Iteration Runs" in r.markdown()


def test_time_call_times_numpy_and_plots_with_bench_results(tmp_path):
    for n, devices in ((64, 1), (128, 1)):
        a = np.random.default_rng(0).random((n, n))
        r = hloscope.time_call(np.linalg.svd, a, iterations=4, warmup=1, x=n, y=n, z=1,
                               px=1, py=devices, precision="float64", backend="numpy")
        assert r.name == "svd" and len(r.times) == 4 and r.first_run is not None
        assert r.warmup == 1 and r.source == "hloscope.time_call"
        r.save(str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "hloscope", "plot", str(tmp_path), "--size",
                          "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (s,) = json.loads(out.stdout)["series"]
    assert [p["label"] for p in s["points"]] == ["64x64x1", "128x128x1"]


def test_time_call_waits_for_jax_work():
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda a: jnp.linalg.qr(a)[0].sum())
    r = hloscope.time_call(f, jnp.ones((64, 64)), iterations=3)
    assert len(r.times) == 3 and all(x > 0 for x in r.times)
    assert r.devices == jax.device_count()


def test_an_inactive_timer_does_nothing(monkeypatch):
    off = hloscope.timer("off", active=False)
    with off:
        assert off.result(3) == 3
    assert off.times == [] and not off.active

    def f(a):
        return a

    assert off(f) is f  # the decorator returns the function itself
    monkeypatch.setenv("HLOSCOPE_TIMER", "0")
    assert not hloscope.timer("env").active
    monkeypatch.setenv("HLOSCOPE_TIMER", "1")
    assert hloscope.timer("env").active
    assert "inactive" in repr(off)


def test_bad_use_is_a_clear_error():
    with pytest.raises(hloscope.HloscopeError, match="no runs"):
        Timer("empty").to_result()
    with pytest.raises(hloscope.HloscopeError, match="iterations=0"):
        hloscope.time_call(len, [], iterations=0)
