"""Which lane a test runs in. `make test-fast` (pytest's --fast) leaves out every test marked with what it needs
beyond its own process, and every test marked slow. The needs are read from the fixtures a test uses and from what
its module and those fixtures' modules import, so a new test finds its lane without a list to keep."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

# What a test may need beyond its own process, as markers (pyproject.toml's [tool.pytest.ini_options] says what
# each means); `slow` is written by hand.
NEEDS = ("broker", "browser", "processes")
LEFT_OUT_OF_FAST = (*NEEDS, "slow")

# A fixture of this name, wherever it is defined, hands the test a broker.
NEEDED_BY_FIXTURE = {"broker": "broker"}
# What a module holding one of these names starts (matched by the object's module and name, so nothing is imported).
NEEDED_BY_IMPORT = {
    "services.app.broker.EmbeddedBroker": "broker",
    "services.app.broker.create_topics": "broker",
    "playwright.sync_api.sync_playwright": "browser",
    "bench.processes.WorkerProcess": "processes",
    "tests.support.upstack.Up": "processes",
    "tests.support.peers.Alertmanager": "processes",
    "tests.support.peers.Prometheus": "processes",
    "tests.support.alerting.worker_with_alertmanager": "processes",
}


def _full_name(value: Any) -> str:
    return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"


class NeedsReader:
    """The markers a test earns, from its fixtures' names and the globals of its module and its fixtures' modules
    (each module read once)."""

    def __init__(self) -> None:
        self._by_module: dict[str, frozenset[str]] = {}

    def of_namespace(self, namespace: dict[str, Any]) -> frozenset[str]:
        name = namespace.get("__name__", "")
        if name not in self._by_module:
            full_names = map(_full_name, namespace.values())
            self._by_module[name] = frozenset(NEEDED_BY_IMPORT[n] for n in full_names if n in NEEDED_BY_IMPORT)
        return self._by_module[name]

    def of_test(self, fixtures: Mapping[str, Sequence[Any]], module: ModuleType | None) -> set[str]:
        """``fixtures`` maps each fixture the test uses to its definitions (pytest's FixtureDefs); ``module`` is the
        test's own module."""
        found = {NEEDED_BY_FIXTURE[name] for name in fixtures if name in NEEDED_BY_FIXTURE}
        namespaces = [vars(module)] if module is not None else []
        for definitions in fixtures.values():
            namespaces += [d.func.__globals__ for d in definitions if hasattr(getattr(d, "func", None), "__globals__")]
        for namespace in namespaces:
            found |= self.of_namespace(namespace)
        return found
