"""The two clustering jobs: re-clustering (leader-only) and online assignment between runs.

A re-cluster has three steps, so its heavy middle can run in a process that shutdown may stop:

- ``collect`` (store and model, on the clustering thread): the failing claims, and the vector of
  every text they need, from the embedding cache or the model (checked for cancel between chunks);
- ``fit_claims`` (pure: no store, no model): UMAP, HDBSCAN and naming over those vectors; the
  schedule runs it in a child process (services/core/threads.py ``ChildProcess``);
- ``publish`` (store): match the clusters to the known issues, save members then issues, and swap
  in the new online assigner. Until then assignment keeps using the last published issues.

``focus_window`` serves an alert the moment it is open: the failing claims of its window that no issue
holds, newest first, go to the known issues before the backlog; the rest, when enough are left, are
clustered at once (a focused run) into new issues, so the alert names its cause within seconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from clustering.assign import OnlineAssigner
from clustering.cluster import NOISE
from clustering.config import ClusteringConfig
from clustering.embed import Embedder
from clustering.pipeline import IssuePipeline, Progress
from clustering.records import FailingClaim
from clustering.run import ClusteringRun
from clustering.track import IssueTracker
from clustering.vectorize import ClaimVectorizer
from services.core.metrics import SkippedRows
from services.core.threads import Cancelled
from services.issues.records import IssueRecords

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FOCUS_LIMIT = (
    800  # an alert window's newest claims a focused run takes: seconds of embedding, well under one of HDBSCAN
)
RECLUSTER, ONLINE_ASSIGNMENT = "recluster", "online_assignment"  # the jobs, as claimwatch_rows_skipped_total names them


@dataclass(frozen=True)
class RunReport:
    claims: int
    issues: int
    noise: int
    timings: dict
    notes: list


@dataclass(frozen=True)
class ReclusterInput:
    """Everything ``fit_claims`` needs, and nothing that cannot pickle."""

    config: ClusteringConfig
    model_id: str
    claims: list[FailingClaim]
    vectors: dict[str, np.ndarray]  # normalised text -> its vector, for every text the claims embed
    now: datetime


@dataclass(frozen=True)
class Fitted:
    run: ClusteringRun  # without the fitted models and vectors (they stay in the child)
    positions: np.ndarray  # 2-D map position per claim of ``run``


class PrecomputedEmbedder:
    """An ``Embedder`` over vectors computed before: the child process needs no model and no store."""

    def __init__(self, model_id: str, vectors: dict[str, np.ndarray]):
        self.model_id = model_id
        self.vectors = vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.vectors[t] for t in texts])


class _Collecting:
    """The real embedder, keeping every vector it returns, and stopping between chunks once cancelled."""

    def __init__(self, embedder, cancelled: Callable[[], bool]):
        self.embedder, self.cancelled = embedder, cancelled
        self.model_id = embedder.model_id
        self.vectors: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.cancelled():
            raise Cancelled("re-cluster abandoned while embedding")
        vectors = self.embedder.embed(texts)
        self.vectors.update(zip(texts, vectors))
        return vectors


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


def fit_claims(job: ReclusterInput, progress: Progress | None = None) -> Fitted:
    """The heavy part of a re-cluster, from collected input alone (runs in a child process)."""
    pipeline = IssuePipeline.from_config(job.config, PrecomputedEmbedder(job.model_id, job.vectors), progress)
    run = pipeline.fit(job.claims, job.now)
    positions = map_positions(run)
    return Fitted(replace(run, vectors_=None, reducer_=None, clusterer_=None, reduced_=None), positions)


Fit = Callable[[ReclusterInput], Fitted]


@dataclass(frozen=True)
class WindowReport:
    """What ``focus_window`` did with an alert window's failing claims that no issue held."""

    claims: int  # taken from the window (newest first)
    assigned: int  # joined a known issue
    clustered: int  # formed new issues in the focused run
    new_issues: tuple[str, ...] = ()


def focused_config(config: ClusteringConfig, limit: int = FOCUS_LIMIT) -> ClusteringConfig:
    """The configuration of a focused run: the same, except that its few hundred claims are clustered in the
    embedding space directly. UMAP would cost a JIT compile in the worker; the next full run reduces them."""
    return replace(config, umap_min_points=limit + 1)


Vectorizer = Callable[[Embedder], ClaimVectorizer]  # the claim vectorizer that embeds with a given embedder


class IssueJobs:
    """Holds the embedder (loaded once per process) and the latest online assigner. A stored claim neither job
    can read is left out (``skipped`` counts and logs it), so one bad row stops neither. ``vectorizer`` turns
    claims into vectors with an embedder as the pipeline does (services/app/compose.py ``claim_vectorizer``)."""

    def __init__(
        self,
        config: ClusteringConfig,
        embedder,
        issues: IssueRecords,
        lookback: timedelta,
        *,
        vectorizer: Vectorizer,
        min_similarity: float = 0.4,
        skipped: SkippedRows | None = None,
    ):
        self.config = config
        self.embedder = embedder
        self.vectorizer_for = vectorizer
        self.issues = issues
        self.lookback = lookback
        self.min_similarity = min_similarity
        self.skipped = skipped or SkippedRows()
        self.assigner: OnlineAssigner | None = None  # replaced whole by publish: assignment reads it once
        self._swap = threading.Lock()  # publish (clustering thread) and assign_new (assignment thread) both set it
        self._publishing = threading.Lock()  # a full run's publish and a focused run's never interleave
        self.mark: datetime | None = None  # online assignment's ingestion high mark
        self.run_mark: datetime | None = None  # claims ingested after it are new to the last re-cluster

    # -- re-clustering --------------------------------------------------------
    def recluster(self, now: datetime, progress: Progress | None = None, fit: Fit | None = None) -> RunReport:
        """One whole run; ``fit`` replaces the in-process ``fit_claims`` (the schedule's child process)."""
        job = self.collect(now, progress=progress)
        fitted = fit(job) if fit is not None else fit_claims(job, progress)
        return self.publish(now, fitted)

    def collect(
        self, now: datetime, cancelled: Callable[[], bool] = lambda: False, progress: Progress | None = None
    ) -> ReclusterInput:
        """The failing claims of the lookback and the vectors of their texts (cached, or embedded now)."""
        claims = self.issues.failing_claims(now - self.lookback, skip=self.skipped.of(RECLUSTER))
        collecting = _Collecting(self.embedder, cancelled)
        vectorizer = self.vectorizer_for(collecting)
        prepared = vectorizer.prepare(claims)
        report = (lambda done, total: progress("embed", done, total, 0.0)) if progress else None
        vectorizer.embed(prepared, report)
        if cancelled():
            raise Cancelled("re-cluster abandoned")
        return ReclusterInput(self.config, self.embedder.model_id, claims, collecting.vectors, now)

    def publish(self, now: datetime, fitted: Fitted) -> RunReport:
        """Make a fitted run the current issues: members first, then issues, then the online assigner."""
        with self._publishing:
            return self._publish(now, fitted)

    def _publish(self, now: datetime, fitted: Fitted) -> RunReport:
        run, positions = fitted.run, fitted.positions
        tracker = IssueTracker(self.config)
        known = self.issues.load()
        # Issues a focused run made after this run read its claims. A cluster holding their claims (the alert's window
        # was read by both) continues them, so the issue a page named keeps its id; linked by members only, as a
        # cluster that merely looks alike must not take one over. One the run holds no claims of stays as it is.
        young = {r.issue_id: r for r in known if r.first_seen > run.now}
        records = tracker.match([replace(r, centroid=None) if r.issue_id in young else r for r in known], run, now)
        issue_of = tracker.cluster_issue_ids_
        records = [
            young[r.issue_id] if r.issue_id in young and r.issue_id not in issue_of and r.merged_into is None else r
            for r in records
        ]
        rows = []
        for i, (claim, label, probability) in enumerate(
            zip(run.claims, run.labels_.tolist(), run.probabilities_.tolist())
        ):
            rows.append(
                {
                    "claim_key": claim.id,
                    "issue_id": "" if label == NOISE else issue_of[label],
                    "probability": float(probability),
                    "source": "batch",
                    "config_name": self.config.name,
                    "x": float(positions[i, 0]),
                    "y": float(positions[i, 1]),
                    "observed_at": claim.observed_at or now,
                }
            )
        self.issues.save_members(rows)
        self.issues.save(records)  # after the members: an issue is visible only with its members
        assigner = OnlineAssigner.from_issues(
            records, self.vectorizer_for(self.embedder), self.config.name, self.min_similarity
        )
        with self._swap:
            self.assigner = assigner
        # An issue merged in this run still holds the claims the run did not read (older than its lookback, or
        # assigned while it ran); they go to the survivor, as a merge by hand moves them. After the swap, so an
        # assignment saved after the move was made by the new assigner or sees the swap (assign_new).
        was_live = {r.issue_id for r in known if r.merged_into is None}
        self.issues.move_members(
            {r.issue_id: r.merged_into for r in records if r.merged_into and r.issue_id in was_live}
        )
        self.run_mark = now
        summary = run.summary()
        log.info(
            "re-clustered %d failing claims into %d issues (%d noise)",
            summary["claims"],
            summary["issues"],
            summary["noise"],
        )
        return RunReport(summary["claims"], summary["issues"], summary["noise"], summary["timings"], summary["notes"])

    def new_claims(self, at_least: int) -> int:
        """Failing claims ingested since the last re-cluster (its ``now``), counted up to ``at_least`` or a
        little beyond: the store is asked for at most ``at_least`` events, so a tick costs one small query."""
        claims, _ = self.issues.claims_ingested_after(
            self.run_mark or EPOCH, max(at_least, 1), skip=self.skipped.of(RECLUSTER)
        )
        return len(claims)

    def previous_run(self, since: datetime) -> int | None:
        """At start-up, with issues stored by an earlier process: count claims ingested from ``since`` as new
        and return the claims those issues hold (the last run's size, near enough); None when there are none."""
        live = [i for i in self.issues.load() if i.config_name == self.config.name and i.merged_into is None]
        if not live:
            return None
        self.run_mark = since
        return sum(i.size for i in live)

    # -- online assignment ----------------------------------------------------
    def _current_assigner(self) -> OnlineAssigner | None:
        """The last published issues (even while a re-cluster runs), or the stored ones; None before any."""
        assigner = self.assigner
        if assigner is None:
            stored = self.issues.load()
            if not stored:
                return None
            built = OnlineAssigner.from_issues(
                stored, self.vectorizer_for(self.embedder), self.config.name, self.min_similarity
            )
            with self._swap:  # unless a re-cluster published meanwhile
                assigner = self.assigner = self.assigner or built
        return assigner

    def _member_rows(self, claims: Sequence[FailingClaim], results, source: str, now: datetime) -> list[dict]:
        return [
            {
                "claim_key": c.id,
                "issue_id": issue or "",
                "probability": float(p),
                "source": source,
                "config_name": self.config.name,
                "x": 0.0,
                "y": 0.0,
                "observed_at": c.observed_at or now,
            }
            for c, (issue, p) in zip(claims, results)
        ]

    def assign_new(self, now: datetime, batch: int = 2000) -> int:
        """Assign failing claims ingested since the last call to the current issues; returns how many."""
        if self.mark is None:
            self.mark = now
        assigner = self._current_assigner()
        if assigner is None:
            return 0
        claims, mark = self.issues.claims_ingested_after(self.mark, batch, skip=self.skipped.of(ONLINE_ASSIGNMENT))
        results = assigner.assign_many(claims) if claims else []
        self.issues.save_members(self._member_rows(claims, results, "online", now))
        current = self.assigner  # a re-cluster that published meanwhile may have merged issues: its issues decide
        if claims and current is not None and current is not assigner:  # (the newest row of a claim wins)
            self.issues.save_members(self._member_rows(claims, current.assign_many(claims), "online", now))
        if mark is not None:  # also past a batch whose claims were all skipped: it is not read again
            self.mark = mark
        return sum(1 for issue, _ in results if issue)

    def focus_window(
        self, route: str, since: datetime, until: datetime, now: datetime, limit: int = FOCUS_LIMIT
    ) -> WindowReport:
        """An open alert's window first: its failing claims that no issue holds, newest first, join the known issues
        seen on ``route``; when at least an issue's worth is left, a focused run clusters them into new issues at
        once."""
        claims = self.issues.window_claims(route, since, until, limit, skip=self.skipped.of(ONLINE_ASSIGNMENT))
        if not claims:
            return WindowReport(0, 0, 0)
        assigner = self._current_assigner()
        results: list[tuple[str | None, float]] = [(None, 0.0)] * len(claims)
        if assigner is not None:
            # Only issues that have held claims of the alert's route: another route's issue whose claims are worded
            # alike (invented numbers on billing and on parcels) would take the whole window and be named behind it.
            results = [
                (issue, p) if issue and assigner.seen_on(issue, route) else (None, 0.0)
                for issue, p in assigner.assign_many(claims)
            ]
        rest = [c for c, (issue, _) in zip(claims, results) if not issue]
        assigned = [(c, r) for c, r in zip(claims, results) if r[0]]
        self.issues.save_members(self._member_rows([c for c, _ in assigned], [r for _, r in assigned], "online", now))
        new_issues: tuple[str, ...] = ()
        clustered = 0
        if len(rest) >= self.config.min_cluster_size:
            with self._publishing:
                new_issues, clustered = self._cluster_window(rest, now, limit)
        else:
            self.issues.save_members(self._member_rows(rest, [(None, 0.0)] * len(rest), "online", now))
        if new_issues:
            log.info(
                "alert window on %s: %d failing claims no issue held; %d joined known issues, %d formed %d new "
                "issue(s): %s",
                route,
                len(claims),
                len(assigned),
                clustered,
                len(new_issues),
                ", ".join(new_issues),
            )
        return WindowReport(len(claims), len(assigned), clustered, new_issues)

    def _cluster_window(self, claims: Sequence[FailingClaim], now: datetime, limit: int) -> tuple[tuple[str, ...], int]:
        """A focused run over ``claims``: its clusters become new issues (members, then issues, then the assigner);
        the claims it leaves as noise are saved as noise, as online assignment would."""
        run = IssuePipeline.from_config(focused_config(self.config, limit), self.embedder).fit(claims, now)
        known = self.issues.load()
        tracker = IssueTracker(self.config)
        records = tracker.adopt(known, run, now) if run.clusters_ else []
        issue_of = tracker.cluster_issue_ids_ if records else []
        labels, probabilities = run.labels_.tolist(), run.probabilities_.tolist()
        results = [
            (issue_of[label] if label != NOISE else None, p if label != NOISE else 0.0)
            for label, p in zip(labels, probabilities)
        ]
        self.issues.save_members(self._member_rows(run.claims, results, "online", now))
        if not records:
            return (), 0
        self.issues.save(records)  # after the members: an issue is visible only with its members
        assigner = OnlineAssigner.from_issues(
            [*known, *records], self.vectorizer_for(self.embedder), self.config.name, self.min_similarity
        )
        with self._swap:
            self.assigner = assigner
        return tuple(r.issue_id for r in records), sum(1 for label in labels if label != NOISE)
