"""`claimwatch review ...` and `rates --calibrated`, answered by the in-process API over a real store."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.app.cli import main
from services.app.compose import build
from services.app.settings import Settings
from tests.support.cli import answer_http_with
from tests.support.review_world import answer, write_answers
from tests.unit.review.test_review_api import (  # noqa: F401  (world is a fixture)
    AUTH,
    TOKEN,
    TOKEN_HASH,
    Clock,
    label_everything,
    world,
)


@pytest.fixture
def cli(world, monkeypatch):  # noqa: F811
    client, _ = world
    api = answer_http_with(client, monkeypatch, TOKEN)
    monkeypatch.setenv("COLUMNS", "160")
    return lambda *args: CliRunner().invoke(main, [*args, "--api", "http://testserver"], obj=api)


def test_next_shows_the_claim_blind_and_label_reveals(cli):
    shown = cli("review", "next", "--reviewer", "ann")
    assert shown.exit_code == 0, shown.output
    assert "question: question" in shown.output and "[refund-1] Annual plans" in shown.output
    assert "claim:    claim" in shown.output and "verifier" not in shown.output
    slot = shown.output.split()[1]
    bad = cli("review", "label", slot, "--reviewer", "ann", "--label", "contradicted", "--span", "made up")
    assert bad.exit_code == 1 and "verbatim" in bad.output
    done = cli(
        "review", "label", slot, "--reviewer", "ann", "--label", "contradicted", "--span", "within 14 days of purchase"
    )
    assert done.exit_code == 0, done.output
    assert "verifier said:" in done.output and "span from refund-1" in done.output


def test_next_with_a_label_labels_at_once_and_json_reserves_only(cli):
    done = cli("review", "next", "--reviewer", "bob", "--label", "stale")
    assert done.exit_code == 0 and "labelled" in done.output and "settled: not yet" in done.output
    slot = json.loads(cli("review", "next", "--reviewer", "bob", "--json").output)
    assert "verdict" not in slot and slot["slot"]


def test_progress_and_agreement_tables_and_json(cli):
    for reviewer in ("ann", "bob"):
        for _ in range(2):
            assert cli("review", "next", "--reviewer", reviewer, "--label", "contradicted").exit_code == 0
    progress = cli("review", "progress")
    assert progress.exit_code == 0 and "ann" in progress.output and "billing-faq" in progress.output
    assert any(line.split()[:4] == ["ann", "reviewer", "2", "0"] for line in progress.output.splitlines())
    assert "NOT BLIND" in progress.output  # as the review page counts them
    agreement = json.loads(cli("review", "agreement", "--json").output)
    assert agreement["overall"]["human"]["kappa"]["items"] == 2
    table = cli("review", "agreement")
    assert table.exit_code == 0 and "VERIFIER-HUMAN KAPPA" in table.output


def test_rates_calibrated_adds_columns_and_json_fields(cli):
    plain = json.loads(cli("rates", "--window", "all", "--json").output)
    calibrated = json.loads(cli("rates", "--window", "all", "--calibrated", "--json").output)
    assert [{k: v for k, v in e.items() if k != "calibrated"} for e in calibrated] == plain
    assert all(e["calibrated"]["stale"] for e in calibrated), "no labels yet"
    table = cli("rates", "--window", "all", "--calibrated")
    assert table.exit_code == 0 and "CALIBRATED" in table.output and "NO LABELS YET" in table.output


@pytest.mark.slow
def test_plan_fits_80_columns_and_json_is_the_api_s(cli, monkeypatch):
    for reviewer in ("ann", "bob"):
        while cli("review", "next", "--reviewer", reviewer, "--label", "contradicted").exit_code == 0:
            pass
    monkeypatch.setenv("COLUMNS", "80")
    table = cli("review", "plan", "--window", "all", "--width", "5")
    assert table.exit_code == 0, table.output
    assert "under 5 pts" in table.output and "billing-faq" in table.output and "MORE" in table.output
    assert max(len(line) for line in table.output.splitlines()) <= 80, table.output
    plans = json.loads(cli("review", "plan", "--window", "all", "--width", "5", "-o", "json").output)
    assert {p["route"] for p in plans} == {"billing-faq", "shipping"} and all(p["target"] == 0.05 for p in plans)
    assert all(p["more"] == p["flagged"] + p["passed"] for p in plans if p["more"] is not None)
    assert [p["more"] for p in plans] == sorted((p["more"] for p in plans), reverse=True), "most needed first"
    bad = cli("review", "plan", "--width", "0")
    assert bad.exit_code != 0 and "--width" in bad.output


@pytest.fixture
def scored_cli(store, tmp_path, monkeypatch):
    """Answers whose verifier scores its verdicts, every queued claim labelled by two reviewers as the verifier
    said, except those it scored under 0.7."""
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}",
        api={"token_hashes": [TOKEN_HASH], "mutations_per_minute": 6000, "mutation_burst": 1000},
        review={"daily_budget": 40, "reviewers_per_claim": 2, "min_labels": 3, "bootstrap_samples": 200},
    )
    write_answers(store, [answer(i, scores=((0.55, 0.97), (0.65, 0.91), (0.99, 0.8))[i % 3]) for i in range(12)])
    client = TestClient(create_api(build(settings, store), now=Clock()))
    assert client.post("/api/review/sample", json={"window": "all"}, headers=AUTH).json()["queued"] == 24
    label_everything(client, Clock(), choose=lambda slot: "contradicted")
    api = answer_http_with(client, monkeypatch, TOKEN)
    monkeypatch.setenv("COLUMNS", "80")
    return lambda *args: CliRunner().invoke(main, [*args, "--api", "http://testserver"], obj=api)


def test_agreement_checks_the_verifier_s_confidence_at_80_columns(scored_cli):
    table = scored_cli("review", "agreement")
    assert table.exit_code == 0, table.output
    assert "The verifier's confidence against settled labels" in table.output
    assert "Reliability of verifier nli@1's score, every route" in table.output
    rows = {line.split()[0]: line for line in table.output.splitlines() if line[:3] in ("0.5", "0.8", "0.9")}
    # Every claim labelled 'contradicted': the supported ones at 0.55 disagree, the contradicted one at 0.8
    # agrees, and of 0.91, 0.97 (contradicted) and 0.99 (supported), two in three.
    assert " 0.0% (0.0%–" in rows["0.5-0.6"] and " 100.0% (" in rows["0.8-0.9"] and " 66.7% (" in rows["0.9-1.0"]
    assert max(len(line) for line in table.output.splitlines()) <= 80
    data = json.loads(scored_cli("review", "agreement", "--json").output)
    overall = next(c for c in data["confidence"] if c["route"] == "all")
    assert overall["labels"] == 24 and 0 < overall["ece"]["value"] < 1 and overall["auroc"]["value"] > 0.5
    progress = scored_cli("review", "progress")
    assert "SCORE" in progress.output and ">= 0.95" in progress.output and "0.50-0.70" in progress.output
