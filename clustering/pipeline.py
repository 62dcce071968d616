"""The clustering pipeline: normalize → embed → reduce → cluster → name (tracking is separate).

Each stage is an object handed to the constructor; the pipeline only sequences them,
times them and reports progress. Claims are put in canonical order (sorted by id) first,
so the result does not depend on arrival order.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np

from clustering.cluster import NOISE, HdbscanClusterer
from clustering.config import ClusteringConfig
from clustering.embed import Embedder
from clustering.exemplars import ExemplarPicker
from clustering.naming import IssueNamer
from clustering.neighbours import neighbours
from clustering.records import FailingClaim
from clustering.reduce import Reducer, UmapReducer
from clustering.run import ATTACHED, CLUSTERED, NOISE_STATUS, UNEMBEDDED, VIA_EVENT, ClusteringRun, ClusterSummary
from clustering.screen import TextScreen
from clustering.vectorize import ClaimVectorizer, Vectorized

# progress(stage, done, total, seconds): at a stage's start (done=0), during embed, and at its end.
Progress = Callable[[str, int, int, float], None]
STAGES = ("normalize", "embed", "reduce", "cluster", "name")
NAMING_TEXTS_PER_ISSUE = 300  # c-TF-IDF needs a sample, not every member


class IssuePipeline:
    def __init__(
        self,
        config: ClusteringConfig,
        embedder: Embedder,
        reducer: Reducer,
        clusterer: HdbscanClusterer,
        namer: IssueNamer,
        progress: Progress | None = None,
        exemplars: ExemplarPicker | None = None,
    ):
        self.config = config
        self.embedder = embedder
        self.reducer = reducer
        self.clusterer = clusterer
        self.namer = namer
        self.progress = progress or (lambda stage, done, total, seconds: None)
        self.exemplars = exemplars or ExemplarPicker(config.n_exemplars, config.exemplar_max_similarity)
        self.vectorizer = ClaimVectorizer(
            embedder,
            config.fields,
            screen=TextScreen(config.max_chars, config.model),
            require_claim_text=config.require_claim_text,
        )

    @classmethod
    def from_config(
        cls, config: ClusteringConfig, embedder: Embedder, progress: Progress | None = None
    ) -> IssuePipeline:
        return cls(
            config,
            embedder,
            UmapReducer(
                config.umap_neighbors,
                config.umap_components,
                config.umap_min_dist,
                config.umap_metric,
                config.random_state,
                config.umap_min_points,
                config.umap_neighbors_fraction,
            ),
            HdbscanClusterer(
                config.min_cluster_size,
                config.min_cluster_fraction,
                config.min_samples,
                config.attach_min_similarity,
                config.allow_single_cluster,
                config.merge_min_cohesion,
                config.merge_min_alignment,
            ),
            IssueNamer(config.n_keywords, config.facet_min_share),
            progress,
        )

    def fit(self, claims: Sequence[FailingClaim], now: datetime) -> ClusteringRun:
        timings: dict[str, float] = {}
        notes: list[str] = []
        # fresh fitted stages per run: an earlier run keeps its own UMAP and HDBSCAN models
        self.reducer, self.clusterer = copy.copy(self.reducer), copy.copy(self.clusterer)
        ordered = _canonical(claims, notes)
        n = len(ordered)

        prepared = self._stage("normalize", n, timings, lambda: self.vectorizer.prepare(ordered))
        vectorized: Vectorized = self._stage(
            "embed",
            len(prepared.embedded),
            timings,
            lambda: self.vectorizer.embed(prepared, lambda done, total: self.progress("embed", done, total, 0.0)),
        )
        notes.extend(_problem_notes(vectorized, n))

        labels = np.full(n, NOISE)
        probabilities = np.zeros(n)
        status = [UNEMBEDDED] * n
        m = len(vectorized.embedded)
        embedded_ids = [ordered[i].id for i in vectorized.embedded]
        if n == 0:
            notes.append("no failing claims in the input: nothing to cluster, 0 issues")
        elif m == 0:
            notes.append(f"none of the {n} claims has text to embed: they are counted but form no issues")
        fit_rows = _fit_sample(embedded_ids, self.config.fit_sample_size)
        if m > len(fit_rows):
            notes.append(
                f"{m} claims: clustered a deterministic sample of {len(fit_rows)}, the rest joined the "
                "nearest issue centroid"
            )
        reduced = self._stage(
            "reduce", len(fit_rows), timings, lambda: self._reduce(vectorized.vectors[fit_rows]) if m else None
        )
        clustered = self._stage(
            "cluster", m, timings, lambda: self._cluster(vectorized, reduced, fit_rows, embedded_ids) if m else None
        )
        if m:
            emb_labels, emb_probs, emb_status = clustered
            labels[vectorized.embedded] = emb_labels
            probabilities[vectorized.embedded] = emb_probs
            for row, i in enumerate(vectorized.embedded):
                status[i] = emb_status[row]
            notes.extend(self._cluster_notes(m, emb_labels))
            _inherit_from_event(ordered, labels, probabilities, status)
        clusters = self._stage(
            "name",
            self.clusterer.n_clusters_ if m else 0,
            timings,
            lambda: self._summaries(ordered, vectorized, labels, probabilities, now, fit_rows) if m else [],
        )
        return ClusteringRun(
            self.config.name,
            self.embedder.model_id,
            now,
            tuple(ordered),
            labels,
            probabilities,
            tuple(status),
            clusters,
            timings,
            notes,
            vectorized.problems,
            vectorized.skipped,
            vectorized.vectors if m else None,
            self.reducer,
            self.clusterer,
            reduced,
        )

    def _stage(self, stage: str, total: int, timings: dict[str, float], work: Callable):
        self.progress(stage, 0, total, 0.0)
        started = time.perf_counter()
        result = work()
        timings[stage] = time.perf_counter() - started
        self.progress(stage, total, total, timings[stage])
        return result

    def _reduce(self, vectors: np.ndarray) -> np.ndarray:
        """Reduce each distinct vector once: UMAP's neighbour graph breaks on many exact duplicates
        (the same failing claim repeated), and identical claims must land on the same point anyway."""
        unique, inverse = np.unique(vectors, axis=0, return_inverse=True)
        return self.reducer.fit_transform(unique)[inverse.ravel()]

    def _cluster(self, vectorized: Vectorized, reduced, fit_rows: np.ndarray, embedded_ids: list[str]):
        """(labels, probabilities, status) per embedded claim."""
        vectors = vectorized.vectors
        m = len(vectors)
        self.clusterer.fit(reduced, vectors[fit_rows], [embedded_ids[i] for i in fit_rows])
        labels = np.full(m, NOISE)
        probabilities = np.zeros(m)
        status = np.array([NOISE_STATUS] * m, dtype=object)
        labels[fit_rows] = self.clusterer.labels_
        probabilities[fit_rows] = self.clusterer.probabilities_
        status[fit_rows] = np.where(
            self.clusterer.attached_, ATTACHED, np.where(self.clusterer.labels_ == NOISE, NOISE_STATUS, CLUSTERED)
        )
        rest = np.setdiff1d(np.arange(m), fit_rows)
        if len(rest):
            rest_labels, rest_probs = self.clusterer.attach(vectors[rest])
            labels[rest], probabilities[rest] = rest_labels, rest_probs
            status[rest] = np.where(rest_labels == NOISE, NOISE_STATUS, ATTACHED)
        return labels, probabilities, status.tolist()

    def _cluster_notes(self, m: int, labels: np.ndarray) -> list[str]:
        min_size = self.clusterer.min_size_
        if self.clusterer.degenerate_ == "too_few":
            return [
                f"only {m} embeddable claim(s): an issue needs at least {min_size} similar claims, "
                "so all stay unassigned (issue_id null)"
            ]
        if self.clusterer.degenerate_ == "identical":
            return [f"all {m} embeddable claims are identical after normalisation: they form one issue"]
        notes = []
        if self.clusterer.merges_:
            notes.append(
                f"{len(self.clusterer.merges_)} density cluster(s) merged into a neighbour: their claims are "
                "near-paraphrases of one failure (clustering/merge.py)"
            )
        if self.clusterer.dissolved_:
            notes.append(
                f"{len(self.clusterer.dissolved_)} dense group(s) of dissimilar claims "
                f"({sum(self.clusterer.dissolved_)} claims) left as noise: no common failure to name"
            )
        if not (labels != NOISE).any():
            notes.append(
                f"no group of at least {min_size} similar claims among {m}: all stay unassigned (issue_id null)"
            )
        return notes

    def _summaries(
        self, claims, vectorized: Vectorized, labels, probabilities, now, fit_rows: np.ndarray
    ) -> list[ClusterSummary]:
        k = self.clusterer.n_clusters_
        # links among the clustered sample only: the claims beyond it joined by nearest centroid
        linked = neighbours(vectorized.vectors[fit_rows], labels[vectorized.embedded][fit_rows])
        rows_of: list[list[int]] = [[] for _ in range(k)]  # rows into vectorized arrays: what names the issue
        for row, i in enumerate(vectorized.embedded):
            if labels[i] != NOISE:
                rows_of[labels[i]].append(row)
        members_of: list[list[int]] = [[] for _ in range(k)]  # every claim counted in the issue
        for i, label in enumerate(labels.tolist()):
            if label != NOISE:
                members_of[label].append(i)
        facts = [_facts(c) for c in claims]
        everyone = [facts[i] for i in vectorized.embedded]
        texts = [[vectorized.texts[r] for r in rows[:NAMING_TEXTS_PER_ISSUE]] for rows in rows_of]
        member_facts = [[everyone[r] for r in rows] for rows in rows_of]
        picks_of = [
            self.exemplars.pick(
                vectorized.vectors[rows],
                probabilities[vectorized.embedded[rows]],
                self.clusterer.centroids_[index],
                [vectorized.texts[r] for r in rows],
            )
            for index, rows in enumerate(rows_of)
        ]
        # the exemplars, most central first, are the claims that can title the issue
        representatives = [
            [_title_facts(claims[vectorized.embedded[rows[p]]]) for p in picks]
            for rows, picks in zip(rows_of, picks_of)
        ]
        names = self.namer.name_all(texts, member_facts, everyone, representatives)
        out = []
        for index, rows in enumerate(rows_of):
            members = [claims[i] for i in members_of[index]]
            picks = picks_of[index]
            observed = [c.observed_at for c in members if c.observed_at is not None]
            out.append(
                ClusterSummary(
                    index=index,
                    member_ids=tuple(c.id for c in members),
                    name=names[index].name,
                    subtitle=names[index].subtitle,
                    facets=names[index].facets,
                    keywords=names[index].keywords,
                    exemplar_ids=tuple(claims[vectorized.embedded[rows[p]]].id for p in picks),
                    routes=_ranked(c.route for c in members),
                    verdicts=_ranked(c.verdict for c in members),
                    centroid=self.clusterer.centroids_[index],
                    hourly_counts=dict(sorted(Counter(_hour(c.observed_at or now) for c in members).items())),
                    first_observed=min(observed, default=None),
                    last_observed=max(observed, default=None),
                    neighbours=linked[index] if index < len(linked) else {},
                )
            )
        return out


def _canonical(claims: Sequence[FailingClaim], notes: list[str]) -> list[FailingClaim]:
    unique: dict[str, FailingClaim] = {}
    for claim in claims:
        unique.setdefault(claim.id, claim)
    if len(unique) < len(claims):
        notes.append(f"{len(claims) - len(unique)} claim(s) repeated an id already seen; the first of each was kept")
    return [unique[k] for k in sorted(unique)]


def _inherit_from_event(claims, labels: np.ndarray, probabilities: np.ndarray, status: list[str]) -> None:
    """A claim with no text counts in the issue its event's other failing claims mostly joined."""
    joined: dict[str, list[tuple[int, float]]] = {}
    for i, claim in enumerate(claims):
        if labels[i] != NOISE and claim.event_id:
            joined.setdefault(claim.event_id, []).append((int(labels[i]), float(probabilities[i])))
    for i, claim in enumerate(claims):
        if status[i] == UNEMBEDDED and claim.event_id in joined:
            siblings = joined[claim.event_id]
            label = Counter(label for label, _ in siblings).most_common(1)[0][0]
            labels[i] = label
            probabilities[i] = float(np.mean([p for lab, p in siblings if lab == label]))
            status[i] = VIA_EVENT


def _fit_sample(ids: list[str], limit: int) -> np.ndarray:
    """All rows, or the ``limit`` rows with the smallest id hashes: the same sample whatever the order."""
    if len(ids) <= limit:
        return np.arange(len(ids))
    keys = [hashlib.blake2b(i.encode(), digest_size=8).digest() for i in ids]
    return np.sort(np.array(sorted(range(len(ids)), key=keys.__getitem__)[:limit]))


def _problem_notes(vectorized: Vectorized, n: int) -> list[str]:
    notes = []
    by_kind = Counter(p.kind for p in vectorized.problems)
    examples = {p.kind: p.message for p in reversed(vectorized.problems)}
    for kind, count in sorted(by_kind.items()):
        notes.append(f"{count} text(s) {kind.replace('_', ' ')}; e.g. {examples[kind]}")
    if vectorized.skipped:
        reasons = Counter(vectorized.skipped.values())
        notes.extend(f"{count} of {n} claim(s) not embedded: {reason}" for reason, count in reasons.most_common())
    return notes


def _facts(claim: FailingClaim) -> dict:
    return {"verdict": claim.verdict, "route": claim.route, "stage": claim.stage, "versions": claim.versions}


def _title_facts(claim: FailingClaim) -> dict:
    return {"text": claim.text or claim.question, "verdict": claim.verdict, "source_id": claim.source_id}


def _ranked(values) -> dict[str, int]:
    return dict(Counter(v for v in values if v).most_common())


def _hour(ts: datetime) -> str:
    if ts.tzinfo is not None:
        ts = ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%dT%H")
