"""What a module must satisfy before any analysis may run on it.

The tolerant reader keeps what it does not know (a newer XLA's opcode or
attribute) but refuses what would make an analysis wrong or make it loop:

- an operand cycle (an instruction that uses itself, directly or through
  others) and a computation that calls itself (``calls=``, ``to_apply=``, a
  loop body or condition, a branch), which XLA's verifier rejects;
- a known opcode with the wrong number of operands (``bitcast()``);
- a ``get-tuple-element`` of a non-tuple, or of an element that does not
  exist; an ``async-start`` whose shape is not ``((operands), output, ...)``;
- two parameters with the same number in one computation.

`validate` returns the first problem as ``(message, instruction)`` so the
parser can locate it; None when there is none.  It is linear in the module's
size and only walks what can be wrong (cycles are possible only where an
operand is named before its definition).
"""

from __future__ import annotations

import re

from ._module import Computation, Instruction, Module
from ._opcodes import OPCODE_ARITY

__all__ = ["validate", "FIXED_ARITY", "arity_problem", "tuple_element_problem"]

# Opcodes whose operand count XLA's parser checks (the rest take any number, or depend
# on attributes).
# Host transfers keep the operand counts of older XLA versions (infeed() without a token).
_FIXED = {op: n for op, n in OPCODE_ARITY.items()
          if n is not None and op not in ("gather", "dot", "scaled-dot", "ragged-dot",
                                          "ragged-all-to-all", "async-done", "infeed",
                                          "outfeed", "send", "recv", "send-done", "recv-done")}
_INDEX_RE = re.compile(r"(?:^|, )index=(-?[0-9]+)(?=,|$)")

Problem = tuple[str, Instruction]


def validate(module: Module, forward: set[str], calls: dict[str, list[tuple[str, Instruction]]],
             checked: set[str] | None = None) -> Problem | None:
    """The first problem in `module`, or None.

    `forward` names the computations where an operand is used before its
    definition (only there can operands form a cycle); `calls` maps each
    computation to the (callee, calling instruction) pairs found in it;
    `checked` names computations whose instructions the parser already checked
    one by one as it read them (`arity_problem`, `tuple_element_problem`).
    """
    for comp in module.computations:
        done = checked is not None and comp.name in checked and comp.name not in forward
        problem = None if done else _instructions(comp)
        if problem is None and comp.name in forward:
            problem = _operand_cycle(comp)
        if problem is not None:
            return problem
    return _call_cycle(calls)


def _instructions(comp: Computation) -> Problem | None:
    fixed = _FIXED
    insts = comp.instructions
    # One pass in C for the common case (list comprehensions), the checks only on the few.
    odd = [i for i in insts if fixed.get(i.opcode, len(i.operand_names)) != len(i.operand_names)
           or i.opcode in _SPECIAL]
    numbers = [i.parameter_number for i in insts if i.opcode == "parameter"]
    if len(set(numbers)) != len(numbers):
        odd += [i for i in insts if i.opcode == "parameter"]
    if not odd:
        return None
    params: dict[int, Instruction] = {}
    by_name = comp.by_name
    for inst in odd:
        op = inst.opcode
        n = fixed.get(op)
        if n is not None and len(inst.operand_names) != n:
            return arity_problem(inst, n)
        if op == "get-tuple-element":
            problem = _tuple_element(inst, by_name)
            if problem is not None:
                return problem
        elif op == "parameter":
            k = inst.parameter_number
            if k in params:
                return (f"{inst.name}: parameter number {k} is already {params[k].name}'s "
                        f"in computation {comp.name!r}", inst)
            params[k] = inst
        elif op == "async-start" and not inst.sugar:
            s = inst.shape
            if not (s.is_tuple and len(s.tuple_shapes) >= 2 and s.tuple_shapes[0].is_tuple):
                return (f"{inst.name}: an async-start's shape is ((operands...), output, ...), "
                        f"not {s.to_text()}", inst)
    return None


_SPECIAL = frozenset({"get-tuple-element", "async-start"})


FIXED_ARITY = _FIXED


def arity_problem(inst: Instruction, n: int) -> Problem:
    """The message for `inst` having other than `n` operands."""
    return (f"{inst.name}: {inst.opcode} takes {n} operand{'s' if n != 1 else ''}, this one has "
            f"{len(inst.operand_names)}", inst)


def tuple_element_problem(inst: Instruction, by_name: dict[str, Instruction]) -> Problem | None:
    return _tuple_element(inst, by_name)


def _tuple_element(inst: Instruction, by_name: dict[str, Instruction]) -> Problem | None:
    m = _INDEX_RE.search(inst.attr_text)
    if m is None or len(m.group(1)) > 18:
        return (f"{inst.name}: get-tuple-element needs index=N", inst)
    src = by_name.get(inst.operand_names[0])
    if src is None:
        return None  # reported as an undefined operand
    shape = src.shape
    if not shape.is_tuple:
        return (f"{inst.name}: get-tuple-element of {src.name}, which is not a tuple "
                f"({shape.to_text()})", inst)
    k = int(m.group(1))
    if not 0 <= k < len(shape.tuple_shapes):
        return (f"{inst.name}: reads element {k} of {src.name}, a tuple of "
                f"{len(shape.tuple_shapes)}", inst)
    return None


def _operand_cycle(comp: Computation) -> Problem | None:
    """An operand cycle in `comp`, found by an iterative depth-first walk."""
    by_name = comp.by_name
    state: dict[str, int] = {}  # 1: on the walk's stack, 2: done
    for start in comp.instructions:
        if start.name in state:
            continue
        stack: list[tuple[Instruction, int]] = [(start, 0)]
        path: list[str] = [start.name]
        state[start.name] = 1
        while stack:
            inst, k = stack[-1]
            ops = inst.operand_names
            if k < len(ops):
                stack[-1] = (inst, k + 1)
                nxt = by_name.get(ops[k])
                if nxt is None:
                    continue
                s = state.get(nxt.name)
                if s == 1:
                    cycle = path[path.index(nxt.name):] + [nxt.name]
                    return (f"{nxt.name} uses itself: the operands form a cycle "
                            f"{' -> '.join(cycle)}", nxt)
                if s is None:
                    state[nxt.name] = 1
                    stack.append((nxt, 0))
                    path.append(nxt.name)
                continue
            state[inst.name] = 2
            stack.pop()
            path.pop()
    return None


def _call_cycle(calls: dict[str, list[tuple[str, Instruction]]]) -> Problem | None:
    """A computation that calls itself, directly or through others."""
    state: dict[str, int] = {}
    for root in calls:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        state[root] = 1
        while stack:
            comp, k = stack[-1]
            out = calls.get(comp, ())
            if k < len(out):
                stack[-1] = (comp, k + 1)
                callee, inst = out[k]
                s = state.get(callee)
                if s == 1:
                    cycle = path[path.index(callee):] + [callee]
                    return (f"computation {callee!r} calls itself: {' -> '.join(cycle)} (through "
                            f"{inst.name})", inst)
                if s is None:
                    state[callee] = 1
                    stack.append((callee, 0))
                    path.append(callee)
                continue
            state[comp] = 2
            stack.pop()
            path.pop()
    return None
