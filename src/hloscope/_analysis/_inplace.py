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

__all__ = ["in_place_pairs"]

Index = tuple[int, ...]


def _follow_tuples(inst: Instruction, index: Index) -> tuple[Instruction, Index]:
    while inst.opcode == "tuple" and index:
        inst = inst.operands[index[0]]
        index = index[1:]
    while inst.opcode == "get-tuple-element":
        index = (int(inst.attr("index", "0") or 0), *index)
        inst = inst.operands[0]
    return inst, index


def in_place_pairs(inst: Instruction) -> list[tuple[int, Index, Index]]:
    """``(operand_number, operand_index, output_index)`` that must share a buffer."""
    op = inst.opcode
    if op in ("dynamic-update-slice", "scatter", "all-reduce-start"):
        n = len(inst.operand_names)
        if op == "scatter":
            n = (n - 1) // 2
        elif op == "dynamic-update-slice":
            n = 1
        if n == 1:
            return [(0, (), ())]
        return [(i, (), (i,)) for i in range(n)]
    if op in ("collective-permute", "collective-permute-start") and len(inst.operand_names) == 4:
        base = (1,) if op == "collective-permute-start" else ()
        operand = inst.operands[1]
        pairs = [(1, (), base)]
        if operand.shape.is_tuple:
            pairs += [(1, (i,), (*base, i)) for i in range(len(operand.shape.tuple_shapes))]
        return pairs
    pairs: list[tuple[int, Index, Index]] = []
    if op == "fusion":
        pairs.extend(_fusion_in_place_pairs(inst))
    if op in ("custom-call", "fusion", "async-start"):
        v = inst.attr("output_to_operand_aliasing")
        if v:
            pairs.extend((p, pidx, out) for out, p, pidx, _ in parse_input_output_alias(v))
    if op == "set-dimension-size":
        return [(0, (), ())]
    if op == "ragged-all-to-all":
        return [(1, (), ())]
    return pairs


def _fusion_in_place_pairs(fusion: Instruction) -> list[tuple[int, Index, Index]]:
    names = fusion.called_computation_names
    if not names:
        return []
    comp = fusion.computation.module.computation(names[0])
    out: list[tuple[int, Index, Index]] = []
    for index, _leaf in fusion.shape.leaves():
        src, src_index = _follow_tuples(comp.root, index)
        source: Instruction | None = None
        source_index: Index = ()
        for opnum, opidx, outidx in in_place_pairs(src):
            if outidx != src_index:
                continue
            source, source_index = _follow_tuples(src.operands[opnum], opidx)
            if source.opcode == "fusion":
                for n2, i2, o2 in in_place_pairs(source):
                    if o2 == source_index:
                        source, source_index = _follow_tuples(source.operands[n2], i2)
        if source is not None and source.opcode == "bitcast":
            source = source.operands[0]
        if source is not None and source.opcode == "parameter":
            out.append((source.parameter_number, source_index, index))
    return out


