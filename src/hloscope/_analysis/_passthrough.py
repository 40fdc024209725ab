"""Instructions that move no data: annotations, and copies and transposes that are bitcasts.

XLA removes both kinds before it assigns buffers or emits kernels, so no
analysis counts them: they launch no kernel, hold no memory of their own
(their output is their operand's buffer, as a bitcast's is), and draw no
advice.  This module is the one definition every analysis uses
(`passes_through`, `forwarded_operands`).

* An *annotation* is a custom-call that only carries information for a
  compiler pass: a sharding for the SPMD partitioner or Shardy, a memory
  space for host offloading, a layout for layout assignment.  The pass that
  reads it replaces it with its operand (`ANNOTATION_TARGETS` names the
  targets and where XLA defines them).
* A ``transpose`` or ``copy`` whose output holds the same elements in the
  same order in memory as its operand is a bitcast.  XLA's algebraic
  simplifier replaces it by one (``AlgebraicSimplifierVisitor::HandleTranspose``
  in xla/hlo/transforms/simplifiers/algebraic_simplifier.cc: a transpose that
  only permutes size-1 dimensions becomes a reshape, one for which
  ``ShapeUtil::TransposeIsBitcast`` holds a bitcast; ``HandleCopy``: a copy
  for which ``ShapeUtil::ReshapeIsBitcast`` holds between its operand's
  layout and its own).  `keeps_element_order` applies that rule: the
  dimensions of size greater than one, read from minor to major through the
  permutation, must come in the same order in the operand's layout and the
  output's (size-1 dimensions take no place in memory); a shape printed
  without a layout has XLA's default, major-to-minor.  A copy whose layout
  is the operand's own is kept: after optimization it is one that XLA's copy
  insertion placed on purpose (a loop's state, an output that must not
  alias an argument), a real copy.
"""

from __future__ import annotations

from .._hlo._module import Instruction
from .._hlo._shape import Layout, Shape

__all__ = ["ANNOTATION_TARGETS", "PASSING_OPCODES", "forwarded_operands", "is_annotation",
           "keeps_element_order", "passes_through", "same_physical_order"]

Index = tuple[int, ...]

ANNOTATION_TARGETS: frozenset[str] = frozenset({
    # xla/service/spmd/shardy/constants.h (kShardingCustomCallTargetName, ...) and
    # xla/service/sharding_propagation.cc: sharding annotations read by sharding
    # propagation and the SPMD partitioner, which replace them with their operand.
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
    # Shardy's round-trip annotations (xla/service/spmd/shardy/constants.h).
    "xla.sdy.FuncResultSharding", "xla.sdy.ShardingGroup", "xla.sdy.PropagationBarrier",
    "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",
    # Host offloading's memory-space annotations (xla/service/memory_annotations.h).
    "annotate_device_placement", "MoveToHost", "MoveToDevice", "PinToDevice",
    "PinToDeviceSram",
    # A layout for layout assignment (xla/service/layout_assignment.cc).
    "LayoutConstraint",
    # jax.debug.inspect_array_sharding: an identity the partitioner takes out
    # (xla/python/inspect_sharding.cc).
    "InspectSharding",
})
"""Custom-call targets that are annotations, not library calls: XLA's passes read them
and replace them with their operand, so they launch nothing and hold no memory."""

PASSING_OPCODES: frozenset[str] = frozenset({"custom-call", "transpose", "copy"})
"""The opcodes of the instructions that may pass their operand through (others never do)."""


def is_annotation(inst: Instruction) -> bool:
    """Whether `inst` is a custom-call to one of `ANNOTATION_TARGETS`."""
    return inst.opcode == "custom-call" and inst.custom_call_target in ANNOTATION_TARGETS


def passes_through(inst: Instruction) -> bool:
    """Whether `inst` moves no data: an annotation, or a transpose or copy that keeps the
    order of the elements in memory (see the module docstring)."""
    op = inst.opcode
    if op not in PASSING_OPCODES:
        return False
    if op == "custom-call":
        return inst.custom_call_target in ANNOTATION_TARGETS
    return keeps_element_order(inst)


def forwarded_operands(inst: Instruction) -> tuple[tuple[Index, int], ...]:
    """Where the output of an instruction that `passes_through` comes from: ``(output index,
    operand number)`` pairs, the whole operand placed at that index.  An array output is
    its first operand; a tuple of arrays (Shardy's ``GlobalToLocalShape``) holds operand
    ``i`` at ``{i}`` (its pointer table is its own, as a tuple's is).  Empty when the
    output cannot be its operands (an annotation without operands, or whose shape does not
    match them): then it defines its own values, like any instruction, but still launches
    no kernel."""
    shape = inst.shape
    names = inst.operand_names
    if not names:
        return ()
    by_name = inst.computation.by_name
    shapes = [by_name[n].shape if n in by_name else None for n in names]
    if not shape.is_tuple:
        first = shapes[0]
        ok = first is not None and not first.is_tuple and first.is_array == shape.is_array
        return (((), 0),) if ok else ()
    elems = shape.tuple_shapes
    if not elems or len(elems) != len(shapes) or any(
            s is None or s.is_tuple or e.is_tuple for e, s in zip(elems, shapes)):
        return ()
    return tuple(((i,), i) for i in range(len(elems)))


def keeps_element_order(inst: Instruction) -> bool:
    """Whether `inst`, a transpose or a copy, leaves the elements where they are in memory:
    XLA makes it a bitcast (see the module docstring).  A copy to its operand's own layout
    is not counted here (it is a real copy after optimization)."""
    op = inst.opcode
    if op not in ("transpose", "copy") or len(inst.operand_names) != 1:
        return False
    src_inst = inst.computation.by_name.get(inst.operand_names[0])
    if src_inst is None:
        return False
    src, dst = src_inst.shape, inst.shape
    if op == "transpose":
        perm = inst.dimensions
    else:
        if src.layout is dst.layout or _layout(src) == _layout(dst):
            return False  # a copy XLA placed on purpose: it moves the data
        perm = _identity(len(dst.dims))
    key = (id(src), id(dst), perm)
    hit = _SEEN.get(key)
    if hit is not None and hit[0] is src and hit[1] is dst:
        return hit[2]
    same = same_physical_order(src, dst, perm)
    if len(_SEEN) >= _LIMIT:
        _SEEN.clear()
    _SEEN[key] = (src, dst, same)  # the shapes are kept alive: their ids are not reused
    return same


def same_physical_order(src: Shape, dst: Shape, perm: tuple[int, ...]) -> bool:
    """Whether `dst`, whose dimension ``j`` is `src`'s dimension ``perm[j]``, holds every
    element at the same place in memory as `src`."""
    rank = len(dst.dims)
    if len(src.dims) != rank or len(perm) != rank or src.element_type != dst.element_type:
        return False
    if not src.is_array or src.is_tuple or sorted(perm) != list(range(rank)):
        return False
    if src.is_dynamic or dst.is_dynamic:
        return False
    if any(dst.dims[j] != src.dims[perm[j]] for j in range(rank)):
        return False
    a, b = _layout(src), _layout(dst)
    if len(a.minor_to_major) != rank or len(b.minor_to_major) != rank:
        return False
    if _rest(a) != _rest(b):
        return False  # tiles, element size, memory space or what hloscope does not model
    mapped = [perm[d] for d in b.minor_to_major]
    if a.tiles or a.extra:
        return mapped == list(a.minor_to_major)  # tiles pad by dimension: all must match
    if src.num_elements == 0:
        return True
    return ([d for d in mapped if src.dims[d] != 1]
            == [d for d in a.minor_to_major if src.dims[d] != 1])


# Shapes are interned by the parser: the answer for a pair of shapes and a permutation is
# kept (by the shapes' ids) for the many instructions that repeat it.
_SEEN: dict[tuple[int, int, tuple[int, ...]], tuple[Shape, Shape, bool]] = {}
_LIMIT = 100_000
_DEFAULTS: dict[int, Layout] = {}
_IDENTITY: dict[int, tuple[int, ...]] = {}


def _identity(rank: int) -> tuple[int, ...]:
    hit = _IDENTITY.get(rank)
    if hit is None:
        hit = _IDENTITY[rank] = tuple(range(rank))
    return hit


def _layout(shape: Shape) -> Layout:
    """The shape's layout, or XLA's default (major-to-minor) when none is printed."""
    if shape.layout is not None:
        return shape.layout
    rank = len(shape.dims)
    hit = _DEFAULTS.get(rank)
    if hit is None:
        hit = _DEFAULTS[rank] = Layout(tuple(range(rank - 1, -1, -1)))
    return hit


def _rest(layout: Layout) -> tuple[object, ...]:
    """Everything in a layout but the order of the dimensions."""
    return (layout.tiles, layout.tail_padding_alignment, layout.index_type,
            layout.pointer_type, layout.element_size_in_bits, layout.memory_space,
            layout.dynamic_shape_metadata_prefix_bytes, layout.extra)
