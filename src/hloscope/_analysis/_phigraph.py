"""XLA's phi graph: folds phi values that turn out to carry a single value.

A phi stands for the values that can reach one place (a loop's state, a
conditional's result).  After dataflow propagation, a phi whose inputs, once
its own self-references are dropped, are all one value is that value; and a
closure of phis fed by exactly one non-phi value folds into it.  This follows
XLA's `PhiGraph::Optimize` step by step (a replaced node is swapped for its
replacement in its users' operand lists and its operands' user lists), with
position indexes so that a phi with many inputs (a loop body shared by
thousands of loops) costs time in proportion to its inputs, not their square.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._values import Value

__all__ = ["PhiGraph"]


# The operands of every node that is not a phi, and the users of every node until `optimize`
# (never changed in place: a node gets a list of its own).
_NO_NODES: list[_Node] = []


class _Node:
    __slots__ = ("checked", "dead", "ids", "is_phi", "operand_at", "operands", "several",
                 "user_at", "users", "value_id")

    def __init__(self, value_id: int) -> None:
        self.value_id = value_id
        self.is_phi = False
        self.dead = False
        # Flags of `PhiGraph.optimize` (on the node, not in sets of ids: a million phis'
        # ids in sets were the dataflow's largest moment): the last pass that walked it, and
        # whether it is known to reach two or more non-phis.
        self.checked = -1
        self.several = False
        self.operands: list[_Node] = _NO_NODES  # a phi's own list (`register`)
        self.users: list[_Node] = _NO_NODES  # made by `optimize`
        self.ids: list[int] | None = None  # the values it stands for: None is its own only
        # id(node) -> where it sits in `operands` / `users`, for long lists only (built by
        # `optimize`; a short list is searched instead).
        self.operand_at: dict[int, int | list[int]] | None = None
        self.user_at: dict[int, int | list[int]] | None = None


_INDEXED = 16  # lists longer than this get a position index


def _positions(nodes: list[_Node]) -> dict[int, int | list[int]] | None:
    """id(node) -> its position in `nodes` (a list when it is there more than once), for
    long lists only."""
    if len(nodes) <= _INDEXED:
        return None
    at: dict[int, int | list[int]] = {}
    for i, x in enumerate(nodes):
        k = id(x)
        cur = at.get(k)
        if cur is None:
            at[k] = i
        elif isinstance(cur, int):
            at[k] = [cur, i]
        else:
            cur.append(i)
    return at


def _swap(nodes: list[_Node], at: dict[int, int | list[int]] | None, old: _Node,
          new: _Node) -> None:
    """Replace every occurrence of `old` in `nodes` by `new`, keeping `at` up to date."""
    if at is None:
        for i, x in enumerate(nodes):
            if x is old:
                nodes[i] = new
        return
    where = at.pop(id(old), None)
    if where is None:
        return
    spots = [where] if isinstance(where, int) else where
    for i in spots:
        nodes[i] = new
    cur = at.get(id(new))
    if cur is None:
        at[id(new)] = where
    else:
        at[id(new)] = ([cur] if isinstance(cur, int) else cur) + spots


def _drop(nodes: list[_Node], at: dict[int, int | list[int]] | None,
          node: _Node) -> tuple[list[_Node], dict[int, int | list[int]] | None]:
    """`nodes` without `node`, and their index (rebuilt only when something was dropped)."""
    if at is not None and id(node) not in at:
        return nodes, at
    if at is None and node not in nodes:  # nodes compare by identity
        return nodes, at
    kept = [x for x in nodes if x is not node]
    return kept, _positions(kept)


def _all_same(nodes: list[_Node], at: dict[int, int | list[int]] | None) -> bool:
    if at is not None:
        return len(at) == 1
    return nodes.count(nodes[0]) == len(nodes)  # nodes compare by identity


class PhiGraph:
    """The phis of one dataflow analysis and the values they take their inputs from.

    Each phi's inputs are kept as value ids until `optimize`, which builds the graph of
    nodes only when some phi may fold (`_all_fixed`): in a module whose phis each meet
    two different values (a chain of loops), no node is made at all.
    """

    def __init__(self) -> None:
        self.inputs: dict[int, list[int]] = {}  # phi id -> its inputs' ids (the last given)
        # Every registration in turn: the order in which ids were first seen (a phi, then
        # its inputs) is the order of the nodes, the order `optimize` visits them in.
        self.log: list[tuple[int, list[int]]] = []
        self.nodes: list[_Node] = []
        self.by_id: dict[int, _Node] = {}

    def register(self, phi: Value, inputs: list[Value]) -> None:
        """Record (or replace) the inputs of `phi`."""
        self.register_ids(phi.id, [v.id for v in inputs])

    def register_ids(self, phi: int, ids: list[int]) -> None:
        """`register` by value ids (`ids` is kept: not to be changed afterwards)."""
        self.inputs[phi] = ids
        self.log.append((phi, ids))

    def inputs_equal(self, phi: Value, inputs: list[Value]) -> bool:
        return set(self.inputs[phi.id]) == {v.id for v in inputs}

    def find(self, vid: int) -> int:
        """The value `vid` stands for after `optimize` (itself when it was not folded)."""
        n = self.by_id.get(vid)
        return vid if n is None else n.value_id

    @property
    def folds(self) -> bool:
        """Whether `optimize` may have folded a phi (else `find` is the identity)."""
        return bool(self.by_id)

    def release(self) -> None:
        """Drop the graph once `find` has been read: its nodes point at each other (operands
        and users), a cycle that only a full collection frees, which would keep a large
        module's graph (hundreds of MB) alive through every later analysis."""
        for n in self.nodes:
            n.operands = n.users = _NO_NODES
            n.operand_at = n.user_at = None
        self.nodes = []
        self.by_id = {}
        self.inputs = {}
        self.log = []

    def _all_fixed(self) -> bool:
        """Whether no phi can fold: each has two different inputs (besides itself) that are
        values or phis known not to fold.  Those inputs are never replaced, so the phi's
        inputs never become all one, and it reaches two values, so it is never in one
        value's closure: `optimize` would change nothing.  (A few passes, in registration
        order.)"""
        inputs = self.inputs
        fixed: set[int] = set()
        pending = list(inputs)
        for _ in range(3):
            left = []
            for phi in pending:
                a = -1
                for i in inputs[phi]:
                    if i == phi or i == a or (i in inputs and i not in fixed):
                        continue
                    if a < 0:
                        a = i
                    else:  # a second one
                        fixed.add(phi)
                        break
                else:
                    left.append(phi)
            if not left:
                return True
            if len(left) == len(pending):
                return False
            pending = left
        return False

    def _build(self) -> None:
        """The graph of nodes, in the order their ids were first registered."""
        nodes = self.nodes
        by_id = self.by_id
        for phi, ids in self.log:
            for vid in (phi, *ids):
                if vid not in by_id:
                    n = by_id[vid] = _Node(vid)
                    nodes.append(n)
        self.log = []
        for vid, ids in self.inputs.items():
            n = by_id[vid]
            n.is_phi = True
            n.operands = [by_id[i] for i in ids]

    def _replace(self, node: _Node, by: _Node) -> None:
        if node.dead:
            return
        while by.dead:
            by = self.by_id[by.value_id]
        for u in node.users:
            _swap(u.operands, u.operand_at, node, by)
        for o in node.operands:
            _swap(o.users, o.user_at, node, by)
        ids = node.ids if node.ids is not None else [node.value_id]
        for vid in ids:
            self.by_id[vid] = by
        if by.ids is None:
            by.ids = [by.value_id]
        by.ids.extend(ids)
        node.ids = []
        node.dead = True

    def _closure(self, start: _Node, mark: int) -> tuple[_Node | None, list[_Node]]:
        """The phis reachable from `start` through operands and the one non-phi that feeds
        them all (None when there are several).

        A node already known to reach two non-phis ends the search at once: folding
        never changes which non-phis a node reaches, so the answer is the same, and a
        chain of loops (each loop's phi reading the last one's) is not walked again
        from each of its phis.
        """
        seen: dict[int, _Node] = {}
        work = deque([start])
        non_phi: _Node | None = None
        while work:
            t = work.popleft()
            if id(t) in seen:
                continue
            t.checked = mark
            seen[id(t)] = t
            if t.several:
                start.several = True
                return None, []
            work.extend(t.operands)
            if not t.is_phi:
                if non_phi is not None and non_phi is not t:
                    start.several = True
                    return None, []
                non_phi = t
        return non_phi, list(seen.values())

    def optimize(self) -> None:
        """Fold phis to a fixed point (see the module docstring)."""
        if self._all_fixed():
            return
        self._build()
        for n in self.nodes:
            for o in n.operands:
                if o.users is _NO_NODES:
                    o.users = [n]
                else:
                    o.users.append(n)
        for n in self.nodes:
            if len(n.operands) > _INDEXED:
                n.operand_at = _positions(n.operands)
            if len(n.users) > _INDEXED:
                n.user_at = _positions(n.users)
        changed = True
        mark = -1  # the pass number
        while changed:
            changed = False
            mark += 1
            for n in self.nodes:
                if not n.is_phi or n.dead:
                    continue
                n.operands, n.operand_at = _drop(n.operands, n.operand_at, n)
                n.users, n.user_at = _drop(n.users, n.user_at, n)
                if not n.operands:
                    continue
                first = n.operands[0]
                if _all_same(n.operands, n.operand_at):
                    self._replace(n, first)
                    changed = True
                    continue
                if n.checked == mark:
                    continue
                # A closure of phis fed by exactly one non-phi folds into it.
                non_phi, closure = self._closure(n, mark)
                if non_phi is not None:
                    for t in closure:
                        if t.is_phi:
                            self._replace(t, non_phi)
                            changed = True
