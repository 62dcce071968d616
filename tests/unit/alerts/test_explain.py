"""An alert explains itself: the route's excess failing claims split by issue, and the notifications that say so."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.explain.explainer import AlertExplainer
from services.alerts.explain.shares import decompose
from services.alerts.lifecycle.alert import Alert
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.payloads import alertmanager_payload, webhook_payload

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
URL = "https://claimwatch.example"


def test_a_constructed_case_decomposes_exactly():
    # 1,000 claims, 150 failed, baseline 8%: 80 expected, 70 excess.
    # Baseline period: 400 failed, issue A 40 (10%), B 200 (50%), C none -> expected A 8, B 40, C 0, rest 32.
    issues, rest = decompose(1000, 150, 0.08, {"A": 60, "B": 40, "C": 10}, {"A": 40, "B": 200}, 400)
    got = {c.issue_id: (c.failed, c.expected, c.contribution) for c in issues}
    assert got["A"] == pytest.approx((60, 8.0, 52.0))
    assert got["B"] == pytest.approx((40, 40.0, 0.0))  # as common as before: explains nothing
    assert got["C"] == pytest.approx((10, 0.0, 10.0))  # new: all its claims are excess
    assert (rest.failed, rest.expected, rest.contribution) == pytest.approx((40, 32.0, 8.0))
    assert [c.issue_id for c in issues] == ["A", "C", "B"]  # largest contribution first
    assert issues[0].share == pytest.approx(52 / 70) and rest.share == pytest.approx(8 / 70)
    assert sum(c.contribution for c in issues) + rest.contribution == pytest.approx(150 - 0.08 * 1000)
    assert sum(c.share for c in issues) + rest.share == pytest.approx(1.0)


def test_an_issue_that_shrank_contributes_negatively_and_the_sum_still_holds():
    issues, rest = decompose(500, 60, 0.06, {"A": 50, "B": 2}, {"A": 100, "B": 100}, 250)
    by_id = {c.issue_id: c for c in issues}
    assert by_id["B"].contribution < 0 < by_id["A"].contribution
    assert sum(c.contribution for c in issues) + rest.contribution == pytest.approx(60 - 30)


def test_without_failures_in_the_baseline_expected_failures_follow_the_window_shares():
    issues, rest = decompose(1000, 100, 0.05, {"A": 75}, {}, 0)
    (a,) = issues
    assert a.expected == pytest.approx(50 * 0.75) and rest.expected == pytest.approx(50 * 0.25)
    assert a.share + rest.share == pytest.approx(1.0)


def test_no_clustered_members_is_all_unclustered():
    issues, rest = decompose(1000, 150, 0.08, {}, {}, 400)
    assert issues == [] and rest.share == pytest.approx(1.0) and rest.contribution == pytest.approx(70)


def test_no_claims_and_no_issues_at_all():
    issues, rest = decompose(0, 0, 0.08, {}, {}, 0)
    assert issues == [] and rest.contribution == 0 and rest.share is None  # no excess: no shares to give


# -- the explainer over repositories --------------------------------------------------------------------------


@dataclass
class FakeIssue:
    issue_id: str
    name: str


class FakeIssues:
    """Members by (issue, route, minute) and issue names, answering like services.store.issues.IssueRepository."""

    def __init__(self, members: dict[tuple[str, str], list[datetime]], names: dict[str, str], pending: int = 0):
        self.members = members
        self.names = names
        self.pending = pending  # failing claims no assignment has seen yet

    def unassigned_on_route(self, route, since, until):
        return self.pending

    def members_on_route(self, route, since, until):
        out = {}
        for (issue, r), times in self.members.items():
            n = sum(1 for t in times if r == route and since <= t <= until)
            if n:
                out[issue] = n
        return out

    def representatives_on_route(self, issue_ids, route, since, until):
        return {
            i: {"claim_key": f"{i}-e:0", "text": f"a claim of {i}", "trace_id": f"tr-{i}", "verdict": "contradicted"}
            for i in issue_ids
            if self.members_on_route(route, since, until).get(i)
        }

    def load(self, issue_ids=None):
        return [FakeIssue(i, self.names[i]) for i in (issue_ids or self.names)]


class FakeRates:
    """One route's claims and failures per minute."""

    def __init__(self, per_minute: dict[datetime, tuple[int, int]]):
        self.per_minute = per_minute

    def route_slices(self, route, start, end):
        rows = [v for m, v in self.per_minute.items() if start <= m <= end]
        return [{"dim": "", "value": "", "claims": sum(c for c, _ in rows), "failed": sum(f for _, f in rows)}]


def alert(**changes) -> Alert:
    fields = dict(
        alert_id="a-1",
        route="billing",
        kind="hallucination_rate_rise",
        severity="warning",
        labels={},
        window=30,
        pending_since=T0,
        starts_at=T0 + timedelta(minutes=5),
        rate=0.2,
        baseline=0.1,
        delta=0.1,
        claims=1000,
        onset=T0 - timedelta(minutes=10),
    )
    return Alert(**{**fields, **changes})


def minutes(start: datetime, n: int) -> list[datetime]:
    return [start + timedelta(minutes=i) for i in range(n)]


@pytest.fixture
def explainer():
    # Baseline hour before the onset: 100 claims and 10 failed a minute, 5 of them "old". After the onset: 100 claims
    # and 20 failed a minute: 5 "old" (unchanged), 12 "new" (the regression), 3 unclustered.
    onset = T0 - timedelta(minutes=10)
    rates = dict.fromkeys(minutes(onset - timedelta(minutes=60), 60), (100, 10))
    rates.update(dict.fromkeys(minutes(onset, 30), (100, 20)))
    members = {
        ("old", "billing"): [m for m in minutes(onset - timedelta(minutes=60), 90) for _ in range(5)],
        ("new", "billing"): [m + timedelta(seconds=30) for m in minutes(onset, 30) for _ in range(12)],
        ("elsewhere", "other"): minutes(onset, 30),
    }
    issues = FakeIssues(members, {"old": "Old issue", "new": "New issue", "elsewhere": "Elsewhere"})
    return AlertExplainer(issues, FakeRates(rates), base_url=URL, baseline_minutes=60)


def test_the_explainer_credits_the_new_issue_with_the_excess(explainer):
    now = T0 + timedelta(minutes=19)  # window: onset (T0-10) .. T0+19, 30 minutes
    e = explainer.explain(alert(), now)
    assert (e.start, e.end) == (T0 - timedelta(minutes=10), now)
    assert (e.claims, e.failed, e.baseline) == (3000, 600, 0.1)
    assert e.excess == pytest.approx(300)
    top = e.top()
    assert [c.issue_id for c in top] == ["new"]
    # "new" had no members in the baseline: all 360 claims are excess, minus nothing; "old" is as expected (5/10)
    assert top[0].contribution == pytest.approx(360) and top[0].share == pytest.approx(1.2)
    old = next(c for c in e.issues if c.issue_id == "old")
    assert old.contribution == pytest.approx(150 - 300 * 0.5)
    assert e.unclustered.contribution == pytest.approx(90 - 150)
    assert top[0].name == "New issue" and top[0].claim["text"] == "a claim of new"
    assert top[0].runbook_url == f"{URL}/issues/new?alert=a-1"  # its traces from this alert's window
    parts = e.parts()
    assert sum(p.contribution for p in parts) == pytest.approx(e.excess)
    assert sum(p.share for p in parts) == pytest.approx(1.0)
    shown = e.as_dict()
    assert [i["issue_id"] for i in shown["issues"]] == ["new"]
    total = sum(i["share"] for i in shown["issues"]) + shown["other_issues"]["share"] + shown["unclustered"]["share"]
    assert total == pytest.approx(1.0, abs=1e-3)  # shares add to 100% within rounding


def test_an_issue_lists_the_alerts_it_contributes_to(explainer):
    now = T0 + timedelta(minutes=19)
    found = explainer.alerts_of_issue("new", [alert(), alert(alert_id="a-2", route="other", baseline=0.0)], now)
    assert [(a.alert_id, a.route, a.state) for a in found] == [("a-1", "billing", "firing")]
    assert found[0].share == pytest.approx(1.2) and found[0].failed == 360
    assert explainer.alerts_of_issue("elsewhere", [alert()], now) == []


def test_an_alert_with_no_clustered_members_is_all_unclustered():
    rates = FakeRates(dict.fromkeys(minutes(T0 - timedelta(minutes=10), 30), (100, 20)))
    e = AlertExplainer(FakeIssues({}, {}), rates, base_url=URL).explain(alert(), T0 + timedelta(minutes=19))
    assert e.issues == () and e.top() == () and e.unclustered.share == pytest.approx(1.0)
    assert e.as_dict()["issues"] == [] and e.as_dict()["other_issues"] is None


def test_while_the_windows_claims_are_unseen_the_explanation_says_it_is_clustering_them():
    rates = FakeRates(dict.fromkeys(minutes(T0 - timedelta(minutes=10), 30), (100, 20)))
    waiting = AlertExplainer(FakeIssues({}, {}, pending=540), rates, base_url=URL).explain(
        alert(), T0 + timedelta(minutes=19)
    )
    assert waiting.as_dict()["status"] == "clustering 540 failing claims of this window"
    assert waiting.as_dict()["pending"] == 540


def test_a_few_unseen_claims_beside_named_issues_do_not_say_clustering(explainer):
    explainer.issues.pending = 12  # the last seconds' claims, against 600 failing in the window
    e = explainer.explain(alert(), T0 + timedelta(minutes=19))
    assert e.top() and e.status == ""
    explainer.issues.pending = 60  # a tenth of the window still unseen: its issues may change
    assert (
        explainer.explain(alert(), T0 + timedelta(minutes=19)).status == "clustering 60 failing claims of this window"
    )


# -- notifications --------------------------------------------------------------------------------------------


@pytest.fixture
def three_issues():
    onset = T0 - timedelta(minutes=10)
    rates = dict.fromkeys(minutes(onset, 30), (100, 30))
    members = {
        (f"i{k}", "billing"): [m for m in minutes(onset, 30) for _ in range(n)]
        for k, n in ((1, 10), (2, 6), (3, 4), (4, 1))
    }
    issues = FakeIssues(members, {f"i{k}": f"Issue {k}" for k in range(1, 5)})
    e = AlertExplainer(issues, FakeRates(rates), base_url=URL).explain(alert(), T0 + timedelta(minutes=19))
    return e


def test_alertmanager_annotations_name_the_top_three_issues_with_a_claim_and_runbook(three_issues):
    payload = alertmanager_payload(alert(), URL, T0, timedelta(minutes=5), three_issues)
    notes = payload["annotations"]
    for k in (1, 2, 3):
        assert notes[f"issue_{k}"] == f"Issue {k}"
        assert notes[f"issue_{k}_claim"] == f"a claim of i{k}"
        assert notes[f"issue_{k}_runbook_url"] == f"{URL}/issues/i{k}?alert=a-1"
        assert notes[f"issue_{k}_share"].endswith("%")
    assert "issue_4" not in notes
    assert f"{URL}/issues/i1" in notes["explanation"] and "unclustered" in notes["explanation"]
    assert all(isinstance(v, str) for v in notes.values())  # Alertmanager annotations are strings
    plain = alertmanager_payload(alert(), URL, T0, timedelta(minutes=5))["annotations"]
    assert set(plain) == {"summary", "description", "runbook_url"}


def test_the_webhook_carries_the_top_three_issues(three_issues):
    body = webhook_payload(alert(), "new firing", URL, three_issues)
    issues = body["explanation"]["issues"]
    assert [i["issue_id"] for i in issues] == ["i1", "i2", "i3"]
    assert [i["claim"] for i in issues] == ["a claim of i1", "a claim of i2", "a claim of i3"]
    assert [i["runbook_url"] for i in issues] == [f"{URL}/issues/i{k}?alert=a-1" for k in (1, 2, 3)]
    shares = [i["share"] for i in issues] + [
        body["explanation"]["other_issues"]["share"],
        body["explanation"]["unclustered"]["share"],
    ]
    assert sum(shares) == pytest.approx(1.0, abs=1e-3)
    assert "Issue 1" in body["text"]


def test_the_dispatcher_puts_the_explanation_in_what_it_sends(three_issues):
    d = Dispatcher(
        "http://am:9093",
        "http://hook",
        URL,
        timedelta(minutes=5),
        retry_initial_seconds=0.5,
        retry_max_seconds=30,
        attempt_timeout_seconds=10,
    )
    sent = {o.target: o.body for o in d.plan(None, alert(), [], T0 + timedelta(minutes=6), three_issues)}
    assert sent["alertmanager"][0]["annotations"]["issue_1_runbook_url"] == f"{URL}/issues/i1?alert=a-1"
    assert sent["webhook"]["explanation"]["issues"][0]["issue_id"] == "i1"
    resent = d.resend([alert()], [], T0 + timedelta(minutes=6), {"a-1": three_issues})
    assert resent[0].body[0]["annotations"]["issue_2"] == "Issue 2"


def test_the_alert_cycle_sends_each_firing_alert_with_its_explanation(three_issues):
    import asyncio

    from services.alerts.evaluation.cycle import AlertCycle
    from services.core.metrics import Metrics

    firing = alert()

    class Evaluator:
        open = {"billing": firing}
        last_minute = None

        def evaluate(self, now):
            return [firing]

    class Alerts:
        def silences(self, now=None):
            return []

    class Explainer:
        def __init__(self, fails: bool):
            self.fails = fails

        def explain(self, a, now):
            if self.fails:
                raise RuntimeError("store hiccup")
            return three_issues

    async def inline(fn, *args):
        return fn(*args)

    async def run(explainer):
        d = Dispatcher(
            "http://am:9093",
            None,
            URL,
            timedelta(minutes=5),
            retry_initial_seconds=0.5,
            retry_max_seconds=30,
            attempt_timeout_seconds=10,
        )
        cycle = AlertCycle(Evaluator(), Alerts(), d, Metrics(), inline, explainer=explainer)
        await cycle.evaluate(T0 + timedelta(minutes=6))
        await cycle.resend(T0 + timedelta(minutes=12))
        return [item.body[0]["annotations"] for item in d.queued()]

    sent = asyncio.run(run(Explainer(False)))
    assert len(sent) == 2 and all(n["issue_1_runbook_url"] == f"{URL}/issues/i1?alert=a-1" for n in sent)
    plain = asyncio.run(run(Explainer(True)))  # an explainer that fails never stops the notification
    assert len(plain) == 2 and all("issue_1" not in n and n["summary"] for n in plain)


class SampledRates(FakeRates):
    """Every answer verified at sampling.rate 0.25 (weight 4), the whole traffic failing at ``traffic_rate`` while
    the verified claims fail at their stored failed / claims."""

    def __init__(self, per_minute, traffic_rate: float):
        super().__init__(per_minute)
        self.traffic_rate = traffic_rate

    def route_slices(self, route, start, end):
        row = super().route_slices(route, start, end)[0]
        w_claims = row["claims"] * 4.0
        return [
            {
                **row,
                "events": row["claims"],
                "sampled": row["claims"],
                "w_events": w_claims,
                "w_claims": w_claims,
                "w_failed": w_claims * self.traffic_rate,
            }
        ]


@pytest.mark.parametrize(("traffic_rate", "excess_share"), [(0.1, 0.0), (0.2, 0.5)])
def test_a_sampled_routes_excess_is_the_traffics_relative_rise_not_the_samples_bias(traffic_rate, excess_share):
    # Verified claims fail at 20% in the window; the alert's baseline, a rate of the whole traffic, is 10%. If the
    # traffic also fails at 10%, the verified sample's 20% is its bias, not a rise: no excess (not 300 of 600).
    rates = SampledRates(dict.fromkeys(minutes(T0 - timedelta(minutes=10), 30), (100, 20)), traffic_rate)
    e = AlertExplainer(FakeIssues({}, {}), rates, base_url=URL).explain(alert(expected=0.1), T0 + timedelta(minutes=19))
    assert (e.claims, e.failed) == (3000, 600)
    assert e.excess == pytest.approx(600 * excess_share)
