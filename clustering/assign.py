"""Online assignment between re-clusterings: one new failing claim → an existing issue, or none.

Two ways were measured (bench/clustering.py --assign): HDBSCAN's ``approximate_predict``
on the UMAP-transformed embedding (bench/approximate_assign.py), and nearest issue centroid in the embedding space with
a cosine threshold. The nearest-centroid ``OnlineAssigner`` is the one to use: it agreed
with the batch labels at least as often, runs in well under a millisecond once the claim
is embedded, and needs only the centroids stored on each ``IssueRecord`` — no pickled UMAP
or HDBSCAN model has to travel from the re-clustering run to every worker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from clustering.issue import IssueRecord
from clustering.records import FailingClaim
from clustering.run import ClusteringRun
from clustering.vectorize import ClaimVectorizer


class OnlineAssigner:
    """Nearest issue centroid by cosine; below ``min_similarity`` the claim joins no issue."""

    def __init__(
        self,
        vectorizer: ClaimVectorizer,
        issue_ids: Sequence[str],
        centroids: np.ndarray,
        min_similarity: float = 0.4,
        routes: Mapping[str, Iterable[str]] | None = None,
    ):
        if len(issue_ids) != len(centroids):
            raise ValueError(f"{len(issue_ids)} issue ids but {len(centroids)} centroids")
        self.vectorizer = vectorizer
        self.issue_ids = list(issue_ids)
        self.centroids = np.asarray(centroids, dtype=np.float32)
        if not self.issue_ids:
            self.centroids = self.centroids.reshape(0, 0)
        self.min_similarity = min_similarity
        self.routes = {issue_id: frozenset(seen) for issue_id, seen in (routes or {}).items()}  # routes each has held

    @classmethod
    def from_issues(
        cls, issues: Sequence[IssueRecord], vectorizer: ClaimVectorizer, config_name: str, min_similarity: float = 0.4
    ) -> OnlineAssigner:
        """From stored issues of one config: every issue not merged away that has a centroid."""
        usable = [i for i in issues if i.config_name == config_name and i.merged_into is None and i.centroid]
        centroids = np.array([i.centroid for i in usable], dtype=np.float32)
        return cls(
            vectorizer, [i.issue_id for i in usable], centroids, min_similarity, {i.issue_id: i.routes for i in usable}
        )

    @classmethod
    def from_run(
        cls,
        run: ClusteringRun,
        cluster_issue_ids: Sequence[str],
        vectorizer: ClaimVectorizer,
        min_similarity: float = 0.4,
    ) -> OnlineAssigner:
        centroids = np.array([c.centroid for c in run.clusters_], dtype=np.float32)
        return cls(vectorizer, cluster_issue_ids, centroids, min_similarity)

    def seen_on(self, issue_id: str, route: str) -> bool:
        """Whether the issue has held claims of ``route`` (as its record knew when this assigner was built)."""
        return route in self.routes.get(issue_id, ())

    def assign(self, claim: FailingClaim) -> tuple[str | None, float]:
        """(issue_id, probability); (None, 0.0) when the claim cannot be embedded or fits no issue."""
        vector = self.vectorizer.vectorize_one(claim)
        if vector is None:
            return None, 0.0
        return self.assign_vector(vector)

    def assign_vector(self, vector: np.ndarray) -> tuple[str | None, float]:
        if not self.issue_ids:
            return None, 0.0
        similarity = self.centroids @ vector
        best = int(np.argmax(similarity))
        if similarity[best] < self.min_similarity:
            return None, 0.0
        return self.issue_ids[best], float(min(max(similarity[best], 0.0), 1.0))

    def assign_many(self, claims: Sequence[FailingClaim]) -> list[tuple[str | None, float]]:
        """Batch form for a worker batch: one embedder call for all claims."""
        vectorized = self.vectorizer.vectorize(claims)
        out: list[tuple[str | None, float]] = [(None, 0.0)] * len(claims)
        for row, i in enumerate(vectorized.embedded):
            out[i] = self.assign_vector(vectorized.vectors[row])
        return out
