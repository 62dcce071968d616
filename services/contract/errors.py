"""Errors about input records: a line that can't become a verdict event or a failing claim."""

from __future__ import annotations


class RecordError(ValueError):
    """A record that can't be converted. ``line``, ``field`` and ``rule`` say where and why, when known."""

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None, rule: str = "bad_value"):
        super().__init__(message)
        self.line, self.field, self.message, self.rule = line, field, message, rule

    @classmethod
    def at(cls, line: int, field: str, message: str, rule: str = "bad_value") -> RecordError:
        """An error in one field of one input line; the text reads ``line N: field: message``."""
        error = cls(f"line {line}: {field}: {message}", line=line, field=field, rule=rule)
        error.message = message
        return error
