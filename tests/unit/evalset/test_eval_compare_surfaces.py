"""`claimwatch eval compare`, GET /api/eval/compare and `eval gate --baseline` over a real store holding three runs
of the same approved items: the API and the CLI give the same figures, bad matchers are refused with a sentence,
and the gate fails a credibly worse candidate and passes the same runs the other way round."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.api.auth import new_token
from services.app.cli import main
from services.app.compose import build
from services.app.settings import Settings
from services.core.numbers import change_interval_text, pct, pts
from services.evalset.compare import PairedComparison
from services.evalset.promotion import load_outcomes
from services.store.evalset import EvalRepository
from tests.support.cli import answer_http_with
from tests.support.eval_runs import Answer, add_approved_items, record_run

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
TOKEN, TOKEN_HASH = new_token()
AUTH = {"Authorization": f"Bearer {TOKEN}"}
S, C = "supported", "contradicted"
GEN_10, GEN_11 = {"model": "gen-2026-10"}, {"model": "gen-2026-11", "prompt": "p7"}


def lay_down_runs(evals: EvalRepository) -> None:
    """30 answerable items (a00-a09 high stakes) and 10 unanswerable ones, answered by three runs:

    - r-10 (gen-2026-10): 3 claims of 4 supported on every answerable item; abstains on u0-u7, serves u8 and u9.
    - r-11-old (gen-2026-11, an hour later): the same answers.
    - r-11 (gen-2026-11, prompt p7, two hours later): 2 of 4 on a00-a14, 3 of 4 on a15-a28, abstains on a29 and
      on u0-u8; it never answered u9.

    r-11 against r-10: faithfulness on the 29 items both served with claims, 87/116 = 0.75 against 72/116."""
    items = [(f"a{i:02d}", "lookup", "high" if i < 10 else "low", True) for i in range(30)]
    add_approved_items(evals, items + [(f"u{i}", "lookup", "low", False) for i in range(10)], T0)
    old = {f"a{i:02d}": Answer((S, S, S, C)) for i in range(30)}
    old |= {f"u{i}": Answer(abstained=True) if i < 8 else Answer((S, C)) for i in range(10)}
    record_run(evals, "r-10", GEN_10, old, T0)
    record_run(evals, "r-11-old", {"model": "gen-2026-11"}, old, T0 + timedelta(hours=1))
    new = {f"a{i:02d}": Answer((S, S, C, C) if i < 15 else (S, S, S, C)) for i in range(29)}
    new |= {"a29": Answer(abstained=True)} | {f"u{i}": Answer(abstained=True) for i in range(9)}
    record_run(evals, "r-11", GEN_11, new, T0 + timedelta(hours=2))


@pytest.fixture
def world(store, tmp_path):
    settings = Settings(
        clickhouse=f"chdb:{tmp_path / 'unused'}", api={"token_hashes": [TOKEN_HASH]}, eval={"min_items": 20}
    )
    lay_down_runs(EvalRepository(store))
    return TestClient(create_api(build(settings, store))), EvalRepository(store)


@pytest.fixture
def cli(world, monkeypatch):
    api = answer_http_with(world[0], monkeypatch, TOKEN)

    def run(*args: str):
        return CliRunner(env={"COLUMNS": "200"}).invoke(main, [*args, "--api", "http://testserver"], obj=api)

    return run


def compare(client, baseline: str, candidate: str):
    return client.get("/api/eval/compare", params={"baseline": baseline, "candidate": candidate}, headers=AUTH)


def test_compare_finds_runs_by_versions_and_gives_the_known_paired_difference(world):
    client, evals = world
    answer = compare(client, "model=gen-2026-10", "model=gen-2026-11").json()
    assert answer["baseline"]["run_id"] == "r-10" and answer["baseline"]["matched"] == 1
    # Two runs answered with gen-2026-11: the newest is compared, and the answer says so.
    assert answer["candidate"] | {"versions": None} == {
        "run_id": "r-11",
        "versions": None,
        "label": "r-11 (model=gen-2026-11,prompt=p7)",
        "results": 39,
        "produced_at": "2026-11-21T11:00:00Z",
        "matcher": "model=gen-2026-11",
        "matched": 2,
    }
    assert (answer["items"], answer["baseline_only"], answer["candidate_only"]) == (39, 1, 0)
    faith, correct, over = answer["metrics"]
    assert (faith["metric"], faith["pairs"], faith["reading"]) == ("faithfulness", 29, "candidate worse")
    assert faith["baseline"]["value"] == 87 / 116 and faith["candidate"]["value"] == 72 / 116
    assert faith["difference"] == pytest.approx(72 / 116 - 87 / 116)
    assert faith["lo"] < faith["difference"] < faith["hi"] < 0 and faith["excludes_zero"]
    assert (correct["pairs"], correct["baseline"]["value"], correct["candidate"]["value"]) == (9, 8 / 9, 1.0)
    assert (over["pairs"], over["difference"]) == (30, pytest.approx(1 / 30))
    assert answer["slices"][0]["where"] == "stakes=high"  # a00-a09: 2 of 4 against 3: the largest loss
    # The same figures as the statistics on the stored outcomes.
    direct = PairedComparison().compare(load_outcomes(evals, "r-10"), load_outcomes(evals, "r-11")).metrics[0]
    assert (faith["lo"], faith["hi"]) == (direct.lo, direct.hi)


def test_the_cli_prints_the_apis_figures(world, cli):
    client, _ = world
    api = compare(client, "r-10", "model=gen-2026-11").json()
    shown = cli("eval", "compare", "--baseline", "r-10", "--candidate", "model=gen-2026-11", "-o", "json")
    assert shown.exit_code == 0 and orjson.loads(shown.output) == api
    text = cli("eval", "compare", "--baseline", "r-10", "--candidate", "model=gen-2026-11")
    assert text.exit_code == 0, text.output
    faith = api["metrics"][0]
    assert "r-11 (model=gen-2026-11,prompt=p7); the newest of 2 runs matching model=gen-2026-11" in text.output
    assert "39 approved items answered by both (1 only by the baseline, 0 only by the candidate)" in text.output
    row = next(line for line in text.output.splitlines() if line.startswith("faithfulness") and " all " in line)
    for cell in (
        pct(87 / 116),
        pct(72 / 116),
        pts(faith["difference"]),
        change_interval_text(faith["lo"], faith["hi"]),
    ):
        assert cell in row
    assert row.rstrip().endswith("candidate worse")


@pytest.mark.parametrize(
    "baseline, candidate, status, fragment",
    [
        (
            "model=gen-2026-12",
            "r-11",
            404,
            "baseline 'model=gen-2026-12' matches no eval run; the newest runs are r-11 (model=gen-2026-11,prompt=p7), "
            "r-11-old (model=gen-2026-11), r-10 (model=gen-2026-10)",
        ),
        ("r-10", "r-12", 404, "candidate 'r-12' matches no eval run"),
        ("model=", "r-11", 422, "baseline: 'model=' is not KEY=VALUE"),
        ("model=gen-2026-11,prompt=p7", "r-11", 422, "baseline and candidate are the same run, r-11 (model="),
    ],
)
def test_bad_matchers_are_refused_with_a_sentence(world, cli, baseline, candidate, status, fragment):
    refused = compare(world[0], baseline, candidate)
    assert refused.status_code == status and fragment in refused.json()["detail"]
    said = cli("eval", "compare", "--baseline", baseline, "--candidate", candidate)
    assert said.exit_code == 1 and fragment in " ".join(said.output.split()) and f"(HTTP {status})" in said.output
    assert world[0].get("/api/eval/compare", params={"candidate": "r-10"}, headers=AUTH).status_code == 422


def test_without_a_candidate_the_newest_run_is_compared(world, cli):
    newest = world[0].get("/api/eval/compare", params={"baseline": "r-10"}, headers=AUTH).json()
    assert newest == compare(world[0], "r-10", "r-11").json() | {"candidate": newest["candidate"]}
    assert newest["candidate"]["run_id"] == "r-11" and newest["candidate"]["matcher"] == ""
    shown = cli("eval", "compare", "--baseline", "r-10", "-o", "json")
    assert orjson.loads(shown.output) == newest


def test_the_gate_fails_a_credibly_worse_candidate_and_passes_the_runs_the_other_way_round(world, cli):
    client, _ = world
    gate = client.get("/api/eval/gate", params={"baseline": "model=gen-2026-10"}, headers=AUTH).json()  # the newest
    assert not gate["passed"]
    assert [(f["slice"], f["metric"]) for f in gate["failures"]] == [("all", "faithfulness against the baseline")]
    assert (
        "credibly worse, the whole interval below -1.0 pts (eval.compare_tolerance)" in gate["failures"][0]["message"]
    )
    failed = cli("eval", "gate", "--baseline", "model=gen-2026-10")
    assert failed.exit_code == 1 and "FAIL all: faithfulness on all is 62.1% for r-11" in failed.output
    passed = cli("eval", "gate", "--baseline", "r-11", "--candidate", "r-10")
    assert passed.exit_code == 0, passed.output
    assert "faithfulness on all is 75.0% for r-10 (model=gen-2026-10) against 62.1%" in passed.output
    assert "not credibly worse than -1.0 pts (eval.compare_tolerance)" in passed.output
    # The same answers under two runs: nothing changed, nothing fails.
    same = client.get("/api/eval/gate", params={"baseline": "r-10", "candidate": "r-11-old"}, headers=AUTH).json()
    assert same["passed"] and len(same["checked"]) == 3
    lone = cli("eval", "gate", "--candidate", "r-10")
    assert lone.exit_code == 1 and "--candidate needs --baseline" in lone.output


def flat(page: str) -> str:
    """A page as read: tags dropped, entities decoded, runs of white space one space."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).strip()


def test_the_eval_page_compares_the_runs_it_is_asked_for(world):
    client, _ = world
    api = compare(client, "model=gen-2026-10", "model=gen-2026-11").json()
    page = client.get("/eval", params={"baseline": "model=gen-2026-10", "candidate": "model=gen-2026-11"})
    assert page.status_code == 200 and 'id="comparison"' in page.text
    text = flat(page.text)
    assert "(the newest of 2 runs matching model=gen-2026-11)" in text
    assert "39 approved items answered by both (1 only by the baseline, 0 only by the candidate)" in text
    for m in api["metrics"] + api["slices"]:
        interval = m["note"] or change_interval_text(m["lo"], m["hi"])
        cells = [m["metric"], m["where"], f"{m['pairs']:,}", pct(m["baseline"]["value"]), pct(m["candidate"]["value"])]
        assert " ".join([*cells, pts(m["difference"]), interval, m["reading"]]) in text
    refused = client.get("/eval", params={"baseline": "model=gen-2026-12"})
    assert refused.status_code == 200 and 'id="compare-error"' in refused.text and 'id="comparison"' not in refused.text
    assert "baseline 'model=gen-2026-12' matches no eval run" in flat(refused.text)
    plain = client.get("/eval").text
    assert 'id="compare-form"' in plain and 'id="comparison"' not in plain and 'id="compare-error"' not in plain
    assert '<option value="r-11-old">r-11-old (model=gen-2026-11)</option>' in plain
