"""Source records turned into contract verdict events: the checks and the identity rules every mapping shares
(the file adapters in services/client/adapters/ and the OTLP intake in services/contract/otlp.py).

Bad records raise RecordError naming the line and the source field. Labels are
mapped through explicit tables; an unknown label is an error, never a guess.

Ids and times are taken as the tool emits them, never required when the rates do not
need them:

- the event id is ``uuid5(EVENT_ID_NAMESPACE, "<format>/<own id>")`` when the record has
  its own id. Without one (absent, null or ""), the identity is ``sha256:<hex>@<line>``:
  the first 32 hex digits of the SHA-256 of the record as compact UTF-8 JSON with sorted
  keys (whitespace and key order do not matter), and its 1-based line number (blank
  lines counted). Converting the same file twice gives the same ids, which the store
  counts once; identical lines (one answer judged alike for two users) stay two
  events. Editing lines above a record changes its id: records that will be re-sent
  from edited files need their own id;
- a record without a time gets the conversion time ``now`` (the CLI's --observed-at,
  or the wall clock with a warning).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from services.contract.decode import validate_event
from services.contract.errors import RecordError
from services.contract.model import SCHEMA, parse_timestamp
from services.contract.rejection import ContractError

# Fixed namespace: event ids derived from source ids must never change between releases.
EVENT_ID_NAMESPACE = uuid.UUID("0b7c4d1e-6f0a-5c1b-9a57-c1a1a1c0ffee")


def require(record: Mapping[str, Any], field: str, kind: type | tuple[type, ...], line: int, *, where: str = "") -> Any:
    """The field's value, or RecordError naming the line and the field."""
    path = f"{where}{field}"
    if not isinstance(record, Mapping):
        raise RecordError.at(
            line, where.rstrip(".") or "$", f"expected an object, got {type(record).__name__}", "wrong_type"
        )
    if field not in record or record[field] is None:
        raise RecordError.at(line, path, "required field is missing", "missing_field")
    return check_type(record[field], kind, line, path)


def optional(
    record: Mapping[str, Any], field: str, kind: type | tuple[type, ...], line: int, *, where: str = ""
) -> Any:
    value = record.get(field)
    return None if value is None else check_type(value, kind, line, f"{where}{field}")


def check_type(value: Any, kind: type | tuple[type, ...], line: int, path: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int in Python, never in a source format.
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        names = " or ".join(
            {
                str: "a string",
                int: "an integer",
                float: "a number",
                list: "a list",
                dict: "an object",
                bool: "true/false",
            }.get(k, k.__name__)
            for k in kinds
        )
        raise RecordError.at(
            line, path, f"expected {names}, got {type(value).__name__} {str(value)[:40]!r}", "wrong_type"
        )
    return value


def label(value: Any, table: Mapping[str, str], line: int, path: str) -> str:
    """Map a source label through an explicit table (case-insensitive); unknown labels are errors."""
    key = value.lower() if isinstance(value, str) else value
    if not isinstance(key, str) or key not in table:
        accepted = ", ".join(sorted(set(table)))
        raise RecordError.at(line, path, f"unknown label {value!r}; accepted: {accepted}", "unknown_label")
    return table[key]


def timestamp(value: Any, line: int, path: str) -> str:
    """An RFC 3339 timestamp with offset, as the contract wants it; naive times are refused, not guessed."""
    check_type(value, str, line, path)
    try:
        parse_timestamp(value)
    except Exception as exc:  # the contract's Fault carries the specific reason
        raise RecordError.at(
            line,
            path,
            f"{exc}; the contract needs RFC 3339 with a UTC offset, e.g. 2026-11-21T09:14:03Z",
            "bad_timestamp",
        ) from None
    return str(value)


def event_time(record: Mapping[str, Any], fields: tuple[str, ...], line: int, now: datetime | None) -> str:
    """The first present time field, else ``now`` (conversion time), else an error naming the fields."""
    for field in fields:
        if record.get(field) is not None:
            return timestamp(record[field], line, field)
    if now is not None:
        return stamp(now)
    raise RecordError.at(
        line,
        fields[0],
        f"required field is missing (one of {', '.join(fields)}); or pass a "
        "conversion time (now=...) to stamp records that have none",
        "missing_field",
    )


def stamp(now: datetime) -> str:
    """The conversion time as an event time (UTC, milliseconds)."""
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def derived_event_id(fmt: str, source_id: str) -> str:
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{fmt}/{source_id}"))


def identity(record: Mapping[str, Any], field: str, line: int) -> str:
    """The record's own id (``field``), else ``sha256:<content>@<line>``: see the module's docstring."""
    value = optional(record, field, (str, int), line)
    if value is not None and value != "":
        return str(value)
    try:
        content = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:  # only records built in Python get here
        raise RecordError.at(
            line, field, f"missing, and the record is not JSON to derive one from ({exc})", "missing_field"
        ) from None
    return f"sha256:{hashlib.sha256(content).hexdigest()[:32]}@{line}"


def pick_route(route: str | None, line: int) -> str:
    if not route:
        raise RecordError.at(line, "route", "this format carries no route; pass one (--route ROUTE)", "missing_field")
    return route


def finish(event: dict[str, Any], line: int) -> dict[str, Any]:
    """Fill ``schema``, check the event against the contract, return it in canonical form."""
    event = {"schema": SCHEMA, **{k: v for k, v in event.items() if v not in (None, {}, "")}}
    try:
        checked = validate_event(event)
    except ContractError as exc:
        problem = exc.rejection.problems[0]
        raise RecordError.at(
            line,
            f"event.{problem.path}",
            f"{problem.message} (contract rule {problem.rule})",
            f"contract:{problem.rule}",
        ) from None
    out = checked.to_json_dict()
    if out.get("signals") == {"cherry_pick": []}:
        del out["signals"]
    # Optional parts the source did not fill stay out of the event, as the contract allows.
    return {k: v for k, v in out.items() if k == "claims" or v not in ({}, [])}


def rate_mismatch(
    stated: Any, failed: int, total: int, line: int, field: str, *, tolerance: float = 0.005
) -> list[str]:
    """A warning when a source's own rate disagrees with its claims (beyond rounding)."""
    if isinstance(stated, bool) or not isinstance(stated, (int, float)):
        return [f"line {line}: {field} is {stated!r}, not a number; ignored"]
    if total == 0:
        return [] if stated == 0 else [f"line {line}: {field} says {stated} but the record has no checkable claims"]
    computed = failed / total
    if abs(stated - computed) > tolerance:
        return [
            f"line {line}: {field} says {stated} but the claims give {failed}/{total} = {computed:.3f}; "
            "the events carry the per-claim verdicts, not the stated figure"
        ]
    return []
