"""In-place operations: which operand an instruction's result must share memory with.

Following XLA's `AliasInfo::GetInPlaceInputOutputPairs`: dynamic-update-slice,
scatter and all-reduce-start write over their operands; collective-permute
with four operands writes into its second; custom-calls, fusions and
async-starts may declare ``output_to_operand_aliasing``; and a fusion whose
root (through tuples) is such an operation on one of its parameters writes
over that operand.
"""

from __future__ import annotations

from .._hlo._attrs import parse_input_output_alias
from .._hlo._module import Instruction
from .._hlo._numbers import is_ascii_digits

__all__ = ["IN_PLACE_OPCODES", "InPlacePairs", "in_place_pairs"]

Index = tuple[int, ...]
Pair = tuple[int, Index, Index]

# The opcodes `in_place_pairs` may find pairs for (every other has none).
IN_PLACE_OPCODES = frozenset({
    "dynamic-update-slice", "scatter", "all-reduce-start", "collective-permute",
    "collective-permute-start", "fusion", "custom-call", "async-start", "set-dimension-size",
    "ragged-all-to-all"})

# Nested fusions deeper than this are not followed (XLA nests one or two levels).
_MAX_FUSION_DEPTH = 8


def _follow_tuples(inst: Instruction, index: Index) -> tuple[Instruction, Index]:
    """The instruction and index that define `inst` at `index`: into tuples, then up
    get-tuple-elements.  Stops where a name or an index does not resolve, and after as
    many steps as the computation has instructions (an operand cycle)."""
    by_name = inst.computation.by_name
    steps = len(by_name) + 1
    while inst.opcode == "tuple" and index and steps:
        names = inst.operand_names
        if not 0 <= index[0] < len(names) or names[index[0]] not in by_name:
            break
        inst, index = by_name[names[index[0]]], index[1:]
        steps -= 1
    while inst.opcode == "get-tuple-element" and inst.operand_names and steps:
        src = by_name.get(inst.operand_names[0])
        if src is None:
            break
        inst, index = src, (_gte_index(inst), *index)
        steps -= 1
    return inst, index


def _gte_index(inst: Instruction) -> int:
    v = inst.attr("index", "0") or "0"
    return int(v) if is_ascii_digits(v.lstrip("-")) else 0


def in_place_pairs(inst: Instruction, cache: InPlacePairs | None = None,
                   depth: int = 0) -> list[Pair]:
    """``(operand_number, operand_index, output_index)`` that must share a buffer."""
    op = inst.opcode
    n = len(inst.operand_names)
    if op in ("dynamic-update-slice", "scatter", "all-reduce-start"):
        if op == "scatter":
            n = (n - 1) // 2
        elif op == "dynamic-update-slice":
            n = 1
        if n == 1:
            return [(0, (), ())]
        return [(i, (), (i,)) for i in range(max(n, 0))]
    if op in ("collective-permute", "collective-permute-start") and n == 4:
        base = (1,) if op == "collective-permute-start" else ()
        operand = inst.computation.by_name.get(inst.operand_names[1])
        pairs = [(1, (), base)]
        if operand is not None and operand.shape.is_tuple:
            pairs += [(1, (i,), (*base, i)) for i in range(len(operand.shape.tuple_shapes))]
        return pairs
    pairs: list[Pair] = []
    if op == "fusion" and depth < _MAX_FUSION_DEPTH:
        pairs.extend(_fusion_in_place_pairs(inst, cache, depth))
    if op in ("custom-call", "fusion", "async-start"):
        v = inst.attr("output_to_operand_aliasing")
        if v:
            pairs.extend((p, pidx, out) for out, p, pidx, _ in parse_input_output_alias(v))
    if op == "set-dimension-size":
        return [(0, (), ())]
    if op == "ragged-all-to-all":
        return [(1, (), ())]
    return pairs


def _fusion_in_place_pairs(fusion: Instruction, cache: InPlacePairs | None,
                           depth: int) -> list[Pair]:
    names = fusion.called_computation_names
    module = fusion.computation.module
    if not names or names[0] not in module._by_name:
        return []
    comp = module.computation(names[0])
    if comp is fusion.computation or not comp.instructions:
        return []

    def pairs_of(inst: Instruction) -> list[Pair]:
        if cache is not None:
            return cache.pairs(inst, depth + 1)
        return in_place_pairs(inst, None, depth + 1)

    out: list[Pair] = []
    root = comp.root
    for index, _leaf in fusion.shape.leaves():
        src, src_index = _follow_tuples(root, index)
        source: Instruction | None = None
        source_index: Index = ()
        for opnum, opidx, outidx in pairs_of(src):
            if outidx != src_index or opnum >= len(src.operand_names):
                continue
            operand = comp.by_name.get(src.operand_names[opnum])
            if operand is None:
                continue
            source, source_index = _follow_tuples(operand, opidx)
            if source.opcode == "fusion":
                for n2, i2, o2 in pairs_of(source):
                    if o2 == source_index and n2 < len(source.operand_names):
                        inner = comp.by_name.get(source.operand_names[n2])
                        if inner is not None:
                            source, source_index = _follow_tuples(inner, i2)
        if source is not None and source.opcode == "bitcast" and source.operand_names:
            source = comp.by_name.get(source.operand_names[0])
        if source is not None and source.opcode == "parameter":
            out.append((source.parameter_number, source_index, index))
    return out


class InPlacePairs:
    """`in_place_pairs` of each instruction, computed once (an analysis asks many times
    about the same instruction, e.g. once per output of a wide multi-output fusion)."""

    __slots__ = ("_by_output", "_pairs")

    def __init__(self) -> None:
        self._pairs: dict[int, tuple[Instruction, list[Pair]]] = {}
        self._by_output: dict[int, dict[Index, list[tuple[int, Index]]]] = {}

    def pairs(self, inst: Instruction, depth: int = 0) -> list[Pair]:
        """The pairs of `inst` (the instruction is kept alive by the cache)."""
        hit = self._pairs.get(id(inst))
        if hit is None:
            hit = self._pairs[id(inst)] = (inst, in_place_pairs(inst, self, depth))
        return hit[1]

    def by_output(self, inst: Instruction) -> dict[Index, list[tuple[int, Index]]]:
        """Output index -> the (operand number, operand index) written in place there."""
        hit = self._by_output.get(id(inst))
        if hit is None:
            hit = {}
            for opnum, opidx, outidx in self.pairs(inst):
                hit.setdefault(outidx, []).append((opnum, opidx))
            self._by_output[id(inst)] = hit
        return hit
