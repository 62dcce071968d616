"""`claimwatch` command line. Thin: parse flags, build Settings once, call plain objects.

One module per command group; importing them registers their commands on ``main``.
"""

# importing a command module registers its commands
from services.app.cli import (  # noqa: F401
    alerts,
    assistant,
    config,
    data,
    evalset,
    issues,
    review,
    rules,
    silences,
    slos,
    stack,
    storage,
    traces,
    triage,
)
from services.app.cli.base import main

__all__ = ["main"]
