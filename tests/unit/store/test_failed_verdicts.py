"""The failed verdicts are one fact, defined once: services/contract/model.py (FAILED_VERDICTS, FAILED_VERDICT_ORDER).

Python imports them. The store's SQL binds them ({failed:Array(String)}), so no store module should spell them out;
the shipped migrations cannot import anything, so their views do. These tests read every SQL site that lists failed
verdicts (the views and tables the migrations leave in force, and every string in the store's Python) and check each
list is the contract's set; and that no Python module outside the contract keeps its own copy of the set.
The last tests plant wrong lists and check they are caught.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from services.contract.model import FAILED_VERDICT_ORDER, FAILED_VERDICTS
from services.store.migrate import _migrations, statements
from tests.support.paths import ROOT

PACKAGES = ("services", "streams", "clustering", "runbooks")
CONTRACT = ROOT / "services" / "contract" / "model.py"

_QUOTED = r"'(?:[^'\\]|\\.)*'"
_LIST = re.compile(rf"[(\[]\s*({_QUOTED}(?:\s*,\s*{_QUOTED})+)\s*[)\]]")  # ('a', 'b', ...) or ['a', 'b', ...]
_ITEM = re.compile(r"'((?:[^'\\]|\\.)*)'")
_OBJECT = re.compile(
    r"^\s*(CREATE|DROP|ALTER)\s+(?:OR\s+REPLACE\s+)?(?:MATERIALIZED\s+VIEW|VIEW|TABLE|DICTIONARY)\s+"
    r"(IF\s+(?:NOT\s+)?EXISTS\s+)?([\w.]+)",
    re.IGNORECASE,
)


def failed_lists(sql: str) -> list[tuple[str, ...]]:
    """Every literal list in ``sql`` that names two or more failed verdicts: a failed-verdict list, right or wrong."""
    lists = (tuple(_ITEM.findall(m[1])) for m in _LIST.finditer(sql))
    return [items for items in lists if len(FAILED_VERDICTS.intersection(items)) >= 2]


def in_force(migrations: list[tuple[int, str, str]]) -> dict[str, list[str]]:
    """Each view or table the migrations leave, with the statements that define it now: its CREATE (a CREATE ...
    IF NOT EXISTS of a name that exists changes nothing) and the ALTERs after it. A DROP forgets the name."""
    current: dict[str, list[str]] = {}
    for _version, _name, sql in migrations:
        for statement in statements(sql):
            m = _OBJECT.match(statement)
            if not m:
                continue
            verb, if_exists, name = m[1].upper(), m[2], m[3]
            if verb == "DROP":
                current.pop(name, None)
            elif verb == "ALTER":
                current.setdefault(name, []).append(statement)
            elif not (if_exists and name in current):
                current[name] = [statement]
    return current


def migration_sites(migrations: list[tuple[int, str, str]]) -> dict[str, list[tuple[str, ...]]]:
    return {
        f"migrations: {name}": found
        for name, stmts in in_force(migrations).items()
        if (found := [items for s in stmts for items in failed_lists(s)])
    }


def python_sql_sites(files: list[Path]) -> dict[str, list[tuple[str, ...]]]:
    """The failed-verdict lists in every string literal (f-string parts included) of ``files``."""
    sites = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (found := failed_lists(node.value)):
                sites[f"{path}:{node.lineno}"] = found
    return sites


def python_copies(files: list[Path]) -> list[str]:
    """Tuple, list and set literals of ``files`` whose items are exactly the failed verdicts: copies of the fact."""
    copies = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, (ast.Tuple, ast.List, ast.Set))
                and node.elts
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
            ):
                if {e.value for e in node.elts} == FAILED_VERDICTS:
                    copies.append(f"{path}:{node.lineno}")
    return copies


def wrong(sites: dict[str, list[tuple[str, ...]]]) -> dict[str, tuple[str, ...]]:
    return {
        where: items
        for where, found in sites.items()
        for items in found
        if set(items) != FAILED_VERDICTS or len(items) != len(FAILED_VERDICTS)
    }


def _store_files() -> list[Path]:
    return sorted((ROOT / "services" / "store").rglob("*.py"))


# -- the tree ------------------------------------------------------------------------------------------------------
def test_the_contract_orders_its_set():
    assert set(FAILED_VERDICT_ORDER) == FAILED_VERDICTS and len(FAILED_VERDICT_ORDER) == len(FAILED_VERDICTS)


def test_the_views_in_force_list_the_contracts_failed_verdicts():
    sites = migration_sites(_migrations())
    assert "migrations: rate_minute_mv" in sites, f"the parser found no failed-verdict list in rate_minute_mv: {sites}"
    assert not wrong(sites), f"lists that differ from services.contract.model.FAILED_VERDICTS: {wrong(sites)}"


def test_the_stores_sql_lists_the_contracts_failed_verdicts():
    sites = python_sql_sites(_store_files())
    assert not wrong(sites), (
        f"lists that differ from services.contract.model.FAILED_VERDICTS: {wrong(sites)}; "
        "bind them instead: {failed:Array(String)} with sorted(FAILED_VERDICTS)"
    )


def test_no_module_keeps_its_own_copy():
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) if p != CONTRACT]
    assert not python_copies(files), "import FAILED_VERDICTS or FAILED_VERDICT_ORDER from services.contract.model"


# -- the test of the test: planted lists ---------------------------------------------------------------------------
MISSING_STALE = "arrayCount(v -> v IN ('unsupported', 'contradicted', 'overreach', 'no_source'), verdicts) AS n_failed"
RIGHT = "arrayCount(v -> v IN ('unsupported', 'contradicted', 'overreach', 'stale', 'no_source'), verdicts) AS n_failed"


def _view(body: str) -> str:
    return f"CREATE MATERIALIZED VIEW IF NOT EXISTS rate_minute_mv TO rate_minute AS\nSELECT {body}\nFROM events;\n"


def test_a_view_missing_stale_is_caught():
    sites = migration_sites(
        [(1, "ingest", _view(RIGHT)), (2, "planted", "DROP VIEW IF EXISTS rate_minute_mv;\n" + _view(MISSING_STALE))]
    )
    assert set(wrong(sites)) == {"migrations: rate_minute_mv"}


def test_a_superseded_view_is_not_a_site_and_a_no_op_create_changes_nothing():
    dropped = [(1, "old", _view(MISSING_STALE)), (2, "new", "DROP VIEW IF EXISTS rate_minute_mv;\n" + _view(RIGHT))]
    assert migration_sites(dropped) and not wrong(migration_sites(dropped))
    kept = [(1, "old", _view(MISSING_STALE)), (2, "no_op", _view(RIGHT))]  # IF NOT EXISTS, no DROP: the old stays
    assert wrong(migration_sites(kept))


def test_a_store_string_missing_stale_is_caught(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        f'RIGHT = "{RIGHT}"\n\ndef q(store, x):\n    return store.query(f"SELECT {{x}}, {MISSING_STALE}")\n'
    )
    assert list(wrong(python_sql_sites([planted]))) == [f"{planted}:4"]
    assert failed_lists("has(['stale', 'no_source'], v)") == [("stale", "no_source")]  # array literals are lists too
    assert failed_lists("countEqual(verdicts, 'stale') AS stale") == []  # one verdict is not a list


def test_a_copy_in_python_is_caught(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'FIELDS = ("unsupported", "contradicted", "overreach", "stale", "no_source")\nSOME = ("stale", "no_source")\n'
    )
    assert python_copies([planted]) == [f"{planted}:1"]
