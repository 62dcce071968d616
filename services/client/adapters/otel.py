"""OpenTelemetry files as verdict events: one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``)
or ``ExportLogsServiceRequest`` (``{"resourceLogs": [...]}``) per line, as the Collector's file exporter writes them.

The mapping is the OTLP intake's (services/contract/otlp.py): spans that carry per-claim verdicts and
``gen_ai.evaluation.result`` events. A line with a record that cannot become an event is refused whole, naming
the record; records that carry no verdicts are skipped.
"""

from __future__ import annotations

from datetime import datetime

from services.contract import otlp

NAME = "otel"
DESCRIPTION = "OTLP/JSON spans with claimwatch.claims.N.* attributes, or gen_ai.evaluation.result events"
TIME_FIELDS: tuple[str, ...] = ()  # every span and log record carries its own time


def looks_like(record: dict) -> bool:
    return otlp.signal_of(record) is not None


def to_events(record: dict, *, route: str | None, line: int, now: datetime | None = None) -> list[dict]:
    signal = otlp.signal_of(record) or "traces"  # neither: the error names resourceSpans
    mapped = otlp.map_request(record, signal, route=route, line=line)
    if mapped.refused:
        raise mapped.refused[0].error
    return mapped.events


def audit(record: dict, events: list[dict], *, line: int) -> list[str]:
    return []
