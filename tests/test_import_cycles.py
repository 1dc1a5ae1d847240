"""No import cycle among the modules of ``pipeline/`` (docs/DESIGN.md: dependencies point one
way). Every import counts: at the top, inside a function (a lazy import that hides a cycle is
still one) and under ``if TYPE_CHECKING:``; ``from pipeline.x import y`` counts as an import of
``pipeline.x.y`` when ``y`` is a submodule, else of ``pipeline.x``. A package is not counted as
imported by its own submodules (Python imports it first, whatever they import)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pipeline"


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted name -> file, for every module and package under ``pipeline/``."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, source: str, known: set[str], is_package: bool) -> set[str]:
    """The modules of ``known`` that the module ``name`` (its ``source``) imports anywhere."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            subs = {f"{base}.{a.name}" for a in node.names} & known
            found |= subs | ({base} if len(subs) < len(node.names) else set())
    return {m for m in found if m in known and m != name}


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """module -> the project modules it imports, from each module's source (package names end
    in ``.__init__`` in the keys only to say they are packages)."""
    names = {n.removesuffix(".__init__") for n in sources}
    return {n.removesuffix(".__init__"): _imports(n.removesuffix(".__init__"), src, names,
                                                  n.endswith(".__init__"))
            for n, src in sources.items()}


def _sources(root: Path = ROOT) -> dict[str, str]:
    return {(n + ".__init__" if p.name == "__init__.py" else n): p.read_text()
            for n, p in modules(root).items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path ``a -> ... -> a``) per strongly connected component that has one
    (Tarjan's algorithm, iterative; components in sorted order of their first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        part.add(top)
                        if top == node:
                            break
                    components.append(part)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [_path_in(part, graph) for part in sorted(components, key=min)
            if len(part) > 1 or min(part) in graph[min(part)]]


def _path_in(part: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the first module of the component ``part`` (breadth first)."""
    start = min(part)
    previous: dict[str, str] = {}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & part):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"no cycle through {start} in {sorted(part)}")


def test_pipeline_has_no_import_cycle():
    found = cycles(import_graph(_sources()))
    assert not found, "import cycles in pipeline/ (one path per group of modules):\n" + "\n".join(
        " -> ".join(c) for c in found)


def test_the_check_sees_lazy_relative_and_submodule_imports():
    """The forms a cycle hides behind: an import inside a function, a relative one, a
    submodule named in ``from package import module``, one under TYPE_CHECKING."""
    sources = {
        "pipeline.__init__": "",
        "pipeline.report.__init__": "",
        "pipeline.report.a": "def f():\n    from pipeline.report import b\n",
        "pipeline.report.b": "from .c import value\n",
        "pipeline.report.c": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    import pipeline.report.a\n"),
        "pipeline.report.d": "from pipeline.report.a import f\n",
    }
    assert cycles(import_graph(sources)) == [
        ["pipeline.report.a", "pipeline.report.b", "pipeline.report.c", "pipeline.report.a"]]
    del sources["pipeline.report.c"]
    assert cycles(import_graph(sources)) == []
