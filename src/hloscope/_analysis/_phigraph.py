"""XLA's phi graph: folds phi values that turn out to carry a single value.

A phi stands for the values that can reach one place (a loop's state, a
conditional's result).  After dataflow propagation, a phi whose inputs, once
its own self-references are dropped, are all one value is that value; and a
closure of phis fed by exactly one non-phi value folds into it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._dataflow import Value

__all__ = ["PhiGraph"]


class _Node:
    __slots__ = ("dead", "ids", "is_phi", "operands", "users", "value_id")

    def __init__(self, value_id: int) -> None:
        self.value_id = value_id
        self.is_phi = False
        self.dead = False
        self.operands: list[_Node] = []
        self.users: list[_Node] = []
        self.ids = [value_id]


class PhiGraph:
    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.by_id: dict[int, _Node] = {}

    def node(self, vid: int) -> _Node:
        n = self.by_id.get(vid)
        if n is None:
            n = _Node(vid)
            self.nodes.append(n)
            self.by_id[vid] = n
        return n

    def register(self, phi: Value, inputs: list[Value]) -> None:
        n = self.node(phi.id)
        n.is_phi = True
        n.operands = [self.node(v.id) for v in inputs]

    def inputs_equal(self, phi: Value, inputs: list[Value]) -> bool:
        return {o.value_id for o in self.by_id[phi.id].operands} == {v.id for v in inputs}

    def find(self, vid: int) -> int:
        return self.by_id[vid].value_id

    def _replace(self, node: _Node, by: _Node) -> None:
        if node.dead:
            return
        while by.dead:
            by = self.by_id[by.value_id]
        for u in node.users:
            u.operands = [by if o is node else o for o in u.operands]
        for o in node.operands:
            o.users = [by if x is node else x for x in o.users]
        for vid in node.ids:
            self.by_id[vid] = by
        by.ids.extend(node.ids)
        node.ids = []
        node.dead = True

    def optimize(self) -> None:
        for n in self.nodes:
            for o in n.operands:
                o.users.append(n)
        changed = True
        while changed:
            changed = False
            checked: set[int] = set()
            for n in self.nodes:
                if not n.is_phi or n.dead:
                    continue
                n.operands = [o for o in n.operands if o is not n]
                n.users = [u for u in n.users if u is not n]
                if not n.operands:
                    continue
                first = n.operands[0]
                if all(o is first for o in n.operands):
                    self._replace(n, first)
                    changed = True
                    continue
                if id(n) in checked:
                    continue
                # A closure of phis fed by exactly one non-phi folds into it.
                seen: dict[int, _Node] = {}
                work = [n]
                non_phi: _Node | None = None
                ok = True
                while work:
                    t = work.pop(0)
                    if id(t) in seen:
                        continue
                    checked.add(id(t))
                    seen[id(t)] = t
                    work.extend(t.operands)
                    if not t.is_phi:
                        if non_phi is not None and non_phi is not t:
                            ok = False
                            break
                        non_phi = t
                if ok and non_phi is not None:
                    for t in seen.values():
                        if t.is_phi:
                            self._replace(t, non_phi)
                            changed = True


