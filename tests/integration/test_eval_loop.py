"""The closing loop on the real engine and model: a simulated regression becomes an issue with a
runbook; its representative traces are proposed, signed off, exported; the CI gate then fails just
above the measured faithfulness and passes just below it (through the CLI's exit code)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta

import orjson

from services.app.compose import build
from services.app.settings import load_settings
from services.client.simulate import Regression, Scenario, generate
from services.contract.decode import Decoder, Rejection
from services.evalset.promotion import load_traces
from services.evalset.service import EvalService
from services.store.backends import ChdbStore
from services.store.migrate import migrate
from services.store.writer import EventWriter


def cli(*args: str, store: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "services.app.cli", *args, "--clickhouse", store, "--api", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_regression_to_issue_runbook_promotion_export_and_gate(tmp_path):
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    demo = Scenario.demo()
    scenario = Scenario(
        routes=demo.routes[:2],
        bad_fraction=0.0,
        regressions=(Regression("billing-faq", 20, {"model": "gen-2026-11"}, 0.15, "invented_numbers"),),
    )
    sims = list(generate(scenario, now - timedelta(minutes=40), 40, seed=9))
    family = {f"{s.event['event_id']}:{i}": f for s in sims if s.event for i, f in enumerate(s.family_by_claim) if f}
    decoder = Decoder()
    events = [e for e in (decoder.decode(s.raw) for s in sims) if not isinstance(e, Rejection)]

    path = tmp_path / "ch"
    store = ChdbStore(path)
    try:
        migrate(store)
        EventWriter(store).write(events)
        components = build(load_settings(None, {}, {}), store)  # the embedder the worker uses
        jobs = components.issue_jobs
        report = jobs.recluster(now)
        assert report.issues >= 3

        # The issue that holds the regression's invented numbers, found by its members' ground truth.
        members = store.query("SELECT claim_key, issue_id FROM issue_members FINAL WHERE issue_id != ''")
        per_issue = Counter(r["issue_id"] for r in members if family.get(r["claim_key"]) == "invented_numbers")
        issue_id, held = per_issue.most_common(1)[0]
        service = components.issues
        issue = service.show(issue_id)
        assert "billing-faq" in issue["routes"]

        runbook = service.runbook(issue_id, "md")
        for section in (
            "## Summary",
            "## Timeline",
            "## Routes affected",
            "## Suspect changes",
            "## Representative traces",
            "claimwatch promote propose",
        ):
            assert section in runbook, section
        html = service.runbook(issue_id, "html")
        assert "<script" not in html and "<h2" in html

        evals = EvalService(components.repos.evalset, components.repos.issues, components.embedder.embed, n_boot=500)
        proposed = evals.propose(issue_id, None, by="alice")
        assert 1 <= len(proposed) <= 5
        assert all(p.state == "proposed" and p.origin_issue_id == issue_id for p in proposed)
        for item in proposed:
            assert evals.approve(item.item_id, by="bob", reason="invented refund window").state == "approved"
        out = tmp_path / "evalset.jsonl"
        assert evals.export(out, by="bob") == len(proposed)
        lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
        assert {line["item_id"] for line in lines} == {p.item_id for p in proposed}
        # The simulator has a share of answers labelled by people (human:ann-NN): both kinds are labels.
        unlabelled = [
            line
            for line in lines
            if not line["claim_labels"]
            or not all(lab["labeler"].startswith(("verifier:", "human:")) for lab in line["claim_labels"])
        ]
        assert not unlabelled, (
            unlabelled,
            [t.__dict__ for t in load_traces(components.repos.evalset, [p.origin_trace_id for p in proposed])],
        )
        measured = evals.report().faithfulness.value
        # The promoted traces carry failing claims; short ones may carry nothing else (faithfulness 0).
        assert measured is not None and 0 <= measured < 1
    finally:
        store.close()

    store_url = f"chdb:{path}"
    above = cli("eval", "gate", "--min-faithfulness", f"{measured + 0.01:.4f}", store=store_url)
    assert above.returncode == 1, above.stderr
    assert "FAIL" in above.stderr and "faithfulness" in above.stderr
    # a handful of promoted traces cannot support a gate at the default eval.min_items (30)
    thin = cli("eval", "gate", "--min-faithfulness", f"{max(measured - 0.01, 0.0):.4f}", store=store_url)
    assert thin.returncode == 1 and "fewer than eval.min_items (30)" in " ".join(thin.stderr.split()), thin.stderr
    below = cli(
        "eval",
        "gate",
        "--min-faithfulness",
        f"{max(measured - 0.01, 0.0):.4f}",
        store=store_url,
        CLAIMWATCH_EVAL__MIN_ITEMS="1",
    )
    assert below.returncode == 0, below.stderr
    assert "eval gate passed" in below.stderr and f"faithfulness on all is {measured:.4f}" in below.stderr

    # The CLI on the same store files, with no API: the in-process API refuses as the running one does.
    again = cli(
        "promote", "reject", proposed[0].item_id, "--by", "carol", "--reason", "changed my mind", store=store_url
    )
    assert again.returncode == 1 and "was already approved by bob" in again.stderr, again.stderr
    reclustered = cli("cluster", store=store_url)
    assert reclustered.returncode == 0, reclustered.stderr
    assert "failing claims ->" in reclustered.stderr
