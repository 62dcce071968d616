"""HDBSCAN ``approximate_predict`` as an online assigner: measured against clustering.assign.OnlineAssigner.

Only bench/clustering.py --assign uses it; the worker assigns by nearest centroid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from clustering.assign import OnlineAssigner
from clustering.cluster import NOISE
from clustering.run import ClusteringRun
from clustering.vectorize import ClaimVectorizer


class ApproximatePredictAssigner:
    """HDBSCAN ``approximate_predict`` on the run's UMAP transform; kept to measure against.

    hdbscan selects clusters for its prediction data separately from ``labels_``, and the two
    numberings can disagree (scikit-learn-contrib/hdbscan#163, #410): predicted labels are
    therefore mapped to the run's clusters by predicting the fitted points once, up front.
    """

    def __init__(self, run: ClusteringRun, cluster_issue_ids: Sequence[str], vectorizer: ClaimVectorizer):
        if run.reduced_ is None or run.clusterer_.model_ is None:
            raise ValueError("the run has no fitted HDBSCAN model (too few or identical claims); use OnlineAssigner")
        import hdbscan

        self.run = run
        self.issue_ids = list(cluster_issue_ids)
        self.vectorizer = vectorizer
        predicted, _ = hdbscan.approximate_predict(run.clusterer_.model_, run.reduced_)
        votes: dict[int, Counter] = {}
        for guess, label in zip(predicted.tolist(), run.clusterer_.raw_labels_.tolist()):
            if guess != NOISE and label != NOISE:
                votes.setdefault(guess, Counter())[label] += 1
        self._canonical = {guess: count.most_common(1)[0][0] for guess, count in votes.items()}

    assign = OnlineAssigner.assign  # vectorize, then assign_vector below

    def assign_vector(self, vector: np.ndarray) -> tuple[str | None, float]:
        import hdbscan

        reduced = self.run.reducer_.transform(vector.reshape(1, -1))
        labels, strengths = hdbscan.approximate_predict(self.run.clusterer_.model_, reduced)
        label = self._canonical.get(int(labels[0]), NOISE)
        if label == NOISE:
            return None, 0.0
        return self.issue_ids[label], float(strengths[0])
