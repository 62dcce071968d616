"""`make test-fast` runs tests/unit with --fast, which leaves out every test that needs a broker, a browser or other
processes, and every test marked slow (tests/support/lanes.py), and keeps the rest."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from services.app.broker import EmbeddedBroker
from tests.support.lanes import NeedsReader
from tests.support.paths import ROOT

# Files whose needs are known: every test of the first uses the broker fixture, the second drives Chromium, the third
# starts Alertmanagers (and no broker), the fourth is marked slow as a module; the last needs nothing.
BROKER = "tests/integration/test_producer.py"
BROWSER = "tests/e2e/test_review_browser.py"
PROCESSES = "tests/integration/test_team_pages.py"
SLOW = "tests/unit/alerts/test_backtest_seasonal.py"
PLAIN = "tests/unit/store/test_bind.py"

# A pytest plugin for the child run: the tests the lane keeps and those it leaves out, with their fixtures.
PROBE = """
import json, os

LEFT_OUT = {}


def pytest_deselected(items):
    LEFT_OUT.update({item.nodeid: sorted(item.fixturenames) for item in items})


def pytest_collection_finish(session):
    kept = {item.nodeid: sorted(item.fixturenames) for item in session.items}
    with open(os.environ["LANE_PROBE_OUT"], "w") as out:
        json.dump({"kept": kept, "left_out": LEFT_OUT}, out)
"""


def fast_lane_args() -> list[str]:
    """The pytest options of the Makefile's test-fast recipe, without its workers and its paths."""
    recipe = re.search(r"^test-fast:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None, "the Makefile has no test-fast target"
    (pytest_line,) = [line for line in recipe.group(1).splitlines() if "-m pytest" in line]
    args = pytest_line.split("-m pytest", 1)[1].split()
    assert args[-1] == "tests/unit", pytest_line
    workers = {"-n", "2", "--dist", "loadfile"}
    return [a for a in args[:-1] if a not in workers]


def collect(tmp_path: Path, *paths: str) -> dict[str, dict[str, list[str]]]:
    (tmp_path / "lane_probe.py").write_text(PROBE)
    out = tmp_path / "lane.json"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LANE_PROBE_OUT": str(out)}
    args = [*fast_lane_args(), "-p", "lane_probe", "--collect-only", *paths]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


def in_file(nodeids, path: str) -> list[str]:
    return [n for n in nodeids if n.startswith(path + "::")]


@pytest.mark.slow  # a child pytest collecting five files
def test_the_fast_lane_leaves_out_broker_browser_process_and_slow_tests_and_keeps_the_rest(tmp_path):
    lane = collect(tmp_path, BROKER, BROWSER, PROCESSES, SLOW, PLAIN)
    kept, left_out = lane["kept"], lane["left_out"]
    using_the_broker = [n for n, fixtures in {**kept, **left_out}.items() if "broker" in fixtures]
    assert using_the_broker and not [n for n in using_the_broker if n in kept]
    for path in (BROKER, BROWSER, PROCESSES, SLOW):
        assert in_file(left_out, path) and not in_file(kept, path), path
    assert in_file(kept, PLAIN) and not in_file(left_out, PLAIN)


def test_a_module_is_marked_by_what_it_imports_and_a_test_by_its_fixtures():
    reader = NeedsReader()
    starts_a_broker = {"__name__": "planted_broker", "EmbeddedBroker": EmbeddedBroker}
    runs_commands = {"__name__": "planted_plain", "subprocess": subprocess, "json": json}
    assert reader.of_namespace(starts_a_broker) == {"broker"}
    assert reader.of_namespace(runs_commands) == set()
    assert reader.of_test({"broker": [], "tmp_path": []}, None) == {"broker"}
    assert reader.of_test({"tmp_path": []}, None) == set()
