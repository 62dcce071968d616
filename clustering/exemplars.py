"""Representative traces per issue: central ones first, then spread out, never near-copies.

Start from the medoid-like member (closest to the centroid), then repeatedly add the
candidate with the best maximal-marginal-relevance score: central to the issue, far from
everything chosen so far (max-min distance), among the members HDBSCAN holds most firmly. Candidates
closer than ``max_similarity`` to a chosen one, or with a normalised text already chosen, are skipped: five
copies of one trace teach nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class ExemplarPicker:
    def __init__(
        self, n_exemplars: int = 5, max_similarity: float = 0.95, candidates: int = 200, relevance: float = 0.5
    ):
        self.n_exemplars = n_exemplars
        self.relevance = relevance
        self.max_similarity = max_similarity
        self.candidates = candidates

    def pick(self, vectors: np.ndarray, strength: np.ndarray, centroid: np.ndarray, texts: Sequence[str]) -> list[int]:
        """Indices (into this cluster's rows) of its exemplars, most central first."""
        n = len(vectors)
        if n == 0:
            return []
        centrality = vectors @ centroid
        # firm members first (HDBSCAN strength), then central ones; index breaks ties deterministically
        order = np.lexsort((np.arange(n), -centrality, -np.round(strength, 3)))[: self.candidates]
        chosen = [int(order[np.argmax(centrality[order])])]
        seen_texts = {texts[chosen[0]]}
        nearest = vectors[order] @ vectors[chosen[0]]
        while len(chosen) < self.n_exemplars:
            allowed = (nearest < self.max_similarity) & np.array([texts[i] not in seen_texts for i in order])
            if not allowed.any():
                break
            score = self.relevance * centrality[order] - (1.0 - self.relevance) * nearest
            gap = np.where(allowed, score, -np.inf)
            pick = int(order[int(np.argmax(gap))])
            chosen.append(pick)
            seen_texts.add(texts[pick])
            nearest = np.maximum(nearest, vectors[order] @ vectors[pick])
        return chosen
