"""Helpers the analyses share to walk a module in bounded time and stack.

Every walk here is iterative (a module may nest calls thousands deep, or be
damaged into cycles, and must never exhaust Python's stack) and visits each
computation once, so it ends on any input.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._errors import HloModelError
from .._gc import paused_gc as paused_gc
from .._hlo._module import Computation, Instruction, Module
from .._hlo._numbers import ascii_int

__all__ = ["ENTER", "EXIT", "INCONSISTENT", "INSTRUCTION", "control_flow_callees",
           "first_parameter", "gte_index", "operand", "paused_gc", "walk_schedule"]

ENTER, INSTRUCTION, EXIT = 0, 1, 2
INCONSISTENT = "the module text is inconsistent here; re-export it from XLA"


def operand(inst: Instruction, i: int) -> Instruction:
    """The `i`-th operand of `inst`, without building the tuple of all of them."""
    try:
        return inst.computation.by_name[inst.operand_names[i]]
    except IndexError:
        raise HloModelError(f"{inst.name} ({inst.opcode}) has {len(inst.operand_names)} "
                            f"operand(s); operand {i} is needed", hint=INCONSISTENT) from None
    except KeyError:
        raise HloModelError(f"{inst.name} reads {inst.operand_names[i]}, which is not in "
                            f"computation {inst.computation.name}", hint=INCONSISTENT) from None


def first_parameter(comp: Computation) -> Instruction | None:
    """The parameter of `comp` with the lowest number, or None when it has none."""
    best: Instruction | None = None
    for inst in comp.instructions:
        if inst.opcode == "parameter" and (best is None
                                           or inst.parameter_number < best.parameter_number):
            best = inst
    return best


_RUNS_COMPUTATIONS = frozenset({"call", "async-start", "conditional", "while"})


def control_flow_callees(inst: Instruction) -> tuple[Computation, ...]:
    """The computations `inst` runs as part of the caller's schedule, in the order they run:
    a while's condition then body; a call's, an async-start's or a conditional's computations."""
    op = inst.opcode
    if op in ("call", "async-start", "conditional"):
        return inst.called_computations
    if op == "while":
        module = inst.computation.module
        out = []
        for key in ("condition", "body"):
            v = inst.attr(key)
            if v:
                out.append(module.computation(v.lstrip("%")))
        return tuple(out)
    return ()


def walk_schedule(module: Module) -> Iterator[tuple[int, Computation | Instruction,
                                                     Instruction | None]]:
    """The entry's instructions in order, each preceded by the computations it runs.

    Yields ``(ENTER, computation, caller)`` when a computation starts (the caller
    is None for the entry), ``(INSTRUCTION, instruction, None)`` for each
    instruction and ``(EXIT, computation, None)`` when it ends.  A computation run
    from several places is laid out once, where it is first reached (XLA flattens
    the call graph first, cloning such computations; hloscope does not clone).
    """
    seen = {module.entry.name}
    runs = _RUNS_COMPUTATIONS
    # A while's callees by its attribute text (thousands of loops name the same two).
    loops: dict[str, tuple[Computation, ...]] = {}

    def visit(comp: Computation) -> Iterator[tuple[int, Computation | Instruction,
                                                   Instruction | None]]:
        for inst in comp.instructions:
            if inst.opcode in runs:
                if inst.opcode == "while":
                    callees = loops.get(inst.attr_text)
                    if callees is None:
                        callees = loops[inst.attr_text] = control_flow_callees(inst)
                else:
                    callees = control_flow_callees(inst)
                for callee in callees:
                    if callee.name not in seen:
                        seen.add(callee.name)
                        yield ENTER, callee, inst
            yield INSTRUCTION, inst, None
        yield EXIT, comp, None

    yield ENTER, module.entry, None
    stack = [visit(module.entry)]
    while stack:
        event = next(stack[-1], None)
        if event is None:
            stack.pop()
            continue
        yield event
        if event[0] == ENTER:
            stack.append(visit(event[1]))  # type: ignore[arg-type]


def gte_index(inst: Instruction) -> int:
    """The element a get-tuple-element reads (0 when the attribute is missing)."""
    text = inst.attr_text
    if text.startswith("index=") and text[6:].isdigit() and text.isascii():
        return int(text[6:])  # the attribute alone (most): not parsed
    v = inst.attr("index")
    if not v:
        return 0
    try:
        return ascii_int(v)
    except ValueError:
        raise HloModelError(f"{inst.name} (get-tuple-element) has index={v}, not a number",
                            hint=INCONSISTENT) from None
