"""Runbooks: every template against plain and hostile contexts, kind precedence, overrides, commands."""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from runbooks import (
    KINDS,
    ContextError,
    IssueInfo,
    IssueSignals,
    RouteImpact,
    RunbookContext,
    RunbookError,
    RunbookRenderer,
    Summary,
    SuspectChange,
    TimelineEntry,
    TraceExample,
    runbook_kind,
)
from runbooks.alerts import RUNBOOK_KINDS
from runbooks.issues import alert_steps
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import DRIFT_KIND
from tests.support.paths import ROOT

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
LONG = "A" * 5000 + " tail"
HOSTILE = (
    "{{ 7*7 }}",
    "{% raw %}",
    "{{ ''.__class__.__mro__ }}",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "# heading\n\n- item | pipe `code` [x](javascript:alert(1)) <!-- c -->\n---",
    LONG,
)
REQUIRED_SECTIONS = (
    "## Summary",
    "## What is failing",
    "## Timeline",
    "## Routes affected",
    "## Suspect changes",
    "## Representative traces",
    "## First failed stage",
    "### Checks for this kind",
    "## Commands",
)


def make_ctx(hostile: bool = False, n_traces: int = 5, **overrides) -> RunbookContext:
    def text(i: int) -> str:
        return HOSTILE[i % len(HOSTILE)] if hostile else f"plain text {i}"

    traces = tuple(
        TraceExample(
            trace_id=f"tr-{i}" + (f" {HOSTILE[i % len(HOSTILE)][:40]}" if hostile else ""),
            event_id=f"ev-{i}",
            route="billing-faq",
            question=text(i),
            answer_excerpt=text(i + 1),
            failing_claim=text(i + 2),
            evidence_span=text(i + 3),
            verdict="contradicted",
            source_versions={text(i + 4) if hostile else "refund-policy": "2026-11-01"},
        )
        for i in range(n_traces)
    )
    fields = dict(
        issue=IssueInfo(
            "iss-7",
            text(0) if hostile else "Refund window stated as 30 days",
            "open",
            "critical",
            T0,
            T0 + timedelta(hours=5),
            312,
            (1, 3, 8, 20, 41),
        ),
        summary=Summary(0.123, 0.101, 0.146, 0.02, 2530, {"contradicted": 200, "unsupported": 80, "supported": 2000}),
        timeline=(
            TimelineEntry(T0, text(5) if hostile else "prompt faq-v15 deployed"),
            TimelineEntry(T0 + timedelta(minutes=32), "alert fired"),
        ),
        routes=(RouteImpact("billing-faq", 0.123, 0.101, 0.146, 280),),
        suspect_changes=(
            SuspectChange("prompt", text(3) if hostile else "faq-v15", "system", 0.02, 0.12, 0.0, 0.8),
            SuspectChange("corpus", "policies@2026-11-20", "evidence", 0.02, 0.03),
        ),
        traces=traces,
        first_failed_stage="claim_generation",
        signals=IssueSignals(0.3, tuple(HOSTILE[:3]) if hostile else ("pol-17#5",), 0.9, 0.25, 0.5),
        alert_id="al-1",
        base_url="http://cw.example",
    )
    fields.update(overrides)
    return RunbookContext(**fields)


@pytest.fixture(scope="module")
def renderer() -> RunbookRenderer:
    return RunbookRenderer()


def test_packaged_templates_are_a_base_plus_one_per_kind():
    names = {p.name for p in (ROOT / "runbooks" / "templates").glob("*.j2")}
    assert names == (
        {"base.md.j2", "alert_base.md.j2"} | {f"{k}.md.j2" for k in KINDS} | {f"{k}.md.j2" for k in RUNBOOK_KINDS}
    )  # issue kinds; input-health alert kinds


@pytest.mark.parametrize("kind", KINDS)
def test_every_template_renders_every_required_section(renderer, kind):
    md = renderer.render(make_ctx(), kind=kind)
    for section in REQUIRED_SECTIONS:
        assert section in md, f"{kind}: missing {section}"
    assert md.startswith("# Refund window stated as 30 days\n")
    assert "**Severity:** critical · **State:** open" in md
    assert "**12.3%** (95% interval 10.1%–14.6%)" in md and "where 2.0% is expected" in md
    assert "contradicted 71% (200), unsupported 29% (80)" in md
    assert "| billing-faq | 12.3% | 10.1%–14.6% | 280 |" in md
    assert "| system | prompt | faq-v15 | 0% → 80% | 2.0% | 12.0% |" in md  # the share it took, the rate on each side
    assert "| evidence | corpus | policies@2026-11-20 | — | 2.0% | 3.0% |" in md
    assert md.count("- **Failing claim:**") == 5 and md.count("- **Evidence span:**") == 5
    assert "- **Source versions:** refund-policy@2026-11-01" in md
    assert "claimwatch alerts ack al-1 --note 'investigating issue iss-7'" in md  # --by: the CLI's default
    assert "\nclaimwatch promote propose iss-7 --traces tr-0,tr-1,tr-2,tr-3,tr-4\n" in md  # --by: the CLI's default
    assert f"Template: {kind}".replace("_", "\\_") in md
    # Each kind says something of its own in the mechanism section.
    mechanism = md.split("## What is failing")[1].split("## Timeline")[0].strip()
    assert len(mechanism) > 80


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_trace_text_is_inert_in_markdown(renderer, kind):
    md = renderer.render(make_ctx(hostile=True), kind=kind)
    assert "49" not in re.sub(r"\(\+\d+ chars\)", "", md)  # {{ 7*7 }} was never evaluated
    assert "{{ 7\\*7 }}" in md and "{% raw %}" in md  # ... it is shown, escaped, as text
    assert "<class" not in md and "mro" in md
    prose = re.sub(r"^```sh\n.*?^```$", "", md, flags=re.S | re.M)  # commands are shell-quoted, in code blocks
    assert not re.search(r"(?<!\\)<(script|img|!--)", prose)
    assert "\n# heading" not in md and "\n---" not in md.replace("\n---|", "")
    assert "A" * 1000 not in md and "… (+" in md
    for section in REQUIRED_SECTIONS:
        assert md.count("\n" + section) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_trace_text_is_escaped_in_html_and_keeps_the_structure(renderer, kind):
    plain = renderer.render(make_ctx(), format="html", kind=kind)
    html = renderer.render(make_ctx(hostile=True), format="html", kind=kind)
    assert html.startswith(f'<article class="runbook runbook-{kind}">')
    assert "<script" not in html and "<img" not in html and "<!--" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="javascript' not in html and "49" not in re.sub(r"\(\+\d+ chars\)", "", html)
    # Hostile text added no headings, lists, rules or links of its own.
    tags = lambda doc: sorted(re.findall(r"<(h\d|ul|ol|li|hr|a|table|tr|pre)\b", doc))  # noqa: E731
    assert tags(html) == tags(plain)


def test_html_renders_tables_lists_and_commands(renderer):
    html = renderer.render(make_ctx(), format="html")
    assert "<h1>Refund window stated as 30 days</h1>" in html
    assert "<td>billing-faq</td>" in html
    assert '<pre><code class="language-sh">claimwatch alerts ack al-1' in html
    assert '<a href="http://cw.example/traces/tr-0">tr-0</a>' in html


@pytest.mark.parametrize(
    "bad_id",
    [
        "tr-1; rm -rf /",
        "tr-$(touch pwned)",
        "tr-`id`",
        "tr-'quote'\"dq\"",
        "tr-line\nbreak\n```\n# x",
        "tr-\x1b[31mred",
    ],
)
def test_commands_are_safe_to_paste_into_bash(renderer, bad_id):
    ctx = make_ctx(traces=(replace(make_ctx().traces[0], trace_id=bad_id),), alert_id=bad_id)
    md = renderer.render(ctx)
    commands = [line for line in md.splitlines() if line.startswith("claimwatch ")]
    assert len(commands) == 2
    ack, promote = commands
    # Let bash parse the arguments exactly as a paste would, printing them instead of running anything.
    parsed = {}
    for line, position, expected in ((ack, 3, bad_id), (promote, 5, bad_id)):
        argv = subprocess.run(
            ["bash", "-c", "printf '%s\\0' " + line.removeprefix("claimwatch ")],
            capture_output=True,
            check=True,
            env={"USER": "alice"},
        ).stdout.split(b"\0")[:-1]
        assert argv[position - 1].decode() == expected
        parsed[line] = argv
    assert parsed[ack][3] == b"--note"  # no --by: the CLI records the configured or login name
    assert len(parsed[promote]) == 5  # the traces end it: promote takes no --by (the CLI knows its user)
    fences = [line for line in md.splitlines() if line.lstrip().startswith("```")]
    assert fences == ["```sh", "```", "```sh", "```"]  # two fenced blocks, neither broken open


def test_commands_start_with_claimwatch_as_the_reader_runs_it(renderer):
    md = renderer.render(make_ctx(cli="/opt/my venv/bin/claimwatch"))
    ack, promote = re.findall(r"^```sh\n(.*?)\n```$", md, flags=re.M)
    for command in (ack, promote):
        argv = subprocess.run(
            ["bash", "-c", "printf '%s\\0' " + command], capture_output=True, check=True, env={"USER": "alice"}
        ).stdout.split(b"\0")[:-1]
        assert argv[0] == b"/opt/my venv/bin/claimwatch"
    assert "from your PATH" not in md
    # the bare name (a service's page, readers anywhere) comes with the line on activating the virtualenv
    assert "These commands run `claimwatch` from your PATH: activate the virtualenv" in renderer.render(make_ctx())


def test_no_alert_means_no_ack_command_and_no_traces_means_no_promote(renderer):
    md = renderer.render(make_ctx(alert_id=None, traces=()))
    assert "No alert is linked to this issue." in md and "alerts ack" not in md
    assert "No representative traces are recorded yet." in md and "promote propose" not in md


def test_fewer_than_three_traces_are_flagged_and_more_than_five_are_capped(renderer):
    assert "Only 2 representative traces so far" in renderer.render(make_ctx(n_traces=2))
    md = renderer.render(make_ctx(n_traces=7))
    assert md.count("- **Failing claim:**") == 5 and "tr-5" not in md


@pytest.mark.parametrize(
    "stage, headline",
    [
        ("evidence_admission", "Fix retrieval, permissions or freshness, not the prompt."),
        ("claim_generation", "Tighten generation and the claim gate."),
        ("generation_stability", "Look at decoding or prompt stability; this is not a source failure."),
        ("", "The verifier reported no failed stage"),
    ],
)
def test_first_failed_stage_decides_the_next_action(renderer, stage, headline):
    ctx = make_ctx(first_failed_stage=stage, signals=IssueSignals())
    md = renderer.render(ctx)
    section = md.split("## First failed stage:")[1].split("### Checks")[0]
    assert headline in section
    assert len(re.findall(r"^\d\. ", section, re.M)) >= 3


NO_SIGNALS = IssueSignals()


@pytest.mark.parametrize(
    "stage, breakdown, signals, expected",
    [
        ("claim_generation", {"contradicted": 5, "unsupported": 3}, NO_SIGNALS, "contradicted"),
        ("claim_generation", {"unsupported": 5, "contradicted": 3}, NO_SIGNALS, "unsupported"),
        ("claim_generation", {"overreach": 5}, NO_SIGNALS, "overreach"),
        ("evidence_admission", {"stale": 5, "unsupported": 1}, NO_SIGNALS, "stale"),
        ("claim_generation", {"no_source": 5}, NO_SIGNALS, "no_source"),
        ("evidence_admission", {"unsupported": 5}, NO_SIGNALS, "evidence_admission"),
        ("evidence_admission", {"contradicted": 5}, NO_SIGNALS, "evidence_admission"),
        ("generation_stability", {"contradicted": 5}, NO_SIGNALS, "unstable_generation"),
        ("claim_generation", {"contradicted": 5}, IssueSignals(sample_disagreement=0.4), "unstable_generation"),
        ("claim_generation", {"contradicted": 5}, IssueSignals(sample_disagreement=0.39), "contradicted"),
        ("claim_generation", {"contradicted": 5}, IssueSignals(cherry_pick_share=0.2), "cherry_pick"),
        ("claim_generation", {"contradicted": 5}, IssueSignals(cherry_pick_share=0.19), "contradicted"),
        ("claim_generation", {"unsupported": 5}, IssueSignals(premise_similarity=0.9), "sycophancy"),
        ("claim_generation", {"unsupported": 5}, IssueSignals(support_delta=0.3), "sycophancy"),
        (
            "claim_generation",
            {"unsupported": 5},
            IssueSignals(cherry_pick_share=0.5, premise_similarity=0.9),
            "cherry_pick",
        ),
        ("generation_stability", {"stale": 5}, IssueSignals(cherry_pick_share=0.5), "unstable_generation"),
        ("", {"supported": 9}, NO_SIGNALS, "unsupported"),
    ],
)
def test_runbook_kind_precedence(stage, breakdown, signals, expected):
    ctx = make_ctx(first_failed_stage=stage, signals=signals, summary=Summary(0.1, 0.05, 0.15, 0.02, 100, breakdown))
    assert runbook_kind(ctx) == expected == ctx.kind


def test_render_uses_the_issue_kind_by_default(renderer):
    ctx = make_ctx(first_failed_stage="evidence_admission", signals=NO_SIGNALS)
    assert "**Kind:** evidence admission failures" in renderer.render(ctx)


def test_a_team_overrides_one_template_and_keeps_the_rest(tmp_path):
    (tmp_path / "stale.md.j2").write_text(
        '{% extends "base.md.j2" %}{% block kind_title %}OUR STALE PLAYBOOK{% endblock %}'
        "{% block mechanism %}Call the corpus team: {{ ctx.issue.name }}{% endblock %}"
    )
    renderer = RunbookRenderer([tmp_path])
    hostile = make_ctx(hostile=True)
    stale = renderer.render(hostile, kind="stale")
    assert "OUR STALE PLAYBOOK" in stale and "Call the corpus team: {{ 7\\*7 }}" in stale
    assert "## Commands" in stale
    assert "contradicted facts" in renderer.render(hostile, kind="contradicted")


def test_overriding_the_base_changes_every_kind(tmp_path):
    (tmp_path / "base.md.j2").write_text(
        "TEAM LAYOUT {% block kind_title %}{% endblock %} for {{ ctx.issue.issue_id }}\n"
    )
    renderer = RunbookRenderer([tmp_path])
    for kind in KINDS:
        assert renderer.render(make_ctx(), kind=kind).startswith("TEAM LAYOUT ")


def test_a_template_with_an_undefined_variable_fails_loudly(tmp_path):
    (tmp_path / "contradicted.md.j2").write_text(
        '{% extends "base.md.j2" %}\n{% block mechanism %}\n{{ ctx.issue.owner }}\n{% endblock %}'
    )
    with pytest.raises(RunbookError, match=r"contradicted\.md\.j2.*:3.*owner"):
        RunbookRenderer([tmp_path]).render(make_ctx(), kind="contradicted")


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ ctx.__class__.__init__.__globals__ }}",
        "{{ ctx.issue.__dict__ }}",
        "{% for c in ().__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    ],
)
def test_the_sandbox_refuses_internals_even_in_an_override(tmp_path, source):
    (tmp_path / "overreach.md.j2").write_text(source)
    with pytest.raises(RunbookError, match="overreach.md.j2"):
        RunbookRenderer([tmp_path]).render(make_ctx(), kind="overreach")


def test_a_template_syntax_error_names_the_file_and_line(tmp_path):
    (tmp_path / "no_source.md.j2").write_text("line one\n{% if %}\n")
    with pytest.raises(RunbookError, match=r"no_source\.md\.j2.*:2"):
        RunbookRenderer([tmp_path]).render(make_ctx(), kind="no_source")


def test_bad_arguments_get_specific_errors(tmp_path, renderer):
    with pytest.raises(RunbookError, match="does not exist"):
        RunbookRenderer([tmp_path / "missing"])
    with pytest.raises(RunbookError, match="format 'pdf'"):
        renderer.render(make_ctx(), format="pdf")
    with pytest.raises(RunbookError, match="kind 'weird'"):
        renderer.render(make_ctx(), kind="weird")
    with pytest.raises(ContextError, match="first_failed_stage"):
        make_ctx(first_failed_stage="retrieval")
    with pytest.raises(ContextError, match="traces must be a tuple"):
        make_ctx(traces=[])


def test_control_and_bidi_characters_are_shown_not_obeyed(renderer):
    ctx = make_ctx(issue=replace(make_ctx().issue, name="ok\u202eevil\x00\x1b[2J name"))
    title = renderer.render(ctx).splitlines()[0]
    assert title == "# ok\ufffdevil\ufffd\ufffd\\[2J name"


def test_the_timeline_puts_each_step_of_an_alert_at_its_own_time(renderer):
    """An alert that went pending at 09:00 and fired at 09:07 is not "firing at 09:00"; the onset the checks
    compare suspect changes with is in the timeline too."""
    fired = Alert(
        alert_id="a-1",
        route="billing-faq",
        kind=DRIFT_KIND,
        severity="critical",
        labels={},
        window=30,
        pending_since=T0,
        starts_at=T0 + timedelta(minutes=7),
        onset=T0 - timedelta(minutes=6),
    )
    steps = alert_steps(fired)
    assert [(s.at, s.what) for s in steps] == [
        (T0 - timedelta(minutes=6), "onset of the rise on billing-faq (alert a-1 on billing-faq)"),
        (T0, "alert a-1 on billing-faq: pending"),
        (T0 + timedelta(minutes=7), "alert a-1 on billing-faq: firing"),
    ]
    assert [s.what for s in alert_steps(replace(fired, starts_at=None, onset=None))] == [
        "alert a-1 on billing-faq: pending"
    ]
    resolved = alert_steps(replace(fired, ends_at=T0 + timedelta(minutes=40)))
    assert resolved[-1] == TimelineEntry(T0 + timedelta(minutes=40), "alert a-1 on billing-faq: resolved")
    md = renderer.render(make_ctx(timeline=tuple(steps)))
    assert "- 2026-11-21 09:07 UTC: alert a-1 on billing-faq: firing" in md
    assert "- 2026-11-21 09:00 UTC: alert a-1 on billing-faq: pending" in md


def test_a_learning_routes_expectation_is_marked_as_its_recent_level(renderer):
    """The rates table wrote "learning (5 h of history)" where the runbook wrote a bare 6.4% for the same route."""
    learning = make_ctx(
        routes=(
            RouteImpact("billing-faq", 0.132, 0.123, 0.141, 4976, 0.064, "alert a-1", True, True),
            RouteImpact("legal-terms", 0.124, 0.108, 0.143, 36, 0.128, "", False, False),
        )
    )
    md = renderer.render(learning)
    assert "| 6.4% (learning) |" in md and "| 12.8% |" in md
    assert "((learning): under a day of history, the route's recent level)" in md
    assert "(learning)" not in renderer.render(make_ctx())
