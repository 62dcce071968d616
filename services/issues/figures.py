"""One issue's figures, computed once from every member: the runbook, the API and the issue page all read these.

Times are event times (the members' ``observed_at``), never when clustering ran. Rates are the route's
*current* rate over a window that ends where the overview's does (``RateRepository.window_end``):
the open alert's window when the route has an alert, else ``DEFAULT_WINDOW_MINUTES``. Each route is set beside
what the drift detector expects of it, as every other surface sets it: its open alert's ``expected``, else the
route's published expectation
(services/alerts/detection/expectations.py), which `claimwatch rates` shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from services.alerts.detection.expectations import NOT_EVALUATED, Expectation
from services.alerts.explain.explainer import explainable
from services.alerts.lifecycle.alert import Alert
from services.rates.intervals import Counts, ratio_interval
from services.store.rates import RateRepository

MAX_TRACES = 5  # representative traces shown, at most (distinct traces)
OWN_ROUTE_SHARE = 0.1  # a route holding less of the issue's claims does not speak for it (severity)
DEFAULT_WINDOW_MINUTES = 30  # the overview's window, for routes without an alert
SIGNAL_MIN_SHARE = 0.5  # a signal is reported when at least this share of the issue's events carried it
SIGNALS = ("premise_similarity", "support_delta", "sample_disagreement")
STAGES = ("evidence_admission", "claim_generation", "generation_stability")


@dataclass(frozen=True)
class RouteFigure:
    """One route of an issue: its current rate beside what the drift detector expects of it."""

    route: str
    members: int  # the issue's failing claims on this route
    share: float  # of the issue's claims whose route is known
    own: bool  # holds >= OWN_ROUTE_SHARE of them (or the most): its alerts count
    window_minutes: int
    window_end: datetime | None  # RateRepository.window_end
    rate: float | None  # failed / checkable claims of the route over the window
    lo: float | None
    hi: float | None
    claims: int
    expected: float | None  # the rate the drift detector expects of the route now
    expected_source: str  # where the expectation comes from, or why there is none
    alert_id: str | None = None
    alert_severity: str | None = None
    alert_rate: float | None = None  # the rate the alert recorded
    learning: bool = False  # the route's expectation is still learning (a recent level, under a day)


@dataclass(frozen=True)
class SignalFigures:
    events: int = 0  # events behind the issue's members
    carried: Mapping[str, int] = field(default_factory=dict)  # signal -> events that carried it
    means: Mapping[str, float | None] = field(default_factory=dict)  # None unless carried by enough events
    cherry_pick_share: float = 0.0
    cherry_pick_chunks: tuple[str, ...] = ()


@dataclass(frozen=True)
class IssueFigures:
    issue_id: str
    count: int  # members (failing claims) of the issue
    first_seen: datetime | None  # event time of the first member
    last_seen: datetime | None  # event time of the last member
    hourly: tuple[tuple[str, int], ...]  # (hour, members), event time, zero-filled, last 24 hours
    verdicts: Mapping[str, int]  # every member whose claim is stored, by verdict
    verdicts_counted: int
    routes: tuple[RouteFigure, ...]  # most members first
    headline: RouteFigure | None  # the route the runbook's summary is about
    severity: str  # from alerts on the issue's own routes only
    alerts: tuple[Alert, ...]  # open alerts on the issue's own routes
    events: int
    traces: int  # distinct traces behind the members
    first_failed_stage: str
    stages: Mapping[str, int]
    signals: SignalFigures
    notes: tuple[str, ...] = ()  # where a figure covers less than every member

    def as_dict(self) -> dict:
        out = asdict(self)
        out.pop("alerts")
        out["alert_ids"] = [a.alert_id for a in self.alerts]
        for key in ("first_seen", "last_seen"):
            out[key] = _iso(getattr(self, key))
        out["routes"] = list(out["routes"])
        for r in out["routes"] + ([out["headline"]] if out["headline"] else []):
            r["window_end"] = _iso(r["window_end"])
        out["hourly"] = [{"hour": h, "count": n} for h, n in self.hourly]
        out["signals"]["cherry_pick_chunks"] = list(self.signals.cherry_pick_chunks)
        return out


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.isoformat()


def zero_filled(hourly: Mapping[str, int], last: int = 24) -> tuple[tuple[str, int], ...]:
    """Hour buckets ("YYYY-MM-DD HH:00:00") from the first to the last, gaps as 0, the newest ``last`` of them."""
    if not hourly:
        return ()
    hours = sorted(hourly)
    start, end = (datetime.fromisoformat(hours[0]), datetime.fromisoformat(hours[-1]))
    out, at = [], start
    while at <= end:
        key = at.strftime("%Y-%m-%d %H:%M:%S")
        out.append((key, int(hourly.get(key, 0))))
        at += timedelta(hours=1)
    return tuple(out[-last:])


def newest_alert_per_route(alerts: list[Alert], preferred: str | None = None) -> dict[str, Alert]:
    """Each route's open alert on its claims' failure rate: the ``preferred`` one (the page the reader came from),
    then firing before pending, then the newest. Not the input-health kinds: a silent route's rate and baseline
    count events a minute, not failing claims."""
    best: dict[str, Alert] = {}
    for a in filter(explainable, alerts):
        held = best.get(a.route)
        if held is None or _rank(a, preferred) > _rank(held, preferred):
            best[a.route] = a
    return best


def _rank(alert: Alert, preferred: str | None) -> tuple:
    return alert.alert_id == preferred, alert.starts_at is not None, alert.pending_since


def route_figure(
    rates: RateRepository,
    route: str,
    members: int,
    share: float,
    own: bool,
    alert: Alert | None,
    end: datetime | None,
    expectation: Expectation | None,
) -> RouteFigure:
    window = int(alert.window) if alert is not None and alert.window else DEFAULT_WINDOW_MINUTES
    c = Counts.zero()
    if end is not None:
        for row in rates.totals("", timedelta(minutes=window), end, route):
            c += Counts.from_row(row)
    interval = ratio_interval(c) if c.claims else None
    if alert is not None and alert.expected is not None:
        expected, source = alert.expected, f"alert {alert.alert_id}"
    elif expectation is not None and expectation.expected is not None:
        expected, source = expectation.expected, "the drift detector's expectation"
    else:
        expected, source = None, expectation.basis if expectation is not None else NOT_EVALUATED
    return RouteFigure(
        route,
        members,
        share,
        own,
        window,
        end,
        c.rate,
        interval.lo if interval else None,
        interval.hi if interval else None,
        c.claims,
        expected,
        source,
        alert.alert_id if alert else None,
        alert.severity if alert else None,
        alert.rate if alert else None,
        bool(expectation and expectation.learning),
    )


def signal_figures(events: dict) -> SignalFigures:
    n = events["events"]
    carried = {k: events["signals"][k][0] for k in SIGNALS}
    means = {
        k: (
            float(events["signals"][k][1])
            if n and carried[k] and carried[k] / n >= SIGNAL_MIN_SHARE and events["signals"][k][1] is not None
            else None
        )
        for k in SIGNALS
    }
    _, picked, chunks = events["cherry_pick"]
    return SignalFigures(n, carried, means, picked / n if n else 0.0, tuple(chunks[:5]) if picked else ())


def issue_figures(
    issue_id: str,
    span: dict,
    breakdown: list[dict],
    events: dict,
    rates: RateRepository,
    open_alerts: list[Alert],
    expectations: Mapping[str, Expectation],
    alert_id: str | None = None,
) -> IssueFigures:
    """``span``: IssueRepository.member_span; ``breakdown``: .member_breakdown; ``events``: .member_events;
    ``expectations``: the detector's, as published (services/alerts/detection/expectations.py); ``alert_id``: the
    alert the reader came from, which its route's figures are measured against."""
    verdicts: Counter = Counter()
    per_route: Counter = Counter()
    for row in breakdown:
        verdicts[row["verdict"]] += row["n"]
        per_route[row["route"]] += row["n"]
    counted = sum(per_route.values())
    ranked = sorted(per_route.items(), key=lambda kv: (-kv[1], kv[0]))
    alert_of = newest_alert_per_route(open_alerts, alert_id)
    end = rates.window_end()
    routes = []
    for i, (route, n) in enumerate(ranked):
        share = n / counted if counted else 0.0
        own = i == 0 or share >= OWN_ROUTE_SHARE
        routes.append(route_figure(rates, route, n, share, own, alert_of.get(route), end, expectations.get(route)))
    own_alerts = tuple(alert_of[r.route] for r in routes if r.own and r.route in alert_of)
    severity = "critical" if any(a.severity == "critical" for a in own_alerts) else "warning" if own_alerts else "none"
    headline = routes[0] if routes else None
    stages = {k: v for k, v in events["stages"].items() if k in STAGES}
    notes = []
    if counted < span["count"]:
        notes.append(
            f"verdicts and routes cover {counted} of {span['count']} members: the claims of the others "
            "are no longer stored"
        )
    return IssueFigures(
        issue_id=issue_id,
        count=span["count"],
        first_seen=span["first"],
        last_seen=span["last"],
        hourly=zero_filled(span["hourly"]),
        verdicts=dict(verdicts),
        verdicts_counted=counted,
        routes=tuple(routes),
        headline=headline,
        severity=severity,
        alerts=own_alerts,
        events=events["events"],
        traces=events["traces"],
        first_failed_stage=max(stages, key=lambda k: (stages[k], k)) if stages else "",
        stages=stages,
        signals=signal_figures(events),
        notes=tuple(notes),
    )
