"""The Grafana dashboard (dashboards/grafana/claimwatch.json) against the real ClickHouse engine.

Every panel's SQL, the alert annotation and the route variable run on chDB over simulated traffic
(written through EventWriter), its dead letters, alerts (AlertRepository) and issues (IssueRecord), after the
Grafana and grafana-clickhouse-datasource macros are expanded the way the plugin expands them. Each result must
have the columns its panel reads, with the types Grafana needs, and rows. The JSON itself is checked
for what Grafana relies on: unique ids, a grid that fits, and the provisioned data source uid.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from clustering.issue import IssueRecord
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.records import alert_repository
from services.client.simulate import Scenario, generate
from services.contract.decode import Decoder, Rejection
from services.core.metrics import Metrics
from services.ingest.records import DeadLetter
from services.rates.intervals import Counts, proportion_interval, ratio_interval
from services.store.backends import ChdbStore
from services.store.convert import ch_time
from services.store.issues import issue_row
from services.store.migrate import migrate
from services.store.review import ReviewRepository
from services.store.writer import EventWriter
from tests.support.paths import ROOT

DASHBOARD = ROOT / "dashboards/grafana/claimwatch.json"
DATASOURCES = ROOT / "dashboards/grafana/provisioning/datasources/clickhouse.yaml"
PROVIDERS = ROOT / "dashboards/grafana/provisioning/dashboards/claimwatch.yaml"
PLUGIN = "grafana-clickhouse-datasource"
MINUTES = 45

# What each panel reads: column names in order, and the kind of each. Time series come first with
# their time column; a string column in a time series is a label (long format, split per value).
TIME, STRING, NUMBER, ARRAY = "time", "string", "number", "array"
EXPECTED = {
    "Routes, worst first": [
        ("route", STRING),
        ("events", NUMBER),
        ("claims", NUMBER),
        ("failed", NUMBER),
        ("rate", NUMBER),
        ("lower", NUMBER),
        ("upper", NUMBER),
        ("unsafe_serve", NUMBER),
    ],
    "Open alerts": [("firing", NUMBER), ("pending", NUMBER)],
    "Dead-lettered messages": [("invalid", NUMBER), ("invalid_share", NUMBER)],
    "Hallucination rate · ${route}": [("time", TIME), ("rate", NUMBER), ("lower", NUMBER), ("upper", NUMBER)],
    "Failed claims by verdict": [
        ("time", TIME),
        ("contradicted", NUMBER),
        ("unsupported", NUMBER),
        ("overreach", NUMBER),
        ("stale", NUMBER),
        ("no_source", NUMBER),
    ],
    "Unsafe-serve rate by route": [("time", TIME), ("route", STRING), ("unsafe_serve", NUMBER)],
    "Answers per route": [("time", TIME), ("route", STRING), ("answers", NUMBER)],
    "Claims per route": [("time", TIME), ("route", STRING), ("claims", NUMBER)],
    "Abstention pair by route": [
        ("route", STRING),
        ("unanswerable", NUMBER),
        ("correct_abstention", NUMBER),
        ("correct_abstention_lower", NUMBER),
        ("correct_abstention_upper", NUMBER),
        ("answerable", NUMBER),
        ("over_refusal", NUMBER),
        ("over_refusal_lower", NUMBER),
        ("over_refusal_upper", NUMBER),
    ],
    "Dead-lettered messages by rule": [("time", TIME), ("rule", STRING), ("messages", NUMBER)],
    "Open alerts table": [
        ("alert_id", STRING),
        ("route", STRING),
        ("kind", STRING),
        ("severity", STRING),
        ("state", STRING),
        ("since", TIME),
        ("rate", NUMBER),
        ("expected", NUMBER),
        ("delta", NUMBER),
        ("claims", NUMBER),
        ("acked_by", STRING),
    ],
    "Top issues": [
        ("issue_id", STRING),
        ("name", STRING),
        ("state", STRING),
        ("size", NUMBER),
        ("first_seen", TIME),
        ("last_seen", TIME),
        ("routes", STRING),
    ],
    "Dead-letter reasons": [("rule", STRING), ("messages", NUMBER), ("last_received", TIME), ("example", STRING)],
    "Calibrated rate beside the raw rate": [
        ("route", STRING),
        ("raw", NUMBER),
        ("calibrated", NUMBER),
        ("lower", NUMBER),
        ("upper", NUMBER),
        ("sensitivity", NUMBER),
        ("specificity", NUMBER),
        ("labels", NUMBER),
        ("status", STRING),
        ("reasons", STRING),
        ("computed_at", TIME),
    ],
}
ANNOTATION_COLUMNS = [("time", TIME), ("timeEnd", TIME), ("text", STRING), ("tags", ARRAY)]

KIND_OF_TYPE = [
    (TIME, re.compile(r"^(Nullable\()?DateTime(64)?\b")),
    (NUMBER, re.compile(r"^(Nullable\()?(U?Int\d+|Float\d+|Decimal)")),
    (STRING, re.compile(r"^(Nullable\()?(LowCardinality\()?(Nullable\()?(String|FixedString)")),
    (ARRAY, re.compile(r"^Array\(")),
]


def kind_of(ch_type: str) -> str:
    return next((kind for kind, pattern in KIND_OF_TYPE if pattern.match(ch_type)), ch_type)


class GrafanaMacros:
    """Grafana's template variables, then the plugin's macros (grafana/clickhouse-datasource pkg/macros/macros.go).

    Only what the dashboard uses is known; anything else left with a ``$`` is an error, so a panel
    cannot start using a macro this test does not expand.
    """

    def __init__(self, start: datetime, end: datetime, interval_seconds: int, variables: dict[str, list[str]]):
        self.start, self.end = int(start.timestamp()), int(end.timestamp())
        self.interval = max(int(interval_seconds), 1)
        self.variables = variables

    @staticmethod
    def singlequote(values: list[str]) -> str:
        # Grafana's `singlequote` format: each value quoted, ' escaped as \'.
        return ",".join("'" + v.replace("'", "\\'") + "'" for v in values)

    def expand(self, sql: str) -> str:
        def variable(match: re.Match) -> str:
            name, fmt = match["name"], match["fmt"]
            if name not in self.variables:
                raise AssertionError(f"unknown template variable ${{{name}}}")
            if fmt not in (None, "singlequote"):
                raise AssertionError(f"variable format {fmt!r} is not expanded by this test")
            values = self.variables[name]
            return self.singlequote(values) if fmt == "singlequote" else ",".join(values)

        sql = re.sub(r"\$\{(?P<name>\w+)(?::(?P<fmt>\w+))?\}", variable, sql)
        sql = re.sub(
            r"\$__timeFilter\(\s*([^()]+?)\s*\)",
            lambda m: f"{m[1]} >= toDateTime({self.start}) AND {m[1]} <= toDateTime({self.end})",
            sql,
        )
        sql = re.sub(
            r"\$__timeInterval\(\s*([^()]+?)\s*\)",
            lambda m: f"toStartOfInterval(toDateTime({m[1]}), INTERVAL {self.interval} second)",
            sql,
        )
        sql = re.sub(r"\$__fromTime\b", f"toDateTime({self.start})", sql)
        sql = re.sub(r"\$__toTime\b", f"toDateTime({self.end})", sql)
        sql = re.sub(r"\$__interval_s\b", str(self.interval), sql)
        left = re.findall(r"\$\S+", sql)
        assert not left, f"macros or variables this test does not expand: {left}"
        return sql


def interval_seconds(text: str | None) -> int:
    """A panel's minimum interval ("5m"), or Grafana's 1 minute floor for this dashboard's data."""
    if not text:
        return 60
    number, unit = re.fullmatch(r"(\d+)([smh])", text).groups()
    return int(number) * {"s": 1, "m": 60, "h": 3600}[unit]


def columns(store, sql: str) -> list[tuple[str, str]]:
    """Result column names and ClickHouse types, known even for an empty result."""
    return [(r["name"], r["type"]) for r in store.query(f"DESCRIBE TABLE ({sql})")]


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


@pytest.fixture(scope="module")
def datasource() -> dict:
    (ds,) = yaml.safe_load(DATASOURCES.read_text())["datasources"]
    return ds


def query_panels(dashboard) -> list[dict]:
    """The panels that read the store (SQL); the SLO panels read Prometheus (prometheus_panels)."""
    return [p for p in dashboard["panels"] if p["type"] != "row" and p["datasource"]["type"] != "prometheus"]


def prometheus_panels(dashboard) -> list[dict]:
    return [p for p in dashboard["panels"] if p["datasource"]["type"] == "prometheus"]


def panel_key(panel: dict) -> str:
    # Two panels share the title "Open alerts" (the stat and the table).
    return panel["title"] + (" table" if panel["title"] == "Open alerts" and panel["type"] == "table" else "")


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """chDB with 45 minutes of simulated traffic ending now, its dead letters, alerts and issues."""
    store = ChdbStore(tmp_path_factory.mktemp("grafana") / "clickhouse")
    migrate(store)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(minutes=MINUTES)
    decoder, events, dead = Decoder(), [], []
    # Flat volume: the same traffic whatever the time of day the test runs at.
    scenario = Scenario.demo(regression_at=15, corpus_change_at=None, diurnal_amplitude=0.0).scaled(0.1)
    for offset, sim in enumerate(generate(scenario, start, MINUTES, seed=11)):
        decoded = decoder.decode(sim.raw)
        if isinstance(decoded, Rejection):
            dead.append(DeadLetter("claimwatch.verdicts", offset % 4, offset, sim.raw, decoded))
        else:
            events.append(decoded)
    EventWriter(store).write(events, dead)

    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    alerts = alert_repository(store)
    # firing, pending, resolved
    for route, pending, starts, ends, severity, expected in (
        ("billing-faq", ago(25), ago(20), None, "critical", 0.055),
        ("product-search", ago(3), None, None, "warning", 0.06),
        ("hr-policy", ago(40), ago(38), ago(30), "warning", 0.05),
    ):
        alerts.save(
            Alert(
                alert_id=f"a-{route}",
                route=route,
                kind="hallucination_rate_rise",
                severity=severity,
                labels={"service": "claimwatch"},
                window=30,
                pending_since=pending,
                starts_at=starts,
                ends_at=ends,
                rate=0.12,
                baseline=0.06,
                delta=0.12 - expected,
                claims=800,
                expected=expected,
                updated_at=now,
            )
        )

    issues = [  # id, name, state, size, first and last seen (minutes ago), route -> members, merged into
        ("i-1", "invented refund amounts", "new", 40, 14, 1, {"billing-faq": 40}, None),
        ("i-2", "stale tracking statuses", "ongoing", 90, 44, 2, {"billing-faq": 20, "parcel-status": 70}, None),
        ("i-3", "old leave policy", "resolved", 300, 44, 5, {"hr-policy": 300}, None),
        ("i-4", "seen before the range", "ongoing", 500, 600, 300, {"legal-terms": 500}, None),
        ("i-5", "refund amounts, merged", "ongoing", 700, 30, 2, {"billing-faq": 700}, "i-1"),
    ]
    store.insert(
        "issues",
        [
            # Clustering ran just now: the issue row's own times are processing times, not when claims were seen.
            issue_row(
                IssueRecord(
                    issue_id,
                    name,
                    (),
                    "clustering@test",
                    ago(0),
                    ago(0),
                    state,
                    size,
                    routes=routes,
                    merged_into=merged,
                )
            )
            for issue_id, name, state, size, first, last, routes, merged in issues
        ],
    )
    # First and last seen are the members' event times: one member at each end.
    store.insert(
        "issue_members",
        [
            {
                "claim_key": f"{issue_id}:{end}",
                "issue_id": issue_id,
                "probability": 1.0,
                "source": "batch",
                "config_name": "clustering@test",
                "x": 0.0,
                "y": 0.0,
                "observed_at": ch_time(ago(minutes)),
                "assigned_at": ch_time(now),
            }
            for issue_id, _, _, _, first, last, _, _ in issues
            for end, minutes in (("first", first), ("last", last))
        ],
    )
    # Calibrated rates as the leader stores them: billing-faq's newest is stale without a value (its verifier changed).
    calibrated = lambda route, minutes, rate, stale, reasons: {  # noqa: E731
        "computed_at": ago(minutes),
        "route": route,
        "window_start": ago(minutes + 60),
        "window_end": ago(minutes),
        "raw": 0.10,
        "rate": rate,
        "lower": None if rate is None else rate - 0.02,
        "upper": None if rate is None else rate + 0.02,
        "sensitivity": None if rate is None else 0.8,
        "specificity": None if rate is None else 0.95,
        "labels": 40,
        "pooled": 0,
        "stale": int(stale),
        "reasons": reasons,
        "verifier_version": "nli@1",
    }
    ReviewRepository(store).save_calibrated(
        [
            calibrated("billing-faq", 30, 0.07, False, ""),
            calibrated("billing-faq", 5, None, True, "40 labels are of verifier nli@1; the route now runs nli@2"),
            calibrated("parcel-status", 5, 0.04, False, ""),
        ]
    )
    # Dead letters carry the time they arrived (now); the range covers them and the simulated minutes.
    window = (start - timedelta(minutes=1), datetime.now(UTC) + timedelta(minutes=2))
    yield store, window, {"events": len({e.event_id for e in events}), "dead": len(dead)}  # redeliveries count once
    store.close()


@pytest.fixture(scope="module")
def routes(loaded, dashboard) -> list[str]:
    store, (start, end), _ = loaded
    (variable,) = dashboard["templating"]["list"]
    sql = GrafanaMacros(start, end, 60, {}).expand(variable["query"])
    return [r["route"] for r in store.query(sql)]


def run_panel(store, window, panel, route_values) -> tuple[list[tuple[str, str]], list[dict]]:
    (target,) = panel["targets"]
    sql = GrafanaMacros(*window, interval_seconds(panel.get("interval")), {"route": route_values}).expand(
        target["rawSql"]
    )
    return columns(store, sql), store.query(sql)


# -- the JSON ---------------------------------------------------------------------------------------


def test_panel_ids_are_unique_and_the_grid_fits_without_overlaps(dashboard):
    panels = dashboard["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {ids}"
    cells: dict[tuple[int, int], int] = {}
    for p in panels:
        g = p["gridPos"]
        assert set(g) == {"x", "y", "w", "h"} and all(isinstance(v, int) for v in g.values()), p["title"]
        assert g["x"] >= 0 and g["w"] >= 1 and g["x"] + g["w"] <= 24 and g["h"] >= 1, f"{p['title']}: {g}"
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps panel {cells[(x, y)]}"
                cells[(x, y)] = p["id"]


def test_every_query_uses_the_provisioned_clickhouse_datasource(dashboard, datasource):
    assert datasource["type"] == PLUGIN
    expected = {"type": PLUGIN, "uid": datasource["uid"]}
    queries = [("variable route", dashboard["templating"]["list"][0])]
    queries += [(f"annotation {a['name']}", a) for a in dashboard["annotations"]["list"]]
    queries += [(f"annotation target {a['name']}", a["target"]) for a in dashboard["annotations"]["list"]]
    for p in query_panels(dashboard):
        queries.append((p["title"], p))
        queries += [(f"{p['title']} {t['refId']}", t) for t in p["targets"]]
    for where, q in queries:
        assert q["datasource"] == expected, f"{where}: datasource {q['datasource']} is not the provisioned {expected}"


def test_the_slo_panels_read_the_provisioned_prometheus_for_metrics_claimwatch_exports():
    dashboard = json.loads(DASHBOARD.read_text())
    (prometheus,) = yaml.safe_load((DATASOURCES.parent / "prometheus.yaml").read_text())["datasources"]
    expected = {"type": "prometheus", "uid": prometheus["uid"]}
    exported = {m.name for m in Metrics().registry.collect()}
    panels = prometheus_panels(dashboard)
    assert {p["title"] for p in panels} == {"SLO error budget left", "SLO burn rate by window"}
    for p in panels:
        assert p["datasource"] == expected and all(t["datasource"] == expected for t in p["targets"])
        for t in p["targets"]:
            assert t["expr"].split("{")[0] in exported, t["expr"]


def test_targets_are_raw_sql_with_a_format_that_fits_the_panel(dashboard):
    for p in query_panels(dashboard):
        assert p["targets"], f"{p['title']}: no query"
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), f"{p['title']}: duplicate refIds"
        for t in p["targets"]:
            assert t["editorType"] == "sql" and t["rawSql"].strip(), p["title"]
            # Time series panels need the plugin's time series format (0); tables and stats take a table (1).
            want = (0, "timeseries") if p["type"] == "timeseries" else (1, "table")
            assert (t["format"], t["queryType"]) == want, (
                f"{p['title']}: format {t['format']}, queryType {t['queryType']}"
            )
        assert panel_key(p) in EXPECTED, f"{p['title']}: add its expected columns to EXPECTED"
    assert len(query_panels(dashboard)) == len(EXPECTED)


def test_overrides_name_columns_the_query_returns(dashboard):
    for p in query_panels(dashboard):
        names = {name for name, _ in EXPECTED[panel_key(p)]}
        for o in p["fieldConfig"]["overrides"]:
            if o["matcher"]["id"] == "byName":
                assert o["matcher"]["options"] in names, f"{p['title']}: override for unknown column {o['matcher']}"
            for prop in o["properties"]:
                if prop["id"] == "custom.fillBelowTo":
                    assert prop["value"] in names, f"{p['title']}: band fills to unknown column {prop['value']}"


def test_route_variable_is_multi_valued_and_repeats_the_rate_panel(dashboard):
    (variable,) = dashboard["templating"]["list"]
    assert variable["name"] == "route" and variable["multi"] and variable["includeAll"]
    repeated = [p for p in dashboard["panels"] if p.get("repeat")]
    assert [p["repeat"] for p in repeated] == ["route"]
    assert "${route}" in repeated[0]["title"]


def test_provisioning_points_grafana_at_the_dashboard_and_the_clickhouse_http_port(datasource):
    assert datasource["jsonData"]["protocol"] == "http" and datasource["jsonData"]["port"] == 8123
    (provider,) = yaml.safe_load(PROVIDERS.read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")


# -- the SQL on chDB ----------------------------------------------------------------------------------


def test_route_variable_lists_every_simulated_route(routes):
    assert routes == sorted(r.name for r in Scenario.demo().routes)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_panel_sql_returns_the_columns_the_panel_reads(loaded, dashboard, routes, key):
    store, window, _ = loaded
    (panel,) = [p for p in query_panels(dashboard) if panel_key(p) == key]
    # A repeated panel runs once per route, with the variable bound to that route alone.
    bindings = [[r] for r in routes] if panel.get("repeat") == "route" else [routes]
    for route_values in bindings:
        described, rows = run_panel(store, window, panel, route_values)
        got = [(name, kind_of(t)) for name, t in described]
        assert got == EXPECTED[key], f"{key} ({route_values}): columns {described}"
        assert rows, f"{key} ({route_values}): no rows over simulated traffic"
        for row in rows:
            assert list(row) == [name for name, _ in EXPECTED[key]]
            for name, kind in EXPECTED[key]:
                if kind == NUMBER:
                    assert row[name] is None or isinstance(row[name], (int, float)), f"{key}.{name} = {row[name]!r}"
        if panel["type"] == "timeseries":
            times = [r["time"] for r in rows]
            assert times == sorted(times), f"{key}: long-to-wide conversion needs rows in time order"


def test_annotation_sql_returns_alert_spans(loaded, dashboard, routes):
    store, window, _ = loaded
    (annotation,) = dashboard["annotations"]["list"]
    sql = GrafanaMacros(*window, 60, {"route": routes}).expand(annotation["target"]["rawSql"])
    assert [(n, kind_of(t)) for n, t in columns(store, sql)] == ANNOTATION_COLUMNS
    spans = store.query(sql)
    assert [s["tags"][0] for s in spans] == ["hr-policy", "billing-faq", "product-search"]
    assert [s["text"].split(": ")[1] for s in spans] == [
        "hr-policy rate 12% vs expected 5%",
        "billing-faq rate 12% vs expected 5.5%",
        "product-search rate 12% vs expected 6%",
    ]
    assert all(s["time"] <= s["timeEnd"] for s in spans)


def _panel(dashboard, key):
    return next(p for p in query_panels(dashboard) if panel_key(p) == key)


def test_route_table_interval_matches_claimwatchs_own_estimator(loaded, dashboard, routes):
    """The SQL design-effect Wilson interval equals services.rates.intervals.ratio_interval on the same sums."""
    store, window, _ = loaded
    _, rows = run_panel(store, window, _panel(dashboard, "Routes, worst first"), routes)
    assert [r["route"] for r in rows] == [r["route"] for r in sorted(rows, key=lambda r: -r["rate"])]
    start, end = (int(t.timestamp()) for t in window)
    sums = store.query(
        "SELECT route, sum(events) AS events, sum(claims) AS claims, sum(failed) AS failed, "
        "sum(claims_sq) AS claims_sq, sum(failed_sq) AS failed_sq, sum(failed_claims) AS failed_claims "
        "FROM rate_minute WHERE dim = '' AND minute >= toDateTime({s:UInt32}) AND minute <= toDateTime({e:UInt32}) "
        "GROUP BY route",
        {"s": start, "e": end},
    )
    expected = {r["route"]: Counts.from_row(r) for r in sums}
    assert {r["route"] for r in rows} == set(expected)
    for row in rows:
        counts = expected[row["route"]]
        interval = ratio_interval(counts)
        assert (row["events"], row["claims"], row["failed"]) == (counts.events, counts.claims, counts.failed)
        assert row["rate"] == pytest.approx(counts.rate, abs=1e-12)
        assert (row["lower"], row["upper"]) == pytest.approx((interval.lo, interval.hi), abs=1e-9)
        assert row["lower"] <= row["rate"] <= row["upper"]


def test_abstention_intervals_match_claimwatchs_proportion_interval(loaded, dashboard, routes):
    store, window, _ = loaded
    _, rows = run_panel(store, window, _panel(dashboard, "Abstention pair by route"), routes)
    assert {r["route"] for r in rows} == set(routes)
    for row in rows:
        for name, of in (("correct_abstention", "unanswerable"), ("over_refusal", "answerable")):
            interval = proportion_interval(round(row[name] * row[of]), row[of])
            assert (row[f"{name}_lower"], row[f"{name}_upper"]) == pytest.approx((interval.lo, interval.hi), abs=1e-9)


def test_rate_series_interval_brackets_every_bucket(loaded, dashboard):
    store, window, _ = loaded
    _, rows = run_panel(store, window, _panel(dashboard, "Hallucination rate · ${route}"), ["billing-faq"])
    assert len(rows) >= MINUTES // 5
    assert all(0 <= r["lower"] <= r["rate"] <= r["upper"] <= 1 for r in rows)


def test_alert_panels_count_firing_and_pending_but_not_resolved(loaded, dashboard, routes):
    store, window, _ = loaded
    _, (stat,) = run_panel(store, window, _panel(dashboard, "Open alerts"), routes)
    assert stat == {"firing": 1, "pending": 1}
    _, rows = run_panel(store, window, _panel(dashboard, "Open alerts table"), routes)
    assert [(r["route"], r["state"]) for r in rows] == [("billing-faq", "firing"), ("product-search", "pending")]
    # what the alert compared against, as `alerts list` shows it: its expectation
    assert [r["expected"] for r in rows] == [0.055, 0.06]
    assert all(r["delta"] == pytest.approx(r["rate"] - r["expected"]) for r in rows)
    _, (only,) = run_panel(store, window, _panel(dashboard, "Open alerts"), ["hr-policy"])
    assert only == {"firing": 0, "pending": 0}


def test_top_issues_leave_out_resolved_merged_and_out_of_range_issues_and_follow_the_route_filter(
    loaded, dashboard, routes
):
    store, window, _ = loaded
    _, rows = run_panel(store, window, _panel(dashboard, "Top issues"), routes)
    assert [r["issue_id"] for r in rows] == ["i-2", "i-1"]
    assert rows[0]["routes"] == "parcel-status, billing-faq"  # most members first
    _, rows = run_panel(store, window, _panel(dashboard, "Top issues"), ["parcel-status"])
    assert [r["issue_id"] for r in rows] == ["i-2"]


def test_dead_letter_panels_count_every_rejected_message(loaded, dashboard, routes):
    store, window, counts = loaded
    _, (stat,) = run_panel(store, window, _panel(dashboard, "Dead-lettered messages"), routes)
    assert stat["invalid"] == counts["dead"] > 0
    assert stat["invalid_share"] == pytest.approx(counts["dead"] / (counts["dead"] + counts["events"]))
    _, rows = run_panel(store, window, _panel(dashboard, "Dead-letter reasons"), routes)
    assert sum(r["messages"] for r in rows) == counts["dead"]
    assert {r["rule"] for r in rows} >= {"not_json", "not_utf8"}


def test_the_calibrated_panel_shows_each_route_s_newest_snapshot_whole(loaded, dashboard, routes):
    store, window, _ = loaded
    (panel,) = [p for p in query_panels(dashboard) if p["title"] == "Calibrated rate beside the raw rate"]
    _, rows = run_panel(store, window, panel, routes)
    by_route = {r["route"]: r for r in rows}
    assert by_route["billing-faq"]["calibrated"] is None and by_route["billing-faq"]["status"] == "stale"
    assert "now runs nli@2" in by_route["billing-faq"]["reasons"]
    assert (
        by_route["parcel-status"]["calibrated"] == pytest.approx(0.04) and by_route["parcel-status"]["status"] == "ok"
    )
