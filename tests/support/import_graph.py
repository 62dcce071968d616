"""A package's import graph, read from its source, and the cycles in it.

Only module-level imports count: those a module runs when it is imported, including any under
``if TYPE_CHECKING:``. A cycle that only the type checker follows still ties the modules
together. An import inside a function or class body is left out: it runs later, and it is the
usual way to break a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(tree: ast.Module, module: str, is_package: bool = False) -> list[tuple[str, ...]]:
    """What a module imports at module level, each as the names it may be, submodule first: ``from a import b``
    is ``("a.b", "a")`` (the module ``a.b``, or a name in ``a``), ``import a.b`` is ``("a.b",)``."""
    found: list[tuple[str, ...]] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Import):
                found.extend((alias.name,) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from this module's package, up level - 1 packages
                    package = module.split(".") if is_package else module.split(".")[:-1]
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                found.extend((f"{base}.{alias.name}", base) for alias in node.names)
            for block in ("body", "orelse", "finalbody"):  # if, try, with, for and while run at module level too
                visit(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                visit(handler.body)

    visit(tree.body)
    return found


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports at module level; ``root`` holds ``package``'s top folder."""
    paths = {module_name(p, root): p for p in sorted((root / package.replace(".", "/")).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        imports = module_level_imports(ast.parse(path.read_text(), str(path)), module, path.name == "__init__.py")
        targets = (next((name for name in names if name in paths), None) for names in imports)
        graph[module] = {name for name in targets if name is not None and name != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each strongly connected component of more than one module, sorted (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:  # recursive: a package's modules are far fewer than the recursion limit
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)
