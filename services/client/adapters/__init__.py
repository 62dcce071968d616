"""Adapters: verifier outputs teams already have, turned into contract verdict events.

Each adapter is a module with three pure functions:

- ``to_events(record, *, route, line, now=None) -> list[dict]``: checked contract events;
- ``audit(record, events, *, line) -> list[str]``: warnings about the source's own
  summary figures (e.g. a ``hallucination_rate`` that its claims do not add up to);
- ``looks_like(record) -> bool``: the record has this format's signature fields
  (used to refuse files that mix formats);

and ``TIME_FIELDS``, the source fields that carry the event time (empty: the format
always carries one).

Bad records, labels, ids and times follow services/contract/records.py, whose helpers the adapters share.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType

MAX_CLAIMS_PER_RECORD = 10_000

_MODULES = {
    "judge-card": "services.client.adapters.judge_card",
    "pipeline": "services.client.adapters.pipeline",
    "monitor-record": "services.client.adapters.monitor_record",
    "fever": "services.client.adapters.fever",
    "faithfulness": "services.client.adapters.faithfulness",
    "otel": "services.client.adapters.otel",
}
FORMATS = tuple(_MODULES)


@dataclass(frozen=True)
class Adapter:
    name: str
    module: ModuleType

    @property
    def description(self) -> str:
        return self.module.DESCRIPTION

    def to_events(self, record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
        return self.module.to_events(record, route=route, line=line, now=now)

    def audit(self, record: dict, events: list[dict], *, line: int) -> list[str]:
        return self.module.audit(record, events, line=line)

    def looks_like(self, record: dict) -> bool:
        return self.module.looks_like(record)

    def stamped(self, record: dict) -> bool:
        """The record carries no time of its own, so its events get the conversion time."""
        fields = self.module.TIME_FIELDS
        return bool(fields) and all(record.get(f) is None for f in fields)


def get_adapter(name: str) -> Adapter:
    if name not in _MODULES:
        raise KeyError(f"unknown format {name!r}; use one of: {', '.join(FORMATS)}")
    return Adapter(name, importlib.import_module(_MODULES[name]))
