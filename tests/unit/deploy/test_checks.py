"""`make test` checks style and types first: the checks it runs refuse a planted error of each kind."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

BIN = Path(sys.executable).parent
CLEAN = '"""A module as the tree keeps them."""\n\n\ndef double(n: int) -> int:\n    return 2 * n\n'


def lint_recipe() -> list[str]:
    """The commands of the Makefile's lint target, which `test` depends on."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test: .*\blint\b", makefile, re.M), "make test no longer runs the checks"
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    return [line.strip() for line in recipe.group(1).splitlines()]


def run(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / tool), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def planted(tmp_path: Path, text: str) -> Path:
    """A copy of the project's configuration beside one module of ``text``."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "planted.py").write_text(text)
    return tmp_path


def test_make_test_runs_ruff_the_formatter_check_and_mypy():
    recipe = lint_recipe()
    assert any("ruff check" in c for c in recipe) and any("ruff format --check" in c for c in recipe)
    assert any(c.endswith("mypy") for c in recipe)


def test_a_planted_style_error_fails_the_style_checks(tmp_path):
    root = planted(tmp_path, CLEAN)
    assert run("ruff", "check", "services", cwd=root).returncode == 0
    assert run("ruff", "format", "--check", "services", cwd=root).returncode == 0
    (root / "services" / "planted.py").write_text(CLEAN.replace("2 * n", "2 * n  # " + "why " * 30))
    long_line = run("ruff", "check", "services", cwd=root)
    assert long_line.returncode == 1 and "E501" in long_line.stdout
    (root / "services" / "planted.py").write_text(CLEAN.replace("return 2 * n", "return 2*n"))
    assert run("ruff", "format", "--check", "services", cwd=root).returncode == 1


@pytest.mark.slow
def test_a_planted_type_error_fails_mypy(tmp_path):
    root = planted(tmp_path, CLEAN)
    for package in ("streams", "clustering", "runbooks"):  # the packages [tool.mypy] names
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    assert run("mypy", cwd=root).returncode == 0
    (root / "services" / "planted.py").write_text(CLEAN + '\n\nHALF: int = double("2")\n')
    refused = run("mypy", cwd=root)
    assert refused.returncode == 1 and 'incompatible type "str"; expected "int"' in refused.stdout


@pytest.mark.slow
def test_the_contract_kernel_rates_and_alerts_are_checked_strictly(tmp_path):
    root = planted(tmp_path, CLEAN)
    for package in ("streams", "clustering", "runbooks"):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    untyped = "def double(n):\n    return 2 * n\n"
    (root / "services" / "__init__.py").write_text("")
    (root / "services" / "loose.py").write_text(untyped)  # default mode elsewhere: allowed
    assert run("mypy", cwd=root).returncode == 0
    for package in ("contract", "core", "rates", "alerts"):
        (root / "services" / package).mkdir()
        (root / "services" / package / "__init__.py").write_text("")
        (root / "services" / package / "planted.py").write_text(untyped)
    refused = run("mypy", cwd=root)
    assert refused.returncode == 1
    for package in ("contract", "core", "rates", "alerts"):
        assert f"services/{package}/planted.py:1: error: Function is missing a type annotation" in refused.stdout
