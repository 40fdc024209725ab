"""What the analyses need of a module, checked once before they run.

The parser accepts text that XLA would reject (hand-written or damaged
modules).  The dataflow and everything built on it rely on a few structural
facts about the computations that run as control flow; this module checks
them in one linear pass and raises `HloModelError`, naming the instruction,
where they fail, so that no analysis meets an index out of range, a cycle or
an empty computation halfway through:

* every computation run by control flow has instructions;
* no computation runs itself, directly or through others;
* no instruction depends on itself through its operands;
* every operand name resolves;
* a get-tuple-element reads an element its operand's tuple has;
* a while names its condition and body and has one operand.

It also checks a sharding before a per-device shape is computed from it.
"""

from __future__ import annotations

from .._errors import HloModelError
from .._hlo._module import Computation, Instruction, Module
from .._hlo._shape import Shape
from .._hlo._sharding import Sharding
from ._walk import INCONSISTENT, gte_index

__all__ = ["check_module", "shard_shape"]

# Opcodes that run computations as part of the caller's schedule.
_CONTROL_FLOW = frozenset({"call", "while", "conditional", "async-start", "async-update",
                           "async-done"})


def check_module(module: Module) -> None:
    """Raise `HloModelError` when `module` breaks what the analyses rely on (see above)."""
    comps = _control_flow_graph(module)
    for comp in comps:
        _check_instructions(comp)
        _check_acyclic(comp)


def _callees(inst: Instruction) -> list[Computation]:
    """The control-flow computations `inst` runs, each checked to exist."""
    module = inst.computation.module
    out = []
    names = list(inst.called_computation_names)
    if inst.opcode == "while":
        for key in ("condition", "body"):
            v = inst.attr(key)
            if not v:
                raise HloModelError(f"{inst.name} (while) has no {key}=", hint=INCONSISTENT)
            names.append(v.lstrip("%"))
    for name in dict.fromkeys(names):
        out.append(module.computation(name))
    return out


def _control_flow_graph(module: Module) -> list[Computation]:
    """The entry and what it runs through control flow; raises on empty computations and
    on computations that run themselves."""
    entry = module.entry
    if not entry.instructions:
        raise HloModelError(f"the entry computation {entry.name} has no instructions",
                            hint=INCONSISTENT)
    state: dict[str, int] = {entry.name: 1}  # 1: on the current path, 2: done
    order = [entry]
    stack: list[tuple[Computation, list[tuple[Instruction, Computation]]]] = [
        (entry, _edges(entry))]
    while stack:
        comp, edges = stack[-1]
        if not edges:
            state[comp.name] = 2
            stack.pop()
            continue
        caller, callee = edges.pop()
        seen = state.get(callee.name)
        if seen == 1:
            raise HloModelError(
                f"computation {callee.name} runs itself: {caller.name} in {comp.name} calls it "
                "while it is running", hint="XLA's call graphs have no cycles; " + INCONSISTENT)
        if seen is None:
            if not callee.instructions:
                raise HloModelError(f"computation {callee.name}, run by {caller.name}, has no "
                                    "instructions", hint=INCONSISTENT)
            state[callee.name] = 1
            order.append(callee)
            stack.append((callee, _edges(callee)))
    return order


def _edges(comp: Computation) -> list[tuple[Instruction, Computation]]:
    # Callees by what decides them (thousands of loops run the same body and condition).
    memo: dict[tuple[str, str, str, tuple[str, ...]], list[Computation]] = {}
    out = []
    for inst in comp.instructions:
        if inst.opcode in _CONTROL_FLOW:
            key = (inst.opcode, inst.attr_text, inst.sugar, inst.implicit_calls)
            callees = memo.get(key)
            if callees is None:
                callees = memo[key] = _callees(inst)
            out += [(inst, callee) for callee in callees]
    return out


def _check_instructions(comp: Computation) -> None:
    by_name = comp.by_name
    for inst in comp.instructions:
        for name in inst.operand_names:
            if name not in by_name:
                raise HloModelError(f"{inst.name} reads {name}, which is not in computation "
                                    f"{comp.name}", hint=INCONSISTENT)
        op = inst.opcode
        if op == "get-tuple-element":
            _check_gte(inst)
        elif op == "while" and len(inst.operand_names) != 1:
            raise HloModelError(f"{inst.name} (while) has {len(inst.operand_names)} operands; "
                                "a while loop takes one (its state)", hint=INCONSISTENT)


def _check_gte(inst: Instruction) -> None:
    if len(inst.operand_names) != 1:
        raise HloModelError(f"{inst.name} (get-tuple-element) has {len(inst.operand_names)} "
                            "operands; it reads one tuple", hint=INCONSISTENT)
    src = inst.computation.by_name[inst.operand_names[0]]
    index = gte_index(inst)
    if not src.shape.is_tuple:
        raise HloModelError(f"{inst.name} reads element {index} of {src.name}, which is not a "
                            f"tuple ({src.shape})", hint=INCONSISTENT)
    n = len(src.shape.tuple_shapes)
    if not 0 <= index < n:
        raise HloModelError(f"{inst.name} reads element {index} of a {n}-element tuple "
                            f"({src.name})", hint=INCONSISTENT)


def _check_acyclic(comp: Computation) -> None:
    """No operand cycle.  Printed in order (every operand before its user, as XLA prints),
    a computation has none; otherwise Kahn's algorithm finds an instruction on one."""
    defined: set[str] = set()
    for inst in comp.instructions:
        if not defined.issuperset(inst.operand_names):
            break
        defined.add(inst.name)
    else:
        return
    by_name = comp.by_name
    pending = {id(inst): len(set(inst.operand_names)) for inst in comp.instructions}
    ready = [inst for inst in comp.instructions if not pending[id(inst)]]
    done = 0
    while ready:
        inst = ready.pop()
        done += 1
        for user in comp.users(inst):
            k = id(user)
            pending[k] -= 1
            if not pending[k]:
                ready.append(user)
    if done < len(comp.instructions):
        stuck = next(i for i in comp.instructions if pending[id(i)] > 0
                     and all(n in by_name for n in i.operand_names))
        raise HloModelError(f"{stuck.name} in {comp.name} depends on itself through its "
                            "operands (an operand cycle)", hint=INCONSISTENT)


def shard_shape(name: str, sharding: Sharding, shape: Shape) -> Shape:
    """The per-device shape of `shape` under `sharding`; `HloModelError` (naming the
    instruction `name`) when the sharding cuts a dimension into zero or fewer pieces."""
    for s in _leaf_shardings(sharding):
        if any(t <= 0 for t in s.data_tile_dims):
            raise HloModelError(f"{name} has sharding {sharding.text} that cuts a dimension "
                                "into zero pieces", hint=INCONSISTENT)
    return sharding.shard_shape(shape)


def _leaf_shardings(sharding: Sharding) -> list[Sharding]:
    out = []
    stack = [sharding]
    while stack:
        s = stack.pop()
        if s.kind == "tuple":
            stack.extend(s.elements)
        else:
            out.append(s)
    return out
