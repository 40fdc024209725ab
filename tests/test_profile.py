"""Measured time: `hloscope.profile`, `read_profile` and ``--profile DIR`` (small and
fast: the full evaluation is benchmarks/profile_accuracy.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from functools import partial

import pytest

import hloscope
from hloscope._render._profile_text import format_time, render_profile

jax = pytest.importorskip("jax")
jnp = jax.numpy

DATA = os.path.join(os.path.dirname(__file__), "data", "profiles")


def _mlp(x, w):
    return jnp.tanh(x @ w).sum(axis=0)


def test_profile_a_small_function():
    p = hloscope.profile(_mlp, jnp.ones((64, 128)), jnp.ones((128, 64)), runs=3, warmup=1,
                         min_time=0)
    t = p.times
    assert t.module == "jit__mlp" and t.runs == 3 and len(p.wall) == 3
    assert t.matched_share > 0.9
    assert t.kernels and all(k.median > 0 and k.calls >= 1 for k in t.kernels)
    g = t.gaps  # the typical run's parts: they add up to its step
    assert g.step > 0 and g.dispatch >= 0 and g.wait >= 0 and g.idle >= 0
    # Three rounds of one run: the typical run is a run (the one nearest the rounds' mean
    # in its step and its kernels' time), not necessarily the median one.
    assert g.step in t.steps and g.explained == pytest.approx(g.step, rel=1e-9)
    d = p.to_dict()
    assert d["schema"] == "hloscope.profile/1"
    json.dumps(d)
    text = render_profile(t, width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "Kernels by measured time" in text


def test_profile_runs_for_min_time():
    p = hloscope.profile(_mlp, jnp.ones((8, 16)), jnp.ones((16, 8)), runs=1, warmup=0,
                         min_time=0.2)
    assert p.times.runs == len(p.wall) > 1
    with pytest.raises(hloscope.HloscopeError, match="min_time=-1"):
        hloscope.profile(_mlp, jnp.ones((8, 16)), jnp.ones((16, 8)), min_time=-1)


def test_warmup_counts(monkeypatch):
    """The warm-up: a first run, `warmup` more, and more until WARMUP_TIME (none of those
    with warmup=0); a throwaway trace (none with warmup=0); then the profiled runs, in
    rounds (at most `runs`), each after SETTLE unmarked runs; then, without the profiler,
    SETTLE runs and a round's worth (`Profile.slowdown`'s reference)."""
    from hloscope._profile import _capture

    args = [jnp.ones((8, 16)), jnp.ones((16, 8))]
    rep = hloscope.inspect(_mlp, *args)
    real, calls = rep._cache["compiled"], []
    rep._cache["compiled"] = lambda *a: calls.append(1) or real(*a)
    monkeypatch.setattr(_capture, "WARMUP_TIME", 0.0)
    _capture.profile_report(rep, args, runs=2, warmup=2, min_time=0, max_rounds=2)
    traced = 2 * _capture.SETTLE + 2  # two rounds of one run each
    plain = _capture.SETTLE + 1  # after the trace, a round's worth unprofiled
    assert len(calls) == 1 + 2 + traced + traced + plain
    calls.clear()
    monkeypatch.setattr(_capture, "WARMUP_TIME", 1e9)  # not waited for: warmup=0
    p = _capture.profile_report(rep, args, runs=2, warmup=0, min_time=0, rounds=1)
    assert len(calls) == 1 + _capture.SETTLE + 2 + _capture.SETTLE + 2
    assert p.times.runs == 2


def test_an_asynchronous_thunk_is_timed_until_xla_marks_it_done():
    """XLA's CPU runtime marks each thunk done (``end: NAME``); an asynchronous one (Eigen's
    convolution) ends its own event after the calling thread's share, the rest running on
    other threads until the mark.  The thunk is charged the part of that tail in which no
    other kernel ran (a new user's convolution: 36.6 ms measured of about 65, the rest
    shown as wait); a thunk queued behind another's work is not charged for the wait."""
    from hloscope._profile._match import async_tails
    from hloscope._profile._read import TraceEvent, _mark_done

    conv = TraceEvent("m", "conv", 100, 300, "d0", 0, done=1000)
    small = TraceEvent("m", "fusion", 50, 20, "d0", 0, done=390)  # queued behind conv
    other = TraceEvent("m", "fusion.1", 500, 100, "d0", 0)
    ev = [conv, small, other]
    tails = async_tails(ev, [(e.start, e.start + e.duration) for e in ev], 900)
    assert tails == {0: [(400, 500), (600, 900)], 1: [(70, 100)]}  # clipped at the run's end
    # Marks paired with their thunks: by flow id where read, else by name, each the latest
    # of its name that started before it; a mark at the thunk's own end changes nothing
    events = [TraceEvent("m", "convolution", 0, 10, "d0", None),
              TraceEvent("m", "convolution", 60_000, 10, "d0", None),
              TraceEvent("m", "convolution", 70_000, 10, "d0", None),  # its mark lost
              TraceEvent("m", "f", 200, 10, "d0", None)]
    _mark_done(events, 0, {3: 7},
               [("convolution", 50_000, None), ("convolution", 90_000, None), ("f", 99_000, 7),
                ("f", 150, 8), ("absent", 5, None)])
    assert [e.done for e in events] == [50_000, 0.0, 90_000, 99_000]
    events = [TraceEvent("m", "conv", 0, 10_000, "d0", None)]
    _mark_done(events, 0, {}, [("conv", 10_500, None)])
    assert events[0].done == 0.0  # within _DONE_AFTER of its own end: no tail


def test_an_eigen_convolution_is_timed_to_its_end(tmp_path):
    """A 1-D convolution XLA's CPU backend runs with Eigen, asynchronously: its time is
    its own event and the tail until XLA marked it done, not "wait" (before: about 70% of
    the convolution's time was shown as the host waiting for the outputs)."""
    from hloscope._profile._read import read_trace

    def smooth(x, k):
        return jax.vmap(lambda r: jnp.convolve(r, k, mode="same"))(x)


    from hloscope._profile._match import measure

    keep = tmp_path / "trace"
    p = hloscope.profile(smooth, jnp.ones((8, 2048)), jnp.ones((63,)), runs=8, warmup=2,
                         min_time=0, keep=str(keep))
    trace = read_trace(str(keep))
    assert any(e.done for e in trace.events if e.op == "convolution")  # marked done later
    # The same trace joined without the marks: the tail was "wait" (or idle); with them it
    # is the convolution's (compared on one trace: a busy machine moves both alike)
    bare = dataclasses.replace(trace, events=tuple(e._replace(done=0.0) for e in trace.events))
    g, m = p.report.kernels, p.report.module
    with_marks, without = measure(trace, g, m), measure(bare, g, m)
    # How much of the work is left to the tail depends on the machine and its load (3-5x
    # the thunk's own event on one 2-core machine, 1.1x on another): the tail is added,
    # and where most runs have one, the median grows by it (how much: the test above)
    conv = [e for e in trace.events if e.op == "convolution"]
    assert with_marks.seconds("convolution") >= without.seconds("convolution")
    if sum(bool(e.done) for e in conv) > 0.75 * len(conv):
        assert with_marks.seconds("convolution") > without.seconds("convolution")
    for t in (with_marks, without):  # the parts add up either way
        assert abs(t.gaps.explained - t.step) <= 1e-6 * t.step


def test_a_loop_run_as_one_piece_is_timed():
    """The CPU backend runs a small loop as one function inside a `call`
    (xla_cpu_small_call): no event of its kernels, one of the call.  The call is timed as
    a kernel is, not left to "wait" (the new-user trial: 1.5% of the step in kernels)."""
    from hloscope._profile._match import leaf_containers
    from hloscope._profile._read import TraceEvent

    insts = {"call": "call", "while": "while", "fusion": "fusion"}
    ev = [TraceEvent("m", "call", 0, 100, "d0", 0), TraceEvent("m", "fusion", 200, 10, "d0", 0),
          TraceEvent("m", "while", 300, 100, "d0", 0), TraceEvent("m", "fusion", 310, 10, "d0", 0),
          TraceEvent("m", "fusion", 50, 10, "d1", 0)]  # another device's event: not inside
    assert leaf_containers(ev, insts) == {"call"}

    def loop(x):
        def body(c, _):
            return jnp.sin(c) * 1.01 + c[::-1], None
        return jax.lax.scan(body, x, None, length=1000)[0]

    p = hloscope.profile(loop, jnp.ones(16), runs=5, warmup=1, min_time=0)
    assert sum(k.share for k in p.times.kernels) > 0.3, p.times.kernels


def test_columns_left_out_for_width_are_said():
    folder = os.path.join(DATA, "cpu_scan")
    t = hloscope.read_profile(folder, os.path.join(folder, "module.hlo"))
    narrow = render_profile(t, width=70)
    assert "left out to fit 70 columns: --wide shows them" in narrow
    assert "left out to fit" not in render_profile(t, width=None)
    from hloscope._render._text import table_left_out

    heads = ["kernel", "kind", "measured", "share"]
    rows = [["fusion.1", "fusion", "1 ms", "50%"], ["fusion.22", "-", "1 ms", "50%"]]
    assert table_left_out(heads, rows, width=None)[1] == []
    text, gone = table_left_out(heads, rows, width=30, drop=("kind",))
    assert gone == ["kind"] and "kind" not in text.splitlines()[0]
    # A column of nothing ("-" only) goes first, before any cell is cut: said too.
    rows = [["fusion.1", "-", "1 ms", "50%"]]
    text, gone = table_left_out(heads, rows, width=30, drop=("kind",))
    assert gone == ["kind"] and text.splitlines()[0].split() == ["kernel", "measured", "share"]


def test_op_name_scopes():
    from hloscope._profile._match import _scope

    assert _scope("jit(f)/dot_general") == "jit(f)"
    assert _scope("jit(step)/transpose(jvp())/mul;jit(step)/transpose(jvp())") == \
        "jit(step)/transpose(jvp())"  # XLA joined two op_names: the first's scope
    assert _scope("x") == "x"


ASYNC_KERNEL = """HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

%fused (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%p)
}

%async_computation (q: f32[8]) -> f32[8] {
  %q = f32[8]{0} parameter(0)
  ROOT %fusion = f32[8]{0} fusion(%q), kind=kLoop, calls=%fused
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %fusion-start = ((f32[8]{0}), f32[8]{0}, s32[]) async-start(%x), calls=%async_computation
  %fusion-done = f32[8]{0} async-done(%fusion-start)
  ROOT %e = f32[8]{0} exponential(%fusion-done)
}
"""


def test_an_async_start_kernel_is_one_row(tmp_path):
    """An async-start that is a kernel of the graph (a real H100's fusion-start) is timed
    once, as the kernel, not a second time as a container run as one piece."""
    from hloscope._analysis._kernels import kernel_graph
    from hloscope._profile._load import _modules
    from hloscope._profile._match import measure
    from hloscope._profile._read import Trace, TraceEvent

    path = tmp_path / "async.hlo"
    path.write_text(ASYNC_KERNEL)
    m = _modules(str(path))[0]
    g = kernel_graph(m)
    assert "fusion-start" in {k.name for k in g.kernels}
    ev = [TraceEvent("m", op, r * 1000 + at, d, "/device:GPU:0", r)
          for r in range(3) for op, at, d in (("fusion-start", 0, 100), ("e", 200, 50))]
    t = measure(Trace("x", "gpu", tuple(ev), ()), g, m)
    assert [k.name for k in t.kernels] == ["fusion-start", "e"]
    assert t.kernels[0].median == pytest.approx(100e-9)


def test_a_count_of_runs_is_the_count_asked():
    """min_time 0 asks for a count of runs: exactly that many, shared by the rounds (5 in
    4 rounds: 2, 1, 1, 1); a profile sized by time stops at MAX_RUNS and says so."""
    from hloscope._profile import _capture

    args = [jnp.ones((8, 16)), jnp.ones((16, 8))]
    rep = hloscope.inspect(_mlp, *args)
    p = _capture.profile_report(rep, args, runs=5, warmup=0, min_time=0, rounds=4)
    assert len(p.wall) == 5 and p.rounds == 4
    assert _capture.run_cap(_capture.MAX_RUNS - 1, 0.01, 0.25) is None
    assert _capture.run_cap(_capture.MAX_RUNS, 0.25, 0.25) is None
    note = _capture.run_cap(_capture.MAX_RUNS, 0.0212, 30)
    assert "the runs stopped at 2,000" in note and "21.2 ms of runs, short of the 30 s" in note


def test_rounds_go_on_until_their_medians_settle(monkeypatch):
    """Rounds beyond `rounds` follow while the rounds' medians have not settled, up to
    `max_rounds`; a note says so where they never settle; one round asked is one round."""
    from hloscope._profile import _capture

    assert _capture.settled([1.0, 1.01, 0.99, 1.0])
    assert not _capture.settled([1.0, 1.4, 1.0, 1.4])  # two states 1.4x apart
    assert not _capture.settled([1.0])
    assert _capture.unsettled([1.0, 1.0, 1.0, 1.0], [0, 1, 2, 3]) is None
    note = _capture.unsettled([300e-6, 420e-6, 300e-6, 420e-6], [0, 1, 2, 3])
    assert "from 300 us to 420 us between the 4 rounds" in note
    args = [jnp.ones((8, 16)), jnp.ones((16, 8))]
    rep = hloscope.inspect(_mlp, *args)
    cases = ((True, 3, 9, 1e-9, 3), (False, 3, 9, 1e-9, 9), (False, 1, 9, 1e-9, 1),
             (False, 3, 9, 0, 3))  # min_time 0: a count of runs, in the rounds asked
    for steady, asked, most, min_time, expect in cases:
        monkeypatch.setattr(_capture, "settled", lambda m, s=steady: s)
        p = _capture.profile_report(rep, args, runs=3, warmup=0, min_time=min_time,
                                    rounds=asked, max_rounds=most)
        assert len(p.wall) == 3 * expect // asked, (steady, asked, most)
        assert any("rounds of runs" in n for n in p.notes) == (not steady and expect > 1)


def test_rounds_mean_of_medians():
    """Each kernel's time over several rounds is the interquartile mean of its median in
    each: a machine whose blocks of runs run in one of two states moves it by the share of
    rounds in each state (over the middle half), and one round slowed by another process
    does not pull it (a trial's typical step was 15.5 ms where its median run was 9.8)."""
    from hloscope._profile import _capture
    from hloscope._profile._match import _mean_of_medians

    fast, slow = [280.0, 281.0, 279.0], [370.0, 371.0, 369.0]
    xs = fast * 2 + slow * 2  # rounds 0, 1 fast; 2, 3 slow
    rounds = [r for r in range(4) for _ in range(3)]
    assert _mean_of_medians(xs, rounds) == 325.0
    xs = fast * 3 + slow * 1  # one slow round of four: left out with the fastest
    assert _mean_of_medians(xs, rounds) == 280.0
    xs8 = fast * 5 + slow * 3  # of eight rounds the middle four: three fast, one slow
    assert _mean_of_medians(xs8, [r for r in range(8) for _ in range(3)]) == 302.5
    assert _mean_of_medians([1.0, 2.0, 9.0], [0, 1, 2]) == 2.0  # of three, the middle one
    assert _mean_of_medians([1.0, 3.0], [0, 1]) == 2.0  # of two, both
    args = [jnp.ones((8, 16)), jnp.ones((16, 8))]
    p = hloscope.profile(_mlp, *args, runs=8, warmup=0, min_time=1e-9)
    # 4 rounds of 2 runs, and as many more as the machine's rounds took to settle (less
    # the runs left out for touching new memory)
    assert p.times.runs + p.left_out in range(8, 2 * _capture.MAX_ROUNDS + 1, 2)
    assert all(k.median > 0 for k in p.times.kernels)


def test_a_profile_checks_itself_against_unprofiled_runs():
    """After its trace a profile times a round's worth of runs without the profiler, as
    bench times them: its slowdown is their medians' ratio, and a note says it over
    SLOWED (docs/profile.md, Overhead)."""
    from hloscope._profile import _capture

    p = hloscope.profile(_mlp, jnp.ones((8, 16)), jnp.ones((16, 8)), runs=4, warmup=0,
                         min_time=0)
    assert len(p.plain_wall) == 1 and p.plain_step > 0  # 4 runs in 4 rounds: one a round
    assert p.slowdown == pytest.approx(statistics.median(p.wall) / p.plain_step)
    assert p.to_dict()["unprofiled_wall_seconds"] == [round(w, 12) for w in p.plain_wall]
    assert _capture.slowed([1.0, 1.2, 1.1], [1.0] * 3) is None  # 1.1x: within SLOWED
    note = _capture.slowed([6.3e-3, 6.4e-3, 6.2e-3], [3e-3, 2.9e-3, 2.95e-3])
    assert note.startswith("profiling slowed this program: its profiled runs took 6.30 ms "
                           "(median) against 2.95 ms for 3 unprofiled runs right after")
    assert "2.14x" in note
    assert _capture.slowed([], [1.0] * 3) is None
    assert _capture.slowed([6.3e-3], [3e-3, 3e-3]) is None  # too few to say


def test_runs_stop_before_the_profiler_takes_the_machines_memory(monkeypatch):
    """Under JAX's profiler on the CPU some programs take new memory every run (XLA's
    FFT); the runs stop once the process's peak memory has grown by `memory_budget`,
    with a note, rather than let the machine run out of memory."""
    from hloscope._profile import _capture

    args = [jnp.ones((8, 16)), jnp.ones((16, 8))]
    rep = hloscope.inspect(_mlp, *args)
    assert _capture.memory_budget() >= 64 << 20
    monkeypatch.setattr(_capture, "memory_budget", lambda: 100_000)
    calls = iter(range(1, 10**6))  # each look: 5 more page faults, 40 kB more at the peak

    def usage() -> tuple[int, int]:
        c = next(calls)
        return 5 * c, 40_000 * c

    monkeypatch.setattr(_capture, "_usage", usage)
    p = _capture.profile_report(rep, args, runs=10, warmup=0, min_time=0)
    assert len(p.wall) == 2  # the peak: 40 kB at the start, 120 kB, then 200 kB: past 140
    note = next(n for n in p.notes if n.startswith("the profile stopped"))
    assert note.startswith("the profile stopped after 2 runs, fewer than the 10 asked: "
                           "under the profiler this process's memory grew by 195.31 KiB")
    assert p.page_faults == 5


def test_new_memory_is_said_with_whose_it_is():
    """Runs that take new memory: the profiler's doing where the unprofiled runs after
    the trace take none, the program's own (large buffers given back after each run)
    where they take as much."""
    from hloscope._profile._capture import fresh_memory

    assert fresh_memory(10, 0) is None and fresh_memory(None) is None
    own = fresh_memory(65537, 65537)
    assert "256.0 MiB" in own and "profiled or not" in own
    assert "after the trace 0: the profiler's doing" in fresh_memory(2879, 0)
    assert "which plain runs may not" in fresh_memory(2879)


def test_note_on_many_kernels():
    """On the CPU, XLA's recording of each kernel run is said when it may be over a tenth
    of the step (docs/profile.md, Overhead)."""

    from hloscope._profile._capture import many_kernels

    folder = os.path.join(DATA, "cpu_scan")
    t = hloscope.read_profile(folder, os.path.join(folder, "module.hlo"))

    def with_step(step: float) -> object:
        return dataclasses.replace(t, gaps=dataclasses.replace(t.gaps, step=step))

    assert "kernels per run" in many_kernels(with_step(1e-6))
    assert many_kernels(with_step(1.0)) is None
    assert many_kernels(dataclasses.replace(with_step(1e-6), platform="gpu")) is None
    # the kernels not in the trace, named where they are few (a new user looked for it)
    assert "(9 ran; not in the trace: wrapped_compare)" in str(t)
    many = dataclasses.replace(t, not_run=("a", "b", "c", "d"))
    assert "(9 ran, 4 not in the trace)" in str(many)
    # what the match says: every event named a kernel, or how much did and where the rest is
    assert "every event of the module in the trace names one of its kernels" in str(t)
    assert "80.0% of the module's traced time is in events naming its kernels; the rest is " \
           "listed below" in " ".join(str(dataclasses.replace(t, matched_share=0.8)).split())


def test_inspect_with_profile_ranks_by_measured_time():
    rep = hloscope.inspect(_mlp, jnp.ones((64, 128)), jnp.ones((128, 64)), profile=2)
    assert rep.measured is not None and rep.measured.runs >= 2
    assert '"measured"' in rep.html()
    # The whole profile: printed in full, its notes said beside the summary and on the page
    assert isinstance(rep.profile, hloscope.Profile) and rep.profile.times is rep.measured
    assert "Kernels by measured time" in str(rep.profile)
    rep.profile.notes = ("this machine was busy",)
    assert "print(report.profile) for every kernel and 1 note" in str(rep)
    assert "The profile: this machine was busy" in rep.html()



def test_a_saved_profiled_report_keeps_its_measured_times(tmp_path):
    """Report.save and hloscope.load keep what was measured, with the profile's notes (a
    trial: a saved profiled report read back with measured None, and nothing said)."""
    rep = hloscope.inspect(_mlp, jnp.ones((64, 128)), jnp.ones((128, 64)), profile=2)
    rep.profile.notes = ("this machine was busy",)
    path = rep.save(str(tmp_path / "r.json"))
    back = hloscope.load(path)
    t, u = rep.measured, back.measured
    assert u is not None and u.to_dict() == {**t.to_dict(), "notes": ["this machine was busy"]}
    assert u.step == pytest.approx(t.step) and [k.name for k in u.kernels] == [
        k.name for k in t.kernels]
    assert "The profile: this machine was busy" in back.html()
    assert '"measured"' in back.html()
    # A damaged measured part is refused, naming the field
    d = json.loads((tmp_path / "r.json").read_text())
    d["measured"]["kernels"][0]["median_seconds"] = "fast"
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(hloscope.HloscopeError, match=r"measured.kernels\[0\].median_seconds"):
        hloscope.load(str(tmp_path / "bad.json"))


def test_collectives_on_virtual_cpu_devices_are_said_to_be_waiting():
    """On 8 virtual CPU devices sharing 2 CPUs, a collective mostly waits for the devices
    that have not reached it: said, where collectives take a tenth of the step (a trial
    read 'all-gather 39.8%' as its program's communication); not on one device."""
    from hloscope._profile._capture import virtual_devices

    folder = os.path.join(DATA, "cpu_sharded8")
    t = hloscope.read_profile(folder, os.path.join(folder, "module.hlo"))
    said = virtual_devices(t)
    assert said and said.startswith("collectives took 55% of the step on 8 CPU devices")
    assert virtual_devices(dataclasses.replace(t, devices=1)) is None
    assert virtual_devices(dataclasses.replace(t, platform="gpu")) is None


@pytest.mark.parametrize("name,devices", [("cpu_scan", 1), ("cpu_sharded8", 8)])
def test_read_committed_profiles(name, devices):
    folder = os.path.join(DATA, name)
    t = hloscope.read_profile(folder, os.path.join(folder, "module.hlo"))
    assert t.runs == 3 and t.devices == devices
    assert t.matched_share >= 0.95
    assert abs(t.gaps.explained - t.step) <= 0.05 * t.step
    # print(read_profile(...)) shows the profile, as hloscope kernels --profile does
    assert str(t).startswith(f"Profile of {t.module}: 3 runs on {devices} cpu device")
    assert "Kernels by measured time" in str(t) and repr(t).startswith("MeasuredTimes(")
    if name == "cpu_scan":  # 7% of its time in kernels with no line: said why (a trial)
        assert "(no source line): 2 kernels XLA gave no source line" in " ".join(str(t).split())
    if name == "cpu_scan":  # the loop body's kernels run once per step of the scan
        assert any(k.calls == 4 for k in t.kernels)
    else:
        assert [k.name for k in t.collectives] == ["all-reduce"]


def test_profile_of_another_module_is_refused():
    with pytest.raises(hloscope.HloscopeError, match="jit_scan_mlp.*jit_sharded_matmul"):
        hloscope.read_profile(os.path.join(DATA, "cpu_scan"),
                              os.path.join(DATA, "cpu_sharded8", "module.hlo"))


def test_not_a_profile(tmp_path):
    bad = tmp_path / "x.xplane.pb"
    bad.write_bytes(b"\x00not a profile")
    with pytest.raises(hloscope.HloscopeError, match="not a profile"):
        hloscope.read_profile(str(bad), os.path.join(DATA, "cpu_scan", "module.hlo"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(hloscope.HloscopeError, match="no \\*.xplane.pb"):
        hloscope.read_profile(str(empty), os.path.join(DATA, "cpu_scan", "module.hlo"))


def test_format_time():
    assert [format_time(x) for x in (850e-9, 12.3e-6, 4.56e-3, 1.5)] == [
        "850 ns", "12.3 us", "4.56 ms", "1.5 s"]


def test_bench_times_a_donating_function():
    @partial(jax.jit, donate_argnums=0)
    def step(x, y):
        return x * 2 + y

    x = jnp.ones((32, 32))
    r = hloscope.bench(step, x, jnp.ones((32, 32)), warmup=1, iterations=3)
    assert len(r.times) == 3
    assert "donated" in r.metadata["donated_arguments"]
    assert "copied fresh" in r.summary_line()
    assert float(x.sum()) == 32 * 32  # the caller's array is never donated


def test_a_profile_of_a_donating_function_says_so_in_python_too():
    @partial(jax.jit, donate_argnums=0)
    def step(x, y):
        return x * 2 + y

    x = jnp.ones((32, 32))
    p = hloscope.profile(step, x, jnp.ones((32, 32)), runs=2, warmup=0, min_time=0)
    assert p.donated == 1 and float(x.sum()) == 32 * 32
    assert "note: the function donates 1 argument: each run got fresh copies" in str(p)


def test_what_cannot_be_profiled_is_said_before_any_run(tmp_path):
    """A function XLA compiles to no kernel, a trace of the caller's own already on: one
    clear error each, not the profiler's."""
    with pytest.raises(hloscope.HloscopeError, match="runs no kernel"):
        hloscope.profile(lambda x: None, jnp.ones(4))
    with jax.profiler.trace(str(tmp_path / "mine")):
        with pytest.raises(hloscope.HloscopeError, match="a JAX profiler trace is already on"):
            hloscope.profile(jnp.sin, jnp.ones(4), runs=1, warmup=0, min_time=0)


def test_cli_profile_and_profile_dir(tmp_path):
    from conftest import run_cli

    prog = tmp_path / "prog.py"
    prog.write_text("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.tanh(x @ x)\n")
    r = run_cli("profile", f"{prog}:f", "--arg", "f32[64,64]", "-n", "2", "--warmup", "0",
                "--min-time", "0", "--keep", str(tmp_path / "trace"), columns=100)
    assert r.returncode == 0, r.stderr
    assert "Kernels by measured time" in r.stdout and "jit_f" in r.stdout
    assert "libtpu" not in r.stdout  # no GPU or TPU here: JAX started on the CPU alone
    assert max(len(line) for line in r.stdout.splitlines()) <= 100
    kept = tmp_path / "trace"  # the module is kept beside the trace, and read with it
    r = run_cli("kernels", str(kept / "module.hlo"), "--profile", str(kept))
    assert r.returncode == 0 and "measured" in r.stdout, r.stderr
    assert hloscope.read_profile(kept).module == "jit_f"
    r = run_cli("kernels", str(kept), "--profile", str(kept))  # the folder as the module
    assert r.returncode == 0 and f"from {kept / 'module.hlo'}" in r.stdout, r.stderr
    r = run_cli("profile", f"{prog}:f", "--arg", "f32[4,4]", "--keep", str(prog))
    assert r.returncode == 2 and "is a file: a trace is kept in a folder" in r.stderr
    folder = os.path.join(DATA, "cpu_scan")
    r = run_cli("kernels", os.path.join(folder, "module.hlo"), "--profile", folder, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["profile"]["schema"] == "hloscope.profile/1"
    assert any(k.get("measured_seconds") for k in data["modules"][0]["kernels"])
    r = run_cli("lint", os.path.join(DATA, "cpu_sharded8", "module.hlo"), "--profile", folder)
    assert r.returncode == 2 and "jit_scan_mlp" in r.stderr and "jit_sharded_matmul" in r.stderr
    out = tmp_path / "r.html"
    r = run_cli("report", os.path.join(folder, "module.hlo"), "--profile", folder, "-o",
                str(out))
    assert r.returncode == 0, r.stderr
    assert '"measured"' in out.read_text()


def test_diff_with_two_profiles(tmp_path):
    from conftest import run_cli

    folder = os.path.join(DATA, "cpu_scan")
    hlo = os.path.join(folder, "module.hlo")
    r = run_cli("diff", hlo, hlo, "--profile", folder, "--profile", folder, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["measured"]["kernels"]
    assert rows and all(row["change_seconds"] == 0 for row in rows)
    # The step's change, on the page too; and against the runs' own spread (one profile
    # on both sides: the middle halves of the runs overlap; this one has 3 runs, too few
    # to say, the TPU's 100)
    page = tmp_path / "diff.html"
    r = run_cli("diff", hlo, hlo, "--profile", folder, "--profile", folder, "-o", str(page))
    assert r.returncode == 0, r.stderr
    assert "(+0 ns, +0.0%)" in r.stdout and "spread" not in r.stdout
    tpu = os.path.join(DATA, "tpu_v6e")
    tpu_hlo = os.path.join(tpu, "module.hlo")
    r2 = run_cli("diff", tpu_hlo, tpu_hlo, "--profile", tpu, "--profile", tpu)
    assert "within the runs' own spread" in r2.stdout, r2.stderr
    assert r.stdout.rstrip().splitlines()[-1].startswith(f"wrote {page} (")
    assert "<h2>Measured time</h2>" in page.read_text()
    r = run_cli("diff", hlo, hlo, "--profile", folder)
    assert r.returncode == 2 and "--profile goes twice" in r.stderr
    r = run_cli("diff", "a.py:f", "b.py:g", "--arg", "f32[2]", "--profile", folder,
                "--profile", folder)  # two functions: refused before anything compiles
    assert r.returncode == 2 and "A and B are functions" in r.stderr
    other = os.path.join(DATA, "cpu_sharded8")  # A's profile is of another module
    r = run_cli("diff", hlo, hlo, "--profile", other, "--profile", folder)
    assert r.returncode == 2 and r.stderr.startswith("error: A's profile: the profile ")


def test_a_time_diff_says_whether_the_change_stands_out():
    """The step's change is weighed against the middle half of each side's runs: beyond
    it, B is said faster or slower by a ratio; within it, the user is told to measure
    again; with fewer than 4 runs a side, nothing is said."""
    from hloscope._profile._diff import TimeDiff
    from hloscope._render._profile_text import spread_line, time_diff_line

    a = (1.0e-3, 1.1e-3, 1.2e-3, 1.3e-3, 1.4e-3)
    fast = TimeDiff(1.2e-3, 0.4e-3, (), a, tuple(x / 3 for x in a))
    assert fast.within_spread is False
    assert time_diff_line(fast) == "Measured time: step 1.2 ms -> 400 us (-800 us, -66.7%)"
    assert spread_line(fast).startswith("B's median run is 3x faster than A's (95% interval "
                                        "2.14x to 4.2x), beyond the runs' spread: the middle "
                                        "half of A's runs took 1.1 ms to 1.3 ms")
    lo, hi = fast.ratio_interval
    assert lo < 1 / 3 < hi and fast.to_dict()["median_ratio"]["ci95"] == [lo, hi]
    # A typical step pulled by slow rounds (a profile in rounds) far from the median run:
    # both are said, and the verdict goes by the median runs
    pulled = TimeDiff(1.2e-3, 1.92e-3, (), a, tuple(x * 1.3 for x in a))
    assert time_diff_line(pulled).endswith("; median run 1.2 ms -> 1.56 ms")
    assert "median run is 1.3x slower" in spread_line(pulled)
    near = TimeDiff(1.2e-3, 1.25e-3, (), a, tuple(x * 1.04 for x in a))
    assert near.within_spread and spread_line(near).startswith("within the runs' own spread")
    assert TimeDiff(1.0, 2.0, (), (1.0,), (2.0,)).within_spread is None
    assert spread_line(TimeDiff(1.0, 2.0, (), (1.0,), (2.0,))) == ""
    assert fast.to_dict()["within_spread"] is False
    from hloscope._render._profile_text import render_time_diff

    noted = TimeDiff(1.0, 2.0, (), (), (), ("the step's median moved",), ())
    assert "  note (B's profile): the step's median moved" not in render_time_diff(noted)
    assert "  note (A's profile): the step's median moved" in render_time_diff(noted)


def test_a_time_diff_tells_the_machine_from_the_program():
    """The kernels the change left alone are the control: where they moved as the step
    did, the machine ran at another speed between the two profiles, and no verdict is
    given on the program (a trial: 'B is 1.68x slower' of an edit that, timed
    interleaved, changed nothing, while every kernel it left alone took 1.6x its time)."""
    from hloscope._profile._diff import TimeDiff
    from hloscope._render._profile_text import spread_line

    a = (1.0e-3, 1.1e-3, 1.2e-3, 1.3e-3, 1.4e-3)
    slower = tuple(x * 1.68 for x in a)
    machine = TimeDiff(1.2e-3, 2.0e-3, (), a, slower, control=(79, 0.8e-3, 1.29e-3),
                       kernels_a=1.0e-3)
    assert machine.machine_moved and machine.all_machine
    said = spread_line(machine)
    assert said.startswith("the machine changed between the profiles: the 79 kernels the "
                           "change left alone (80.0% of A's kernel time) took 1.61x")
    assert "none of the step's change need be the program's" in said and "slower" not in said
    part = TimeDiff(1.2e-3, 2.4e-3, (), a, tuple(x * 2 for x in a),
                    control=(5, 0.5e-3, 0.6e-3), kernels_a=1.0e-3)
    assert not part.all_machine and "part of the step's change is the machine's" in \
        spread_line(part)
    # left alone and steady: the verdict stands, and says what it rests on
    steady = TimeDiff(1.2e-3, 2.0e-3, (), a, slower, control=(40, 0.5e-3, 0.51e-3),
                      kernels_a=1.0e-3)
    assert not steady.machine_moved
    assert spread_line(steady).endswith("; the 40 kernels the change left alone kept their "
                                        "time (1.02x)")
    # too few to tell (under a fifth of A's kernel time, or one kernel): no control
    for control in ((40, 0.1e-3, 0.2e-3), (1, 0.9e-3, 1.8e-3)):
        few = TimeDiff(1.2e-3, 2.0e-3, (), a, slower, control=control, kernels_a=1.0e-3)
        assert few.control_ratio is None and "1.68x slower" in spread_line(few)
    assert machine.to_dict()["unchanged_kernels"]["ratio"] == pytest.approx(1.6125)


def test_gzipped_profiles_and_folders_of_several_runs(tmp_path):
    """A profile gzipped (.xplane.pb.gz) reads as the file; a folder of several runs is
    read at its newest, and messages name that run."""
    import glob
    import gzip
    import shutil

    folder = os.path.join(DATA, "cpu_scan")
    hlo = os.path.join(folder, "module.hlo")
    plain = hloscope.read_profile(folder, hlo)
    (src,) = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    for run in ("2026_01_01_00_00_00", "2026_01_02_00_00_00"):
        (tmp_path / "plugins" / "profile" / run).mkdir(parents=True)
        with open(src, "rb") as f, gzip.open(
                tmp_path / "plugins" / "profile" / run / "host.xplane.pb.gz", "wb") as g:
            shutil.copyfileobj(f, g)
    t = hloscope.read_profile(tmp_path, hlo)
    assert [k.median for k in t.kernels] == [k.median for k in plain.kernels]
    assert t.source.endswith("(its newest run of 2, plugins/profile/2026_01_02_00_00_00)")
    with pytest.raises(hloscope.HloscopeError, match="its newest run of 2"):
        hloscope.read_profile(tmp_path, os.path.join(DATA, "cpu_sharded8", "module.hlo"))


def test_json_keys_are_documented():
    folder = os.path.join(DATA, "cpu_scan")
    d = hloscope.read_profile(folder, os.path.join(folder, "module.hlo")).to_dict()
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "json.md")).read()
    keys = set(d) | set(d["gaps"]) | set(d["kernels"][0]) | set(d["lines"][0])
    for key in keys:
        assert f"`{key}`" in doc, f"docs/json.md does not document {key}"


def test_profile_a_sharded_function_counts_every_device():
    from jax.sharding import NamedSharding, PartitionSpec

    if jax.device_count() < 8:
        pytest.skip("needs 8 CPU devices (tests/conftest.py sets them)")
    mesh = jax.make_mesh((8,), ("data",))
    x = jax.device_put(jnp.ones((64, 32)), NamedSharding(mesh, PartitionSpec("data", None)))
    p = hloscope.profile(lambda x: jnp.sin(x).sum(), x, runs=2, warmup=1, min_time=0)
    assert p.times.devices == 8 and p.times.collectives


def test_advice_ranked_by_measured_time():
    from hloscope._analysis._advisor import Advice
    from hloscope._analysis._findings import Evidence, Finding, FindingGroup, Saving
    from hloscope._profile._rank import MEASURED_BASIS, rank_measured

    folder = os.path.join(DATA, "cpu_scan")
    t = hloscope.read_profile(folder, os.path.join(folder, "module.hlo"))
    slow, fast = t.kernels[0].name, t.kernels[-1].name

    def group(rule, kernel, share, basis):
        ev = Evidence(kernel, "kernel", "f32[1]", 4, "", None)
        f = Finding(rule, rule, "m", "s", (ev,), Saving(), rule)
        return FindingGroup(rule, rule, Saving(), share, basis, (f,), ())

    advice = Advice([group("HS1", fast, 0.02, "peak"),
                     group("HS2", slow, 0.001, "estimated time"),
                     group("HS3", "no-such-kernel", 0.375, "device footprint")],
                    None, True, 0)
    ranked = rank_measured(advice, t)
    by_rule = {g.rule: g for g in ranked.groups}
    assert [g.rule for g in ranked.groups if g.rule != "HS3"] == ["HS2", "HS1"]
    assert by_rule["HS2"].basis == MEASURED_BASIS
    assert by_rule["HS2"].share == pytest.approx(t.kernels[0].share)
    assert by_rule["HS1"].basis == "peak"  # its peak share is larger than its time's
    # a share of the device footprint (HS110's donation) is kept, not dropped to 0
    assert (by_rule["HS3"].share, by_rule["HS3"].basis) == (0.375, "device footprint")
    # that the profile was read is said even where nothing is found (a new user could not
    # tell "0 findings" with a profile from one without)
    from hloscope._render._kernels_text import render_advice

    none = render_advice("m", rank_measured(Advice([], None, True, 0), t))
    assert f"note: ranked by the measured time of {t.source} ({t.runs} runs, step" in none


@pytest.mark.parametrize("kind", ["gpu", "tpu"])
def test_gpu_and_tpu_shaped_profiles(kind, tmp_path):
    """The device-plane reader on hand-written XSpaces in the shape of XLA's GPU and TPU
    profilers (tests/data/profiles/synthetic: no real GPU or TPU profile could be had)."""
    from jax.profiler import ProfileData

    folder = os.path.join(DATA, "synthetic")
    with open(os.path.join(folder, f"{kind}.pbtxt")) as f:
        blob = ProfileData.text_proto_to_serialized_xspace(f.read())
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "host.xplane.pb").write_bytes(blob)
    t = hloscope.read_profile(str(tmp_path), os.path.join(folder, "module.hlo"))
    assert (t.platform, t.runs, t.devices) == (kind, 2, 1)
    got = {k.name: (round(k.median * 1e6, 3), k.calls) for k in t.kernels}
    if kind == "gpu":  # copy.2 launches two kernels: their times summed
        assert got == {"fusion.1": (10.0, 1), "copy.2": (5.0, 2)}
    else:
        assert got == {"fusion.1": (8.0, 1), "copy.2": (4.0, 1)}
    assert t.matched_share == 1.0
    assert t.device == ("h100" if kind == "gpu" else "tpu-v5e") + " (assumed)"


def test_real_gpu_profile_without_xla_is_refused(tmp_path):
    """A real GPU profile (tensorflow/profiler's demo: TensorFlow on 8 V100s, without XLA,
    tests/data/profiles/tf_gpu): its planes are read, and it holds no XLA kernel."""
    import gzip

    from hloscope._profile._read import read_trace

    src = os.path.join(DATA, "tf_gpu", "34.83.195.179_6003.xplane.pb.gz")
    pb = tmp_path / "34.83.195.179_6003.xplane.pb"
    with gzip.open(src) as f:
        pb.write_bytes(f.read())
    trace = read_trace(str(tmp_path))
    assert trace.platform == "gpu" and trace.events == ()
    with pytest.raises(hloscope.HloscopeError, match=r"\(gpu\) holds no XLA kernel"):
        hloscope.read_profile(str(tmp_path), os.path.join(DATA, "synthetic", "module.hlo"))


def test_real_xla_gpu_profile():
    """A real XLA GPU profile (AMD-AGI/TraceLens' test data: JAX on MI300X GPUs, a 3-D
    convolution, tests/data/profiles/mi300x_conv), joined to its module; and a profile of
    another compile of the same function (mi300x_conv_jax08) refused, not half-joined."""
    folder = os.path.join(DATA, "mi300x_conv")
    module = os.path.join(folder, "module.hlo")
    t = hloscope.read_profile(folder, module)
    assert (t.module, t.platform, t.runs, t.devices) == ("jit_forward_3d_conv", "gpu", 5, 1)
    assert t.matched_share == 1.0 and not t.unmatched and not t.not_run
    got = {k.name: k.calls for k in t.kernels}  # the convolution launches two GPU kernels
    assert got == {"input_transpose_fusion": 1, "cudnn-conv.1.0": 2,
                   "input_transpose_fusion.1": 1, "loop_transpose_fusion": 1}
    assert 300e-6 < t.seconds("cudnn-conv.1.0") < 320e-6
    assert abs(t.gaps.explained - t.step) <= 1e-9
    assert t.device == "h100 (assumed; the profile ran on AMD's GPUs)"
    assert "shares add up to 52.8% of the step; dispatch, idle and wait took 47.5%" in " ".join(
        str(t).split())  # the rest of the step: idle while the host launches
    with pytest.raises(hloscope.HloscopeError, match="another compile"):
        hloscope.read_profile(os.path.join(DATA, "mi300x_conv_jax08"), module)


def test_real_tpu_profile():
    """A real TPU profile (openxla/xprof's test data: JAX on 4 TPU v6e chips, 100 runs of
    jit_f, tests/data/profiles/tpu_v6e): its ``XLA Ops`` events, named after the whole
    instruction text, joined to the module its metadata plane held; each copy-done's wait
    is its copy-start's time; runs counted per device (XLA's run ids differ between them);
    the chip's own peak figures for the estimates; and another module refused."""
    folder = os.path.join(DATA, "tpu_v6e")
    t = hloscope.read_profile(folder, os.path.join(folder, "module.hlo"))
    assert (t.module, t.platform, t.runs, t.devices) == ("jit_f", "tpu", 100, 4)
    assert t.matched_share == 1.0 and not t.unmatched and not t.not_run
    assert {k.name: k.calls for k in t.kernels} == {
        **{f"copy-start{s}": 1 for s in ("", ".1", ".2", ".3", ".4", ".5")},
        **{f"broadcast_add_fusion{s}": 1 for s in ("", ".1", ".2")}}
    assert 7e-3 < t.seconds("broadcast_add_fusion") < 9e-3
    assert 0.15 < t.seconds("copy-start") < 0.25  # its copy-done: the wait for 5 GiB
    assert abs(t.gaps.explained - t.step) <= 1e-6 * t.step
    assert t.device.startswith("TPU v6 Lite (the profile's figures: 918 TFLOP/s")
    # The table says what its shares add up to, and why that is not a run's kernel time.
    shares = sum(k.share for k in t.kernels)
    assert f"shares add up to {100 * shares:.1f}% of the step; a typical run's kernels took " \
           f"{100 * t.gaps.kernels / t.step:.1f}%" in " ".join(
               str(t).split())
    psum = hloscope.read_profile(folder, os.path.join(folder, "psum.hlo"))
    assert (psum.runs, psum.devices) == (3, 4)
    assert [k.name for k in psum.collectives] == ["all-reduce"]
    with pytest.raises(hloscope.HloscopeError, match="another module: it ran jit_f.*"
                                                     "jit_forward_3d_conv"):
        hloscope.read_profile(folder, os.path.join(DATA, "mi300x_conv", "module.hlo"))
    # The same function compiled for other shapes: its kernels have the same names, and a
    # TPU's events state their shapes, so it is refused, not joined.
    with open(os.path.join(folder, "module.hlo"), encoding="utf-8") as f:
        other = f.read().replace("f32[5,1024,1024,256]", "f32[5,1024,1024,128]")
    with pytest.raises(hloscope.HloscopeError, match=r"for other shapes: its "
                       r"broadcast_add_fusion is f32\[5,1024,1024,256\] there and "
                       r"f32\[5,1024,1024,128\] in this module"):
        hloscope.read_profile(folder, other)


def test_a_tpu_events_shape():
    """The shape an ``XLA Ops`` event states (named after the whole instruction), without
    layouts; none where it names the instruction alone or its text is of another form."""
    from hloscope._profile._read import _op_shape

    assert _op_shape("%fusion.1 = f32[8,128]{1,0:T(8,128)} fusion(f32[8]{0} %p)") == "f32[8,128]"
    assert _op_shape("%cs = (f32[2]{0}, u32[]{:S(2)}) copy-start(%p)") == "(f32[2], u32[])"
    assert _op_shape("fusion.1") == _op_shape("%x = not a shape") == _op_shape(" = ") == ""


def test_clean_runs():
    """Runs that touched new memory under the profiler are left out where enough others
    did not; where too few did (or all runs touch as much), every run is kept."""
    from hloscope._profile._capture import FRESH_PAGES, clean_runs, runs_left_out

    faults = [256, 0, 3, 256, FRESH_PAGES, 0, 40]
    assert clean_runs(faults, 3) == [1, 2, 4, 5]
    assert clean_runs(faults, 5) == list(range(7))
    assert clean_runs([300, 301, 290], 2) == [0, 1, 2]  # the program's own: all alike
    assert runs_left_out(0, 7) is None and "3 of 7 runs are left out" in runs_left_out(3, 7)
    assert "1 of 7 runs is left out: it touched" in runs_left_out(1, 7)


def test_a_rounds_median_is_over_the_runs_that_will_be_kept():
    """Rounds settle on the runs clean_runs will keep: a round's median leaves out its runs
    that touched new memory (as far as the fewest faults so far tell), or keeps them all
    where none would be kept."""
    from hloscope._profile._capture import FRESH_PAGES, last_round_median

    wall = [1.0, 1.0, 1.0, 5.0, 5.0, 2.0]
    faults = [0, 0, 0, 300, 300, 0]
    assert last_round_median(wall, faults, 3) == 2.0  # the two faulting runs left out
    assert last_round_median(wall, faults, 6) == 1.0
    assert last_round_median([9.0, 3.0, 4.0], [FRESH_PAGES + 1, 500, 600], 2) == 3.5


def test_the_median_run_is_said_where_the_typical_run_is_far_from_it():
    """Over rounds that ran at different speeds the typical run (nearest the rounds' mean,
    the kernels' footing) can be far from the median run: the header says both."""

    p = hloscope.profile(lambda x: x * 2, jnp.ones((8, 8)), runs=2, warmup=0, min_time=0)
    t = dataclasses.replace(p.times, steps=(1e-4, 1e-4, 1e-4, 5e-4),
                            gaps=dataclasses.replace(p.times.gaps, step=2e-4))
    head = render_profile(t).split("\n")[0]
    assert "step 200 us (typical; median run 100 us, min 100 us, max 500 us)" in head
    t = dataclasses.replace(t, gaps=dataclasses.replace(p.times.gaps, step=1.02e-4))
    assert "median run" not in render_profile(t).split("\n")[0]
    t = dataclasses.replace(t, gaps=dataclasses.replace(p.times.gaps, step=2e-4))
    lines = render_profile(t, width=70).split("\n")
    header = lines[:next(i for i, x in enumerate(lines) if x.startswith("  from "))]
    assert len(header) == 2 and all(len(x) <= 70 for x in header)  # wrapped to the width


def test_the_fresh_memory_benchmark_runs():
    """benchmarks/profile_fresh_memory.py (docs/profile.md's figures on where a traced
    run's buffers land), in a small size."""
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks",
                          "profile_fresh_memory.py")
    out = subprocess.run([sys.executable, script, "--runs", "5"], capture_output=True,
                         text=True, timeout=300, check=True).stdout.splitlines()
    assert [ln.split(" ", 1)[0] for ln in out[1:]] == ["plain", "first", "plain", "second"]
    assert all("addresses over 5 runs" in ln and "runs took page faults" in ln
               for ln in out[1:])


def test_a_kept_profile_reads_back_as_the_profile_gave_it(tmp_path, monkeypatch):
    """read_profile(keep) measures the runs the profile measured, in its rounds (runs.json
    beside the trace): the same figures, the runs it left out for new memory left out."""
    from hloscope._profile import _capture, _kept

    # Leave out every third run, as runs that touched new memory are
    monkeypatch.setattr(_capture, "clean_runs",
                        lambda faults, runs: [i for i in range(len(faults)) if i % 3])
    keep = tmp_path / "trace"
    p = hloscope.profile(_mlp, jnp.ones((32, 64)), jnp.ones((64, 32)), runs=12, warmup=0,
                         min_time=0, keep=str(keep))
    assert p.left_out == 4 and p.rounds == 4
    again = hloscope.read_profile(keep)
    assert again.runs == p.times.runs == 8 and again.steps == p.times.steps
    assert again.step == p.times.step
    assert [(k.name, k.median) for k in again.kernels] == [
        (k.name, k.median) for k in p.times.kernels]
    # The same function compiled for other shapes has kernels of the same names and a CPU
    # trace states no shapes, but the module kept beside the trace tells: refused (a new
    # user's diff of two swapped profiles read "B is 6.29x slower")
    other = jax.jit(_mlp).lower(jnp.ones((16, 64)), jnp.ones((64, 32))).compile().as_text()
    with pytest.raises(hloscope.HloscopeError, match=r"was taken of the module kept beside "
                       r"it .* is another compile: its \S+ is f32\[32,"):
        hloscope.read_profile(keep, other)
    assert hloscope.read_profile(keep, p.report.module).runs == 8  # the same compile
    # and says what the profile said of its runs (here: the runs it left out)
    assert again.notes == p.notes and any("4 of 12 runs are left out" in n for n in p.notes)
    assert "note (when it was profiled): 4 of 12 runs are left out" in str(again)
    assert again.to_dict()["notes"] == list(p.notes)
    # So does --profile DIR on kernels, lint, report and diff (a new user's diff of two kept
    # profiles once turned "slower" into "faster": the runs left out came back)
    from hloscope._cli._profile_cmd import read_measured

    cli = read_measured(keep, p.report.module)
    assert (cli.runs, cli.steps, cli.step) == (again.runs, again.steps, again.step)
    # The folder given as PATH is read with its profile (a trial: 'report KEEP_DIR' left
    # the profile out), and the page says the profile's notes as the text does
    from conftest import run_cli

    page = tmp_path / "r.html"
    r = run_cli("report", str(keep), "-o", str(page))
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert '"profile":{"source"' in text and "The profile: 4 of 12 runs are left out" in text
    r = run_cli("kernels", str(keep))
    assert r.returncode == 0 and "Kernels by measured time" in r.stdout, r.stderr
    # Without runs.json (a folder kept by an older hloscope), every marked run, one round
    os.remove(keep / _kept.KEPT_RUNS)
    assert hloscope.read_profile(keep).runs == 12
    # A runs.json that is not hloscope's is not trusted
    for bad in ("{", '{"schema": "x", "rounds": [0], "measured": [0]}',
                '{"schema": "hloscope.kept-runs/1", "rounds": [0, 1], "measured": [5]}',
                '{"schema": "hloscope.kept-runs/1", "rounds": [0, "a"], "measured": [0]}',
                '{"schema": "hloscope.kept-runs/1", "rounds": "ab", "measured": [0]}',
                '[1, 2]'):
        (keep / _kept.KEPT_RUNS).write_text(bad)
        assert _kept.read_kept_runs(str(keep)) is None
    # Runs that are not the trace's marked runs (another count) change nothing
    (keep / _kept.KEPT_RUNS).write_text(
        '{"schema": "hloscope.kept-runs/1", "rounds": [0, 1], "measured": [0]}')
    assert hloscope.read_profile(keep).runs == 12
