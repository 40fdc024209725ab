"""Live ranges over the flattened schedule, and the memory peak, as XLA's HloLiveRange.

The schedule is flattened the way XLA's `HloLiveRange` does it in module
scope: each while loop's condition then body is laid out just before the
while instruction, each conditional's branches and each call's computation
before the instruction that calls them.  A value lives from its defining
instruction (a computation's parameters: from the computation's start) to
its last use or position; values reaching a computation's root live to the
computation's end, entry parameters that are not donated to the whole
program, a while's init value until the body starts.  Values that share a
buffer get consecutive ranges.

A computation run from several places (which XLA would have cloned) is laid
out once, at the first place; an operand passed to it at a later place is
read at that call.  The flattening is iterative: calls nested thousands deep
need no deep stack.

The peak follows XLA's definition exactly, so that hloscope's number equals
the ``Live ranges at N (peak)`` figure in XLA's ``*-live-range.txt`` dumps:
XLA picks the peak *moment* with a sweep that sizes every value by its
defining instruction's whole shape (a tuple's pointer table for a value
inside a tuple) and counts a value that ended at the previous step; the
peak *bytes* are then the sizes of the values live at that moment.  The
timeline (`live_bytes`) counts each buffer once per step, which is what the
memory really holds.

XLA's HloLiveRange counts every memory space.  A TPU module also places values
in on-chip memory (VMEM, ``S(1)`` in a layout) and scalar memory (``S(2)``),
which have allocations of their own, outside the device memory a program is
given: there the peak and the timeline are of the default memory space (HBM)
alone, the most the device memory holds at once, and `all_spaces_peak_bytes`
keeps XLA's figure over every space (what its dump shows).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .._hlo._module import Computation, Instruction
from .._hlo._shape import UNBOUNDED, Shape
from ._dataflow import DEFINES_NOTHING, Dataflow, Value
from ._shapes import logical_byte_size
from ._walk import ENTER, INSTRUCTION, first_parameter, paused_gc, walk_schedule

__all__ = ["LiveRanges", "compute_live_ranges", "xla_peak_moment"]


@dataclass(slots=True)
class LiveRanges:
    """The flattened schedule, each value's [start, end] (inclusive) and the peak.

    `sequence` is the flattened schedule (time t runs the instruction
    ``sequence[t]``); `spans` maps a computation name to its [start, end)
    times; `ranges` maps a value id to (start, end).  `peak_time` is XLA's
    peak moment and `peak_values` the values live then, largest first;
    `peak_bytes` their total (None when a shape is unbounded dynamic).
    `live_bytes[t]` is the bytes held at step t counting each buffer once.  In a module
    with values in other memory spaces (a TPU's VMEM), the peak and `live_bytes` are of
    the default memory space (HBM) alone; `all_spaces_peak_bytes` is XLA's peak over
    every space (equal to `peak_bytes` in a module without other spaces).
    """

    sequence: list[Instruction]
    spans: dict[str, tuple[int, int]]
    ranges: dict[int, tuple[int, int]]
    time_of: dict[int, int]
    peak_time: int
    peak_values: list[Value]
    peak_bytes: int | None
    live_bytes: list[int]
    all_spaces_peak_bytes: int | None = None

    @property
    def end_time(self) -> int:
        return len(self.sequence)


def _flatten(df: Dataflow) -> tuple[list[Instruction], dict[str, tuple[int, int]],
                                    dict[str, Instruction], dict[str, Instruction]]:
    """The flattened schedule, each computation's [start, end) span in it, the async-start
    that runs each async computation, and the instruction where each called computation
    is laid out (its first call site)."""
    allowed = {c.name for c in df.computations}
    seq: list[Instruction] = []
    spans: dict[str, tuple[int, int]] = {}
    starts: dict[str, int] = {}
    async_ctx: dict[str, Instruction] = {}
    laid_out_at: dict[str, Instruction] = {}
    context: list[Instruction | None] = []
    for event, item, caller in walk_schedule(df.module):
        if event == INSTRUCTION:
            seq.append(item)  # type: ignore[arg-type]
            continue
        comp: Computation = item  # type: ignore[assignment]
        if event == ENTER:
            outer = context[-1] if context else None
            ctx = caller if caller is not None and caller.opcode == "async-start" else outer
            context.append(ctx)
            if ctx is not None:
                async_ctx[comp.name] = ctx
            if caller is not None:
                laid_out_at[comp.name] = caller
            starts[comp.name] = len(seq)
        else:
            context.pop()
            if comp.name in allowed:
                spans[comp.name] = (starts[comp.name], len(seq))
    return seq, spans, async_ctx, laid_out_at


def _async_done(start: Instruction) -> Instruction | None:
    """Follow an async-start's chain through async-updates to its async-done."""
    inst = start
    for _ in range(64):
        nxt = [u for u in inst.users if u.opcode in ("async-update", "async-done")]
        if not nxt:
            return None
        inst = nxt[0]
        if inst.opcode == "async-done":
            return inst
    return None


_READ_TOP_ONLY = frozenset({"tuple", "domain"})
_PASS_THROUGH = frozenset({"get-tuple-element", "copy", "tuple", "domain"})
_MEMO_USERS = 8


class _LastUse:
    """The last step at which a value is read.

    A call's or loop's operand is read where the called computation reads its
    parameter, not at the call, when the computation is laid out at that call
    site; a computation run from several places is laid out once, at the first,
    so a later call site reads its operands at the call itself.
    """

    def __init__(self, df: Dataflow, spans: dict[str, tuple[int, int]],
                 time_of: dict[int, int], laid_out_at: dict[str, Instruction]) -> None:
        self.spans = spans
        self.time_of = time_of
        self.users_of = df.users_of
        self.laid_out_at = laid_out_at
        self.module = df.module
        self.body_param: dict[str, Instruction | None] = {}
        self.read_at: dict[int, int | None] = {}  # id(call or while) -> `call_read`
        self.top: dict[int, int] = {}  # id(instruction) -> `last_read`
        self.inside: dict[int, int] = {}

    def __call__(self, v: Value) -> int:
        more = v._more  # `Value.other_positions`
        if v.inst.is_root:
            return self._read_with_roots(v)
        if more:
            for inst, _index in more:
                if inst.is_root:
                    return self._read_with_roots(v)
        # By XLA's rules a position is read by every user of its instruction but a tuple
        # or a domain (which read only the top), and one inside a tuple also not by a
        # get-tuple-element or a copy: the last such read of each instruction is kept.
        last_read = self.last_read
        end = last_read(v.inst, bool(v.index))
        if more:
            for inst, index in more:
                t = last_read(inst, bool(index))
                if t > end:
                    end = t
        return end

    def last_read(self, inst: Instruction, inside: bool) -> int:
        """The last step at which a user reads `inst`'s output at the top (`inside`: at an
        index inside its tuple), -1 when none does."""
        users = inst.computation.users(inst)
        if len(users) > _MEMO_USERS:  # kept for instructions with many users only
            memo = self.inside if inside else self.top
            k = id(inst)
            end = memo.get(k)
            if end is None:
                end = memo[k] = self._last_read(users, inside)
            return end
        return self._latest(users, _PASS_THROUGH if inside else _READ_TOP_ONLY)

    def _last_read(self, users: Iterable[Instruction], inside: bool) -> int:
        return self._latest(users, _PASS_THROUGH if inside else _READ_TOP_ONLY)

    def _latest(self, users: Iterable[Instruction], skip: frozenset[str]) -> int:
        """The last step at which one of `users` (not of the opcodes in `skip`) reads."""
        end = -1
        time_of = self.time_of
        for user in users:
            op = user.opcode
            if op in skip:
                continue
            t = self.call_read(user) if op == "call" or op == "while" else \
                time_of.get(id(user))
            if t is not None and t > end:
                end = t
        return end

    def _read_with_roots(self, v: Value) -> int:
        """`__call__` for a value held at a computation's root (XLA's rules for uses)."""
        return self._latest(self.users_of(v), frozenset())

    def call_read(self, user: Instruction) -> int | None:
        """The step at which a call or a while reads its operands (None: not at all, the
        called computation laid out there reads its parameters instead), once per user."""
        k = id(user)
        if k in self.read_at:
            return self.read_at[k]
        if user.opcode == "call":
            names = user.called_computation_names
            if names and names[0] in self.spans and self.laid_out_at.get(names[0]) is user:
                self.read_at[k] = None
                return None
        else:
            body = (user.attr("body", "") or "").lstrip("%")
            if body in self.spans and self.laid_out_at.get(body) is user:
                param = self._first_parameter(body)
                if param is not None:
                    user = param
        t = self.read_at[k] = self.time_of.get(id(user))
        return t

    def _first_parameter(self, name: str) -> Instruction | None:
        if name not in self.body_param:
            self.body_param[name] = first_parameter(self.module.computation(name))
        return self.body_param[name]


def compute_live_ranges(df: Dataflow) -> LiveRanges:
    """Flatten the schedule of `df.module` and compute every value's live range and the peak."""
    with paused_gc():
        return _compute_live_ranges(df)


def _compute_live_ranges(df: Dataflow) -> LiveRanges:
    module = df.module
    entry = module.entry
    seq, spans, async_ctx, laid_out_at = _flatten(df)
    # One int object per step, shared by every range and map that holds a step (a million
    # steps would otherwise be several million separate ints).
    steps = list(range(len(seq) + 1))
    time_of = dict(zip(map(id, seq), steps))
    end_time = steps[-1]
    aliased_params = {(p, pidx) for _o, p, pidx, _k in module.input_output_alias}
    last_use = _LastUse(df, spans, time_of, laid_out_at)
    done_time: dict[str, int | None] = {}

    ranges: dict[int, tuple[int, int]] = {}
    sets = df.value_sets
    call_read = last_use.call_read
    cur: Computation | None = None
    cstart = cend = 0
    caller: Instruction | None = None
    users_of = entry.users
    for t, inst in zip(steps, seq):
        comp = inst.computation
        if comp is not cur:
            cur = comp
            cstart, cend = spans[comp.name]
            caller = async_ctx.get(comp.name)
            users_of = comp.users
        stored = sets.get(inst)
        if stored is None:
            continue
        if type(stored) is Value and caller is None and stored._more is None \
                and not inst.is_root:
            # Most values: an array defined here and held only here (never a parameter's),
            # read by every user but a tuple or a domain (`_LastUse`, inlined).
            end = t
            for user in users_of(inst):
                op = user.opcode
                if op == "call" or op == "while":
                    r = call_read(user)
                elif op == "tuple" or op == "domain":
                    continue
                else:
                    r = time_of.get(id(user))
                if r is not None and r > end:
                    end = r
            ranges[stored.id] = (t, end)  # type: ignore[union-attr]
            continue
        if inst.opcode in DEFINES_NOTHING:
            continue
        start = cstart if inst.opcode == "parameter" else t
        def_end = cend if inst.is_root else t
        if caller is not None:
            if comp.name not in done_time:
                done = _async_done(caller)
                done_time[comp.name] = time_of.get(id(done)) if done is not None else None
            dt = done_time[comp.name]
            def_end = max(def_end, dt if dt is not None else cend)
        if type(stored) is Value:  # `Dataflow.defined_by`, inlined
            defined: list[Value] = [stored]
        else:
            defined = [v for vals in stored.values() for v in vals  # type: ignore[union-attr]
                       if v.inst is inst]
            if len(defined) > 1:
                defined = list(dict.fromkeys(defined))
        for v in defined:
            end = def_end
            for pinst, _pidx in v._more or ():
                if pinst.is_root:
                    span = spans.get(pinst.computation.name)
                    if span is None:
                        continue
                    pt = span[1]
                else:
                    pt2 = time_of.get(id(pinst))
                    if pt2 is None:
                        continue
                    pt = pt2
                end = max(end, pt)
            if (inst.opcode == "parameter" and comp is entry
                    and (inst.parameter_number, v.index) not in aliased_params):
                end = end_time
            else:
                end = max(end, last_use(v))
            ranges[v.id] = (start, end)

    _normalize(df, ranges)
    # Values outside the default memory space (a TPU's VMEM, S(1)) are left out of the
    # peak and the timeline; XLA's peak over every space is kept beside them.
    elsewhere = {v.id for v in df.values if v.memory_space}
    peak_time, peak_values, peak_bytes = _peak(df, ranges, end_time, elsewhere)
    all_spaces = _peak(df, ranges, end_time, set())[2] if elsewhere else peak_bytes
    live = _live_bytes(df, ranges, end_time, elsewhere)
    return LiveRanges(seq, spans, ranges, time_of, peak_time, peak_values, peak_bytes, live,
                      all_spaces)


def _normalize(df: Dataflow, ranges: dict[int, tuple[int, int]]) -> None:
    """Values of one buffer get back-to-back ranges (XLA's NormalizeAliasedBuffers)."""
    for buf in df.buffers:
        if len(buf.values) < 2:
            continue
        items = sorted([*ranges[v.id], v.id] for v in buf.values if v.id in ranges)
        if not items:
            continue
        # Each range ends where the next starts, and the next lasts at least as long.
        ps, pe, pid = items[0]
        for s, e, vid in items[1:]:
            ranges[pid] = (ps, pe if pe < s else s)
            ps, pe, pid = s, (pe if pe > e else e), vid
        ranges[pid] = (ps, pe)


def _unbounded(shape: Shape) -> bool:
    if shape.is_tuple:
        return any(_unbounded(s) for s in shape.tuple_shapes)
    return UNBOUNDED in shape.dims


def xla_peak_moment(spans: Iterable[tuple[int, int, int]], end_time: int) -> int:
    """The step XLA's HloLiveRange calls the peak, from (start, end, sweep size) per value.

    XLA sweeps start and end+1 events with starts first at equal times, so a value
    still counts in the step after its end; the first step with the highest sum wins.
    """
    diff = [0] * (end_time + 4)
    for start, end, size in spans:
        diff[start] += size
        diff[end + 2] -= size
    return _sweep(diff, end_time)


def _sweep(diff: list[int], end_time: int) -> int:
    """The first step with the highest running sum of `diff` (`xla_peak_moment`)."""
    best = peak_time = usage = 0
    for t in range(end_time + 2):
        usage += diff[t]
        if usage > best:
            best, peak_time = usage, t
    return peak_time


def _peak(df: Dataflow, ranges: dict[int, tuple[int, int]], end_time: int,
          skip: set[int]) -> tuple[int, list[Value], int | None]:
    """XLA's peak moment, the values live then and their total, over the values not in
    `skip` (ids)."""
    unbounded = False
    diff = [0] * (end_time + 4)
    sizes: dict[Shape, int] = {}  # shapes are interned: few distinct ones
    for v in df.values:
        vid = v.id
        r = ranges.get(vid)
        if r is None or (skip and vid in skip):
            continue
        shape = v.inst.shape
        size = sizes.get(shape)
        if size is None:
            if shape.dynamic and _unbounded(shape):
                unbounded = True
            # Sized by the whole instruction shape, without tile padding, as XLA's
            # ComputePeakMemoryMoment does (ShapeUtil::ByteSizeOf).
            size = sizes[shape] = logical_byte_size(shape)
        diff[r[0]] += size
        diff[r[1] + 2] -= size
    peak_time = _sweep(diff, end_time)
    live = []
    for v in df.values:
        r = ranges.get(v.id)
        if r is not None and r[0] <= peak_time <= r[1] and not (skip and v.id in skip):
            live.append(v)
    live.sort(key=lambda v: (-v.size, v.inst.name, v.index))
    total = None if unbounded else sum(logical_byte_size(v.shape) for v in live)
    return peak_time, live, total


def _live_bytes(df: Dataflow, ranges: dict[int, tuple[int, int]], end_time: int,
                skip: set[int]) -> list[int]:
    """The bytes held at each step, each buffer once (those whose first value is in `skip`
    left out)."""
    diff = [0] * (end_time + 3)
    for buf in df.buffers:
        if skip and buf.values and buf.values[0].id in skip:
            continue
        if len(buf.values) == 1:
            r = ranges.get(buf.values[0].id)
            if r is not None:
                diff[r[0]] += buf.size
                diff[r[1] + 1] -= buf.size
            continue
        spans = sorted(ranges[v.id] for v in buf.values if v.id in ranges)
        if not spans:
            continue
        size = buf.size
        cs, ce = spans[0]
        for s, e in spans[1:]:
            if s <= ce + 1:
                ce = max(ce, e)
                continue
            diff[cs] += size
            diff[ce + 1] -= size
            cs, ce = s, e
        diff[cs] += size
        diff[ce + 1] -= size
    out = []
    usage = 0
    same: dict[int, int] = {}  # one int object per distinct figure (they repeat a lot)
    for t in range(end_time + 1):
        usage += diff[t]
        out.append(same.setdefault(usage, usage))
    return out
