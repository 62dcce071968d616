"""`claimwatch` command line. Thin: parse flags, build Settings once, call plain objects.

One module per command group; importing them registers their commands on ``main``.
"""

from services.app.cli import alerts, data, evalset, issues, review, rules, stack, storage, traces, triage  # noqa: F401  (registers the commands)
from services.app.cli.base import main

__all__ = ["main"]
