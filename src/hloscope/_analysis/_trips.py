"""How many times each computation runs per call of the program: a while loop's trip
count as XLA knows it (``known_trip_count``) or as its condition and body say it, and
each computation's runs from the entry down (`runs_per_call`).  Used by the advisor
(a finding in a loop saves as often as it runs) and the kernel graph (totals per run).
"""

from __future__ import annotations

from typing import Any

from .._hlo._module import Instruction, Module
from .._hlo._numbers import ascii_int

__all__ = ["runs_per_call", "trip_count"]


def runs_per_call(module: Module) -> dict[str, int]:
    """Runs per call of the program of each computation that holds kernels: a loop
    body's known trip count times its caller's (1 where XLA does not know it)."""
    out: dict[str, int] = {}
    stack: list[tuple[Any, int]] = [(module.entry, 1)]
    loops: dict[tuple[object, ...], tuple[int, int] | None] = {}  # see `_counted`
    while stack:
        comp, n = stack.pop()
        if out.get(comp.name, 0) >= n:
            continue
        out[comp.name] = n
        for inst in comp.instructions:
            if inst.opcode == "fusion" or not inst.called_computation_names:
                continue
            times = n * trip_count(inst, loops) if inst.opcode == "while" else n
            for c in inst.called_computations:
                stack.append((c, times))
    return out


def trip_count(inst: Instruction,
               loops: dict[tuple[object, ...], tuple[int, int] | None] | None = None) -> int:
    """A while loop's trip count as XLA knows it (``known_trip_count``), else as its
    condition and body say it (``i < N`` on a counter that starts at a constant and
    adds 1 each iteration: a TPU module's fori_loop carries no backend config), else 1."""
    cfg = inst.backend_config
    if isinstance(cfg, dict):
        n = cfg.get("known_trip_count")
        if isinstance(n, dict):
            try:
                return max(1, int(n.get("n", 1)))
            except (TypeError, ValueError):
                return 1
    return _counted(inst, loops) or 1


def _constant(inst: Instruction) -> int | None:
    while inst.opcode == "copy" and inst.operands:
        inst = inst.operands[0]
    if inst.opcode != "constant" or inst.shape.dims or inst.literal is None:
        return None
    try:
        return ascii_int(inst.literal)
    except ValueError:
        return None


def _index(gte: Instruction) -> int | None:
    """The tuple index a get-tuple-element of a parameter reads, else None."""
    if gte.opcode != "get-tuple-element" or not gte.operands \
            or gte.operands[0].opcode != "parameter":
        return None
    try:
        return ascii_int(gte.attr("index") or "")
    except ValueError:
        return None


def _counted(loop: Instruction,
             loops: dict[tuple[object, ...], tuple[int, int] | None] | None = None
             ) -> int | None:
    """The trip count of a counted loop; `loops` remembers what its condition and body
    say (the bound and the counter's index) for the loops that share them."""
    if loop.opcode != "while" or not loop.operand_names:
        return None
    loops = {} if loops is None else loops
    key = (loop.called_computation_names, loop.attr("condition"))
    if key not in loops:
        loops[key] = _counter(loop)
    return _started(loop, loops[key])


def _started(loop: Instruction, counter: tuple[int, int] | None) -> int | None:
    """The trip count of `loop` whose counter (bound, index) is `counter`, from where its
    initial tuple starts it."""
    if counter is None:
        return None
    limit, i = counter
    by_name = loop.computation.by_name  # (read by name: a module may hold 10^5 loops)
    init = by_name[loop.operand_names[0]]
    if init.opcode != "tuple" or not 0 <= i < len(init.operand_names):
        return None
    start = _constant(by_name[init.operand_names[i]])
    if start is None:
        return None
    return max(0, limit - start) or None


def _counter(loop: Instruction) -> tuple[int, int] | None:
    """(bound, tuple index) of the counter a while loop's condition compares (``i < N``)
    and its body adds 1 to, else None."""
    if len(loop.called_computations) < 2:
        return None
    cond, body = loop.called_computations[0], loop.called_computations[-1]
    if (loop.attr("condition") or cond.name).lstrip("%") != cond.name:
        cond, body = body, cond
    cmp = cond.root
    if cmp.opcode != "compare" or cmp.attr("direction") != "LT" or len(cmp.operands) != 2:
        return None
    counter, bound = cmp.operands
    limit, i = _constant(bound), _index(counter)
    if limit is None or i is None:
        return None
    if body.root.opcode != "tuple" or not 0 <= i < len(body.root.operands):
        return None
    step = body.root.operands[i]
    if step.opcode != "add" or len(step.operands) != 2:
        return None
    a, b = step.operands
    src, one = (a, b) if a.opcode == "get-tuple-element" else (b, a)
    if _constant(one) != 1 or _index(src) != i:
        return None
    return limit, i
