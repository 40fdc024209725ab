"""When XLA lets an instruction write its result over an operand's buffer.

Both of the heap estimate's passes ask this many times about the same
instructions; `Sharing` answers with XLA's rule (abridged, as
``HloDataflowAnalysis::CanShareOperandBufferWithUser``) and keeps what it
looked up, so that wide instructions (a fusion with thousands of operands)
cost time in proportion to their width, not its square.
"""

from __future__ import annotations

from typing import Any

from .._hlo._module import Computation, Instruction
from ._dataflow import Value, operand_positions
from ._inplace import IN_PLACE_OPCODES, InPlacePairs
from ._passthrough import passes_through

__all__ = ["ELEMENTWISE_OPCODES", "Sharing", "compiled_for_gpu", "compiled_for_tpu",
           "never_shares"]

ELEMENTWISE_OPCODES = frozenset({
    "abs", "round-nearest-afz", "round-nearest-even", "ceil", "count-leading-zeros", "convert",
    "bitcast-convert", "copy", "cosine", "erf", "exponential", "exponential-minus-one", "floor",
    "imag", "is-finite", "log", "log-plus-one", "not", "negate", "popcnt", "real",
    "reduce-precision", "rsqrt", "logistic", "sign", "sine", "sqrt", "cbrt", "tan", "tanh",
    "add", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply", "power",
    "remainder", "subtract", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "stochastic-convert", "select", "clamp", "map",
})

_SHARING_OPCODES = ELEMENTWISE_OPCODES | {
    "fusion", "while", "conditional", "dynamic-update-slice", "scatter", "set-dimension-size",
    "triangular-solve", "sort", "custom-call", "all-reduce", "all-reduce-start",
    "collective-permute", "collective-permute-start", "async-start", "ragged-all-to-all"}


# Users with more operands than this have their operand positions looked up once (cached).
_WIDE = 8


def compiled_for_gpu(module: Any) -> bool:
    """A module XLA compiled for a GPU: its instructions' backend configs name the stream
    they run on (``"operation_queue_id"``), or it calls cuBLAS, cuDNN or Triton."""
    for comp in module.computations:
        for inst in comp.instructions[:5000]:
            text = inst.attr_text
            if '"operation_queue_id"' in text or "fusion_backend_config" in text:
                return True
            if inst.opcode == "custom-call" and inst.custom_call_target.startswith(
                    ("__cublas", "__cudnn", "__cusolver", "__gpu", "__triton")):
                return True
    return False


def compiled_for_tpu(module: Any) -> bool:
    """A module XLA compiled for a TPU: its arrays have tiled layouts (``{1,0:T(8,128)}``)."""
    for inst in module.entry.instructions:
        layout = inst.shape.layout
        if layout is not None and layout.tiles and inst.shape.is_array:
            return True
    return False


def never_shares(user: Instruction) -> bool:
    """`user` can never write over one of its operands (a quick test before `can_share`)."""
    return user.opcode not in _SHARING_OPCODES


def _elementwise_on(user: Instruction, operand: int) -> bool:
    if user.opcode == "dynamic-update-slice":
        return operand == 0
    return user.opcode in ELEMENTWISE_OPCODES


def _physical(shape: Any) -> tuple[Any, ...]:
    """An array's element type and dimensions in memory order without the size-1 ones (a
    bitcast's two sides agree: XLA shares `bf16[1,1024,4096]` over `bf16[1024,4096]`)."""
    if shape.is_tuple or shape.layout is None or shape.layout.tiles:
        return (shape,)
    order = shape.layout.minor_to_major or tuple(range(len(shape.dims) - 1, -1, -1))
    return (shape.element_type, tuple(shape.dims[d] for d in order if shape.dims[d] != 1))


class Sharing:
    """XLA's operand-buffer sharing rules over one module, with what they look up cached.

    `time_of` maps ``id(instruction)`` to its step in the flattened schedule.
    """

    def __init__(self, time_of: dict[int, int]) -> None:
        self.time_of = time_of
        self.in_place = InPlacePairs()
        self._positions: dict[int, dict[str, list[int]]] = {}
        self._params: dict[int, dict[int, Instruction]] = {}
        self._elementwise: dict[tuple[int, bool, bool], bool] = {}
        self._gpu_modules: dict[int, bool] = {}
        self._tpu_modules: dict[int, bool] = {}

    def positions(self, user: Instruction, name: str) -> list[int]:
        """Where `user` reads `name` among its operands (looked up once for wide users)."""
        names = user.operand_names
        if len(names) > _WIDE:
            return operand_positions(user, self._positions).get(name, [])
        return [i for i, n in enumerate(names) if n == name]

    def can_share(self, operand: Instruction, user: Instruction,
                  user_index: tuple[int, ...], positions: list[int] | None = None) -> bool:
        """May `user` write its output at `user_index` over `operand`'s buffer?  `positions`
        (where `user` reads `operand`) is looked up when not given."""
        if operand.opcode == "constant":
            return False
        user_shape = user.shape.subshape(user_index) if user_index else user.shape
        a, b = operand.shape, user_shape
        if a is not b and a != b and _physical(a) != _physical(b):
            return False
        if positions is None:
            positions = self.positions(user, operand.name)
        op = user.opcode
        if op in IN_PLACE_OPCODES:
            for opnum, opidx in self.in_place.by_output(user).get(user_index, ()):
                if opnum in positions and not opidx:
                    return True
        if op == "fusion":
            return self._fusion_can_share(user, positions)
        if op in ("while", "conditional"):
            return True
        if op in ("dynamic-update-slice", "scatter", "set-dimension-size"):
            return positions == [0]
        if op == "triangular-solve":
            return positions == [1]
        if op == "sort":
            if len(operand.users) != 1:
                return False
            return len(user.operand_names) == 1 or (
                len(positions) == 1 and user_index[:1] == (positions[0],))
        if op == "call":
            return False
        if op == "all-reduce":
            # On a TPU, reduced in place: output i over operand i (seen in its buffer
            # assignments: the result at its dying operand's offset; not on the CPU).
            return len(positions) == 1 and self._tpu(user.computation.module) and (
                len(user.operand_names) == 1 or user_index[:1] == (positions[0],))
        return len(positions) == 1 and _elementwise_on(user, positions[0])

    def may_follow(self, operand: Value, user: Value) -> bool:
        """May `user` be written over `operand`, whose life ends where the user's begins?"""
        u = user.inst
        if u.opcode not in _SHARING_OPCODES or u.opcode == "copy":
            return False
        end_inst = operand.inst
        if operand.other_positions:
            # XLA looks at the value's last position; annotations and bitcast-like copies
            # and transposes are gone by then (`_passthrough`), so they are not one.
            best = -1
            for p, _idx in operand.positions:
                t = self.time_of.get(id(p), -1)
                if t > best and (p is operand.inst or not passes_through(p)):
                    best, end_inst = t, p
        if end_inst.computation is not u.computation:
            return False
        positions = self.positions(u, end_inst.name)
        return bool(positions) and self.can_share(end_inst, u, user.index, positions)

    def _fusion_can_share(self, user: Instruction, positions: list[int]) -> bool:
        if user.fusion_kind not in ("kLoop", "kInput") or len(positions) != 1:
            return False
        names = user.called_computation_names
        module = user.computation.module
        if not names or names[0] not in module._by_name:
            return False
        param = self._parameter(module.computation(names[0]), positions[0])
        # XLA's GPU reduction emitter computes the reduction before it writes any other
        # output, so a reduce that reads the parameter does not stop the sharing there
        # (xla/service/gpu/buffer_sharing.cc).
        gpu = self._gpu(module)
        after_reduce = user.fusion_kind == "kInput" and gpu
        return param is not None and self._elementwise_uses_only(param, after_reduce, gpu)

    def _gpu(self, module: Any) -> bool:
        hit = self._gpu_modules.get(id(module))
        if hit is None:
            hit = self._gpu_modules[id(module)] = compiled_for_gpu(module)
        return hit

    def _tpu(self, module: Any) -> bool:
        hit = self._tpu_modules.get(id(module))
        if hit is None:
            hit = self._tpu_modules[id(module)] = compiled_for_tpu(module)
        return hit

    def _parameter(self, comp: Computation, number: int) -> Instruction | None:
        params = self._params.get(id(comp))
        if params is None:
            params = self._params[id(comp)] = {}
            for inst in comp.instructions:
                if inst.opcode == "parameter":
                    params.setdefault(inst.parameter_number, inst)
        return params.get(number)

    def _elementwise_uses_only(self, param: Instruction, reduce_ok: bool = False,
                               bitcast_ok: bool = False) -> bool:
        """Does everything that reads `param` (through tuples) read it elementwise?  With
        `reduce_ok` (XLA's GPU rule), a reduce may read it too (what the reduce makes is not
        followed); with `bitcast_ok` (XLA's GPU rule too), bitcasts pass it on."""
        key = (id(param), reduce_ok, bitcast_ok)
        hit = self._elementwise.get(key)
        if hit is not None:
            return hit
        seen: set[int] = set()
        stack = [param]
        ok = True
        while stack and ok:
            cur = stack.pop()
            if id(cur) in seen:
                continue
            seen.add(id(cur))
            for user in cur.users:
                if reduce_ok and user.opcode == "reduce":
                    continue
                if user.opcode != "tuple" and not (
                        (reduce_ok or bitcast_ok) and user.opcode == "bitcast"):
                    for i in operand_positions(user).get(cur.name, ()):
                        if not _elementwise_on(user, i):
                            ok = False
                if id(user) not in seen:
                    stack.append(user)
        self._elementwise[key] = ok
        return ok
