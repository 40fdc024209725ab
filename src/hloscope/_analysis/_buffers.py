"""Buffers: the values that must share one piece of memory (XLA's `HloAliasAnalysis`).

A while loop's state across its init, body and result; conditional branch
results; an in-place operation's operand and result; entry parameters
aliased to outputs.  Built by the dataflow analysis (`_dataflow`) once the
values are known.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from .._hlo._module import Instruction
from ._inplace import IN_PLACE_OPCODES, InPlacePairs
from ._values import Buffer, Dataflow, Index, Value
from ._walk import operand

__all__ = ["build_buffers"]


def build_buffers(df: Dataflow, callers: dict[str, list[Instruction]],
                   in_place: InPlacePairs, deleted: set[int]) -> None:
    """Group the values into buffers (see the module docstring): a union-find over value
    ids in flat arrays, `joined` marking the values that share with another (every other
    value is a buffer of its own).

    Only the instructions whose values share with others are visited (the entry's root,
    computation roots, in-place operations, loop operands, loops' parameters), each index
    once with every value there: which values end up together does not depend on the
    order of the unions, and the root of each group is its lowest id.
    """
    size = df.values[-1].id + 1 if df.values else 0  # a larger id is a deleted value's
    parent = array("q", range(size))
    joined = bytearray(size)
    sets = df.value_sets

    get = sets.get

    def ids_at(inst: Instruction, index: Index) -> list[int]:
        stored = get(inst)
        if type(stored) is dict:
            vals = stored.get(index)
            if not vals:
                return []
            if len(vals) == 1:
                i = vals[0].id
                return [i] if i not in deleted else []
            return [v.id for v in vals if v.id not in deleted]
        if stored is None:
            return []
        return [] if index else [stored.id]  # type: ignore[union-attr]

    def join(ids: list[int]) -> None:
        """Put every value in `ids` in one buffer."""
        ra = -1
        for b in ids:
            while parent[b] != b:  # find, halving the path
                parent[b] = parent[parent[b]]
                b = parent[b]
            if ra < 0:
                ra = b
            elif b != ra:
                if b < ra:
                    ra, b = b, ra
                parent[b] = ra
                joined[ra] = joined[b] = 1

    def share(inst: Instruction, index: Index, others: Iterable[tuple[Instruction, Index]]
              ) -> None:
        """The values at `inst`'s `index` share memory with those at each of `others`."""
        here = ids_at(inst, index)
        if here:
            for other, oidx in others:
                here += ids_at(other, oidx)
            join(here)

    # (which callers, index) -> a value of the group the callers' values at index were
    # joined in (None when they hold none): a computation run by thousands of loops is read
    # once.  The callers are numbered by their list (`callers_key`), not by computation: a
    # loop's body and condition have the same loops, whose values at an index form one group
    # whichever computation asks, so the condition reuses the body's group (exact: the group
    # is the same set of values; any member stands for it, the root is the lowest id).
    groups: dict[tuple[int, Index], int | None] = {}
    numbered: dict[tuple[Instruction, ...], int] = {}

    def callers_key(calls: list[Instruction]) -> int:
        return numbered.setdefault(tuple(calls), len(numbered))

    def share_with_calls(here: list[int], calls: list[Instruction], key: tuple[int, Index],
                         ) -> None:
        """The values `here` share memory with those of each of `calls` at the index `key`
        ends with."""
        if not here:
            return
        index = key[1]
        if key in groups:
            rep = groups[key]
            if rep is not None:
                join([*here, rep])
            return
        there = [i for c in calls for i in ids_at(c, index)]
        groups[key] = there[0] if there else None
        join(here + there)

    module = df.module
    entry = module.entry
    entry_params = {p.parameter_number: p for p in entry.parameters}
    donated: dict[Index, list[tuple[Instruction, Index]]] = {}
    for out_idx, pnum, pidx, _kind in module.input_output_alias:
        if pnum in entry_params:
            donated.setdefault(out_idx, []).append((entry_params[pnum], pidx))
    # Entry outputs aliased with parameters (donated buffers).
    if entry.instructions and donated:
        root = entry.root
        for index in df.sets_of(root):
            if index in donated:
                share(root, index, donated[index])
    for comp in df.computations:
        calls = callers.get(comp.name, ())
        # While loop state, conditional results: a loop body's or a branch's root.
        sharers = [c for c in calls if c.opcode == "conditional" or (
            c.opcode == "while" and (c.attr("body", "") or "").lstrip("%") == comp.name)]
        loops = [c for c in calls if c.opcode == "while"]
        if sharers and comp.instructions:
            root = comp.root
            which = callers_key(sharers)
            for index in df.sets_of(root):
                share_with_calls(ids_at(root, index), sharers, (which, index))
        which = callers_key(loops) if loops else -1
        by_name = comp.by_name
        for inst in comp.instructions:
            op = inst.opcode
            # The parameters of a loop's computations hold the loop's state.
            if op == "parameter" and loops:
                for v in df.defined_by(inst):
                    if v.id not in deleted:
                        share_with_calls([v.id], loops, (which, v.index))
            # In-place operations.
            if op in IN_PLACE_OPCODES:
                for index, pairs in in_place.by_output(inst).items():
                    share(inst, index, [(operand(inst, opnum), opidx) for opnum, opidx in pairs
                                        if opnum < len(inst.operand_names)])
            # A loop's operand: a while reads the whole of it (joined loop by loop: the
            # groups do not depend on the order of the unions).
            if op == "while":
                for name in dict.fromkeys(inst.operand_names):
                    src = by_name.get(name)
                    if src is not None:
                        for index in df.sets_of(src):
                            here = ids_at(src, index)
                            if here:
                                here += ids_at(inst, index)
                                join(here)
    # Buffers in the order of their first (lowest-id) value, which is the union's root.
    members: dict[int, list[Value]] = {}
    for v in df.values:
        if joined[v.id]:
            b = v.id
            while parent[b] != b:
                b = parent[b]
            members.setdefault(b, []).append(v)
    buffers = df.buffers
    buffer_of: list[Buffer | None] = [None] * size
    df.buffer_of = buffer_of
    for v in df.values:
        if not joined[v.id]:
            buf = Buffer(len(buffers), (v,), v.size)
            buffers.append(buf)
            buffer_of[v.id] = buf
            continue
        if v.id not in members:
            continue  # in the buffer of a value that came before it
        vals = tuple(members.pop(v.id))
        buf = Buffer(len(buffers), vals, max(x.size for x in vals))
        buffers.append(buf)
        for x in vals:
            buffer_of[x.id] = buf
