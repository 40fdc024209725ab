"""What a module XLA has not compiled yet already shows: its size, and a Python loop
unrolled into N copies of the same body.

JAX traces a Python ``for`` loop into one copy of its body per iteration; each copy's
operations carry the same source lines.  Counting the operations per (source line,
opcode) finds the copies: the count shared by most of the module's operations is the
number of copies.  A pure function over the model; `describe_lowered` words it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from .._hlo._module import Module

__all__ = ["Unrolled", "describe_lowered", "unrolled_loop"]

MIN_COPIES = 8       # fewer copies than this are not worth a word
MIN_COVERAGE = 0.25  # the copies must hold at least this share of the operations


@dataclass(frozen=True, slots=True)
class Unrolled:
    """`copies` copies of a body of `per_copy` operations from `lines` (file:line)."""

    copies: int
    per_copy: int
    operations: int
    lines: tuple[str, ...]


def unrolled_loop(module: Module) -> Unrolled | None:
    """The unrolled loop in `module` (see the module docstring), or None."""
    counts: Counter[tuple[str, str]] = Counter()
    total = 0
    for comp in module.computations:
        for inst in comp.instructions:
            total += 1
            loc = inst.source
            if loc is None or inst.opcode in ("parameter", "constant", "tuple",
                                              "get-tuple-element"):
                continue
            counts[(str(loc), inst.opcode)] += 1
    if not counts:
        return _by_period(module)
    best: tuple[int, int] | None = None
    for c in set(counts.values()):
        if c < MIN_COPIES:
            continue
        covered = sum(n for n in counts.values() if n % c == 0)
        if best is None or (covered, c) > best[::-1]:
            best = (c, covered)
    if best is None or best[1] < MIN_COVERAGE * max(1, total):
        return None
    copies, covered = best
    lines = sorted({loc for (loc, _op), n in counts.items() if n % copies == 0})
    return Unrolled(copies, covered // copies, covered, tuple(lines))


def _by_period(module: Module) -> Unrolled | None:
    """Without source lines: the entry's opcodes repeating with one period (the gap
    that recurs most between the same opcode's places, checked over the sequence)."""
    ops = [i.opcode for i in module.entry.instructions
           if i.opcode not in ("parameter", "constant", "tuple", "get-tuple-element")]
    n = len(ops)
    places: dict[str, list[int]] = {}
    for k, op in enumerate(ops):
        places.setdefault(op, []).append(k)
    gaps: Counter[int] = Counter()
    for where in places.values():
        if len(where) >= MIN_COPIES:
            gap, _n = Counter(b - a for a, b in zip(where, where[1:])).most_common(1)[0]
            gaps[gap] += 1
    for period in sorted(g for g in gaps if g > 0):
        same = sum(a == b for a, b in zip(ops, ops[period:]))
        copies = n // period
        if copies >= MIN_COPIES and same >= 0.8 * (n - period):
            return Unrolled(copies, period, copies * period, ())
    return None


def describe_lowered(module: Module,
                     what: str = "the lowered module (before XLA's optimization)") -> str:
    """``the lowered module has 12,345 operations; 41 operations from prog.py:12-14
    repeat 300 times: a Python loop unrolled 300 times ...``"""
    n = module.instruction_count
    text = f"{what} has {n:,} operations"
    u = unrolled_loop(module)
    if u is None:
        return text
    where = ", ".join(u.lines[:3]) + (f" and {len(u.lines) - 3} more lines"
                                       if len(u.lines) > 3 else "")
    return (f"{text}; {u.per_copy} operations" + (f" from {where}" if where else "")
            + f" repeat {u.copies} times: a Python loop unrolled {u.copies} times, every "
            "copy optimized by XLA (lax.scan or lax.fori_loop compiles the body once)")
