"""Errors that user-facing layers (API: 404/409/422, CLI: exit 1) translate; messages say what to do next."""


class NotFound(LookupError):
    """An id that names nothing."""

    def __str__(self) -> str:  # LookupError quotes its message; show it plainly
        return str(self.args[0]) if self.args else "not found"


class Conflict(ValueError):
    """The request is well-formed but clashes with the current state (approve twice, ...)."""


class StoreError(RuntimeError):
    """The store refused or failed a statement. The message says what to do next."""
