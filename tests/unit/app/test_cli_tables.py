"""Every list command at 80 columns: lines fit, ids are whole, route names are never split;
`-o wide` shows every column and `-o json` (or `--json`) is the API's JSON.

The commands reach the API test's store (simulated traffic, alerts, issues, hostile route names)
through the in-process API; the eval items and long names come as sample rows."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import orjson
import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.app.cli.alerts import alert_columns
from services.app.cli.data import DLQ_COLUMNS, RATE_COLUMNS
from services.app.cli.evalset import ITEM_COLUMNS
from services.app.cli.issues import issue_columns
from services.app.cli.rules import RULE_COLUMNS
from services.app.cli.silences import silence_columns
from services.app.cli.tables import Column, ago, render
from services.core.clock import utcnow
from tests.support.cli import answer_http_by, answer_http_with
from tests.unit.api.test_api import AUTH, HTML_ROUTE, SQL_ROUTE, TOKEN, client_for, world  # noqa: F401  (fixture)

WIDTH = 80


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    client = client_for(world[0])
    made = client.post(
        "/api/silences",
        json={
            "matchers": ["route=billing-faq", "severity=~warn.*"],
            "by": "oncall",
            "comment": "a model rollback is under way, see the incident channel",
            "duration": "2h",
        },
        headers=AUTH,
    )
    assert made.status_code in (200, 201), made.text
    return client


@pytest.fixture
def cli(client, monkeypatch):
    """`claimwatch ...` at COLUMNS=80, its HTTP calls answered by the in-process API."""
    api = answer_http_with(client, monkeypatch, TOKEN)

    def run(*args: str, columns: int = WIDTH):
        result = CliRunner(env={"COLUMNS": str(columns)}).invoke(main, [*args, "--api", "http://testserver"], obj=api)
        assert result.exit_code == 0, result.output
        return result.output

    return run


# (command, API path and params, id fields, route fields, headers of every column)
COMMANDS = [
    (["rates", "--window", "all"], ("/api/rates", {"window": "all", "sort": "priority"}), [], ["route"], RATE_COLUMNS),
    (["alerts", "list"], ("/api/alerts", {}), ["alert_id"], ["route"], alert_columns(utcnow())),
    (["alerts", "silences"], ("/api/silences", {"active": False}), ["silence_id"], [], silence_columns(utcnow())),
    (["alerts", "rules"], ("/api/alerts/rules", {}), ["kind"], [], RULE_COLUMNS),
    (["issues", "list"], ("/api/issues", {"sort": "priority", "limit": 50}), ["issue_id"], [], issue_columns(utcnow())),
    (["dlq"], ("/api/dlq", {"samples": 1}), [], [], DLQ_COLUMNS),
]


def fits(text: str, width: int = WIDTH) -> list[str]:
    lines = text.splitlines()
    assert lines and all(len(line) <= width for line in lines), max(lines, key=len)
    return lines


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, api, ids, routes, columns",
    COMMANDS,
    ids=lambda v: " ".join(v) if isinstance(v, list) and v and isinstance(v[0], str) else None,
)
def test_list_commands_fit_80_columns_with_whole_ids_and_route_names(cli, client, command, api, ids, routes, columns):
    rows = client.get(api[0], params=api[1]).json()
    assert rows, f"the test store has nothing for {command}"
    lines = fits(cli(*command))
    for row in rows:
        for field in ids + routes:
            assert any(row[field] in line for line in lines), f"{row[field]!r} is not whole on one line"
    if command[0] == "rates":  # hostile route names are shown as they are, whole
        assert any(HTML_ROUTE in line for line in lines) and any(SQL_ROUTE in line for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, api, ids, routes, columns",
    COMMANDS,
    ids=lambda v: " ".join(v) if isinstance(v, list) and v and isinstance(v[0], str) else None,
)
def test_json_is_the_apis_and_wide_shows_every_column(cli, client, command, api, ids, routes, columns):
    expected = client.get(api[0], params=api[1]).json()
    assert orjson.loads(cli(*command, "-o", "json")) == expected
    assert orjson.loads(cli(*command, "--json")) == expected  # the old flag still works
    header = next(line for line in cli(*command, "-o", "wide").splitlines() if line.split()[0] == columns[0].header)
    assert all(c.header in header for c in columns), header
    narrow = next(line for line in cli(*command, columns=30).splitlines() if line.split()[0] == columns[0].header)
    assert columns[0].header in narrow and not all(c.header in narrow for c in columns)


def test_issue_names_wrap_at_words_to_two_lines_at_most(cli, client):
    names = {i["issue_id"]: i["name"] for i in client.get("/api/issues").json()}
    lines = fits(cli("issues", "list"))
    assert "Invented refund numbers" in " ".join(lines)
    assert len(lines) <= 1 + 3 * len(names)  # a row: two name lines, or three state lines at most


# -- sample rows: long values -------------------------------------------------------------
NOW = utcnow()
LONG_ROUTE = "customer-support-escalations"
ITEMS = [
    {
        "item_id": f"ei-{n:016x}",
        "state": "proposed",
        "query": "Can I return a laptop I bought in another "
        "country, and who pays for the shipping back to the warehouse?",
        "origin_issue_id": "iss-b8080668579f",
        "origin_trace_id": f"tr-{n}-long-trace-identifier-0001",
        "origin_route": LONG_ROUTE,
        "proposed_by": "oncall",
        "reviewed_by": "",
    }
    for n in range(3)
]
ISSUES = [
    {
        "issue_id": "iss-b8080668579f",
        "name": '"the robot vacuum empties itself into the dock every night and '
        'charges in an hour" contradicts review-digest',
        "state": "new",
        "escalating": True,
        "drives_alerts": [{"alert_id": "a-0d5e5c9d2b6f4a11"}],
        "count": 4115,
        "last_seen": (NOW - timedelta(minutes=3)).isoformat(),
        "first_seen": (NOW - timedelta(hours=5)).isoformat(),
        "routes": {"product-search": 9, LONG_ROUTE: 3},
    }
]


def test_eval_items_keep_ids_whole_and_drop_columns_before_cutting():
    api = answer_http_by(lambda request: httpx.Response(200, json=ITEMS))

    def run(*a):
        return CliRunner(env={"COLUMNS": "80"}).invoke(main, ["evalset", "items", *a, "--api", "http://x"], obj=api)

    lines = fits(run().output)
    assert all(any(i["item_id"] in line for line in lines) for i in ITEMS)
    assert orjson.loads(run("-o", "json").output) == ITEMS
    wide = run("-o", "wide").output
    assert all(c.header in wide.splitlines()[0] for c in ITEM_COLUMNS)
    assert all(i["origin_trace_id"] in wide for i in ITEMS)


def test_long_names_wrap_at_word_boundaries_and_end_in_an_ellipsis():
    lines = render(issue_columns(NOW), ISSUES, WIDTH)
    assert all(len(line) <= WIDTH for line in lines)
    assert "iss-b8080668579f" in lines[1] and "product-search, +1" in lines[1]  # the route column stays at 80
    start = lines[0].index("NAME")
    name_lines = [line[start:].split("  ")[0].strip() for line in lines[1:] if line[start:].strip()]
    name_lines = [n for n in name_lines if n][:2]
    words = set(ISSUES[0]["name"].split())
    assert name_lines[-1].endswith("…")
    for fragment in " ".join(name_lines).rstrip("…").split():
        assert fragment in words, fragment  # no word is split


def test_route_names_are_never_split_mid_word():
    rows = [{**ISSUES[0], "routes": ["a-route-name-long-enough-to-wrap", "another-long-route-name-for-sure"]}]
    for width in (60, 80, 100, 140):
        text = "\n".join(render(issue_columns(NOW), rows, width))
        pieces = re.findall(r"[\w-]*route[\w-]*", text)
        assert set(pieces) <= {"a-route-name-long-enough-to-wrap", "another-long-route-name-for-sure"}, (width, text)
    key = [Column("ROUTE", lambda r: r["route"], kind="key"), Column("X", lambda r: "y" * 70, 1, "name")]
    assert render(key, [{"route": LONG_ROUTE}], 40)[1] == LONG_ROUTE  # the low-priority column goes first


def test_an_issue_on_two_routes_keeps_its_routes_and_its_count_at_80_columns():
    """make demo's list: the alert's issue had grown onto a second route, and "parcel-status, +1" pushed COUNT out
    (the routes' narrowest form was reckoned as if 99 more routes had to be said)."""
    rows = [
        {**ISSUES[0], "routes": {"parcel-status": 9, "billing-faq": 3}, "count": 3233},
        {**ISSUES[0], "issue_id": "iss-0f3a2c11d2e4", "routes": {"billing-faq": 1}, "count": 57},
    ]
    lines = render(issue_columns(NOW), rows, WIDTH)
    assert lines[0].split()[:5] == ["ISSUE", "NAME", "STATE", "ROUTES", "COUNT"], lines
    assert "parcel-status, +1" in lines[1] and lines[1].rstrip().endswith("3233"), lines


def test_ids_are_whole_even_when_nothing_else_fits():
    lines = render(
        alert_columns(NOW),
        [
            {
                "alert_id": "a-0d5e5c9d2b6f4a11",
                "route": "parcel-status",
                "state": "firing",
                "severity": "critical",
                "rate": 0.097,
                "baseline": 0.046,
                "delta": 0.051,
                "starts_at": NOW.isoformat(),
                "pending_since": None,
                "acked_by": None,
                "silenced_by": [],
            }
        ],
        30,
    )
    assert "a-0d5e5c9d2b6f4a11" in lines[1] and lines[0].split() == ["ALERT", "ROUTE", "STATE"]


def test_alert_rows_read_the_delta_against_the_expectation_and_keep_kind_and_delta_longest():
    row = {
        "alert_id": "a-0d5e5c9d2b6f4a11",
        "route": "parcel-status",
        "state": "firing",
        "severity": "warning",
        "starts_at": NOW.isoformat(),
        "pending_since": None,
        "acked_by": None,
        "silenced_by": [],
    }
    rows = [
        {**row, "kind": "mix_shift", "rate": 0.091, "expected": 0.046, "baseline": 0.043, "delta": 0.045},
        {
            **row,
            "alert_id": "a-5b1e0c7d9f3a2e64",
            "kind": "hallucination_rate_rise",
            "rate": 0.118,
            "expected": 0.121,
            "baseline": 0.125,
            "delta": -0.003,
        },
        {
            **row,
            "alert_id": "a-77c0ffee00000001",
            "kind": "hallucination_rate_rise",
            "rate": 0.13,
            "expected": None,
            "baseline": 0.06,
            "delta": 0.07,
        },
    ]  # the last: no expectation yet
    header = lambda width: render(alert_columns(NOW), rows, width)[0].split()  # noqa: E731
    assert header(WIDTH) == ["ALERT", "ROUTE", "STATE", "KIND", "RATE", "EXPECTED", "DELTA"]
    assert header(72) == ["ALERT", "ROUTE", "STATE", "KIND", "RATE", "DELTA"]  # EXPECTED goes first,
    assert header(64) == ["ALERT", "ROUTE", "STATE", "KIND", "DELTA"]  # then RATE
    wide = [line.split("  ") for line in render(alert_columns(NOW), rows, None, wide=True)]
    cells = [[c.strip() for c in line if c.strip()] for line in wide]
    assert cells[0][3:8] == ["KIND", "RATE", "EXPECTED", "DELTA", "SINCE"] and cells[0][-1] == "BASELINE"
    assert cells[1][3:7] == ["mix shift", "9.1%", "4.6%", "+4.5 pts"] and cells[1][-1] == "4.3%"
    assert cells[2][3:7] == ["regression", "11.8%", "12.1%", "-0.3 pts"] and cells[2][-1] == "12.5%"
    assert cells[3][3:7] == ["regression", "13.0%", "—", "+7.0 pts"]  # not the baseline under another name


def test_times_are_short():
    assert ago((NOW - timedelta(minutes=3, seconds=5)).isoformat(), NOW) == "3m ago"
    assert ago((NOW + timedelta(hours=2)).isoformat(), NOW) == "in 2h"
    assert ago("2020-01-02T03:04:05+00:00", NOW) == "2020-01-02"
    assert ago(None, NOW) == "—"


def test_input_health_rows_read_in_their_own_units():
    row = {
        "alert_id": "a-0d5e5c9d2b6f4a11",
        "route": "parcel-status",
        "state": "firing",
        "severity": "critical",
        "starts_at": NOW.isoformat(),
        "pending_since": None,
        "acked_by": None,
        "silenced_by": [],
    }
    rows = [
        {
            **row,
            "kind": "route_silent",
            "unit": "per_minute",
            "rate": 0.4,
            "expected": 41.2,
            "baseline": 41.2,
            "delta": -40.8,
        },
        {
            **row,
            "kind": "events_rejected",
            "unit": "share",
            "rate": 0.35,
            "expected": 0.01,
            "baseline": 0.01,
            "delta": 0.34,
        },
        {
            **row,
            "kind": "abstention_rise",
            "unit": "share",
            "rate": 0.31,
            "expected": 0.12,
            "baseline": 0.12,
            "delta": 0.19,
        },
    ]
    lines = render(alert_columns(NOW), rows, WIDTH)
    assert all(len(line) <= WIDTH for line in lines) and "DELTA" in lines[0].split()  # the delta stays longest
    assert lines[1].endswith("-40.8/min") and lines[2].endswith("+34.0 pts") and lines[3].endswith("+19.0 pts")
    wide = [
        [c.strip() for c in line.split("  ") if c.strip()] for line in render(alert_columns(NOW), rows, None, wide=True)
    ]
    assert wide[1][3:7] == ["route silent", "0.4/min", "41.2/min", "-40.8/min"] and wide[1][-1] == "41.2/min"
    assert wide[2][3:7] == ["events rejected", "35.0%", "1.0%", "+34.0 pts"]
    assert wide[3][3:7] == ["abstention rise", "31.0%", "12.0%", "+19.0 pts"]
