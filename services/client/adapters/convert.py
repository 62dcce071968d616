"""Convert a JSONL file of verifier output into contract events: all of it, or nothing.

Nothing is half-written: events are spooled while the file is converted, and reach
the output only when every line converted, or when ``keep_good=True`` (then the good
lines are written and the failed ones reported). A file that mixes formats is
refused whole, unless each line names its format in ``format_field``.

Records without a time get ``now``; the report counts them (``stamped``), so a caller
that took ``now`` from the wall clock can say so and how to pin it.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

import orjson

from services.client.adapters import FORMATS, Adapter, get_adapter
from services.contract.errors import RecordError
from services.contract.records import stamp

SPOOL_BYTES = 32 << 20


class ConversionError(ValueError):
    """Bad arguments (unknown format, unreadable input); nothing was converted."""


@dataclass(frozen=True)
class LineFailure:
    line: int
    field: str
    message: str
    rule: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"

    def to_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "message": self.message, "rule": self.rule}


@dataclass
class ConversionReport:
    fmt: str | None
    lines: int = 0
    events: int = 0
    written: bool = False
    failures: list[LineFailure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    formats: dict[str, int] = field(default_factory=dict)
    stamped: int = 0  # records that carried no time
    stamped_at: str | None = None  # ... and the time their events got

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def mixed(self) -> bool:
        return any(f.rule == "mixed_format" for f in self.failures)

    def to_dict(self) -> dict:
        return {
            "format": self.fmt,
            "lines": self.lines,
            "events": self.events,
            "written": self.written,
            "formats": self.formats,
            "failures": [f.to_dict() for f in self.failures],
            "warnings": self.warnings,
            "stamped": self.stamped,
            "stamped_at": self.stamped_at,
        }

    def summary(self, limit: int = 20) -> str:
        head = (
            f"{self.fmt or 'per-line formats'}: {self.lines} lines, {self.events} events "
            f"{'written' if self.written else 'NOT written'}, {len(self.failures)} failed lines, "
            f"{len(self.warnings)} warnings"
        )
        out = [head] + [f"  error: {f}" for f in self.failures[:limit]]
        if self.stamped:
            out.append(f"  {self.stamped} records carry no time: their events have observed_at {self.stamped_at}")
        if len(self.failures) > limit:
            out.append(f"  ... and {len(self.failures) - limit} more failed lines")
        out += [f"  warning: {w}" for w in self.warnings[:limit]]
        if self.failures and not self.written:
            out.append(
                "  nothing was written: fix the lines above, or pass --keep-good to write the good lines"
                if not self.mixed
                else "  nothing was written: split the file by format, or give each line a "
                "format field and pass --format-field"
            )
        return "\n".join(out)


class Converter:
    """Line-by-line conversion with the bookkeeping of a report; no I/O."""

    def __init__(
        self, fmt: str | None, *, route: str | None, format_field: str | None = None, now: datetime | None = None
    ):
        if fmt is None and format_field is None:
            raise ConversionError(f"pass a format (--from {'|'.join(FORMATS)}) or a per-line format field")
        self._default = self._adapter(fmt) if fmt is not None else None
        self.route, self.format_field, self.now = route, format_field, now
        self._detectors = [get_adapter(name) for name in FORMATS]
        self._first_line_of: dict[str, int] = {}
        self.report = ConversionReport(fmt, stamped_at=None if now is None else stamp(now))

    @staticmethod
    def _adapter(name: str) -> Adapter:
        try:
            return get_adapter(name)
        except KeyError as exc:
            raise ConversionError(exc.args[0]) from None

    def convert(self, line: int, raw: bytes | str) -> list[dict]:
        """Events for one source line; [] for a blank or failed line (the failure is in the report)."""
        if not raw.strip():
            return []
        self.report.lines += 1
        try:
            events = self._convert(line, raw)
        except RecordError as exc:
            # An error raised without RecordError.at is of this line and of the record as a whole ($).
            failure = LineFailure(line if exc.line is None else exc.line, exc.field or "$", exc.message, exc.rule)
            self.report.failures.append(failure)
            return []
        for event in events:
            first = self._first_line_of.setdefault(event["event_id"], line)
            if first != line:
                self.report.warnings.append(
                    f"line {line}: same event_id as line {first} (same source record id); it is counted once downstream"
                )
        self.report.events += len(events)
        return events

    def _convert(self, line: int, raw: bytes | str) -> list[dict]:
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RecordError.at(line, "$", f"not JSON: {exc}", "not_json") from None
        if not isinstance(record, dict):
            raise RecordError.at(line, "$", f"expected a JSON object, got {type(record).__name__}", "not_object")
        adapter = self._choose(record, line)
        events = adapter.to_events(record, route=self.route, line=line, now=self.now)
        self.report.stamped += adapter.stamped(record)
        self.report.formats[adapter.name] = self.report.formats.get(adapter.name, 0) + 1
        self.report.warnings += adapter.audit(record, events, line=line)
        return events

    def _choose(self, record: dict, line: int) -> Adapter:
        if self.format_field is not None:
            name = record.get(self.format_field)
            if name is None:
                if self._default is None:
                    raise RecordError.at(
                        line,
                        self.format_field,
                        "required field is missing (it names the line's format)",
                        "missing_field",
                    )
                return self._default
            if name not in FORMATS:
                raise RecordError.at(
                    line,
                    self.format_field,
                    f"unknown format {name!r}; use one of: {', '.join(FORMATS)}",
                    "unknown_format",
                )
            return self._adapter(name)
        assert self._default is not None
        if record.get("schema") == "claimwatch.verdict/v1":
            raise RecordError.at(
                line,
                "schema",
                "this line is already a claimwatch verdict event; send it as it is (claimwatch produce without --from)",
                "mixed_format",
            )
        if not self._default.looks_like(record):
            others = [a.name for a in self._detectors if a.name != self._default.name and a.looks_like(record)]
            if others:
                raise RecordError.at(
                    line,
                    "$",
                    f"looks like a {others[0]} record, not {self._default.name}; a file must "
                    "hold one format (or pass a per-line format field)",
                    "mixed_format",
                )
        return self._default


def _open_input(in_path: str | Path | IO[bytes]) -> IO[bytes]:
    if isinstance(in_path, (str, Path)):
        try:
            return open(in_path, "rb")
        except OSError as exc:
            raise ConversionError(f"cannot read {in_path}: {exc.strerror}") from None
    return in_path


def _convert_into(converter: Converter, in_path: str | Path | IO[bytes], sink) -> None:
    source = _open_input(in_path)
    try:
        for number, raw in enumerate(source, start=1):
            for event in converter.convert(number, raw):
                sink(event)
    finally:
        if source is not in_path:
            source.close()


def _write(out: str | Path | IO, spool: IO[bytes]) -> None:
    spool.seek(0)
    if isinstance(out, (str, Path)):
        target = Path(out)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
        try:
            with os.fdopen(fd, "wb") as handle:
                while chunk := spool.read(1 << 20):
                    handle.write(chunk)
            os.replace(tmp, target)  # atomic: readers see the old file or the whole new one
        except BaseException:
            os.unlink(tmp)
            raise
    elif isinstance(out, io.TextIOBase):
        while chunk := spool.read(1 << 20):
            out.write(chunk.decode("utf-8"))
        out.flush()
    else:
        while chunk := spool.read(1 << 20):
            out.write(chunk)
        out.flush()


def convert_file(
    fmt: str | None,
    in_path: str | Path | IO[bytes],
    out: str | Path | IO,
    *,
    route: str | None,
    keep_good: bool = False,
    format_field: str | None = None,
    now: datetime | None = None,
) -> ConversionReport:
    """Convert ``in_path`` (JSONL) into contract events written to ``out`` (a path, or a text/binary stream).

    ``now`` stamps records that carry no time (``report.stamped`` counts them).
    """
    converter = Converter(fmt, route=route, format_field=format_field, now=now)
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        _convert_into(converter, in_path, lambda event: spool.write(orjson.dumps(event) + b"\n"))
        report = converter.report
        if report.ok or (keep_good and not report.mixed):
            _write(out, spool)
            report.written = True
    return report


def load_events(
    fmt: str | None,
    in_path: str | Path | IO[bytes],
    *,
    route: str | None,
    keep_good: bool = False,
    format_field: str | None = None,
    now: datetime | None = None,
) -> tuple[list[dict], ConversionReport]:
    """Convert in memory, for ``produce --from``: the events to send ([] when refused) and the report."""
    converter = Converter(fmt, route=route, format_field=format_field, now=now)
    events: list[dict] = []
    _convert_into(converter, in_path, events.append)
    report = converter.report
    if report.ok or (keep_good and not report.mixed):
        report.written = True
        return events, report
    return [], report


def convert_records(fmt: str, records: Iterable[dict], *, route: str | None, now: datetime | None = None) -> list[dict]:
    """Convert in-process records (one line of code from Python); raises RecordError on the first bad one."""
    adapter = Converter._adapter(fmt)
    return [
        event
        for line, record in enumerate(records, start=1)
        for event in adapter.to_events(record, route=route, line=line, now=now)
    ]
