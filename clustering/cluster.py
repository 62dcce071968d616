"""Density clustering with hdbscan; noise kept in the open.

HDBSCAN labels the reduced vectors and keeps its prediction data (soft membership,
approximate_predict). Clusters that are one failure in the embedding space merge
(clustering/merge.py). Low-confidence points it calls noise are then attached to the
nearest cluster centroid in the *embedding* space when the cosine similarity clears
``attach_min_similarity``; the rest stay noise (label -1): kept, counted, never dropped.
The same nearest-centroid rule places points outside the fitted sample and, online, new claims.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from clustering.merge import NOISE, CohesionMerger


class HdbscanClusterer:
    """Every parameter comes from a ClusteringConfig (clustering/config.py, where each is defined once):
    ``IssuePipeline.from_config`` builds it."""

    def __init__(
        self,
        min_cluster_size: int,
        min_cluster_fraction: float,
        min_samples: int,
        attach_min_similarity: float,
        allow_single_cluster: bool,
        merge_min_cohesion: float,
        merge_min_alignment: float,
    ):
        self.min_cluster_size = min_cluster_size
        # one failure family dominating a window (a bad deploy) must still become an issue,
        # not be declared all noise because HDBSCAN may not pick the root cluster
        self.allow_single_cluster = allow_single_cluster
        self.min_cluster_fraction = min_cluster_fraction
        self.min_samples = min_samples
        self.attach_min_similarity = attach_min_similarity
        # 1.0 merges nothing; see clustering/merge.py
        self.merger = CohesionMerger(merge_min_cohesion, merge_min_alignment)

    def min_size_for(self, n: int) -> int:
        return max(self.min_cluster_size, round(self.min_cluster_fraction * n))

    def fit(self, reduced: np.ndarray, vectors: np.ndarray, ids: Sequence[str]) -> HdbscanClusterer:
        """Cluster ``reduced`` (rows align with ``vectors`` and ``ids``); fitted state ends in ``_``."""
        n = len(reduced)
        self.min_size_ = self.min_size_for(n)
        self.model_ = None
        self.degenerate_ = None  # "too_few" or "identical" when HDBSCAN had nothing to decide
        if n < self.min_size_ or n < 2:
            self.degenerate_ = "too_few"
            raw = np.full(n, NOISE)
            strength = np.zeros(n)
        elif float(np.ptp(vectors, axis=0).max()) == 0.0:
            self.degenerate_ = "identical"
            raw = np.zeros(n, dtype=int)  # one cluster: there is nothing to separate
            strength = np.ones(n)
        else:
            import hdbscan

            self.model_ = hdbscan.HDBSCAN(
                min_cluster_size=self.min_size_,
                min_samples=min(self.min_samples, self.min_size_, n - 1),
                allow_single_cluster=self.allow_single_cluster,
                prediction_data=True,
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # sklearn deprecation chatter inside hdbscan
                self.model_.fit(reduced)
            raw = self.model_.labels_.copy()
            strength = self.model_.probabilities_.astype(float)
        self.dissolved_ = self._dissolve_loose(raw, strength, vectors)
        raw = self.merger.merge(raw, vectors)
        self.merges_ = self.merger.merges_
        self.order_ = _canonical_order(raw, ids)
        self.raw_labels_ = _relabel(raw, self.order_)
        self.centroids_ = centroids(vectors, self.raw_labels_, len(self.order_))
        labels, probabilities = self.raw_labels_.copy(), strength.copy()
        noise = labels == NOISE
        attached, similarity = self.attach(vectors[noise])
        labels[noise], probabilities[noise] = attached, similarity
        self.labels_ = labels
        self.probabilities_ = probabilities
        self.attached_ = noise & (labels != NOISE)
        return self

    def _dissolve_loose(self, raw: np.ndarray, strength: np.ndarray, vectors: np.ndarray) -> list[int]:
        """Turn clusters whose typical member is not similar to their centroid back into noise.

        A density cluster of mutually unrelated claims (e.g. the single root cluster over
        scattered texts) is no issue: its median member would not pass the very threshold a
        point must pass to join an issue. Returns the sizes of the clusters dissolved.
        """
        found = [label for label in np.unique(raw) if label != NOISE]
        if not found:
            return []
        k = int(max(found)) + 1
        similarity = np.einsum("ij,ij->i", vectors, centroids(vectors, raw, k)[np.maximum(raw, 0)])
        sizes = []
        for label in found:
            member = raw == label
            if np.median(similarity[member]) < self.attach_min_similarity:
                raw[member], strength[member] = NOISE, 0.0
                sizes.append(int(member.sum()))
        return sizes

    def attach(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nearest centroid by cosine, or NOISE below the threshold; returns (labels, similarity)."""
        if len(vectors) == 0 or len(self.centroids_) == 0:
            return np.full(len(vectors), NOISE), np.zeros(len(vectors))
        similarity = vectors @ self.centroids_.T
        best = similarity.argmax(axis=1)
        best_similarity = similarity[np.arange(len(vectors)), best]
        labels = np.where(best_similarity >= self.attach_min_similarity, best, NOISE)
        return labels, np.where(labels == NOISE, 0.0, np.clip(best_similarity, 0.0, 1.0))

    @property
    def n_clusters_(self) -> int:
        return len(self.order_)


def centroids(vectors: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Unit-length mean vector per cluster 0..k-1."""
    if k == 0:
        return np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float32)
    sums = np.zeros((k, vectors.shape[1]), dtype=np.float64)
    member = labels >= 0
    np.add.at(sums, labels[member], vectors[member])
    sums /= np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return sums.astype(np.float32)


def _canonical_order(raw: np.ndarray, ids: Sequence[str]) -> list[int]:
    """Raw cluster numbers sorted by their smallest member id: numbering independent of the algorithm's."""
    first: dict[int, str] = {}
    for label, claim_id in zip(raw.tolist(), ids):
        if label != NOISE and (label not in first or claim_id < first[label]):
            first[label] = claim_id
    return sorted(first, key=first.__getitem__)


def _relabel(raw: np.ndarray, order: list[int]) -> np.ndarray:
    mapping = {old: new for new, old in enumerate(order)}
    return np.array([mapping.get(label, NOISE) for label in raw.tolist()], dtype=int)
