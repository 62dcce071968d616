"""Errors the clustering stage raises to its callers; each message says what to do."""

from __future__ import annotations


class ModelError(RuntimeError):
    """The embedding model cannot be loaded; the message says what to do."""
