"""Read a profile: the kernel events of an XProf/TensorBoard trace (``*.xplane.pb``).

The file is read with JAX's own reader, `jax.profiler.ProfileData` (JAX is
imported here, lazily).  What is kept (`Trace`):

* every event that names an HLO instruction: on the CPU, a thunk on a host
  thread with the stats ``hlo_op`` and ``hlo_module``; on a GPU, a kernel on
  a stream of a ``/device:GPU:N`` plane with the same stats; on a TPU, an
  event of the ``XLA Ops`` line of a ``/device:TPU:N`` plane, named after
  the instruction, in the module of the ``XLA Modules`` event around it;
  on the CPU, with the time XLA's runtime marked the thunk done (its
  ``end: NAME`` event) where that is later than its own event's end (an
  asynchronous thunk: `TraceEvent.done`);
* the runs hloscope's own capture marks (``hloscope.run`` annotations on the
  host), whose start and end are each run's wall time.

A folder is searched for ``plugins/profile/<run>/*.xplane.pb`` (the newest
run; every host's file of it).
"""

from __future__ import annotations

import bisect
import glob
import gzip
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._errors import HloscopeError
from .._hlo._shape import split_shape_prefix

__all__ = ["COMMAND_BUFFER", "KEPT_MODULE", "RUN_ANNOTATION", "Trace", "TraceEvent",
           "find_profile_files", "read_trace"]

RUN_ANNOTATION = "hloscope.run"
KEPT_MODULE = "module.hlo"  # the module's text, beside a trace `hloscope profile` kept
COMMAND_BUFFER = "command_buffer"  # XLA's GPU command buffers: command_buffer_7
_SKIP = ("ThreadpoolListener", "ThunkExecutor", "$")
_END = "end: "  # XLA's CPU runtime: a thunk's execution completed (thunk_executor.cc)
_DONE_AFTER = 1000.0  # ns past its own event's end from which a thunk's done mark counts
_PROGRAM_ID = re.compile(r"\(\d+\)$")
_SKIP_LINES = frozenset({"XLA Modules", "Steps", "XLA TraceMe", "Framework Ops",
                         "Framework Name Scope", "Source code", "Async XLA Ops"})


class TraceEvent(NamedTuple):
    """One execution of one instruction: `module` and `op` (the instruction's name),
    `start` and `duration` in nanoseconds, `device` (plane and device ordinal) and `run`
    (XLA's run id, or the index of the module's run on a device line; None if unknown).
    `kernel`: a GPU kernel's own name where its `hlo_op` does not name its instruction
    (`op` is then a command buffer's name, or empty; `name_events` finds the instruction).
    `shape`: the instruction's shape without layouts where the event states it (a TPU
    profile's ``XLA Ops`` events are named after the whole instruction), else empty.
    `done`: where XLA's CPU runtime marked the thunk done (its ``end: NAME`` event) later
    than its own event ends, that time (an asynchronous thunk, as Eigen's convolution: its
    event covers the launch and the calling thread's share, the rest runs on other
    threads until then); else 0."""

    module: str
    op: str
    start: float
    duration: float
    device: str
    run: int | None
    kernel: str = ""
    shape: str = ""
    done: float = 0.0


@dataclass(frozen=True, slots=True)
class Trace:
    """The kernel events of a profile, the runs hloscope's capture marked, and the vendor
    its device planes name (their ``device_vendor`` stat: "Nvidia", "AMD"; on a TPU its
    ``device_type_string``: "TPU v6 Lite"; None if none), and the peak FLOP/s and memory
    bytes/s a TPU's planes state (``peak_teraflops_per_second``,
    ``peak_hbm_bw_gigabytes_per_second``; None if not)."""

    path: str
    platform: str
    events: tuple[TraceEvent, ...]
    windows: tuple[tuple[float, float], ...]
    vendor: str | None = None
    peak: tuple[float, float] | None = None

    @property
    def modules(self) -> dict[str, float]:
        """Each module the profile ran, with its events' summed time (seconds), most first."""
        out: dict[str, float] = {}
        for e in self.events:
            out[e.module] = out.get(e.module, 0.0) + e.duration * 1e-9
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _profile_files(folder: str) -> list[str]:
    return sorted(f for pattern in ("*.xplane.pb", "*.xplane.pb.gz")
                  for f in glob.glob(os.path.join(glob.escape(folder), "**", pattern),
                                     recursive=True))


def shown_path(path: str, files: list[str]) -> str:
    """`path` as messages name it: a folder holding several runs with the run read."""
    if not os.path.isdir(path) or not files:
        return path
    runs = {os.path.dirname(f) for f in _profile_files(path)}
    if len(runs) < 2:
        return path
    run = os.path.relpath(os.path.dirname(files[0]), path)
    return f"{path} (its newest run of {len(runs)}, {run})"


def find_profile_files(path: str) -> list[str]:
    """The ``.xplane.pb`` files of `path` (or gzipped, ``.xplane.pb.gz``): the file itself,
    or in a folder the newest run of ``plugins/profile/`` (every host's file), or any such
    file below it."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise HloscopeError(f"{path}: no such file or folder",
                            hint="give the folder jax.profiler.trace wrote (it holds "
                                 "plugins/profile/<run>/*.xplane.pb) or one .xplane.pb file")
    found = _profile_files(path)
    if not found:
        raise HloscopeError(f"{path}: no *.xplane.pb file in this folder",
                            hint="give the folder jax.profiler.trace (or TensorBoard's "
                                 "profiler) wrote: it holds plugins/profile/<run>/*.xplane.pb")
    newest = max(os.path.dirname(f) for f in found)
    return [f for f in found if os.path.dirname(f) == newest]


def read_trace(path: str) -> Trace:
    """The kernel events of the profile at `path` (a folder or an ``.xplane.pb`` file)."""
    try:
        from jax.profiler import ProfileData
    except ImportError:
        raise HloscopeError("reading a profile needs JAX (jax.profiler.ProfileData)",
                            hint="pip install 'hloscope[jax]'") from None
    files = find_profile_files(path)
    loaded = []
    for file in files:
        try:
            if file.endswith(".gz"):
                with gzip.open(file, "rb") as f:
                    loaded.append((file, ProfileData.from_serialized_xspace(f.read())))
            else:
                loaded.append((file, ProfileData.from_file(file)))
        except Exception as e:  # noqa: BLE001  (JAX's RuntimeError on a damaged file)
            raise HloscopeError(f"{file}: not a profile JAX can read ({e})",
                                hint="give the .xplane.pb (or .xplane.pb.gz) that "
                                     "jax.profiler.trace or TensorBoard's profiler wrote, "
                                     "whole") from None
    events: list[TraceEvent] = []
    windows: list[tuple[float, float]] = []
    platform, vendor, peak = "cpu", None, None
    for with_runs in (False, True):
        events.clear()
        for file, data in loaded:
            host = os.path.basename(file)[:-len(".xplane.pb")]
            for plane in data.planes:
                name = plane.name
                if name.startswith("/device:GPU"):
                    platform = "gpu"
                elif name.startswith("/device:TPU"):
                    platform = "tpu"
                if name.startswith("/device:"):
                    st = dict(plane.stats)
                    vendor = vendor or st.get("device_vendor") or st.get("device_type_string")
                    flops = st.get("peak_teraflops_per_second")
                    hbm = st.get("peak_hbm_bw_gigabytes_per_second")
                    if peak is None and flops and hbm:
                        peak = (float(flops) * 1e12, float(hbm) * 1e9)
                    _device_plane(plane, f"{host}{name}", events)
                elif name.startswith("/host:CPU"):
                    _host_plane(plane, host, events, windows, with_runs)
        # The first pass reads each thread's stats once per kernel name: right for one
        # device, when hloscope's own capture marked the runs.  Several CPU devices (their
        # kernels share threads) or XLA's run ids need every event's stats: slower.
        devices = {e.device for e in events}
        if platform != "cpu" and devices and not any("/device:" in d for d in devices):
            # XLA kernels on the host alone: JAX ran on the CPU (JAX_PLATFORMS=cpu) on
            # a machine with a GPU, whose tracer still wrote its plane.
            platform, vendor, peak = "cpu", None, None
        if platform != "cpu" or (windows and len(devices) <= 1):
            break
    if platform != "cpu":  # the device's own events; the host's launches are not kernels
        events = [e for e in events if "/device:" in e.device]
    return Trace(shown_path(path, files), platform, tuple(events), tuple(sorted(windows)),
                 str(vendor) if vendor else None, peak)


def _host_plane(plane: Any, host: str, events: list[TraceEvent],
                windows: list[tuple[float, float]], with_runs: bool) -> None:
    """CPU thunks (named after their instruction; stats hlo_op, hlo_module, device_ordinal,
    run_id) and the runs hloscope marked.  Without `with_runs` each (thread, name)'s stats
    are read once and its events' run ids are left unknown."""
    add = events.append
    new = tuple.__new__  # a TraceEvent without NamedTuple's Python-level __new__
    first = len(events)
    # XLA's ``end: NAME`` marks of a thunk's completion that come later than its event's
    # end (the others, nearly all, follow it at once on its own thread), and the thunks'
    # flow ids where the stats are read: `_mark_done` pairs them.
    flows: dict[int, int] = {}  # index in events -> flow id
    ends: list[tuple[str, float, int | None]] = []
    for line in plane.lines:
        seen: dict[str, tuple[str, str, str] | None] = {}
        last, last_end = "", 0.0  # this thread's last thunk event
        for e in line.events:
            name = e.name
            if name.startswith(_END):
                t = e.start_ns
                if name[len(_END):] != last or t > last_end + _DONE_AFTER:
                    ends.append((name[len(_END):], t,
                                 dict(e.stats).get("_c") if with_runs else None))
                continue
            if name.startswith(_SKIP):
                continue
            if name == RUN_ANNOTATION:
                if not with_runs:
                    windows.append((e.start_ns, e.start_ns + e.duration_ns))
                continue
            run = None
            flow = None
            if with_runs or name not in seen:
                st = dict(e.stats)
                op, module = st.get("hlo_op"), st.get("hlo_module")
                hit = None if op is None or module is None else (
                    str(module), str(op), f"{host}/cpu:{st.get('device_ordinal', 0)}")
                seen[name] = hit
                r = st.get("run_id")
                run = int(r) if isinstance(r, int) else None
                flow = st.get("_p") if with_runs else None
            else:
                hit = seen[name]
            if hit is not None:
                if flow is not None:
                    flows[len(events)] = flow
                last, last_end = name, e.start_ns + e.duration_ns
                add(new(TraceEvent, (hit[0], hit[1], e.start_ns, e.duration_ns, hit[2], run,
                                     "", "", 0.0)))
    if ends:
        _mark_done(events, first, flows, ends)


def _mark_done(events: list[TraceEvent], first: int, flows: dict[int, int],
               ends: list[tuple[str, float, int | None]]) -> None:
    """Give each thunk event of this plane (`events[first:]`) the time XLA marked it done
    where that is later than its own end (`TraceEvent.done`): paired by flow id where read
    (`flows`: the thunk's ``_p``, the mark's ``_c``), else by name (the thunk's event is
    named after its instruction, as the mark is), each mark with the latest thunk of its
    name that started before it and has no mark yet (one device: a thunk's runs follow one
    another)."""
    done: dict[int, float] = {}
    by_flow = {flow: i for i, flow in flows.items()}
    names = {name for name, _, flow in ends if flow is None or flow not in by_flow}
    starts: dict[str, list[tuple[float, int]]] = defaultdict(list)
    if names:
        for i in range(first, len(events)):
            e = events[i]
            if e.op in names and i not in flows:
                starts[e.op].append((e.start, i))
        for xs in starts.values():
            xs.sort()
    for name, t, flow in sorted(ends, key=lambda x: x[1]):
        if flow is not None and flow in by_flow:
            done[by_flow[flow]] = t
            continue
        xs = starts.get(name)
        if not xs:
            continue
        k = bisect.bisect_right(xs, (t, float("inf"))) - 1
        while k >= 0 and xs[k][1] in done:  # the latest one before it with no mark yet
            k -= 1
        if k >= 0:
            done[xs[k][1]] = t
    for i, t in done.items():
        e = events[i]
        if t > e.start + e.duration + _DONE_AFTER:
            events[i] = e._replace(done=t)


def _device_plane(plane: Any, device: str, events: list[TraceEvent]) -> None:
    """GPU kernels (stats hlo_op and hlo_module) and TPU ops (the ``XLA Ops`` line, in the
    module of the ``XLA Modules`` event around each)."""
    lines = list(plane.lines)
    gpu = plane.name.startswith("/device:GPU")
    modules: list[tuple[float, float, str, int]] = []
    for line in lines:
        if line.name == "XLA Modules":  # each run's event; its run is the module's k-th here
            seen: dict[str, int] = defaultdict(int)
            for e in line.events:
                module = _PROGRAM_ID.sub("", e.name)
                modules.append((e.start_ns, e.start_ns + e.duration_ns, module, seen[module]))
                seen[module] += 1
    modules.sort()
    for line in lines:
        if line.name in _SKIP_LINES:
            continue
        ops_line = line.name == "XLA Ops"
        last = None  # the module of the last event on this stream that named one
        for e in line.events:
            st = dict(e.stats)
            op = st.get("hlo_op") or (_op_name(e.name) if ops_line else None)
            shape = _op_shape(e.name) if ops_line else ""
            kernel = ""
            if gpu and (not op or str(op).startswith(COMMAND_BUFFER)):
                # A GPU kernel XLA launched in one of its command buffers (a CUDA graph)
                # names the buffer, or nothing: its own name is its instruction's.
                kernel, op = e.name, op or ""
            elif not op:
                continue
            module = st.get("hlo_module")
            run = st.get("run_id")
            run = int(run) if isinstance(run, int) else None
            if module is None or run is None:
                around = _around(modules, e.start_ns)
                if around is not None:
                    module = module if module is not None else around[2]
                    run = run if run is not None else around[3]
            if module is None and kernel:
                module = last  # the stream's kernels of one run follow one another
            if module is None:
                continue
            last = module
            events.append(TraceEvent(_PROGRAM_ID.sub("", str(module)), str(op), e.start_ns,
                                     e.duration_ns, device, run, kernel, shape, 0.0))


def _op_name(name: str) -> str:
    """The instruction an ``XLA Ops`` event names: its name, or the name in its whole text
    (``%fusion.1 = f32[8]{0} fusion(...)``, as TPU profilers write it)."""
    head, eq, _ = name.partition(" = ")
    return head.removeprefix("%") if eq else name


def _op_shape(name: str) -> str:
    """The shape, without layouts, of the instruction whose whole text an ``XLA Ops``
    event is named after (``%fusion.1 = f32[8]{0} fusion(...)``: ``f32[8]``); empty where
    the name is the instruction's alone or its shape cannot be read."""
    _, eq, rest = name.partition(" = ")
    if not eq:
        return ""
    try:
        return split_shape_prefix(rest)[0].without_layout()
    except ValueError:  # ShapeSyntaxError: a name of another form
        return ""


def _around(modules: list[tuple[float, float, str, int]],
            t: float) -> tuple[float, float, str, int] | None:
    """The module event that holds time `t` (the last to start before it)."""
    i = bisect.bisect_right(modules, (t, float("inf"), "", 0)) - 1
    if i >= 0 and modules[i][0] <= t <= modules[i][1]:
        return modules[i]
    return None
