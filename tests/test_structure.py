"""The shape of the package: imports flow one way.

Every import counts, the lazy ones inside functions included (a lazy import
still ties the two modules together); only annotations under
``if TYPE_CHECKING:`` are left out.  A circle among hloscope's modules is a
failure naming the modules in it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "hloscope"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: set[str]) -> set[str]:
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for c in child.orelse:
                    visit(c)
                continue
            if isinstance(child, ast.ImportFrom):
                base = package.split(".")
                if child.level:
                    base = base[:len(base) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                for alias in child.names:
                    full = f"{target}.{alias.name}"
                    if full in modules:
                        out.add(full)
                    elif target in modules:
                        out.add(target)
            elif isinstance(child, ast.Import):
                out.update(a.name for a in child.names if a.name in modules)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    paths = sorted(SRC.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imports(p, modules) for p in paths}
    # A package's __init__ is imported with any module under it: it may not be in a circle
    # with them, but importing its own submodules is how a package re-exports.
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")
                       or m == "hloscope"}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_circles():
    graph = {k: v - {"hloscope"} for k, v in _graph().items() if k != "hloscope"}
    assert _cycles(graph) == []


def test_the_benchmark_pipeline_flows_one_way():
    """measure -> result -> files -> scaling -> report -> renderers -> output: the result
    and the report data never import a renderer or the writers at module level, and no
    renderer imports the result."""
    g = _graph()
    b = "hloscope._bench."
    for renderer in ("_markdown", "_html", "_plot", "_report", "_scaling"):
        assert b + "_result" not in g[b + renderer], renderer
    assert b + "_output" not in g[b + "_files"] and b + "_output" not in g[b + "_jhp"]


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
