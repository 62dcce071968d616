"""How much two issues' claims are each other's nearest neighbours: the evidence behind a suggested merge.

HDBSCAN on UMAP's projection can cut one broad failure in two, and two fine-grained failures side by side can
have centroids as close as those two halves (BANKING77's card_arrival and card_delivery_estimate). The centroids
cannot tell them apart, and nor can the issues' spreads (tried: docs/performance.md#merge-suggestions); the claims'
neighbourhoods can: the halves of one failure stay linked claim to claim across the cut, two failures much less.

Each claim's ``K`` nearest claims (cosine, in the embedding space) are its links. Two clusters' link ratio is
the links between them, both ways, per link within either.
"""

from __future__ import annotations

import numpy as np

K = 15  # UMAP's own neighbourhood at the sizes benched (clustering/config.py umap_neighbors)
MAX_QUERIES = 5_000  # claims whose links are counted: bounds the cost (1.3 s at 15,000 claims on 2 cores)
KEPT = 10  # most linked clusters kept per cluster
_CHUNK = 1_024


def link_counts(vectors: np.ndarray, labels: np.ndarray, k: int = K, max_queries: int = MAX_QUERIES) -> np.ndarray:
    """counts[a, b]: links from cluster a's claims to cluster b's (noise neither counts nor is counted).

    Above ``max_queries`` claims, an evenly spaced sample of them (canonical order) has its links counted, among all.
    """
    found = int(labels.max()) + 1 if len(labels) else 0
    counts = np.zeros((found, found), dtype=np.int64)
    if found == 0 or len(vectors) <= k:
        return counts
    queries = np.unique(np.linspace(0, len(vectors) - 1, min(len(vectors), max_queries)).astype(int))
    queries = queries[labels[queries] >= 0]
    for start in range(0, len(queries), _CHUNK):
        rows = queries[start : start + _CHUNK]
        similarity = vectors[rows] @ vectors.T
        similarity[np.arange(len(rows)), rows] = -np.inf  # a claim is not its own neighbour
        nearest = labels[np.argpartition(-similarity, k, axis=1)[:, :k]]
        source = np.repeat(labels[rows], k)
        kept = nearest.ravel() >= 0
        np.add.at(counts, (source[kept], nearest.ravel()[kept]), 1)
    return counts


def link_ratios(counts: np.ndarray) -> np.ndarray:
    """ratio[a, b] = (links a->b + links b->a) / (links within a + links within b); 0 on the diagonal."""
    within = np.diag(counts).astype(float)
    ratio = (counts + counts.T) / np.maximum(within[:, None] + within[None, :], 1.0)
    np.fill_diagonal(ratio, 0.0)
    return ratio


def neighbours(vectors: np.ndarray, labels: np.ndarray, kept: int = KEPT) -> list[dict[int, float]]:
    """Per cluster 0..max(labels): its ``kept`` most linked clusters and their link ratios (those above 0)."""
    ratio = link_ratios(link_counts(vectors, labels))
    return [
        {int(b): round(float(ratio[a, b]), 4) for b in np.argsort(-ratio[a], kind="stable")[:kept] if ratio[a, b] > 0}
        for a in range(len(ratio))
    ]
