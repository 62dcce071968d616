"""The tree tells the event's path: imports point one way, only the store runs SQL, modules stay small.

These scan the source (AST, not text search), so a docstring that mentions a layer or a
keyword is not a violation, and a function-local import is.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from tests.support.paths import ROOT

PACKAGES = ("services", "streams", "clustering", "runbooks")
MAX_LINES = 400

# What each layer may import from this project (third-party imports are free). A module's
# layer is the longest prefix of its dotted name listed here. Order is the event's path:
# contract < core < store < stages < api < app, with streams wired by app only.
STAGES = ("services.ingest", "services.rates", "services.alerts", "services.issues", "services.evalset",
          "services.review", "services.triage")
BELOW_STAGES = ("services.contract", "services.core", "services.store", "clustering", "runbooks")
ALLOWED = {
    "services": (),
    "services.contract": ("services.contract",),
    "services.core": ("services.core",),
    "services.store": ("services.store", "services.contract", "services.core"),
    "clustering": ("clustering", "services.contract"),
    "runbooks": ("runbooks", "clustering", "services.contract"),
    **{stage: STAGES + BELOW_STAGES for stage in STAGES},
    "services.api": ("services.api",) + STAGES + BELOW_STAGES,
    "streams": ("streams",) + STAGES + BELOW_STAGES,
    "services.client": ("services.client", "services.contract", "services.core"),
    "services.app": PACKAGES,
}

SQL = re.compile(r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT INTO\b|\b(ALTER|CREATE|DROP|OPTIMIZE|TRUNCATE) TABLE\b"
                 r"|\bCREATE MATERIALIZED VIEW\b|\bSYSTEM (FLUSH|STOP|START)\b")
STORE_CALLS = {"query", "command", "insert"}


def source_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    candidates = [layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")]
    assert candidates, f"{module} belongs to no layer; add its folder to ALLOWED in {__file__}"
    return max(candidates, key=len)


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def project_imports(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Every import of this project's packages, anywhere in the module, except under `if TYPE_CHECKING:`."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if _type_checking_block(node):
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")[: -node.level] if not module.endswith("__init__") else module.split(".")
                found.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            elif node.module:
                found.append((node.lineno, node.module))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def parsed() -> list[tuple[Path, str, ast.AST]]:
    return [(p, module_name(p), ast.parse(p.read_text(), str(p))) for p in source_files()]


def test_imports_point_one_way():
    problems = []
    for path, module, tree in parsed():
        allowed = ALLOWED[layer_of(module)]
        for line, name in project_imports(tree, module):
            if not any(name == a or name.startswith(a + ".") for a in allowed):
                problems.append(f"{path.relative_to(ROOT)}:{line} ({layer_of(module)}) imports {name}")
    assert not problems, "imports against the layer order:\n" + "\n".join(problems)


def test_only_the_composition_root_imports_streams():
    importers = {module for _, module, tree in parsed() for _, name in project_imports(tree, module)
                 if name.split(".")[0] == "streams" and not module.startswith("streams")}
    assert importers and all(m.startswith("services.app") for m in importers), importers


def _is_docstring(parent: ast.AST, node: ast.AST) -> bool:
    body = getattr(parent, "body", None)
    return bool(body) and isinstance(body, list) and isinstance(body[0], ast.Expr) and body[0].value is node


def sql_sites(path: Path, tree: ast.AST) -> list[str]:
    sites = []
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            expr = parents.get(node)
            if not (isinstance(expr, ast.Expr) and _is_docstring(parents.get(expr), node)):
                sites.append(f"{path.relative_to(ROOT)}:{node.lineno}: SQL text {node.value[:60]!r}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STORE_CALLS
                and "store" in ast.unparse(node.func.value).lower()):
            sites.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node.func)}(...)")
    return sites


def test_only_the_store_runs_sql():
    sites = [s for path, module, tree in parsed() if not module.startswith("services.store")
             for s in sql_sites(path, tree)]
    assert not sites, "SQL outside services/store:\n" + "\n".join(sites)


def test_the_sql_scan_finds_sql_where_it_is():
    # The scan must see the store's own statements, or the test above proves nothing.
    store_sites = [s for path, module, tree in parsed() if module.startswith("services.store")
                   for s in sql_sites(path, tree)]
    assert len(store_sites) > 20
    planted = ast.parse('def f(store):\n    return store.query("SELECT count() FROM events")\n')
    assert len(sql_sites(ROOT / "planted.py", planted)) == 2


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_stay_small(path: Path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines; split it by responsibility"


def test_the_layer_table_covers_every_package():
    for _, module, _ in parsed():
        layer_of(module)  # raises for a folder nobody placed


def test_one_clock():
    readers = [f"{path.relative_to(ROOT)}:{node.lineno}" for path, module, tree in parsed()
               if module != "services.core.clock" for node in ast.walk(tree)
               if isinstance(node, ast.Call) and ast.unparse(node.func) in {"datetime.now", "datetime.utcnow", "time.time"}]
    assert not readers, "read the clock through services.core.clock (or take `now` as an argument):\n" + "\n".join(readers)
