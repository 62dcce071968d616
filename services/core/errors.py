"""Errors that user-facing layers (API: 404/409/422, CLI: exit 1) translate; messages say what to do next."""


class NotFound(LookupError):
    """An id that names nothing."""

    def __str__(self) -> str:  # LookupError quotes its message; show it plainly
        return str(self.args[0]) if self.args else "not found"


class Conflict(ValueError):
    """The request is well-formed but clashes with the current state (approve twice, ...)."""


class StoreError(RuntimeError):
    """The store failed a statement: down, out of disk or memory, timed out. The same statement may succeed
    later, so ingest retries it. The message says what to do next."""


class StoreRefused(StoreError):
    """The store refuses the statement for what it holds (a value it cannot parse or keep, a broken constraint, a
    size limit): it never succeeds unchanged, so ingest splits the batch to find the events refused."""
