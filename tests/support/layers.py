"""The layer table: the stages in the event's path, and every import that points up it.

A module may import its own stage and any stage before it, never one after it. Imports are read from the
source (AST): module-level and function-local ones alike, except under ``if TYPE_CHECKING:``.

Run ``python -m tests.support.layers`` to print the table and any violation (exit status 1 if there is one).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.import_graph import cycles
from tests.support.paths import ROOT

PACKAGES = ("services", "streams", "clustering", "runbooks")

# In the event's path: the contract and the shared kernel; the client that produces events beside the user's
# system; ingest; the store; the stages that read it; the API and the stream wiring; the composition root.
STAGES: tuple[tuple[str, ...], ...] = (
    ("services", "services.contract", "services.core"),
    ("services.client",),
    ("services.ingest",),
    ("services.store",),
    ("services.rates",),
    ("services.alerts",),
    ("services.issues", "services.triage", "clustering"),
    ("runbooks",),
    ("services.evalset", "services.review"),
    ("services.api",),
    ("streams",),
    ("services.app",),
)
# Runs beside the user's system, so only the composition root (its CLI) may import it.
IMPORTED_ONLY_BY = {"services.client": ("services.app",)}


@dataclass(frozen=True)
class Import:
    path: str  # relative to the tree's root
    line: int
    module: str  # the importing module
    name: str  # the imported module

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({layer_of(self.module)}) imports {self.name}"


def source_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    """The longest stage prefix of ``module``'s dotted name."""
    candidates = [layer for stage in STAGES for layer in stage if module == layer or module.startswith(layer + ".")]
    if not candidates:
        raise LookupError(f"{module} belongs to no layer; add its folder to STAGES in {__file__}")
    return max(candidates, key=len)


def rank(module: str) -> int:
    layer = layer_of(module)
    return next(i for i, stage in enumerate(STAGES) if layer in stage)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def project_imports(tree: ast.AST, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """Every import of this project's packages in ``tree``, except under ``if TYPE_CHECKING:``."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node):
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                found.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            elif node.module:
                found.append((node.lineno, node.module))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def imports(root: Path = ROOT) -> list[Import]:
    found = []
    for path in source_files(root):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), str(path))
        found += [
            Import(str(path.relative_to(root)), line, module, name)
            for line, name in project_imports(tree, module, path.name == "__init__.py")
        ]
    return found


def violation(imp: Import) -> str | None:
    """Why ``imp`` points the wrong way, or None."""
    if rank(imp.name) > rank(imp.module):
        return f"{imp}: {layer_of(imp.name)} comes later in the event's path"
    for layer, importers in IMPORTED_ONLY_BY.items():
        if layer_of(imp.name) == layer and layer_of(imp.module) not in (layer, *importers):
            return f"{imp}: only {', '.join(importers)} may import {layer}"
    return None


def violations(found: list[Import]) -> list[str]:
    return [v for imp in found if (v := violation(imp)) is not None]


def package_cycles(found: list[Import]) -> list[list[str]]:
    """Packages (layers) that import each other, directly or round a loop: a stage may import its own stage, but
    two packages of one stage still import one way only (issue 52: issues and triage did both)."""
    graph: dict[str, set[str]] = {layer: set() for stage in STAGES for layer in stage}
    for imp in found:
        if layer_of(imp.module) != layer_of(imp.name):
            graph[layer_of(imp.module)].add(layer_of(imp.name))
    return cycles(graph)


def table() -> str:
    width = max(len(layer) for stage in STAGES for layer in stage)
    rows = [f"{i:>2}  {' · '.join(stage)}" for i, stage in enumerate(STAGES)]
    return "\n".join([f"{'':>2}  {'stage (imports only itself and the ones above it)':<{width}}", *rows])


def main() -> int:
    print(table())
    found = imports()
    problems = violations(found)
    print(f"\n{len(problems)} import(s) against the order" + (":" if problems else "."))
    print("\n".join(problems))
    loops = package_cycles(found)
    print(f"{len(loops)} package cycle(s)" + (":" if loops else "."))
    print("\n".join(" <-> ".join(loop) for loop in loops))
    return 1 if problems or loops else 0


if __name__ == "__main__":
    sys.exit(main())
