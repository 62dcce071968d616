"""Runbooks: one typed context per issue (or per alert on the monitor's own input), rendered through
sandboxed, overridable jinja2 templates."""

from runbooks.context import (
    KINDS,
    NEXT_ACTIONS,
    AlertRunbookContext,
    ContextError,
    IssueInfo,
    IssueSignals,
    NextAction,
    RouteImpact,
    RunbookContext,
    Summary,
    SuspectChange,
    TimelineEntry,
    TraceExample,
    runbook_kind,
)
from runbooks.render import RunbookError, RunbookRenderer

__all__ = [
    "AlertRunbookContext",
    "KINDS",
    "NEXT_ACTIONS",
    "ContextError",
    "IssueInfo",
    "IssueSignals",
    "NextAction",
    "RouteImpact",
    "RunbookContext",
    "RunbookError",
    "RunbookRenderer",
    "Summary",
    "SuspectChange",
    "TimelineEntry",
    "TraceExample",
    "runbook_kind",
]
