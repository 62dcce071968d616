"""`claimwatch eval record` (POST /api/eval/runs/{run_id}) on a real store: a run's answers from a file, sent in
parts the API takes, then compared; a second send changes nothing, and bad runs are refused with a sentence naming
the line or the item."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from services.app.cli import main
from tests.support.cli import answer_http_with
from tests.unit.evalset.test_eval_compare_surfaces import AUTH, TOKEN, compare, world  # noqa: F401  (a fixture)

S, C = "supported", "contradicted"


@pytest.fixture
def record(world, monkeypatch, tmp_path):  # noqa: F811
    api = answer_http_with(world[0], monkeypatch, TOKEN)

    def run(run_id: str, lines: list[dict | str], *options: str):
        path = tmp_path / f"{run_id}.jsonl"
        path.write_text("\n".join(x if isinstance(x, str) else orjson.dumps(x).decode() for x in lines) + "\n")
        env = {"COLUMNS": "200", "CLAIMWATCH_API__MAX_BODY_BYTES": "2048"}  # a few answers a part
        args = ["eval", "record", run_id, str(path), *options, "--api", "http://testserver"]
        return CliRunner(env=env).invoke(main, args, obj=api)

    return run


def answers_like_r11() -> list[dict]:
    """What r-11 answered (tests/unit/evalset/test_eval_compare_surfaces.py), as a file's lines."""
    lines = [
        {"item_id": f"a{i:02d}", "answer": "...", "claims": [{"verdict": v, "text": f"c{k}"} for k, v in enumerate(
            (S, S, C, C) if i < 15 else (S, S, S, C)
        )]}
        for i in range(29)
    ]  # fmt: skip
    return (
        lines
        + [{"item_id": "a29", "action": "abstained"}]
        + [{"item_id": f"u{i}", "action": "abstained"} for i in range(9)]
    )


GEN_12 = ("--version", "model=gen-2026-12,prompt=p7", "--labeler", "verifier:v1")


def test_a_run_recorded_from_a_file_compares_as_the_same_answers_recorded_directly(world, record):  # noqa: F811
    client, evals = world
    done = record("r-12", answers_like_r11(), *GEN_12)
    assert done.exit_code == 0, done.output
    assert "recorded 39 answers (116 claims) to run r-12; it holds 39 answers" in done.output
    command = done.output.splitlines()[-1].strip()
    assert command.endswith("claimwatch eval compare --baseline r-11 --candidate r-12")  # the run before it
    assert evals.runs("r-12")[0]["versions"] == {"model": "gen-2026-12", "prompt": "p7"}
    # Recorded through the file, r-12 answers as r-11 did: against r-10 the same figures, against r-11 no change.
    twelve, eleven = compare(client, "r-10", "r-12").json(), compare(client, "r-10", "r-11").json()
    assert twelve["metrics"] == eleven["metrics"] and twelve["items"] == eleven["items"]
    same = compare(client, "r-11", "model=gen-2026-12").json()["metrics"][0]
    assert (same["difference"], same["reading"]) == (0.0, "no credible difference")


def test_sending_a_run_again_changes_nothing_and_other_versions_are_refused(world, record):  # noqa: F811
    _, evals = world
    assert record("r-12", answers_like_r11(), *GEN_12).exit_code == 0
    again = record("r-12", answers_like_r11(), *GEN_12)
    assert again.exit_code == 0, again.output
    assert "recorded 0 answers (0 claims) to run r-12; 39 it held already, kept as they were" in again.output
    assert evals.runs("r-12")[0]["items"] == 39
    other = record("r-12", answers_like_r11()[:1], "--version", "model=gen-2026-13", "--labeler", "verifier:v1")
    assert other.exit_code == 1
    assert "run r-12 was recorded with versions model=gen-2026-12,prompt=p7, not model=gen-2026-13" in other.output


@pytest.mark.parametrize(
    "run_id, lines, said",
    [
        ("r-13", [{"item_id": "a00"}, {"item_id": "zz1"}, {"item_id": "zz2"}], "2 items not in the eval set: zz1, zz2"),
        ("r-13", [{"item_id": "a00"}, "{not json", {"item_id": "a01"}], ".jsonl:2: "),
        ("r-13", [{"item_id": "a00", "claims": [{"verdict": "maybe"}]}], ".jsonl:1: claims.0.verdict: unknown verdict"),
        ("r-13", [{"item_id": "a00"}, {"item_id": "a00"}], "1 item answered twice in one part: a00"),
        ("origin", [{"item_id": "a00"}], "run id 'origin' is promotion's own"),
        ("model=x", [{"item_id": "a00"}], "run id 'model=x' must be 1-64 letters"),
    ],
)
def test_a_run_that_cannot_be_recorded_says_why_and_records_nothing(world, record, run_id, lines, said):  # noqa: F811
    _, evals = world
    refused = record(run_id, lines, "--labeler", "verifier:v1")
    assert refused.exit_code == 1 and said in refused.output, refused.output
    assert evals.runs(run_id) == []


def test_the_api_takes_a_part_with_a_token_only(world):  # noqa: F811
    client, _ = world
    part = {"labeler": "verifier:v1", "answers": [{"item_id": "a00"}]}
    assert client.post("/api/eval/runs/r-14", json=part).status_code == 401
    made = client.post("/api/eval/runs/r-14", json=part, headers=AUTH)
    assert made.status_code == 200 and made.json()["recorded"] == 1, made.text
