"""Silences with Alertmanager-style label matchers, and duration parsing.

A silence mutes notifications for the alerts whose labels match all its
matchers while ``starts_at <= now < ends_at``. Unsilencing ends it early
(``expire``); nothing is deleted, so the history stays.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Protocol

import re2

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
MATCHER = re.compile(r"\s*(?P<name>[^=!~\s]*)\s*(?P<op>=~|!~|!=|=)\s*(?P<value>.*?)\s*")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
OPS = ("=", "!=", "=~", "!~")
MAX_SILENCE = timedelta(days=366)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is reported to the caller, not logged to stderr


class LabelRegex(Protocol):
    """What the silences use of a compiled RE2 pattern (google-re2 ships no type hints)."""

    def fullmatch(self, text: str) -> object | None: ...


@lru_cache(maxsize=1024)
def compile_label_regex(pattern: str) -> LabelRegex:
    """RE2, not ``re``: matching takes linear time, so a pattern such as ``(a|a)*b`` cannot hang the alerts."""
    compiled: LabelRegex = re2.compile(pattern, _RE2_OPTIONS)
    return compiled


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str
    value: str

    def __post_init__(self) -> None:
        _validate(self.name, self.op, self.value, str(self))

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.value}"

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.name, "")  # a missing label matches as the empty string, as in Alertmanager
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = compile_label_regex(self.value).fullmatch(actual) is not None  # anchored, as in Alertmanager
        return found if self.op == "=~" else not found


def _validate(name: str, op: str, value: str, shown: str) -> None:
    if not LABEL_NAME.fullmatch(name):
        raise ValueError(f"matcher '{shown}': label name {name!r} must match [a-zA-Z_][a-zA-Z0-9_]*")
    if op not in OPS:
        raise ValueError(f"matcher '{shown}': operator must be one of {', '.join(OPS)}")
    if op in ("=~", "!~"):
        try:
            compile_label_regex(value)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise ValueError(
                f"matcher '{shown}': invalid regex (RE2 syntax, no lookarounds or backreferences): {reason}"
            ) from None


def parse_matcher(text: str) -> Matcher:
    """``label=value``, ``label!=value``, ``label=~regex`` or ``label!~regex``; the value may be "quoted"."""
    if not isinstance(text, str):
        raise ValueError(f"matcher {text!r}: must be a string such as route=billing-faq")
    found = MATCHER.fullmatch(text)
    if found is None or not found["name"]:
        raise ValueError(f"matcher '{text}': use label=value, label!=value, label=~regex or label!~regex")
    value = found["value"]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1].replace('\\"', '"')
    _validate(found["name"], found["op"], value, text)
    return Matcher(found["name"], found["op"], value)


def refuse_unknown_labels(matchers: Iterable[Matcher], known: Iterable[str]) -> None:
    """A matcher on a label no alert carries silences nothing (or, with !=, everything): most likely a typo."""
    names = sorted(set(known))
    for m in matchers:
        if m.name not in names:
            raise ValueError(f"matcher '{m}': no alert carries the label {m.name!r}; known labels: {', '.join(names)}")


def parse_duration(text: str, field: str = "duration") -> timedelta:
    """``90s``, ``30m``, ``2h``, ``1d`` or a sum such as ``1h30m``; positive and at most ``MAX_SILENCE``."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{field} {text!r}: use a number followed by s, m, h or d, such as 30m or 2h")
    cleaned = text.strip().lower()
    parts = DURATION_PART.findall(cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise ValueError(f"{field} '{text}': use a number followed by s, m, h or d, such as 30m or 2h")
    seconds = sum(float(n) * UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError(f"{field} '{text}': must be longer than zero")
    if seconds > MAX_SILENCE.total_seconds():  # checked before timedelta(), which overflows on huge values
        raise ValueError(
            f"{field} '{text}' is longer than the limit of {MAX_SILENCE.days} days; silence for less and renew it"
        )
    return timedelta(seconds=seconds)


def _aware(value: datetime, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValueError(f"silence {field} must be a timezone-aware datetime, got {value!r}")
    return value


@dataclass(frozen=True)
class Silence:
    silence_id: str
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    ended_by: str = ""  # who unsilenced it; empty while it runs or when it ran its course

    def __post_init__(self) -> None:
        _aware(self.starts_at, "starts_at")
        _aware(self.ends_at, "ends_at")
        if self.ends_at < self.starts_at:
            raise ValueError(
                f"silence ends_at {self.ends_at.isoformat()} is before starts_at {self.starts_at.isoformat()}"
            )
        if not self.matchers:
            raise ValueError("silence matchers: give at least one, such as route=billing-faq")
        if all(m.matches({}) for m in self.matchers):
            raise ValueError(
                "silence matchers all match an empty label set, so they would silence everything; "
                "add one such as route=billing-faq"
            )
        if not self.created_by.strip():
            raise ValueError("silence created_by: say who is silencing")
        if not self.comment.strip():
            raise ValueError("silence comment: say why")

    @classmethod
    def create(
        cls,
        matchers: Iterable[str | Matcher],
        starts_at: datetime,
        ends_at: datetime | None = None,
        duration: str | timedelta | None = None,
        created_by: str = "",
        comment: str = "",
    ) -> Silence:
        """Build from matcher texts; give ends_at or a duration such as '2h'. The id derives from the content."""
        parsed = tuple(m if isinstance(m, Matcher) else parse_matcher(m) for m in matchers)
        _aware(starts_at, "starts_at")
        if (ends_at is None) == (duration is None):
            raise ValueError("silence: give either ends_at or duration (such as 2h), not both or neither")
        if ends_at is None:
            assert duration is not None  # exactly one of the two is given, as checked above
            ends_at = starts_at + (duration if isinstance(duration, timedelta) else parse_duration(duration))
        # here, not in a router: a change made without the API (the CLI over the store) meets the same limits
        elif ends_at - starts_at > MAX_SILENCE:
            raise ValueError(f"ends_at is more than {MAX_SILENCE.days} days away; silence for less and renew it")
        elif ends_at <= starts_at - timedelta(seconds=1):
            raise ValueError("ends_at is in the past (before starts_at); give a time in the future or a duration")
        digest = hashlib.sha256("|".join([*map(str, parsed), starts_at.isoformat(), created_by]).encode()).hexdigest()
        return cls("s-" + digest[:16], parsed, starts_at, ends_at, created_by, comment)

    def is_active(self, now: datetime) -> bool:
        return self.starts_at <= now < self.ends_at

    def matches(self, labels: Mapping[str, str], now: datetime) -> bool:
        return self.is_active(now) and all(m.matches(labels) for m in self.matchers)

    def expire(self, now: datetime, by: str = "") -> Silence:
        """Unsilence: end it now, recording who did. One that has already ended keeps its end and who ended it."""
        if now >= self.ends_at:
            return self
        return replace(self, ends_at=max(self.starts_at, now), ended_by=by)

    def as_dict(self) -> dict[str, Any]:
        return {
            "silence_id": self.silence_id,
            "matchers": [str(m) for m in self.matchers],
            "starts_at": self.starts_at.isoformat(),
            "ends_at": self.ends_at.isoformat(),
            "created_by": self.created_by,
            "comment": self.comment,
            "ended_by": self.ended_by,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Silence:
        return cls(
            data["silence_id"],
            tuple(parse_matcher(m) for m in data["matchers"]),
            datetime.fromisoformat(data["starts_at"]),
            datetime.fromisoformat(data["ends_at"]),
            data["created_by"],
            data["comment"],
            data.get("ended_by", ""),
        )  # absent in older records
