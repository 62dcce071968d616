"""Runbooks of the input-health alerts (route_silent, events_rejected, abstention_rise), rendered from the alert
itself: their figures in the alert's unit, the first checks, commands that paste whole into bash, and stored
text (route names, dead-letter samples) inert in Markdown and HTML."""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runbooks import RunbookError, RunbookRenderer
from runbooks.alerts import RUNBOOK_KINDS, runbook_context
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import (
    ABSTENTION_KIND,
    CARDINALITY_KIND,
    DRIFT_KIND,
    FLEET_ROUTE,
    REJECTED_KIND,
    SILENT_KIND,
    SLO_KIND,
)

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
URL = "http://cw.example"
SECTIONS = ("## What it means", "## What it saw", "## First checks", "## Commands")
HOSTILE = "<script>alert(1)</script> {{ 7*7 }} [x](javascript:alert(1)) `code` | pipe\n# heading\n---"
BAD_ROUTES = ("r; rm -rf /", "r-$(touch pwned)", "r-`id`", "r-'q'\"dq\"", "r-line\nbreak\n```\n# x", "r-\x1b[31mred")


def alert(kind: str, route: str = "checkout-help", **fields) -> Alert:
    figures = {
        SILENT_KIND: dict(
            unit="per_minute",
            rate=0.4,
            expected=41.2,
            baseline=41.2,
            delta=-40.8,
            claims=18,
            details={"received": 18, "expected_events": 1854.0},
            expected_basis="time of day: this hour's events per minute over 3.0 days",
        ),
        REJECTED_KIND: dict(
            rate=0.35,
            expected=0.01,
            baseline=0.01,
            delta=0.34,
            claims=1000,
            details={
                "rejected": 350,
                "received": 1000,
                "top_rule": "claims.verdict.unknown",
                "top_rule_count": 341,
                "sample_reason": "claims[0].verdict 'halluc' is not a verdict",
                "sample_source": "claimwatch.verdicts/0/1234",
            },
        ),
        ABSTENTION_KIND: dict(
            rate=0.31,
            expected=0.12,
            baseline=0.12,
            delta=0.19,
            claims=620,
            details={
                "served_share": 0.62,
                "served_share_before": 0.81,
                "hallucination_rate": 0.071,
                "hallucination_rate_before": 0.078,
                "hallucination_fell": True,
            },
        ),
        CARDINALITY_KIND: dict(
            unit="per_minute",
            rate=3.3,
            expected=0.0,
            delta=3.3,
            claims=33,
            details={
                "refused_events": 33,
                "refused_routes": 15,
                "max_active": 20_000,
                "top_source": "model=gen-9",
                "sources": [
                    {"source": "verifier=nli@3, model=gen-9", "events": 30, "routes": 12, "example": "req-7f3a"},
                    {"source": "model=gen-2, tenant=acme", "events": 3, "routes": 3, "example": "r-1"},
                ],
            },
        ),
        SLO_KIND: dict(
            unit="burn",
            rate=16.7,
            expected=14.4,
            delta=2.3,
            claims=2400,
            details={"slo": "billing-strict", "rule": "page: burn above 14.4x over both 1h and 5m"},
            expected_basis="the page rule: burn above 14.4x over both 1h and 5m",
        ),
    }[kind]
    severity = "warning" if kind == ABSTENTION_KIND else "critical"
    return Alert(
        **{
            **dict(
                alert_id="a-0d5e5c9d2b6f4a11",
                route=route,
                kind=kind,
                severity=severity,
                labels={},
                window=45,
                pending_since=T0,
                starts_at=T0,
                onset=T0 - timedelta(minutes=3),
            ),
            **figures,
            **fields,
        }
    )


@pytest.fixture(scope="module")
def renderer() -> RunbookRenderer:
    return RunbookRenderer()


def render(renderer: RunbookRenderer, a: Alert, fmt: str = "md") -> str:
    return renderer.render_alert(runbook_context(a, URL + "/"), fmt)


def argv_of(command: str) -> list[str]:
    """The arguments bash parses from a pasted command (printed, never run)."""
    out = subprocess.run(
        ["bash", "-c", "printf '%s\\0' " + command.removeprefix("claimwatch ")],
        capture_output=True,
        check=True,
        env={"USER": "alice"},
    ).stdout
    return [a.decode() for a in out.split(b"\0")[:-1]]


def commands(md: str) -> list[str]:
    """Each fenced command, continuation lines joined as bash joins them."""
    blocks = re.findall(r"^```sh\n(.*?)^```$", md, flags=re.S | re.M)
    return [b.strip().replace("\\\n", " ") for b in blocks]


@pytest.mark.parametrize("kind", RUNBOOK_KINDS)
def test_every_alert_kind_has_the_sections_its_route_and_an_ack(renderer, kind):
    md = render(renderer, alert(kind))
    for section in SECTIONS:
        assert md.count("\n" + section + "\n") == 1, section
    assert md.splitlines()[0].endswith(": checkout-help")
    assert "[checkout-help](<http://cw.example/routes/checkout-help>)" in md
    assert argv_of(commands(md)[-1]) == ["alerts", "ack", "a-0d5e5c9d2b6f4a11", "--note", "investigating"]
    # no --by: the CLI records the configured name or the login name (an empty $USER cannot break it)


def test_a_silent_route_reads_events_a_minute_and_says_how_to_silence_a_retired_route(renderer):
    md = render(renderer, alert(SILENT_KIND))
    assert "- **Received:** 18 events (0.4/min)" in md
    assert "- **Expected:** 1854 events (41.2/min), a change of -40.8/min" in md
    assert "%" not in md.split("## First checks")[0]  # nothing here is a share
    for check in ("verifier or the producer running", "claimwatch_consumer_lag", "Recent deploys", "route retired"):
        assert check in md, check
    assert argv_of(commands(md)[0]) == [
        "alerts",
        "silence",
        "--match",
        "route=checkout-help",
        "--match",
        "kind=route_silent",
        "--duration",
        "90d",
        "--comment",
        "route retired",
    ]


def test_rejected_events_name_the_top_rule_a_sample_and_list_the_dead_letters(renderer):
    md = render(renderer, alert(REJECTED_KIND))
    assert "- **Rejected:** 350 of 1000 events (35.0%; usually 1.0%, a rise of +34.0 pts)" in md
    assert "- **Top rule:** claims.verdict.unknown (341 events)" in md
    assert "- **Sample:** claims\\[0\\].verdict 'halluc' is not a verdict at claimwatch.verdicts/0/1234" in md
    assert "Contract version" in md and "Producer deploy" in md
    assert argv_of(commands(md)[0]) == ["dlq", "--route", "checkout-help", "--samples", "3"]
    bare = render(renderer, alert(REJECTED_KIND, details={"rejected": 3, "received": 9}))
    assert "Top rule" not in bare and "Sample" not in bare and "- **Rejected:** 3 of 9 events" in bare


def test_an_abstention_rise_says_the_gaming_case_only_when_the_rate_fell(renderer):
    md = render(renderer, alert(ABSTENTION_KIND))
    gaming = (
        "the hallucination rate fell from 7.8% to 7.1% at the same time: abstaining may be hiding failures "
        "(the gaming case)"
    )
    assert f"**Warning:** {gaming}." in md and "- **Served:** 62.0% of answers (81.0% before)" in md
    assert "prompt" in md.lower() and "guardrail" in md
    details = {**alert(ABSTENTION_KIND).details, "hallucination_rate": 0.09, "hallucination_fell": False}
    honest = render(renderer, alert(ABSTENTION_KIND, details=details))
    assert "**Warning:**" not in honest and "the hallucination rate did not fall (7.8% before, 9.0% now)" in honest


@pytest.mark.parametrize("kind", RUNBOOK_KINDS)
def test_an_alert_without_details_still_renders(renderer, kind):
    md = render(renderer, alert(kind, details={}))
    assert "## First checks" in md and "None" not in md


@pytest.mark.parametrize("kind", RUNBOOK_KINDS)
def test_hostile_stored_text_is_inert_in_markdown_and_html(renderer, kind):
    details = {**alert(kind).details, "top_rule": HOSTILE, "sample_reason": HOSTILE, "sample_source": HOSTILE}
    hostile = alert(kind, route=HOSTILE, details=details, expected_basis=HOSTILE)
    md = render(renderer, hostile)
    prose = re.sub(r"^```sh\n.*?^```$", "", md, flags=re.S | re.M)
    assert not re.search(r"(?<!\\)<script", prose) and "49" not in md and "{{ 7\\*7 }}" in prose
    assert "\n# heading" not in md and "\n---" not in md and not re.search(r"(?<!\\)\]\(javascript", prose)
    plain = render(renderer, alert(kind), "html")
    html = render(renderer, hostile, "html")
    assert html.startswith(f'<article class="runbook runbook-{kind}">')
    assert "<script" not in html and "&lt;script&gt;" in html and 'href="javascript' not in html
    tags = lambda doc: sorted(re.findall(r"<(h\d|ul|ol|li|hr|a|table|tr|pre)\b", doc))  # noqa: E731
    assert tags(html) == tags(plain)  # stored text added no headings, lists, rules or links of its own


@pytest.mark.parametrize("route", BAD_ROUTES)
def test_commands_with_a_hostile_route_paste_whole_into_bash(renderer, route):
    silent = commands(render(renderer, alert(SILENT_KIND, route=route)))[0]
    assert argv_of(silent)[2:4] == ["--match", f"route={route}"]
    dlq = commands(render(renderer, alert(REJECTED_KIND, route=route)))[0]
    assert argv_of(dlq)[:3] == ["dlq", "--route", route]
    md = render(renderer, alert(REJECTED_KIND, route=route))
    fences = [line for line in md.splitlines() if line.lstrip().startswith("```")]
    assert fences == ["```sh", "```", "```sh", "```"]  # no route broke a code block open


def test_a_route_cardinality_runbook_names_the_producer_and_lists_the_refused_routes(renderer):
    md = render(renderer, alert(CARDINALITY_KIND, route=FLEET_ROUTE))
    assert md.splitlines()[0] == "# Route cardinality: \\*" and "**Route:** every route (`*`)" in md
    assert (
        "- **Refused:** 33 events of 15 new routes refused over routes.max\\_active (20,000); most from "
        "verifier=nli@3, model=gen-9 (30 events, 12 routes, e.g. 'req-7f3a')"
    ) in md
    assert "- **Also from:** model=gen-2, tenant=acme (3 events, 3 routes, e.g. 'r-1')" in md
    assert "Fix that producer" in md and "routes.max_active" in md
    assert argv_of(commands(md)[0]) == ["dlq", "--route", "", "--samples", "3"]  # route.limit dead letters: route ''


def test_a_drift_alert_has_no_runbook_of_its_own_and_bad_formats_are_refused(renderer):
    drift = replace(alert(REJECTED_KIND), kind=DRIFT_KIND)
    with pytest.raises(RunbookError, match="'hallucination_rate_rise' has no runbook template.*issues behind it"):
        render(renderer, drift)
    with pytest.raises(RunbookError, match="format 'pdf'"):
        render(renderer, alert(SILENT_KIND), "pdf")


def test_a_team_overrides_one_alert_runbook(tmp_path):
    (tmp_path / "route_silent.md.j2").write_text(
        '{% extends "alert_base.md.j2" %}{% block checks %}Call the platform team about {{ ctx.route }}.{% endblock %}'
    )
    renderer = RunbookRenderer([tmp_path])
    md = render(renderer, alert(SILENT_KIND, route="a_b"))
    assert "Call the platform team about a\\_b." in md and "## Commands" in md
    assert "Contract version" in render(renderer, alert(REJECTED_KIND))


@pytest.mark.parametrize("kind", RUNBOOK_KINDS)
def test_every_command_starts_with_claimwatch_as_the_reader_runs_it(renderer, kind):
    cli = "/opt/my venv/bin/claimwatch"  # not on the reader's PATH, with a space to quote
    md = renderer.render_alert(runbook_context(alert(kind), URL, cli=cli))
    found = commands(md)
    assert len(found) >= 2 and "from your PATH" not in md
    for command in found:
        argv = subprocess.run(
            ["bash", "-c", "printf '%s\\0' " + command], capture_output=True, check=True, env={"USER": "alice"}
        ).stdout.split(b"\0")[:-1]
        assert argv[0].decode() == cli, command
    # the bare name (a service's page, readers anywhere) comes with the line on activating the virtualenv
    assert "from your PATH" in render(renderer, alert(kind))
