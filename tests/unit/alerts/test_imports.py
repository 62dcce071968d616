"""The alerts modules import one another without a cycle, and its rooms one way (module-level imports, read from the
source)."""

from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import cycles, import_graph
from tests.support.paths import ROOT


def test_no_import_cycle_among_the_alerts_modules():
    graph = import_graph(ROOT, "services.alerts")
    assert (
        "services.alerts.detection.config" in graph and graph["services.alerts.detection.config"] == set()
    )  # the settings import no stage
    assert {"services.alerts.detection.config", "services.alerts.detection.baseline"} <= graph[
        "services.alerts.detection.engines"
    ]
    assert cycles(graph) == []


# The rooms of services/alerts, in the order they may import one another: each only the ones before it.
ROOMS = ("lifecycle", "detection", "explain", "notify", "evaluation", "oncall")


def room_of(module: str) -> str:
    """``services.alerts.<room>.<module>`` -> its room ('' for the package itself)."""
    return module.split(".")[2] if module.count(".") >= 2 else ""


def test_every_alerts_module_is_in_a_room_and_imports_only_the_rooms_before_it():
    graph = import_graph(ROOT, "services.alerts")
    assert {room_of(m) for m in graph} == {"", *ROOMS}, "a module outside the rooms (or a room not in ROOMS)"
    assert graph["services.alerts"] == set()  # the package imports nothing: no re-exports
    upward = [
        f"{module} imports {name}"
        for module, names in graph.items()
        for name in names
        if ROOMS.index(room_of(name)) > ROOMS.index(room_of(module))
    ]
    assert upward == []


def test_a_planted_cycle_is_found(tmp_path: Path):
    package = tmp_path / "planted"
    package.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from planted.b import thing\n",
        # only for the type checker
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n",
        "c.py": "try:\n    import planted.a\nexcept ImportError:\n    pass\n",
        "d.py": "import planted.a\n\ndef later():\n    from planted import d  # runs later: not an edge\n",
        "e.py": "from planted import f\n",
        "f.py": "class F:\n    from planted import e  # a class body: not counted either\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = import_graph(tmp_path, "planted")
    assert graph["planted.a"] == {"planted.b"} and graph["planted.b"] == {"planted.c"}
    assert graph["planted.c"] == {"planted.a"} and graph["planted.d"] == {"planted.a"}
    assert cycles(graph) == [["planted.a", "planted.b", "planted.c"]]
    assert cycles({"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [["x", "y"]]
    assert cycles({"x": {"y"}, "y": set()}) == []
