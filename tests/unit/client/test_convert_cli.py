"""`claimwatch convert` run as users run it (a subprocess): verifier output exactly as the tools
emit it, and every minimal example in docs/sending-verdicts.md ("The smallest line each format accepts")."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from services.client.adapters import FORMATS, get_adapter
from services.contract.decode import validate_event
from services.contract.model import parse_timestamp
from tests.support.paths import ROOT

# The LLM-judge card's documented output, exactly: no card_id, no created_at.
CARD = {
    "claims": [
        {
            "text": "Annual plans can be refunded within 30 days of purchase.",
            "label": "contradicted",
            "evidence_phrase": "refunded within 14 days of purchase",
        },
        {"text": "The refund arrives the same day.", "label": "unsupported", "evidence_phrase": None},
    ],
    "hallucination_rate": 1.0,
    "decision_basis": "retrieved policy pol-17",
}
OTHER_CARD = {
    "claims": [
        {"text": "A 5% fee is deducted.", "label": "supported", "evidence_phrase": "A processing fee of 5% applies."}
    ],
    "hallucination_rate": 0.0,
    "decision_basis": "retrieved policy pol-17",
}
ROW = re.compile(r"^\| `(?P<fmt>[a-z-]+)` \| `(?P<line>\{.*\})` \| `(?P<command>claimwatch [^`]+)` \|$", re.M)


def claimwatch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "services.app.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def events_of(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stderr
    events = [orjson.loads(line) for line in done.stdout.splitlines()]
    for event in events:
        validate_event(event)
    return events


def said(done: subprocess.CompletedProcess) -> str:
    return " ".join(done.stderr.split())  # the console wraps lines


def documented_examples() -> list[tuple[str, str, str]]:
    guide = (ROOT / "docs" / "sending-verdicts.md").read_text()
    section = guide[guide.index("### The smallest line each format accepts\n") :]
    section = section[: section.index("\n### ")]
    return [(m["fmt"], m["line"], m["command"]) for m in ROW.finditer(section)]


@pytest.mark.slow
def test_the_judge_cards_own_output_converts_and_rerunning_gives_the_same_ids(tmp_path):
    cards = write(tmp_path / "cards.jsonl", [CARD, CARD, OTHER_CARD])
    args = ("convert", "--from", "judge-card", str(cards), "--route", "billing-faq")
    first = claimwatch(*args)
    events = events_of(first)
    assert [[c["verdict"] for c in e["claims"]] for e in events] == [["contradicted", "unsupported"]] * 2 + [
        ["supported"]
    ]
    assert events[0]["claims"][0]["span"] == "refunded within 14 days of purchase"
    ids = [e["event_id"] for e in events]
    assert len(set(ids)) == 3  # identical lines are two answers, not one
    # No time in the card: the conversion time, and a warning that says how to pin it.
    assert "warning: 3 records carry no time" in said(first)
    suggested = re.search(r"Pass --observed-at (\S+)", said(first))
    assert suggested and parse_timestamp(suggested[1]) == parse_timestamp(events[0]["observed_at"])

    assert [e["event_id"] for e in events_of(claimwatch(*args))] == ids

    pinned = claimwatch(*args, "--observed-at", "2026-11-21T10:14:03+01:00")
    events = events_of(pinned)
    assert [e["event_id"] for e in events] == ids
    assert {e["observed_at"] for e in events} == {"2026-11-21T09:14:03Z"}
    assert "warning:" not in pinned.stderr and "3 records carry no time" in said(pinned)


def test_a_bad_observed_at_is_refused(tmp_path):
    done = claimwatch(
        "convert",
        "--from",
        "judge-card",
        str(write(tmp_path / "c.jsonl", [CARD])),
        "--route",
        "r",
        "--observed-at",
        "2026-11-21T09:00:00",
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "--observed-at" in said(done) and "has no offset" in said(done)


def test_the_docs_show_a_minimal_example_for_every_adapter():
    assert sorted(fmt for fmt, _, _ in documented_examples()) == sorted(FORMATS)


@pytest.mark.slow
@pytest.mark.parametrize("fmt, line, command", documented_examples(), ids=[fmt for fmt, _, _ in documented_examples()])
def test_each_documented_example_converts(tmp_path, fmt, line, command):
    (tmp_path / "in.jsonl").write_text(line + "\n")
    argv = shlex.split(command)
    assert argv[0] == "claimwatch" and argv[1:4] == ["convert", "--from", fmt]
    done = claimwatch(*argv[1:], cwd=tmp_path)
    events = events_of(done)
    assert len(events) == 1 and events[0]["claims"]
    if "--observed-at" in argv:
        assert events[0]["observed_at"] == argv[argv.index("--observed-at") + 1]
    stamped = get_adapter(fmt).stamped(orjson.loads(line)) and "--observed-at" not in argv
    assert ("warning: 1 records carry no time" in said(done)) == stamped
    assert events_of(claimwatch(*argv[1:], cwd=tmp_path))[0]["event_id"] == events[0]["event_id"]


def write(path: Path, records: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path
