"""The input of clustering: one failing claim, from an offline line, a verdict event or a store row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from services.contract.decode import validate_event
from services.contract.errors import RecordError
from services.contract.model import FAILED_VERDICTS, VerdictEvent, canonical_verdict, json_object
from services.contract.rejection import ContractError


@dataclass(frozen=True)
class FailingClaim:
    id: str
    text: str | None
    question: str | None = None
    answer_excerpt: str | None = None
    route: str | None = None
    verdict: str | None = None
    stage: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    span: str | None = None
    event_id: str | None = None
    observed_at: datetime | None = None
    signals: Mapping[str, Any] = field(default_factory=dict)
    source_id: str | None = None  # the source the claim was checked against (names contradicted issues)

    def field_text(self, name: str) -> str | None:
        """The text of one embeddable field: ``claim``, ``question``, ``answer`` or ``span``."""
        try:
            return _FIELD_GETTERS[name](self)
        except KeyError:
            raise RecordError(f"unknown embedding field {name!r}; use one of {sorted(_FIELD_GETTERS)}") from None

    @classmethod
    def from_event(cls, event: VerdictEvent) -> list[FailingClaim]:
        """The failed claims of one verdict event, ids ``{event_id}:{claim_idx}``."""
        signals = json_object(event.signals)
        return [
            cls(
                id=f"{event.event_id}:{idx}",
                text=claim.text,
                question=event.query.text,
                answer_excerpt=_excerpt(event.answer.text),
                route=event.route,
                verdict=claim.verdict,
                stage=event.first_failed_stage,
                versions=dict(event.versions),
                span=claim.span,
                event_id=event.event_id,
                observed_at=event.observed_at,
                signals=signals,
                source_id=claim.source_id,
            )
            for idx, claim in enumerate(event.claims)
            if claim.failed
        ]

    @classmethod
    def from_offline_line(cls, data: Mapping[str, Any], line_no: int | None = None) -> list[FailingClaim]:
        """One JSONL line: a verdict event (has ``schema``) or a ``{"id", "text", ...}`` record.

        Returns a list because one event holds any number of failed claims (possibly none).
        """
        where = f"line {line_no}: " if line_no is not None else ""
        if not isinstance(data, Mapping):
            raise RecordError(f"{where}expected a JSON object, got {type(data).__name__}")
        if "schema" in data:
            try:
                return cls.from_event(validate_event(dict(data)))
            except ContractError as exc:
                raise RecordError(f"{where}invalid verdict event: {exc}") from exc
        return [cls._from_record(data, where)]

    @classmethod
    def _from_record(cls, data: Mapping[str, Any], where: str) -> FailingClaim:
        claim_id = data.get("id")
        if not isinstance(claim_id, (str, int)) or isinstance(claim_id, bool) or str(claim_id) == "":
            raise RecordError(f'{where}field "id" is missing or not a string; give every record a unique "id"')
        for name in ("text", "question", "route", "stage", "answer_excerpt", "span", "event_id", "source_id"):
            value = data.get(name)
            if value is not None and not isinstance(value, str):
                raise RecordError(f'{where}field "{name}" must be a string or null, got {type(value).__name__}')
        versions = data.get("versions") or {}
        if not isinstance(versions, Mapping) or not all(isinstance(v, str) for v in versions.values()):
            raise RecordError(f'{where}field "versions" must be an object of strings, e.g. {{"model": "gen-2026-10"}}')
        verdict = data.get("verdict")
        if verdict is not None:
            try:
                verdict = canonical_verdict(str(verdict))
            except ValueError:
                raise RecordError(
                    f'{where}field "verdict" has unknown value {verdict!r}; use one of {sorted(FAILED_VERDICTS)}'
                ) from None
        observed_at = data.get("observed_at")
        if observed_at is not None:
            try:
                observed_at = datetime.fromisoformat(str(observed_at))
            except ValueError:
                raise RecordError(f'{where}field "observed_at" is not an ISO 8601 timestamp: {observed_at!r}') from None
        return cls(
            id=str(claim_id),
            text=data.get("text"),
            question=data.get("question"),
            answer_excerpt=data.get("answer_excerpt"),
            route=data.get("route"),
            verdict=verdict,
            stage=data.get("stage"),
            versions=dict(versions),
            span=data.get("span"),
            event_id=data.get("event_id"),
            observed_at=observed_at,
            signals=dict(data.get("signals") or {}),
            source_id=data.get("source_id"),
        )

    @classmethod
    def from_claims_row(cls, row: Mapping[str, Any]) -> FailingClaim:
        """A row of the ClickHouse ``claims`` table (migrations/001_baseline.sql); empty strings mean absent."""
        observed_at = row.get("observed_at")
        if isinstance(observed_at, str):
            observed_at = datetime.fromisoformat(observed_at)
        signals = row.get("signals") or "{}"
        return cls(
            id=f"{row['event_id']}:{row['claim_idx']}",
            text=row.get("text") or None,
            question=row.get("query_text") or None,
            answer_excerpt=_excerpt(row.get("answer_text") or None),
            route=row.get("route") or None,
            verdict=row.get("verdict") or None,
            stage=row.get("first_failed_stage") or None,
            versions=dict(row.get("versions") or {}),
            span=row.get("span") or None,
            event_id=row.get("event_id"),
            observed_at=observed_at,
            signals=orjson.loads(signals) if isinstance(signals, (str, bytes)) else dict(signals),
            source_id=row.get("source_id") or None,
        )


def _excerpt(text: str | None, limit: int = 500) -> str | None:
    return None if text is None else text[:limit]


_FIELD_GETTERS = {
    "claim": lambda c: c.text,
    "question": lambda c: c.question,
    "answer": lambda c: c.answer_excerpt,
    "span": lambda c: c.span,
}
EMBED_FIELDS = tuple(_FIELD_GETTERS)
