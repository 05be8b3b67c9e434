"""The layer rules of docs/architecture.md §7, read from the imports of src/moozi (every import statement,
those inside functions too): no import circles, no two folders that import each other, and the lower
layers never reach up."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
NEVER = {  # folder -> folders it must not import
    "eval": {"driver"}, "observe": {"driver"}, "workers": {"driver", "eval"}, "envs": {"driver"}, "web": {"driver"},
    "model": {"driver"}, "replay": {"driver"}, "config": {"eval"},
}


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """moozi module -> the moozi modules it imports. ``from X import Y`` counts ``X.Y`` when that is a module
    (its package ``X`` is its parent, loaded anyway), else ``X``."""
    paths = {_module(p): p for p in (SRC / "moozi").rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                subs = {f"{base}.{a.name}" for a in node.names} & paths.keys()
                found |= subs or {base}
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def _folder(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _cycles(import_graph()) == []


def test_no_two_folders_import_each_other_and_lower_layers_never_reach_up():
    edges: dict[tuple[str, str], list[str]] = {}
    for module, imported in import_graph().items():
        for other in imported:
            a, b = _folder(module), _folder(other)
            if a != b:
                edges.setdefault((a, b), []).append(f"{module} -> {other}")
    mutual = [(a, b) for a, b in edges if a < b and (b, a) in edges]
    assert mutual == [], {pair: edges[pair] + edges[pair[::-1]] for pair in mutual}
    broken = {(a, b): found for (a, b), found in edges.items() if b in NEVER.get(a, ())}
    assert broken == {}


def test_the_walker_sees_an_import_inside_a_function():
    graph = import_graph()
    assert "moozi.eval.perfect" in graph["moozi.hosts.acting"]  # imported inside ActingHost.__init__
