"""What one clustering run produced: clusters, per-claim labels, timings and messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from clustering.cluster import NOISE
from clustering.naming import NO_FACETS, Facets
from clustering.records import FailingClaim
from clustering.screen import TextProblem

# Per-claim outcome of a run: why its issue_id is what it is. A claim with no text is
# "unembedded" (issue_id null) unless its event's other claims joined an issue ("via_event").
CLUSTERED, ATTACHED, NOISE_STATUS, UNEMBEDDED, VIA_EVENT = "clustered", "attached", "noise", "unembedded", "via_event"


@dataclass
class ClusterSummary:
    index: int
    member_ids: tuple[str, ...]
    name: str
    keywords: tuple[str, ...]
    exemplar_ids: tuple[str, ...]
    routes: dict[str, int]  # route -> members, most affected first
    verdicts: dict[str, int]
    centroid: np.ndarray  # unit vector in the embedding space
    hourly_counts: dict[str, int]  # "YYYY-MM-DDTHH" (UTC) -> members observed in that hour
    first_observed: datetime | None
    last_observed: datetime | None
    subtitle: str = ""  # keywords, verdict, route, stage, versions (the name is the title)
    facets: Facets = NO_FACETS  # what the name was chosen from: its meaning keeps an issue's title across runs
    neighbours: dict[int, float] = field(default_factory=dict)  # cluster index -> link ratio (clustering/neighbours.py)

    @property
    def size(self) -> int:
        return len(self.member_ids)


@dataclass
class ClusteringRun:
    config_name: str
    model_id: str
    now: datetime
    claims: tuple[FailingClaim, ...]  # canonical order: sorted by id
    labels_: np.ndarray  # cluster index per claim, NOISE (-1) for noise and unembedded
    probabilities_: np.ndarray
    status_: tuple[str, ...]
    clusters_: list[ClusterSummary]
    timings_: dict[str, float]
    notes: list[str] = field(default_factory=list)
    problems: list[TextProblem] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    vectors_: np.ndarray | None = None  # rows for claims with status != unembedded, in claim order
    reducer_: Any = None
    clusterer_: Any = None
    reduced_: np.ndarray | None = None  # the fitted sample after reduction (what HDBSCAN saw)

    @property
    def ids(self) -> list[str]:
        return [c.id for c in self.claims]

    def count(self, status: str) -> int:
        return sum(s == status for s in self.status_)

    def summary(self) -> dict:
        n = len(self.claims)
        noise = self.count(NOISE_STATUS)
        embedded = n - self.count(UNEMBEDDED) - self.count(VIA_EVENT)
        return {
            "config": self.config_name,
            "model": self.model_id,
            "claims": n,
            "embedded": embedded,
            "unembedded": n - embedded,
            "via_event": self.count(VIA_EVENT),
            "issues": len(self.clusters_),
            "clustered": self.count(CLUSTERED),
            "attached": self.count(ATTACHED),
            "noise": noise,
            "noise_fraction": round(noise / embedded, 4) if embedded else 0.0,
            "timings": {k: round(v, 3) for k, v in self.timings_.items()},
            "notes": list(self.notes),
        }

    def assignments(self, issue_ids: Sequence[str] | None = None) -> list[dict]:
        """One line per input claim: ``{"id", "issue_id", "probability"}``; issue_id null for noise."""
        ids_of = list(issue_ids) if issue_ids is not None else [f"cluster-{c.index}" for c in self.clusters_]
        out = []
        for claim, label, probability in zip(self.claims, self.labels_.tolist(), self.probabilities_.tolist()):
            issue = None if label == NOISE else ids_of[label]
            out.append({"id": claim.id, "issue_id": issue, "probability": round(float(probability), 4)})
        return out
