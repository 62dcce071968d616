"""The traces list: stored claims searched by route, verdict, version, event time and text, one row per trace.

``GET /api/traces``, `claimwatch traces`, the ``/traces`` page and the assistant's ``search_traces`` show these read
models (services/core/readmodel.py). The filters are read here, once, into a ``TraceSearch`` the store runs
(services/store/traces.py); what is wrong with one is said in a plain sentence (ValueError: a 422 at the API).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from pydantic import Field

from services.contract.model import (
    CANONICAL_VERDICTS,
    FAILED_VERDICTS,
    MAX_KEY_CHARS,
    MAX_LABEL_CHARS,
    VERDICT_ALIASES,
    parse_timestamp,
)
from services.core.readmodel import Read
from services.rates.window import WindowError, parse_window
from services.store.traces import MAX_SEARCH_ROWS, SAMPLE_CHARS, TraceSearch

DEFAULT_RANGE = timedelta(hours=24)
ANY_FAILED = "failed"  # as a verdict filter: any of FAILED_VERDICTS
TRACES_PER_PAGE = 20
MAX_TEXT = 200  # characters of "claim text contains"
MAX_VERSIONS = 8  # key=value filters at once
_LENGTH = re.compile(r"\d+\s*[smhdSMHD]")
TIME_FORMS = "a length back from now (30m, 6h, 7d) or an RFC 3339 time with an offset (2026-11-21T09:00:00Z)"


class TraceClaimRead(Read):
    """One matched claim of the trace: a failed one when any matched claim failed, one with text before one without,
    else the earliest."""

    claim_key: str = Field(description="event_id:index, as issue membership names it")
    text: str = Field(description=f"the claim's text, its first {SAMPLE_CHARS} characters")
    verdict: str
    failed: bool


class TraceRowRead(Read):
    """One trace of the list; its figures count the claims that match the search."""

    trace_id: str
    route: str
    first_observed_at: datetime = Field(description="event time of its first matched claim")
    events: int = Field(description="answers (events) with a matched claim")
    claims: int = Field(description="matched claims")
    failed: int = Field(description="matched claims with a failed verdict")
    verdicts: list[str] = Field(description="the verdicts of its matched claims, in the contract's order")
    claim: TraceClaimRead


class TracePage(Read):
    """A page of the traces list and where it lies: ``total`` traces match, over [since, until)."""

    traces: list[TraceRowRead]
    total: int
    offset: int
    limit: int
    since: datetime
    until: datetime

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def after(self) -> int:
        return max(0, self.total - self.offset - len(self.traces))


def moment(text: str, now: datetime, name: str) -> datetime:
    """``text`` as a time: a length back from ``now`` (6h) or RFC 3339 with an offset."""
    text = text.strip()
    if _LENGTH.fullmatch(text):
        try:
            length = parse_window(text)
        except WindowError as exc:
            raise ValueError(f"{name} {text!r}: {exc}") from None
        assert length is not None, "'all' starts with a letter"
        return now - length
    try:
        at = parse_timestamp(text).astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{name} {text[:64]!r} is not a time: give {TIME_FORMS}") from None
    if not 1971 <= at.year <= 2105:  # what the store's event times can hold
        raise ValueError(f"{name} {text[:64]!r}: must fall between 1971 and 2105")
    return at


def time_range(since: str | None, until: str | None, now: datetime) -> tuple[datetime, datetime]:
    """[since, until): until defaults to now, since to a day before until (the store refuses more than 31 days)."""
    end = moment(until, now, "until") if until else now
    return (moment(since, now, "since") if since else end - DEFAULT_RANGE), end


def verdicts_of(given: Iterable[str]) -> tuple[str, ...]:
    """Verdict names (or their aliases: refuted, nei, ...; ``failed``: every failed verdict) as the contract's, in
    its order."""
    found: set[str] = set()
    for text in given:
        name = text.strip().lower()
        verdict = VERDICT_ALIASES.get(name)
        if name == ANY_FAILED:
            found |= FAILED_VERDICTS
        elif verdict is None:
            raise ValueError(
                f"unknown verdict {text[:64]!r}: use one of {', '.join(CANONICAL_VERDICTS)}, or {ANY_FAILED} "
                "(any failed verdict)"
            )
        else:
            found.add(verdict)
    return tuple(v for v in CANONICAL_VERDICTS if v in found)


def versions_of(given: Sequence[str]) -> dict[str, str]:
    """``key=value`` filters (model=gen-2026-11) as a map; each must hold in a matched claim's versions."""
    if len(given) > MAX_VERSIONS:
        raise ValueError(f"{len(given)} version filters: give at most {MAX_VERSIONS}")
    found: dict[str, str] = {}
    for text in given:
        key, equals, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key or not value:
            raise ValueError(f"version {text[:64]!r}: give key=value, e.g. model=gen-2026-11")
        if len(key) > MAX_KEY_CHARS or len(value) > MAX_LABEL_CHARS:
            raise ValueError(
                f"version {text[:64]!r}: a key is at most {MAX_KEY_CHARS} characters and a value {MAX_LABEL_CHARS}"
            )
        if found.get(key, value) != value:
            raise ValueError(f"version {key} is given twice ({found[key]} and {value}); a claim has one of them")
        found[key] = value
    return found


def search_of(
    now: datetime,
    route: str | None = None,
    verdicts: Sequence[str] = (),
    versions: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    text: str | None = None,
) -> TraceSearch:
    """The filters as given (query parameters, CLI options) read into a search, or a ValueError saying what is
    wrong with one."""
    start, end = time_range(since, until, now)
    text = (text or "").strip() or None
    if text is not None and len(text) > MAX_TEXT:
        raise ValueError(f"the claim text to look for is {len(text)} characters; give at most {MAX_TEXT}")
    search = TraceSearch(
        since=start,
        until=end,
        route=(route or "").strip() or None,
        verdicts=verdicts_of(verdicts),
        versions=versions_of(versions),
        text=text,
    )
    refused = search.refusal()  # an empty range, or one over 31 days
    if refused:
        raise ValueError(refused)
    return search


def page_limits(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_SEARCH_ROWS:
        raise ValueError(f"limit {limit}: give 1 to {MAX_SEARCH_ROWS} traces a page")
    if offset < 0:
        raise ValueError(f"offset {offset}: give 0 or more")


def trace_row(row: dict) -> TraceRowRead:
    """A store row (TraceRepository.search) as the list shows it."""
    text, verdict, event_id, index = row["sample"]
    return TraceRowRead(
        trace_id=row["trace_id"],
        route=row["route"],
        first_observed_at=datetime.fromisoformat(row["first_observed_at"]).replace(tzinfo=UTC),
        events=int(row["events"]),
        claims=int(row["claims"]),
        failed=int(row["failed"]),
        verdicts=[v for v in CANONICAL_VERDICTS if v in row["verdicts"]]
        + sorted(v for v in row["verdicts"] if v not in CANONICAL_VERDICTS),
        claim=TraceClaimRead(
            claim_key=f"{event_id}:{index}", text=text, verdict=verdict, failed=verdict in FAILED_VERDICTS
        ),
    )
