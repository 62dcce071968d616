"""Offline mode: ``claimwatch cluster INPUT.jsonl --out ASSIGNMENTS.jsonl --issues-out ISSUES.jsonl``.

Input lines are failing-claim records ``{"id", "text", ...}`` or verdict events (they carry
``schema``), from which the failed claims are taken. Bad lines are skipped and reported,
never fatal (unless ``strict``), the way the worker dead-letters bad events.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import orjson

from clustering.config import DEFAULT_CONFIG, ClusteringConfig
from clustering.embed import CachedEmbedder, Embedder, EmbeddingCache, MemoryEmbeddingCache, SentenceTransformerEmbedder
from clustering.pipeline import IssuePipeline, Progress
from clustering.records import FailingClaim
from clustering.track import IssueTracker
from services.contract.errors import RecordError

MAX_REPORTED_REJECTIONS = 5


class OfflineInputError(ValueError):
    """The input file cannot be read at all; the message says which and why."""


def read_claims(input_path: str | Path, strict: bool = False) -> tuple[list[FailingClaim], list[str]]:
    """Failing claims from a JSONL file, and one reason per rejected line."""
    path = Path(input_path)
    if not path.is_file():
        raise OfflineInputError(
            f"input file {path} does not exist; pass a JSONL file of failing claims or verdict events"
        )
    claims: list[FailingClaim] = []
    rejected: list[str] = []
    for line_no, raw in _lines(path):
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            reason = f"line {line_no}: not JSON ({exc})"
        else:
            try:
                claims.extend(FailingClaim.from_offline_line(data, line_no))
                continue
            except RecordError as exc:
                reason = str(exc)
        if strict:
            raise OfflineInputError(reason)
        rejected.append(reason)
    return claims, rejected


def cluster_file(
    input_path: str | Path,
    out_path: str | Path,
    issues_out_path: str | Path,
    config: ClusteringConfig = DEFAULT_CONFIG,
    progress: Progress | None = None,
    embedder: Embedder | None = None,
    cache: EmbeddingCache | None = None,
    *,
    now: datetime,
    strict: bool = False,
) -> dict:
    """Cluster one file; write assignments and issues; return the run summary (with ``rejected`` lines).

    ``now`` is the run's time (first and last seen of new issues); the caller reads the clock.
    """
    claims, rejected = read_claims(input_path, strict)
    embedder = embedder or SentenceTransformerEmbedder(config.model, backend=config.backend)
    pipeline = IssuePipeline.from_config(config, CachedEmbedder(embedder, cache or MemoryEmbeddingCache()), progress)
    run = pipeline.fit(claims, now)
    tracker = IssueTracker(config)
    issues = tracker.match([], run, now)
    _write_lines(out_path, run.assignments(tracker.cluster_issue_ids_))
    ranked = sorted(issues, key=lambda i: (-i.size, i.issue_id))
    _write_lines(issues_out_path, [i.to_line() for i in ranked])
    summary = run.summary()
    summary["rejected"] = len(rejected)
    if rejected:
        shown = "; ".join(rejected[:MAX_REPORTED_REJECTIONS])
        summary["notes"].append(f"{len(rejected)} input line(s) skipped: {shown}")
    summary["outputs"] = {"assignments": str(out_path), "issues": str(issues_out_path)}
    return summary


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if raw.strip():
                yield line_no, raw


def _write_lines(path: str | Path, rows: list[dict]) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as handle:
        for row in rows:
            handle.write(orjson.dumps(row) + b"\n")
