"""The runbook of an alert on the monitor's own input: its context, the figures in words
(services.alerts.explain.figures).

A drift alert has no runbook of its own: the issues behind its excess have theirs (services/alerts/explain/shares.py).
"""

from __future__ import annotations

from runbooks.context import AlertRunbookContext
from runbooks.render import Md, RunbookRenderer, shell_arg
from services.alerts.explain.figures import (
    counted,
    dlq_command,
    figure,
    hallucination_sentence,
    other_sources,
    refused_sentence,
    served_sentence,
)
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import CARDINALITY_KIND, FLEET_ROUTE, MONITOR_KINDS

RUNBOOK_KINDS = MONITOR_KINDS  # runbooks/templates/<kind>.md.j2 for each


def runbook_context(alert: Alert, base_url: str, cli: str = "claimwatch") -> AlertRunbookContext:
    """``cli``: how the reader runs claimwatch (services/core/command.py), first word of every command."""
    d = alert.details
    return AlertRunbookContext(
        alert_id=alert.alert_id,
        route=alert.route,
        kind=alert.kind,
        severity=alert.severity,
        window=alert.window,
        onset=alert.onset,
        rate=figure(alert.rate, alert.unit),
        expected=figure(alert.expected, alert.unit),
        change=figure(alert.delta, alert.unit, change=True),
        count=alert.claims,
        counted=counted(alert.kind),
        expected_basis=alert.expected_basis,
        details=dict(d),
        served=served_sentence(d),
        hallucination=hallucination_sentence(d),
        gaming=bool(d.get("hallucination_fell")),
        refused=refused_sentence(d) if alert.kind == CARDINALITY_KIND else "",
        also_from=tuple(other_sources(d)),
        dlq_command=Md(dlq_command("" if alert.route == FLEET_ROUTE else alert.route, shell_arg, cli)),
        base_url=base_url.rstrip("/"),
        cli=cli,
    )


class AlertRunbooks:
    """The alerts service's runbook writer (given to ``AlertsService`` by the composition root)."""

    def __init__(self, renderer: RunbookRenderer, base_url: str, cli: str = "claimwatch"):
        self.renderer = renderer
        self.base_url = base_url.rstrip("/")
        self.cli = cli  # how the runbooks' reader runs claimwatch (services/core/command.py)

    def __call__(self, alert: Alert, fmt: str = "md") -> str | None:
        """The alert's own runbook (input-health kinds); None for a drift alert, whose runbooks are its issues'."""
        if alert.kind not in RUNBOOK_KINDS:
            return None
        return self.renderer.render_alert(runbook_context(alert, self.base_url, self.cli), fmt)
