"""The alerts modules import one another without a cycle (module-level imports, read from the source)."""

from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import cycles, import_graph
from tests.support.paths import ROOT


def test_no_import_cycle_among_the_alerts_modules():
    graph = import_graph(ROOT, "services.alerts")
    assert (
        "services.alerts.config" in graph and graph["services.alerts.config"] == set()
    )  # the settings import no stage
    assert {"services.alerts.config", "services.alerts.baseline"} <= graph["services.alerts.engines"]
    assert cycles(graph) == []


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
