"""The runbook of an alert on the monitor's own input: its context, the figures in words
(services.alerts.explain.figures).

A drift alert has no runbook of its own: the issues behind its excess have theirs (services/alerts/explain/shares.py).
"""

from __future__ import annotations

from collections.abc import Callable

from runbooks.context import AlertRunbookContext, SloFacts
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
from services.alerts.lifecycle.kinds import CARDINALITY_KIND, FLEET_ROUTE, MONITOR_KINDS, SLO_KIND
from services.alerts.oncall.readmodel import SloDetailRead
from services.alerts.oncall.slos import budget_text, spent_text
from services.core.numbers import pct, thousands

RUNBOOK_KINDS = (*MONITOR_KINDS, SLO_KIND)  # runbooks/templates/<kind>.md.j2 for each


def slo_facts(s: SloDetailRead) -> SloFacts:
    """An SLO's report in the runbook's words, the figures as `claimwatch slo show` gives them."""
    spent = f"{spent_text(s.budget_spent, s.budget_spent_interval)}: {budget_text(s.budget_remaining)}"
    burns = tuple(
        f"{b.window}: {figure(b.rate, 'burn')}" if b.rate is not None else f"{b.window}: no figure ({b.reason})"
        for b in s.burns
    )
    routes = tuple(
        f"{r.route}: {pct(r.budget_spent) if r.budget_spent is not None else '—'} of the budget "
        f"({thousands(round(r.bad))} of {thousands(round(r.units))} {'claims' if s.sli == 'claims' else 'answers'} bad)"
        for r in s.routes_spending
    )
    issues = tuple((x.issue_id, x.name, pct(x.budget_spent) if x.budget_spent is not None else "—") for x in s.spenders)
    drift = tuple(
        (a.alert_id, f"{a.kind} on {a.route}, {a.state}" + (f" since {a.starts_at}" if a.starts_at else ""))
        for a in s.drift_alerts
    )
    promise = f"{pct(s.objective)} of {'claims' if s.sli == 'claims' else 'served answers'} good over {s.window}"
    return SloFacts(s.name, promise, s.routes, spent, burns, routes, issues, drift)


def runbook_context(
    alert: Alert, base_url: str, cli: str = "claimwatch", slo: SloDetailRead | None = None
) -> AlertRunbookContext:
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
        slo=None if slo is None else slo_facts(slo),
        base_url=base_url.rstrip("/"),
        cli=cli,
    )


class AlertRunbooks:
    """The alerts service's runbook writer (given to ``AlertsService`` by the composition root)."""

    def __init__(
        self,
        renderer: RunbookRenderer,
        base_url: str,
        cli: str = "claimwatch",
        slo_of: Callable[[str], SloDetailRead | None] | None = None,
    ):
        self.renderer = renderer
        self.base_url = base_url.rstrip("/")
        self.cli = cli  # how the runbooks' reader runs claimwatch (services/core/command.py)
        self.slo_of = slo_of  # an SLO burn alert's SLO, by name (services/alerts/oncall/slos.py)

    def __call__(self, alert: Alert, fmt: str = "md") -> str | None:
        """The alert's own runbook (input-health kinds); None for a drift alert, whose runbooks are its issues'."""
        if alert.kind not in RUNBOOK_KINDS:
            return None
        slo = None
        if alert.kind == SLO_KIND and self.slo_of is not None:
            slo = self.slo_of(alert.labels.get("slo", ""))
        return self.renderer.render_alert(runbook_context(alert, self.base_url, self.cli, slo), fmt)
