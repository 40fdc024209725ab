"""Values and buffers as the dataflow analysis (`_dataflow`) gives them to the others.

A `Value` is one array (or tuple pointer table) written by one instruction at
one shape index; a `Buffer` the values that share one piece of memory; a
`Dataflow` holds both, with the values each instruction's output may hold at
each shape index.  A value's uses are computed when asked (XLA's rules), not
kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .._hlo._module import Computation, Instruction, Module
from .._hlo._shape import Shape
from ._shapes import byte_size

__all__ = ["NO_VALUES", "Buffer", "Dataflow", "Index", "Value", "as_dict", "operand_positions"]

Index = tuple[int, ...]


class Value:
    """One SSA value: what `inst` writes at shape index `index`.

    `positions` are every (instruction, index) that holds the value, the
    defining one first; `uses` the (instruction, operand number, operand
    index) that read it, by XLA's rules.
    """

    __slots__ = ("_label", "_more", "id", "index", "inst", "is_phi", "shape", "size")

    def __init__(self, vid: int, inst: Instruction, index: Index, is_phi: bool) -> None:
        self.id = vid
        self.inst = inst
        self.index = index
        self.is_phi = is_phi
        self.shape: Shape = inst.shape.subshape(index) if index else inst.shape
        self.size: int = byte_size(self.shape)  # bytes (a tuple's pointer table for a tuple)
        self._more: list[tuple[Instruction, Index]] | None = None  # positions after the first
        self._label: str | None = None

    @property
    def memory_space(self) -> int:
        """The layout's memory space: 0 is device memory (HBM); a TPU's on-chip memory
        (``S(1)``), scalar memory (``S(2)``) and the host (``S(5)``) have allocations of
        their own, outside XLA's temp allocation (XLA's live-range peak counts every
        value, whatever its space)."""
        layout = self.shape.layout
        return layout.memory_space if layout is not None else 0

    @property
    def positions(self) -> list[tuple[Instruction, Index]]:
        """Every (instruction, index) that holds the value, the defining one first (a new
        list each time: most values have only the one, which is then not stored)."""
        first = (self.inst, self.index)
        return [first] if self._more is None else [first, *self._more]

    @property
    def other_positions(self) -> list[tuple[Instruction, Index]] | tuple[()]:
        """`positions` without the defining one."""
        return self._more or ()

    def add_position(self, inst: Instruction, index: Index) -> None:
        """Record that `inst` holds the value at `index` too."""
        if self._more is None:
            self._more = []
        self._more.append((inst, index))

    @property
    def label(self) -> str:
        """``name{index}`` as XLA's dumps print it."""
        if self._label is None:
            self._label = f"{self.inst.name}{{{','.join(map(str, self.index))}}}"
        return self._label

    def __repr__(self) -> str:
        return f"<Value {self.id} {self.label}{' (phi)' if self.is_phi else ''}>"

    @property
    def uses(self) -> list[tuple[Instruction, int, Index]]:
        """The (user, operand number, operand index) that read the value (computed on each
        use, not kept: a million values' uses are a lot of memory for what is read once)."""
        return _compute_uses(self)


def _may_use(user: Instruction, index: Index) -> bool:
    op = user.opcode
    if op == "get-tuple-element" or op == "copy":
        return not index
    return op != "tuple" and op != "domain"


_PASS_THROUGH = frozenset({"get-tuple-element", "copy", "tuple", "domain"})
# Users with more operands than this have their operand positions looked up once (cached).
_WIDE = 8


def _compute_uses(value: Value, cache: dict[int, dict[str, list[int]]] | None = None,
                  readers: dict[int, tuple[Instruction, ...]] | None = None,
                  root_reads: dict[int, frozenset[str]] | None = None,
                  users_only: bool = False) -> list[tuple[Instruction, int, Index]]:
    """The (user, operand number, operand index) that read `value`, by XLA's rules (with
    `users_only`, only the users, once per position that they read it at).

    A get-tuple-element, copy, tuple or domain reads only the top of its
    operand, so for a value inside a tuple only the other users (and the
    computation roots among the value's positions) are looked at; `readers`
    caches those per instruction and `root_reads` each root's operand names,
    which keeps wide tuples linear.
    """
    if value._more is None and not value.index and not value.inst.is_root and not users_only:
        return _array_uses(value.inst, cache)
    root_reads = root_reads if root_reads is not None else {}
    roots = [inst for inst, _ in value.positions if inst.is_root]
    root_ids = {id(r) for r in roots}
    uses: list[tuple[Instruction, int, Index]] = []
    for inst, index in value.positions:
        if index:
            key = id(inst)
            users = readers.get(key) if readers is not None else None
            if users is None:
                users = tuple(u for u in inst.users if u.opcode not in _PASS_THROUGH)
                if readers is not None:
                    readers[key] = users
            if roots:
                users = users + tuple(r for r in roots if r.opcode in _PASS_THROUGH
                                      and inst.name in _operand_names(r, root_reads)
                                      and r.computation is inst.computation)
        else:
            users = inst.users
        name = inst.name
        for user in users:
            if id(user) in root_ids or _may_use(user, index):
                if users_only:  # a user reads the position's name (`Computation.users`)
                    uses.append(user)  # type: ignore[arg-type]
                    continue
                names = user.operand_names
                if len(names) > _WIDE:
                    where: Iterable[int] = operand_positions(user, cache).get(name, ())
                else:
                    where = [i for i, n in enumerate(names) if n == name]
                for i in where:
                    uses.append((user, i, index))
    return uses


def _array_uses(inst: Instruction, cache: dict[int, dict[str, list[int]]] | None,
                ) -> list[tuple[Instruction, int, Index]]:
    """`_compute_uses` of a value held only where it is defined, an array, not at a root
    (most values): every user reads it, but a tuple or domain (which read only the top)."""
    name = inst.name
    uses: list[tuple[Instruction, int, Index]] = []
    for user in inst.users:
        if user.opcode == "tuple" or user.opcode == "domain":
            continue
        names = user.operand_names
        if len(names) > _WIDE:
            for i in operand_positions(user, cache).get(name, ()):
                uses.append((user, i, ()))
        else:
            for i, n in enumerate(names):
                if n == name:
                    uses.append((user, i, ()))
    return uses


def _operand_names(inst: Instruction, cache: dict[int, frozenset[str]]) -> frozenset[str]:
    names = cache.get(id(inst))
    if names is None:
        names = cache[id(inst)] = frozenset(inst.operand_names)
    return names


def operand_positions(user: Instruction, cache: dict[int, dict[str, list[int]]] | None = None,
                      ) -> dict[str, list[int]]:
    """Operand name -> the operand numbers where `user` reads it.

    `cache` (keyed by ``id(user)``; the caller keeps the instructions alive while
    it uses the cache) saves rescanning long operand lists.
    """
    if cache is not None:
        hit = cache.get(id(user))
        if hit is not None:
            return hit
    out: dict[str, list[int]] = {}
    for i, n in enumerate(user.operand_names):
        out.setdefault(n, []).append(i)
    if cache is not None:
        cache[id(user)] = out
    return out


@dataclass(frozen=True, slots=True)
class Buffer:
    """Values that must share one piece of memory (sorted by value id); `size` is the largest."""

    id: int
    values: tuple[Value, ...]
    size: int


@dataclass(slots=True)
class Dataflow:
    """The values and buffers of a module (see the module docstring)."""

    module: Module
    computations: list[Computation]          # the control-flow computations
    values: list[Value]                      # sorted by id
    # instruction -> index -> values; for an instruction that only defines one array value
    # (most), that value itself (see `values_at` and `sets_of`).
    value_sets: dict[Instruction, dict[Index, list[Value]] | Value]
    buffers: list[Buffer] = field(default_factory=list)
    # value id -> its buffer (None for the id of a folded phi)
    buffer_of: list[Buffer | None] = field(default_factory=list)
    kinds: list[str] | None = None  # allocation kind by buffer id (`classify_buffers`)
    _use_caches: tuple[dict[int, dict[str, list[int]]], dict[int, tuple[Instruction, ...]],
                       dict[int, frozenset[str]]] = field(default_factory=lambda: ({}, {}, {}))

    def values_at(self, inst: Instruction, index: Index = ()) -> Sequence[Value]:
        """The values that may be in `inst`'s output at `index` (none for an instruction
        outside the control-flow computations, or an index its shape lacks)."""
        sets = self.value_sets.get(inst)
        if sets is None:
            return NO_VALUES
        if type(sets) is Value:
            return NO_VALUES if index else (sets,)
        return sets.get(index, NO_VALUES)  # type: ignore[union-attr]

    def sets_of(self, inst: Instruction) -> dict[Index, list[Value]]:
        """Shape index -> the values that may be there, for every index of `inst`."""
        return as_dict(self.value_sets.get(inst))

    def defined_by(self, inst: Instruction) -> list[Value]:
        """Values `inst` defines, in shape-index order."""
        stored = self.value_sets.get(inst)
        if type(stored) is Value:
            return [stored]
        sets = as_dict(stored)
        out = [v for vals in sets.values() for v in vals if v.inst is inst]
        return list(dict.fromkeys(out)) if len(out) > 1 else out  # once each

    def uses_of(self, v: Value) -> list[tuple[Instruction, int, Index]]:
        """`v.uses`, with this dataflow's caches for wide instructions."""
        return _compute_uses(v, *self._use_caches)

    def users_of(self, v: Value) -> list[Instruction]:
        """The users in `uses_of(v)`, without their operand numbers (each once per position
        that it reads)."""
        return _compute_uses(v, *self._use_caches, users_only=True)  # type: ignore[return-value]


NO_VALUES: list[Value] = []
_NO_SETS: dict[Index, list[Value]] = {}


def as_dict(sets: dict[Index, list[Value]] | Value | None) -> dict[Index, list[Value]]:
    """Value sets by shape index, from their stored form (a bare value: its own, at ``()``)."""
    if sets is None:
        return _NO_SETS
    if type(sets) is Value:
        return {(): [sets]}  # type: ignore[list-item]
    return sets  # type: ignore[return-value]
