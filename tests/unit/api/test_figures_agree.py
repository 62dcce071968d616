"""One source for every figure: the runbook, the API, the issue page, the issues list and the route page
report the same numbers for the same issue, in event time, each route beside what the drift detector expects of it.

Reuses the simulated world of test_api (its own copy: this module adds an issue of its own on top) and adds
``iss-bulk``: 640 failing claims on bulk-faq (more than the 500 members the runbook once sampled), spread
over two hours of event time, plus 4 claims on minor-route (with sycophancy signals and a critical alert)
and 3 on quiet-route (no alert; nothing expected until the drift detector publishes an expectation). The
clustering run that stored it ran hours later.
"""

from __future__ import annotations

import html as htmllib
import re
from collections import Counter
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from clustering.issue import IssueRecord
from services.alerts.detection.detector import DriftDetector
from services.alerts.detection.expectations import NOT_EVALUATED, Expectation, publish
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.app.cli.evalset import _figure
from services.contract.decode import Decoder
from services.contract.model import FAILED_VERDICTS
from services.core.numbers import plural, thousands
from services.evalset.metrics import ItemOutcome, faithfulness
from services.issues.records import issue_repository
from services.rates.intervals import Counts, Interval
from services.store.convert import ch_time
from services.store.writer import EventWriter
from tests.unit.api.test_api import AS_REVIEWER, AUTH, START, client_for, world  # noqa: F401  (world is a fixture)

CLUSTERED_AT = START + timedelta(hours=5, minutes=17)  # processing time: must never show as "seen"
BULK_FROM = START - timedelta(minutes=50)  # 07:10, so the members span two hours


def event(event_id: str, route: str, at: datetime, verdicts: list[str], signals: dict | None = None):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": event_id,
                "trace_id": f"tr-{event_id}",
                "observed_at": at.isoformat(),
                "route": route,
                "first_failed_stage": "claim_generation",
                "query": {"text": f"question {event_id}", "answerable": True},
                "answer": {"text": f"answer {event_id}", "action": "served"},
                "signals": signals or {},
                "claims": [{"text": f"claim {event_id} {i}", "verdict": v} for i, v in enumerate(verdicts)],
            }
        )
    )


def bulk_events() -> list:
    out = []
    for i in range(320):  # two failing claims each: 640 members
        at = BULK_FROM + timedelta(seconds=17 * i)
        second = "unsupported" if i % 3 == 0 else "contradicted"
        extra = ["supported"] * (1 + i % 4)
        out.append(event(f"bulk-{i:03d}", "bulk-faq", at, ["contradicted", second, *extra]))
    for i in range(4):
        out.append(
            event(
                f"minor-{i}",
                "minor-route",
                START + timedelta(minutes=30 + i),
                ["unsupported", "supported"],
                {"premise_similarity": 0.97, "support_delta": 0.4},
            )
        )
    for i in range(3):
        out.append(event(f"quiet-{i}", "quiet-route", START + timedelta(minutes=36, seconds=i), ["stale"]))
    return out


@pytest.fixture(scope="module")
def bulk(world):  # noqa: F811
    services, world_events = world
    events = bulk_events()
    EventWriter(services.store).write(events, [])
    alerts = alert_repository(services.store)
    # a-bulk expects 18% (its trailing baseline is 20%); a-minor expects its baseline
    for route, alert_id, severity, window, baseline, expected in (
        ("bulk-faq", "a-bulk", "warning", 60, 0.2, 0.18),
        ("minor-route", "a-minor", "critical", 30, 0.065, 0.065),
    ):
        at = START + timedelta(minutes=25)
        alerts.save(
            Alert(
                alert_id=alert_id,
                route=route,
                kind="hallucination_rate_rise",
                severity=severity,
                labels={},
                window=window,
                pending_since=at,
                starts_at=at + timedelta(minutes=2),
                rate=0.5,
                rate_interval=Interval(0.4, 0.6),
                baseline=baseline,
                baseline_interval=Interval(0.01, 0.3),
                expected=expected,
                delta=0.3,
                claims=500,
                onset=at,
            )
        )
    members = [(e, i) for e in events for i, c in enumerate(e.claims) if c.verdict in FAILED_VERDICTS]
    keys = [f"{e.event_id}:{i}" for e, i in members]
    issues = issue_repository(services.store)
    issues.save(
        [
            IssueRecord(
                issue_id="iss-bulk",
                name="Bulk parcel numbers",
                keywords=("bulk",),
                config_name="t@1",
                first_seen=CLUSTERED_AT,
                last_seen=CLUSTERED_AT,
                size=len(keys),
                hourly_counts={CLUSTERED_AT.strftime("%Y-%m-%dT%H"): len(keys)},
                routes={"bulk-faq": 640, "minor-route": 4, "quiet-route": 3},
                centroid=[0.0, 1.0],
                exemplar_ids=("bulk-000:0", "bulk-000:1"),
            )
        ]
    )  # two claims of one trace
    issues.save_members(
        [
            {
                "claim_key": k,
                "issue_id": "iss-bulk",
                "probability": 0.5,
                "source": "batch",
                "config_name": "t@1",
                "x": 0.0,
                "y": 0.0,
                "observed_at": ch_time(e.observed_at),
            }
            for k, (e, _) in zip(keys, members)
        ]
    )
    everything = list({e.event_id: e for e in [*world_events, *events]}.values())
    return services, events, members, everything


@pytest.fixture(scope="module")
def client(bulk):
    return client_for(bulk[0])


def pct(value: float, digits: int = 1) -> str:
    return f"{value * 100:.{digits}f}%"


def when(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def current_rate(everything, route: str, minutes: int) -> tuple[float, int]:
    """failed / checkable claims of ``route`` over the last ``minutes`` whole minutes before the newest event."""
    end = max(e.observed_at for e in everything).replace(second=0, microsecond=0)
    start = end - timedelta(minutes=minutes - 1)
    claims = [
        c
        for e in everything
        if e.route == route and start <= e.observed_at.replace(second=0, microsecond=0) <= end
        for c in e.claims
        if c.verdict != "trivial"
    ]
    failed = sum(c.verdict in FAILED_VERDICTS for c in claims)
    return failed / len(claims), len(claims)


def page_text(html: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))).strip()


def element(html: str, element_id: str, end: str = "</p>") -> str:
    """The text of the element with this id, up to ``end``."""
    start = html.index(f'id="{element_id}"')
    return page_text(html[html.index(">", start) + 1 :].split(end)[0])


@pytest.mark.slow
def test_runbook_api_page_and_list_report_the_same_figures(client, bulk):
    _, events, members, everything = bulk
    detail = client.get("/api/issues/iss-bulk").json()
    runbook = client.get("/api/issues/iss-bulk/runbook", params={"format": "md"}).text
    page = client.get("/issues/iss-bulk").text
    listed = next(i for i in client.get("/api/issues").json() if i["issue_id"] == "iss-bulk")

    # Member count and verdicts: every member, not a sample of 500.
    verdicts = Counter(e.claims[i].verdict for e, i in members)
    assert len(members) == 647 and detail["count"] == listed["count"] == 647
    assert detail["verdicts"] == dict(verdicts) and detail["verdicts_counted"] == 647 and detail["notes"] == []
    assert "groups 647 failing claims" in runbook and 'id="issue-count">647<' in page
    failed_total = sum(verdicts.values())
    for verdict, n in verdicts.items():
        assert f"{verdict} {pct(n / failed_total, 0)} ({thousands(n)})" in runbook
        assert re.search(rf'<th scope="row">{verdict}</th><td class="num">{n}</td>', page), verdict

    # Event time: first and last seen are the members' observed_at, everywhere.
    first = min(e.observed_at for e, _ in members)
    last = max(e.observed_at for e, _ in members)
    for view in (detail, listed):
        assert datetime.fromisoformat(view["first_seen"]) == first
        assert datetime.fromisoformat(view["last_seen"]) == last
    assert f"seen between {when(first)} and {when(last)} (event time)" in runbook
    assert f'id="first-seen">{when(first)}<' in page and f'id="last-seen">{when(last)}<' in page

    # Headline: bulk-faq's current rate over its alert's 60-minute window, beside what that alert expected.
    rate, claims = current_rate(everything, "bulk-faq", 60)
    head = detail["headline"]
    assert head["route"] == "bulk-faq" and head["window_minutes"] == 60 and head["claims"] == claims
    assert (
        head["rate"] == pytest.approx(rate) and head["expected"] == 0.18 and head["expected_source"] == "alert a-bulk"
    )
    assert (
        f"Claims on bulk-faq fail at **{pct(rate)}**" in runbook
        and f"over {thousands(claims)} checkable claims in the last 60 minutes, where 18.0% is expected (alert a-bulk)"
        in runbook
    )
    headline = element(page, "headline")
    assert f"fails at {pct(rate)}" in headline and f"over {thousands(claims)} checkable claims" in headline
    assert "expected 18.0% (alert a-bulk)" in headline
    alert = client.get("/api/alerts/a-bulk").json()  # what the alert's own surfaces set the rate beside
    assert alert["expected"] == head["expected"]


@pytest.mark.slow
def test_each_route_is_beside_what_is_expected_of_it_and_only_own_routes_set_severity(client, bulk):
    everything = bulk[3]
    detail = client.get("/api/issues/iss-bulk").json()
    runbook = client.get("/api/issues/iss-bulk/runbook", params={"format": "md"}).text
    page = client.get("/issues/iss-bulk").text
    by_route = {r["route"]: r for r in detail["route_figures"]}
    assert [r["route"] for r in detail["route_figures"]] == ["bulk-faq", "minor-route", "quiet-route"]
    assert [r["members"] for r in detail["route_figures"]] == [640, 4, 3]
    minor_rate, _ = current_rate(everything, "minor-route", 30)
    assert by_route["minor-route"]["rate"] == pytest.approx(minor_rate) and by_route["minor-route"]["expected"] == 0.065
    assert not by_route["minor-route"]["own"] and by_route["bulk-faq"]["own"]
    quiet = by_route["quiet-route"]
    assert quiet["expected"] is None and quiet["expected_source"] == NOT_EVALUATED
    # minor-route's critical alert is not this issue's: severity comes from bulk-faq's warning.
    assert detail["severity"] == "warning" and detail["alert_ids"] == ["a-bulk"]
    assert "**Severity:** warning" in runbook and "severity warning" in page
    assert f"| minor-route (minor) | {pct(minor_rate)} |" in runbook and "| 4 | 6.5% |" in runbook
    rows = element(page, "route-figures", "</table>")
    assert f"minor-route (minor: its alerts do not set this issue's severity) 4 {pct(minor_rate)}" in rows
    assert "6.5% alert a-minor" in rows


@pytest.mark.slow
def test_a_route_without_an_alert_is_beside_the_expectation_claimwatch_rates_shows(client, bulk):
    alerts = alert_repository(bulk[0].store)
    detector = DriftDetector()
    for minute in range(150):  # two finished hours of quiet-route: a learning level of 3%
        detector.update(Counts.from_row({"events": 30, "claims": 100, "failed": 3}), START + timedelta(minutes=minute))
    saved = alerts.expectations()
    publish(alerts, {"quiet-route": Expectation.of(detector.regression)}, START + timedelta(minutes=149))
    try:
        detail = client.get("/api/issues/iss-bulk").json()
        runbook = client.get("/api/issues/iss-bulk/runbook", params={"format": "md"}).text
        page = client.get("/issues/iss-bulk").text
        rates = {r["route"]: r for r in client.get("/api/rates", params={"window": "30m"}).json()}
        whole_page = page_text(client.get("/routes/quiet-route").text)
        route_page = page_text(element(client.get("/routes/quiet-route").text, "current-rate"))
    finally:
        bulk[0].store.command("TRUNCATE TABLE route_expectations")
        if saved:
            alerts.save_expectations(START, saved)
    quiet = next(r for r in detail["route_figures"] if r["route"] == "quiet-route")
    assert quiet["expected"] == pytest.approx(0.03) == pytest.approx(detector.regression.expected)
    assert quiet["expected"] == rates["quiet-route"]["expected"]
    assert quiet["expected_source"] == "the drift detector's expectation"
    assert re.search(r"\| quiet-route \(minor\) \| [^|]+ \| [^|]+ \| 3 \| 3\.0% \(learning\) \|", runbook)
    assert "3.0% (learning) the drift detector's expectation" in element(page, "route-figures", "</table>")
    # the route page names the expectation once, with its hours, and says what its dashed line is
    assert "expected 3.0% (learning, 2 h)" in route_page, route_page
    assert "the dashed line is its level so far, 3.0%" in route_page and "baseline 3.0%" not in route_page
    assert set(re.findall(r"(\d+) h of history", whole_page)) == {"2"}, whole_page  # one count of hours per page


@pytest.mark.slow
def test_a_quiet_route_says_how_large_a_rise_it_sees_wherever_its_expectation_shows(client, bulk):
    """A route at 5 answers a minute sees +5.8 points within an hour (tests/unit/alerts/test_learning_margin.py):
    the rates API, the overview and the route page say so beside its expected rate (issue 55)."""
    alerts = alert_repository(bulk[0].store)
    saved = alerts.expectations()
    publish(alerts, {"quiet-route": Expectation(0.03, "time of day", False, None, 0.0584)}, START)
    try:
        rates = {r["route"]: r for r in client.get("/api/rates", params={"window": "30m"}).json()}
        overview = page_text(client.get("/", params={"window": "30m"}).text)
        route_page = page_text(client.get("/routes/quiet-route").text)
    finally:
        bulk[0].store.command("TRUNCATE TABLE route_expectations")
        if saved:
            alerts.save_expectations(START, saved)
    assert rates["quiet-route"]["detectable_rise"] == 0.0584
    assert rates["bulk-faq"]["detectable_rise"] is None  # a busy route sees its threshold: nothing to add
    assert "3.0% (sees +5.8 pts in 1 h)" in overview
    assert "expected 3.0% (sees +5.8 pts in 1 h)" in route_page
    assert "quiet route Its drift alert sees a rise of +5.8 pts within an hour, on average" in route_page


def test_signals_the_issues_events_did_not_carry_are_not_shown(client):
    detail = client.get("/api/issues/iss-bulk").json()
    runbook = client.get("/api/issues/iss-bulk/runbook", params={"format": "md"}).text
    # Only minor-route's 4 of 327 events carry premise similarity: not this issue's signal.
    assert detail["signals"]["carried"]["premise_similarity"] == 4 and detail["signals"]["events"] == 327
    assert detail["signals"]["means"]["premise_similarity"] is None
    assert "sycophan" not in runbook.split("## Summary")[0] and "question-answer similarity" not in runbook


@pytest.mark.slow
def test_no_page_shows_a_processing_time_where_an_event_time_belongs(client, bulk):
    members = bulk[2]
    clustered = when(CLUSTERED_AT)
    pages = {path: client.get(path).text for path in ("/issues", "/issues/iss-bulk", "/api/issues/iss-bulk/runbook")}
    for path, text in pages.items():
        assert clustered not in text, path
    detail = client.get("/api/issues/iss-bulk").json()
    assert detail["clustered_at"].startswith(CLUSTERED_AT.isoformat()[:16])  # kept, and named for what it is
    # The timeline counts members per hour of event time: 07:00 and 08:00, not the clustering hour.
    hours = Counter(e.observed_at.strftime("%Y-%m-%d %H:00:00") for e, _ in members)
    assert [(h["hour"], h["count"]) for h in detail["hourly"]] == sorted(hours.items())
    assert detail["trend"] == [n for _, n in sorted(hours.items())] and len(detail["trend"]) == 2
    listing = pages["/issues"]
    row = listing[listing.index('href="/issues/iss-bulk"') :].split("</tr>")[0]
    first = min(e.observed_at for e, _ in members)
    assert when(first) in row
    # Every issue: first/last seen are the min/max observed_at of its members as stored.
    services = bulk[0]
    for issue in client.get("/api/issues").json():
        rows = services.store.query(
            "SELECT min(observed_at) AS a, max(observed_at) AS b FROM issue_members FINAL WHERE issue_id = {id:String}",
            {"id": issue["issue_id"]},
        )
        stored = [datetime.fromisoformat(v).replace(tzinfo=UTC) for v in (rows[0]["a"], rows[0]["b"])]
        assert [datetime.fromisoformat(issue["first_seen"]), datetime.fromisoformat(issue["last_seen"])] == stored


@pytest.mark.slow
def test_representative_traces_are_distinct_up_to_five_and_fewer_are_explained(client):
    detail = client.get("/api/issues/iss-bulk").json()
    traces = [e["trace_id"] for e in detail["exemplars"]]
    assert len(traces) == 5 == len(set(traces))
    # a-bulk is open on bulk-faq: the traces come from its window (since its onset), not from before it
    assert detail["exemplars_from"].startswith("alert a-bulk's window on bulk-faq")
    onset = START + timedelta(minutes=25)
    assert all(datetime.fromisoformat(e["observed_at"]).replace(tzinfo=UTC) >= onset for e in detail["exemplars"])
    runbook = client.get("/api/issues/iss-bulk/runbook", params={"format": "md"}).text
    assert runbook.count("- **Failing claim:**") == 5 and "Only " not in runbook
    # 3 hostile events ask the same question: one trace is shown, since a promote command refuses the others
    evil = client.get("/api/issues/iss-evil").json()
    assert len(evil["exemplars"]) == 1 and evil["exemplars_note"].startswith("1 representative trace:")
    assert "repeat a question shown here" in evil["exemplars_note"]
    evil_md = client.get("/api/issues/iss-evil/runbook", params={"format": "md"}).text
    assert "come from 3 distinct traces" in evil_md and "repeat a question shown here" in evil_md
    assert "from 3 distinct traces" in client.get("/issues/iss-evil").text


def test_route_page_headline_is_the_current_rate_with_the_range_average_labelled(client, bulk):
    everything = bulk[3]
    rate, claims = current_rate(everything, "bulk-faq", 30)
    html = client.get("/routes/bulk-faq").text
    lead = element(html, "current-rate")
    assert f"Now {pct(rate)} of {claims} claims failed" in lead and "in the last 30 minutes" in lead
    average = element(html, "range-average")
    assert average.startswith("6h average:")
    overview = client.get("/api/rates", params={"window": "30m"}).json()
    assert next(r for r in overview if r["route"] == "bulk-faq")["rate"] == pytest.approx(rate)


# -- intervals over few items and the /eval page ---------------------------------------------------------------
def outcome(i: int, verdicts: list[str]) -> ItemOutcome:
    return ItemOutcome(f"it-{i}", "lookup", "low", True, False, tuple(verdicts))


def test_an_interval_over_fewer_than_ten_items_says_so_and_is_never_a_zero_width_band():
    one = faithfulness([outcome(0, ["supported", "supported", "contradicted"])], n_boot=200)
    assert one.value == pytest.approx(2 / 3) and one.note == "n=1: too few for an interval" and not one.has_interval
    nine = faithfulness([outcome(i, ["supported", "contradicted"][: 1 + i % 2]) for i in range(9)], n_boot=200)
    assert nine.note == "n=9: too few for an interval"
    ten = faithfulness([outcome(i, ["supported", "contradicted"][: 1 + i % 2]) for i in range(10)], n_boot=200)
    assert ten.note == "" and ten.has_interval and ten.hi > ten.lo
    same = faithfulness([outcome(i, ["supported"]) for i in range(12)], n_boot=200)
    assert not same.has_interval and "no interval" in same.note  # every resample is 100%: no band
    as_cli = _figure({"value": one.value, "lo": one.lo, "hi": one.hi, "items": 1, "note": one.note})
    assert as_cli == "66.7% (n=1: too few for an interval)" and "[" not in as_cli
    assert _figure({"value": 0.5, "lo": 0.4, "hi": 0.6, "items": 30, "note": ""}) == "50.0% [40.0–60.0] (n=30)"


def test_eval_page_prints_figures_not_dict_methods_and_flags_few_items(world):  # noqa: F811
    client = client_for(world[0])
    made = client.post("/api/promotions", json={"issue_id": "iss-numbers", "by": "oncall"}, headers=AUTH)
    assert made.status_code == 201, made.text
    item = made.json()[0]["item_id"]
    assert client.post(f"/api/promotions/{item}/approve", json={"reason": "ok"}, headers=AS_REVIEWER).status_code == 200
    report = client.get("/api/eval/report").json()
    n = report["faithfulness"]["items"]
    assert 1 <= n < 10 and report["faithfulness"]["note"] == f"n={n}: too few for an interval"
    html = client.get("/eval").text
    assert "built-in method" not in html and "&lt;built-in" not in html
    metrics = element(html, "metrics-h", "</section>")
    assert f"(n={n}: too few for an interval) over {plural(n, 'item')}" in metrics  # never "over 1 items"
    assert re.search(r"Faithfulness \(claims supported, origin run\) \d+\.\d%", metrics)
