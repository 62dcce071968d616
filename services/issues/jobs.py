"""The two clustering jobs: periodic re-clustering (leader-only) and online assignment between runs."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from clustering.assign import OnlineAssigner
from clustering.cluster import NOISE
from clustering.config import ClusteringConfig
from clustering.pipeline import IssuePipeline
from clustering.run import ClusteringRun
from clustering.track import IssueTracker
from services.issues.records import IssueRecords

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunReport:
    claims: int
    issues: int
    noise: int
    timings: dict
    notes: list


def map_positions(run: ClusteringRun) -> np.ndarray:
    """2-D positions for the issue map: the run's embedded vectors projected on their top two principal axes."""
    positions = np.zeros((len(run.claims), 2), dtype=np.float32)
    vectors = run.vectors_
    if vectors is None or len(vectors) < 3:
        return positions
    centred = vectors - vectors.mean(axis=0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ axes[:2].T
    embedded = [i for i, status in enumerate(run.status_) if status != "unembedded"]
    positions[embedded] = projected[: len(embedded)]
    return positions


class IssueJobs:
    """Holds the embedder (loaded once per process) and the latest online assigner."""

    def __init__(self, config: ClusteringConfig, embedder, issues: IssueRecords, lookback: timedelta,
                 min_similarity: float = 0.4):
        self.config = config
        self.embedder = embedder
        self.issues = issues
        self.lookback = lookback
        self.min_similarity = min_similarity
        self.assigner: OnlineAssigner | None = None
        self.mark: datetime | None = None

    def recluster(self, now: datetime, progress=None) -> RunReport:
        claims = self.issues.failing_claims(now - self.lookback)
        pipeline = IssuePipeline.from_config(self.config, self.embedder, progress)
        run = pipeline.fit(claims, now)
        tracker = IssueTracker(self.config)
        records = tracker.match(self.issues.load(), run, now)
        issue_of = tracker.cluster_issue_ids_
        positions = map_positions(run)
        rows = []
        for i, (claim, label, probability) in enumerate(zip(run.claims, run.labels_.tolist(), run.probabilities_.tolist())):
            rows.append({
                "claim_key": claim.id, "issue_id": "" if label == NOISE else issue_of[label],
                "probability": float(probability), "source": "batch", "config_name": self.config.name,
                "x": float(positions[i, 0]), "y": float(positions[i, 1]),
                "observed_at": claim.observed_at or now,
            })
        self.issues.save_members(rows)
        self.issues.save(records)  # after the members: an issue is visible only with its members
        self.assigner = OnlineAssigner.from_issues(records, pipeline.vectorizer, self.config.name, self.min_similarity)
        summary = run.summary()
        log.info("re-clustered %d failing claims into %d issues (%d noise)", summary["claims"], summary["issues"],
                 summary["noise"])
        return RunReport(summary["claims"], summary["issues"], summary["noise"], summary["timings"], summary["notes"])

    def assign_new(self, now: datetime, batch: int = 2000) -> int:
        """Assign failing claims ingested since the last call to the current issues; returns how many."""
        if self.mark is None:
            self.mark = now
        if self.assigner is None:
            if not self.issues.load():
                return 0
            pipeline = IssuePipeline.from_config(self.config, self.embedder)
            self.assigner = OnlineAssigner.from_issues(self.issues.load(), pipeline.vectorizer, self.config.name,
                                                       self.min_similarity)
        claims, mark = self.issues.claims_ingested_after(self.mark, batch)
        if not claims:
            return 0
        results = self.assigner.assign_many(claims)
        self.issues.save_members(
            {"claim_key": c.id, "issue_id": issue or "", "probability": float(p), "source": "online",
             "config_name": self.config.name, "x": 0.0, "y": 0.0,
             "observed_at": c.observed_at or now}
            for c, (issue, p) in zip(claims, results))
        self.mark = mark
        return sum(1 for issue, _ in results if issue)
