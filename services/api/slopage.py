"""The SLO pages: ``/slos`` (each SLO's budget, burn rates and alerts, worst budget first) and ``/slos/{name}`` (the
budget's burn-down over the window, every burn window against the alert rules, what spends the budget). They read
the SLO report (services/alerts/oncall/slos.py), as GET /api/slos and `claimwatch slo` do; figures are written as the
CLI writes them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from services.alerts.detection.slo_burn import BurnRule
from services.alerts.oncall.slos import SloReport
from services.api.models import path_id
from services.api.serialise import as_json


def worst_first(slos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Least budget left first; SLOs with no traffic last."""
    return sorted(slos, key=lambda s: (s["budget_remaining"] is None, s["budget_remaining"] or 0.0, s["name"]))


def route_budgets(slos: list[dict[str, Any]], routes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The overview's budget column: each route under an SLO, with the covering SLO that has least budget left."""
    found: dict[str, dict[str, Any]] = {}
    for slo in worst_first(slos):
        for route in routes:
            if route not in found and fnmatchcase(route, slo["routes"]) and slo["budget_remaining"] is not None:
                found[route] = slo
    return found


def rule_rows(rules: Sequence[BurnRule], burns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each alert rule with its two windows' burn rates now, and whether it holds."""
    by_window = {b["window"]: b for b in burns}
    rows = []
    for rule in rules:
        long, short = by_window.get(rule.long, {}), by_window.get(rule.short, {})
        holds = all((w.get("rate") or 0) > rule.factor for w in (long, short))
        rows.append({"rule": rule, "long": long, "short": short, "holds": holds})
    return rows


def handlers(pages, slos: SloReport, rules: Sequence[BurnRule]) -> tuple[Callable[..., Response], ...]:
    """The handlers of ``/slos`` and ``/slos/{name}`` over ``pages`` (services/api/pages.py: its page frame)."""

    def slos_page(request: Request) -> Response:
        return pages._page(request, "slos.html", title="SLOs", slos=worst_first(as_json(slos.all())))

    def slo_page(request: Request, name: str = path_id()) -> Response:
        found = as_json(slos.get(name))  # NotFound: the styled 404 naming the SLOs there are
        return pages._page(request, "slo.html", title=f"SLO {name}", s=found, rules=rule_rows(rules, found["burns"]))

    return slos_page, slo_page
