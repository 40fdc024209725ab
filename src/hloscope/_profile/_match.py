"""Join a profile's events to the kernels of a module: `measure` -> `MeasuredTimes`.

* The module's events are those whose ``hlo_module`` is the module's name; a
  profile that never ran it is refused, naming the modules it did run, and
  so is one whose events name instructions the module does not have (over 1%
  of its time: another compile of a function of the same name), or whose events
  state other shapes than the module's instructions (a TPU's: the same function
  compiled for other shapes).
* Each event names an instruction: a kernel of the graph (its time), a
  loop, branch or call (a container: its time is its kernels', not counted
  twice; but one whose events hold no other event ran as one piece, as XLA's
  CPU backend runs a small call holding a whole loop, and is timed as a kernel
  is: `leaf_containers`), or something else (`unmatched`, listed with its time).
* Runs: the ``hloscope.run`` windows of hloscope's own capture; otherwise
  XLA's run ids (runs that overlap in time, one per device, are one run).
* Per run and per device, the run's wall time is taken apart exactly into
  kernel time, time kernels ran concurrently, dispatch, idle and wait; the
  step and its parts (`Gaps`) are those of the typical run (the run whose
  wall time is the median; over rounds, the nearest the interquartile mean of
  the rounds' medians), so they add up; each kernel's time is the median over
  the runs (over rounds, the interquartile mean of the rounds' medians: the
  middle half of them); both averaged over the devices
  that ran the module.
"""

from __future__ import annotations

import bisect
import operator
import statistics
from collections import defaultdict

from .._analysis._devices import DEVICES, Device
from .._analysis._kernels import Kernel, KernelGraph
from .._errors import HloscopeError
from .._hlo._module import Module
from .._repr import clip
from ._commands import name_events
from ._read import Trace, TraceEvent
from ._times import Gaps, KernelTime, MeasuredTimes, PlaceTime

__all__ = ["CPU_ROOFLINE", "default_device", "measure", "round_medians"]

# The advisor's nominal CPU (_advice_context): what hloscope's estimates on a CPU are.
CPU_ROOFLINE = Device("cpu", {"*": 1e11}, 2e10, "nominal figures for weighing findings only")
_START = operator.itemgetter(2)  # TraceEvent.start
_CONTAINERS = frozenset({"while", "conditional", "call", "async-start", "async-done"})


def default_device(platform: str, vendor: str | None = None,
                   peak: tuple[float, float] | None = None) -> tuple[Device, str]:
    """The device the estimates are for, and how to name it, for a profile's platform (and
    the vendor or TPU type its device planes name, said beside; a TPU's own peak figures
    where its profile states them)."""
    if platform == "gpu":
        # The H100 of XLA's own GPU target config (what target="h100" compiles for): its
        # float32 rate is the tensor cores' (TF32), which XLA's cuBLAS and Triton matmuls
        # use at JAX's default precision; the datasheet's non-tensor-core 67 TFLOP/s
        # priced them 5 to 6 times too slow on a real H100 (docs/profile.md).
        from .._target._catalog import chip_device

        ran = f"; the profile ran on {vendor}'s GPUs" if vendor else ""
        return chip_device("h100")[0], f"h100 (assumed{ran})"
    if platform == "tpu" and peak is not None:
        name = vendor or "tpu"
        return (Device(name, {"*": peak[0]}, peak[1], "the peak figures its profile states"),
                f"{name} (the profile's figures: {peak[0] / 1e12:g} TFLOP/s, "
                f"{peak[1] / 1e9:.0f} GB/s)")
    if platform == "tpu":
        ran = f"; the profile ran on {vendor}" if vendor else ""
        return DEVICES["tpu-v5e"], f"tpu-v5e (assumed{ran})"
    return CPU_ROOFLINE, "cpu (nominal 100 GFLOP/s, 20 GB/s)"


def _quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def _runs(trace: Trace, events: list[TraceEvent],
          starters: list[str]) -> list[tuple[float, float, list[TraceEvent]]]:
    """The runs: (start, end, events), from the capture's windows, or XLA's run ids, or
    else (a GPU's kernels carry none) each device's k-th call of the first of `starters`
    (the entry computation's kernels, in order) that ran begins its run k (a call's
    kernels one after the other, a library's, being one call)."""
    if trace.windows:
        out: list[tuple[float, float, list[TraceEvent]]] = [(a, b, []) for a, b in trace.windows]
        i, n = 0, len(out)
        for e in sorted(events, key=_START):  # one sweep over the events in time order
            while i < n and out[i][1] < e.start:
                i += 1
            if i == n:
                break
            if out[i][0] <= e.start:
                out[i][2].append(e)
        return [r for r in out if r[2]]
    by_id: dict[int | None, list[TraceEvent]] = defaultdict(list)
    if all(e.run is None for e in events):
        ran = {e.op for e in events}
        first = next((k for k in starters if k in ran), None)
        by_dev: dict[str, list[TraceEvent]] = defaultdict(list)
        for e in sorted(events, key=_START):
            by_dev[e.device].append(e)
        for es in by_dev.values():
            k, last = -1, None
            for e in es:  # a call that ran several kernels (a library's) begins one run
                k += e.op == first and last != first
                last = e.op
                by_id[max(k, 0)].append(e)
    else:
        for e in events:
            by_id[e.run].append(e)
    spans = sorted(((min(e.start for e in es), max(e.start + e.duration for e in es), es)
                    for es in by_id.values()), key=lambda r: r[:2])
    if trace.platform == "tpu":  # each device's k-th run of the module is run k already
        return spans
    merged: list[tuple[float, float, list[TraceEvent]]] = []
    for a, b, es in spans:  # one run on several devices: run ids that overlap in time
        if merged and a < merged[-1][1]:
            pa, pb, pes = merged[-1]
            merged[-1] = (pa, max(pb, b), pes + es)
        else:
            merged.append((a, b, list(es)))
    return merged


def _waits(module: Module, kernels: dict[str, Kernel]) -> dict[str, str]:
    """Each ``-done`` of an async pair whose start is a kernel, with that start's name (on
    a TPU the done is an op of its own: the device waiting for the copy or collective its
    start began)."""
    out: dict[str, str] = {}
    for c in module.computations:
        by_name = c.by_name
        for i in c.instructions:
            start = i
            while (start.opcode.endswith(("-done", "-update")) and start.operand_names
                   and start.operand_names[0] in by_name):
                start = by_name[start.operand_names[0]]
            if start is not i and start.opcode.endswith("-start") and start.name in kernels:
                out[i.name] = start.name
    return out


def leaf_containers(events: list[TraceEvent], insts: dict[str, str]) -> set[str]:
    """The containers (loops, branches, calls) no event of which holds another event of
    its device: XLA ran each as one piece (the CPU backend compiles a small call, a whole
    loop inside, into one function), so its time is no kernel's of the trace."""
    containers = [e for e in events if insts.get(e.op) in _CONTAINERS]
    if not containers:
        return set()
    starts: dict[str, list[float]] = defaultdict(list)
    for e in events:
        starts[e.device].append(e.start)
    for xs in starts.values():
        xs.sort()
    holds: set[str] = set()
    for c in containers:
        xs = starts[c.device]
        i = bisect.bisect_right(xs, c.start)  # the first start after the container's own
        if i < len(xs) and xs[i] < c.start + c.duration:
            holds.add(c.op)
    return {c.op for c in containers} - holds


def async_tails(events: list[TraceEvent], own: list[tuple[float, float]],
                end: float) -> dict[int, list[tuple[float, float]]]:
    """For each event (by index) of one run on one device that XLA marked done after its
    own end (`TraceEvent.done`: an asynchronous thunk, its work going on in other threads),
    the pieces of that tail, up to the run's `end`, in which no event of the run ran
    (`own`: the events' intervals): the thunk's time there is its own, as far as the trace
    tells; where another kernel ran, the time is that kernel's (a thunk queued behind
    another's work is not charged for the wait)."""
    out: dict[int, list[tuple[float, float]]] = {}
    merged: list[tuple[float, float]] | None = None
    for j, e in enumerate(events):
        if not e.done:
            continue
        if merged is None:
            merged = _merged(own)
        a, b = e.start + e.duration, min(e.done, end)
        pieces = []
        k = max(bisect.bisect_right(merged, (a, float("inf"))) - 1, 0)
        for x, y in merged[k:]:
            if x >= b:
                break
            if y <= a:
                continue
            if x > a:
                pieces.append((a, x))
            a = max(a, y)
        if a < b:
            pieces.append((a, b))
        if pieces:
            out[j] = pieces
    return out


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Intervals merged where they overlap, in order."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _union(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in _merged(intervals))


def measure(trace: Trace, graph: KernelGraph, module: Module, *,
            device: Device | None = None, device_label: str | None = None,
            rounds: list[int] | None = None) -> MeasuredTimes:
    """Each kernel of `graph` (the kernel graph of `module`) with its time in `trace`:
    its median over the runs or, given `rounds` (the round of each of the trace's
    windows, in order), the interquartile mean over the rounds of its median in each."""
    name = graph.module
    ran = trace.modules
    if not ran:
        raise HloscopeError(
            f"the profile {trace.path} ({trace.platform}) holds no XLA kernel: none of its "
            "events names an HLO instruction and module (the stats hlo_op and hlo_module)",
            hint="profile a program XLA compiled (jax.jit, or TensorFlow with XLA), with "
                 "jax.profiler.trace or TensorBoard's profiler, while it runs")
    if name not in ran:
        listed = ", ".join(list(ran)[:6]) + (" ..." if len(ran) > 6 else "")
        raise HloscopeError(
            f"the profile {trace.path} is of another module: it ran {listed or 'no module'}, "
            f"and the module given is {name}",
            hint="give the module the profile ran (its compiled.as_text() or XLA dump), or a "
                 "profile of this one")
    kernels = {k.name: k for k in graph.kernels}
    insts = {i.name: i.opcode for c in module.computations for i in c.instructions}
    events = name_events([e for e in trace.events if e.module == name], graph.kernels)
    # A kernel is timed whatever its opcode (an async-start XLA made a kernel of, as a GPU's
    # fusion-start); a container only where it ran as one piece.
    leaves = leaf_containers(events, insts) - kernels.keys()
    events = [e for e in events
              if e.op in kernels or e.op in leaves or insts.get(e.op) not in _CONTAINERS]
    waits = _waits(module, kernels)  # a -done's time is its start's; not another call
    timed = list(kernels) + sorted(leaves)  # what gets a row of its own
    total = sum(e.duration for e in events)
    matched = sum(e.duration for e in events
                  if e.op in kernels or e.op in waits or e.op in leaves)
    share = matched / total if total else 0.0
    foreign = {e.op for e in events if e.op not in insts and not e.kernel}
    # Another compile of the same function (same module name): its kernels' names differ
    # from this module's in part (cudnn-conv.1 for cudnn-conv.1.0 in two real GPU
    # profiles), and a join by name would be half a join.  A profile of this compile
    # names nothing else.
    if events and sum(e.duration for e in events if e.op in foreign) > 0.01 * total:
        raise HloscopeError(
            f"the profile {trace.path} ran a module named {name} with instructions this "
            f"module {name} does not have ({', '.join(sorted(foreign)[:4])}): another "
            "compile of it",
            hint="give the module compiled for the run profiled (compiled.as_text() of the "
                 "same compile, or its XLA dump)")
    _check_shapes(trace, name, events, module, total)
    entry = module.entry.name
    in_entry = {i.name for i in module.entry.instructions}
    runs = _runs(trace, events, [k.name for k in graph.kernels if k.group == entry]
                 + [op for op in sorted(leaves) if op in in_entry])
    if not runs:
        raise HloscopeError(f"the profile {trace.path} holds no run of {name}",
                            hint="profile at least one run after the first (compile) run")
    if device is None:
        device, device_label = default_device(trace.platform, trace.vendor, trace.peak)
    per_kernel: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, list[float]] = defaultdict(list)
    other: dict[str, list[float]] = defaultdict(list)
    steps: list[float] = []
    run_parts: list[tuple[float, ...]] = []
    ndev: list[int] = []
    round_at = dict(zip(trace.windows, rounds)) if rounds else {}
    run_round: list[int] = []
    for w0, w1, es in runs:
        run_round.append(round_at.get((w0, w1), 0))
        by_dev: dict[str, list[TraceEvent]] = defaultdict(list)
        for e in es:
            by_dev[e.device].append(e)
        n = len(by_dev)
        ndev.append(n)
        sums: dict[str, float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        parts = [0.0] * 5
        for devs in by_dev.values():
            iv = [(e.start, e.start + e.duration) for e in devs]
            tails = async_tails(devs, iv, w1)
            for pieces in tails.values():
                iv.extend(pieces)
            busy = _union(iv)
            first, last = min(a for a, _ in iv), max(b for _, b in iv)
            ktime = sum(b - a for a, b in iv)
            for x, v in enumerate((ktime, ktime - busy, first - w0, last - first - busy,
                                   w1 - last)):
                parts[x] += v
            for j, e in enumerate(devs):
                sums[waits.get(e.op, e.op)] += e.duration + sum(
                    b - a for a, b in tails.get(j, ()))
                counts[e.op] += e.op not in waits
        steps.append((w1 - w0) * 1e-9)
        run_parts.append(tuple(v / n * 1e-9 for v in parts))
        for op in timed:
            per_kernel[op].append(sums.get(op, 0.0) / n * 1e-9)
            calls[op].append(counts.get(op, 0) / n)
        for op in sums.keys() - kernels.keys() - leaves:
            other[op].append(sums[op] / n * 1e-9)
    med = statistics.median
    # The typical run, whose parts add up to its step (medians of the parts taken one by
    # one need not): the median run (the lower of the two middle ones for an even count),
    # or, over rounds, the run nearest the (interquartile) mean of the rounds' medians both in
    # its step and in its kernels' time, as each kernel's time is that of its rounds' (so
    # that the shares and the parts are on the kernels' footing, where the rounds ran at
    # different speeds).
    middle = sorted(range(len(steps)), key=lambda i: (steps[i], i))[(len(steps) - 1) // 2]
    if len(set(run_round)) > 1:
        s0 = _mean_of_medians(steps, run_round) or 1.0
        k0 = _mean_of_medians([p[0] for p in run_parts], run_round) or 1.0
        middle = min(range(len(steps)), key=lambda i: (
            abs(steps[i] / s0 - 1) + abs(run_parts[i][0] / k0 - 1), steps[i], i))
    step = steps[middle]
    gaps = Gaps(step, *run_parts[middle])
    rows: list[KernelTime] = []
    not_run = []
    where = {i.name: (i, c.name) for c in module.computations for i in c.instructions
             if i.name in leaves}
    for kname in timed:
        if not any(calls[kname]):
            not_run.append(kname)
            continue
        q1, m, q3 = _quartiles(per_kernel[kname])
        if len(set(run_round)) > 1:
            m = _mean_of_medians(per_kernel[kname], run_round)
        c = med(calls[kname])
        k = kernels.get(kname)
        if k is not None:
            est = k.roofline_seconds(device, k.element_type) * c
            rows.append(KernelTime(kname, k.category, k.group, m, q3 - q1,
                                   min(per_kernel[kname]), c, m / step if step else 0.0, est,
                                   k.op_name, k.source))
        else:  # a container run as one piece: no estimate of its own
            inst, comp = where[kname]
            md = inst.metadata
            loc = inst.source if md.source_file or md.stack_frame_id else None
            rows.append(KernelTime(kname, inst.opcode, comp, m, q3 - q1,
                                   min(per_kernel[kname]), c, m / step if step else 0.0, None,
                                   md.op_name, str(loc) if loc else None))
    rows.sort(key=lambda r: (-r.median, r.name))
    unmatched = tuple(sorted(((op, sum(v) / len(runs)) for op, v in other.items()),
                             key=lambda kv: (-kv[1], kv[0])))
    return MeasuredTimes(name, trace.path, trace.platform, len(runs), max(ndev),
                         tuple(steps), tuple(rows), _places(rows, step, "source"),
                         _places(rows, step, "scope"), gaps, share, unmatched,
                         tuple(not_run), device_label)


def _check_shapes(trace: Trace, name: str, events: list[TraceEvent], module: Module,
                  total: float) -> None:
    """Refuse a profile whose events state shapes (a TPU's) other than the module's
    instructions of the same names, over 1% of its time: the same function compiled for
    other shapes, whose kernels have the same names."""
    if not any(e.shape for e in events):  # a CPU's or GPU's trace: no shapes to compare
        return
    shapes = {i.name: i.shape for c in module.computations for i in c.instructions}
    odd: dict[str, tuple[str, str]] = {}
    odd_time = 0.0
    for e in events:
        s = shapes.get(e.op)
        if e.shape and s is not None and e.shape != s.without_layout():
            odd.setdefault(e.op, (e.shape, s.without_layout()))
            odd_time += e.duration
    if odd and odd_time > 0.01 * total:
        op, (theirs, ours) = min(odd.items())
        raise HloscopeError(
            f"the profile {trace.path} ran a module named {name} for other shapes: its {op} "
            f"is {clip(theirs, 60)} there and {clip(ours, 60)} in this module ({len(odd)} "
            "instruction" + ("s differ" if len(odd) > 1 else " differs") + "): another "
            "compile of it",
            hint="give the module compiled for the run profiled (compiled.as_text() of the "
                 "same compile, or its XLA dump)")


def _mean_of_medians(xs: list[float], rounds: list[int]) -> float:
    """The interquartile mean over the rounds of the median of `xs` in each round
    (`rounds`: each x's): a machine that runs a block of runs in one of two states gives
    each round's median in one state, and their mean moves with the share of rounds in
    each, where a median over all runs would jump from one state to the other; the
    rounds' lowest and highest quarters are left out (of 4 rounds the middle two, of 3 the
    middle one), so that one round slowed by another process does not pull every figure
    (a trial: a typical step of 15.5 ms from rounds whose median run was 9.8 ms)."""
    medians = sorted(round_medians(xs, rounds))
    k = (len(medians) + 1) // 4
    return statistics.fmean(medians[k:len(medians) - k])


def round_medians(xs: list[float], rounds: list[int]) -> list[float]:
    """The median of `xs` in each round (`rounds`: each x's), in the order rounds first
    appear."""
    by: dict[int, list[float]] = defaultdict(list)
    for x, r in zip(xs, rounds):
        by[r].append(x)
    return [statistics.median(v) for v in by.values()]


def _scope(op_name: str) -> str:
    """The op_name scope of a kernel: its op_name without the last part (the operation);
    of an op_name XLA joined from several with ``;``, the first's."""
    first = op_name.split(";", 1)[0]
    head, _, _ = first.rpartition("/")
    return head or first


def _places(rows: list[KernelTime], step: float, what: str) -> tuple[PlaceTime, ...]:
    acc: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        key = (r.source or "(no source line)") if what == "source" else (
            _scope(r.op_name) if r.op_name else "(no op_name)")
        acc[key].append(r.median)
    out = [PlaceTime(p, sum(v), sum(v) / step if step else 0.0, len(v)) for p, v in acc.items()]
    out.sort(key=lambda p: (-p.seconds, p.place))
    return tuple(out)
