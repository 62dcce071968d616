"""The review stage as the API and the CLI use it: one object over the review and rate repositories."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

import numpy as np

from services.core.readmodel import closed
from services.evalset.metrics import Figure
from services.review.agreement import AgreementReport, AgreementReporter
from services.review.calibration import CalibratedRate, Calibrator, settled_labels
from services.review.labels import ReviewedClaim
from services.review.planning import LabelPlan, LabelPlanner
from services.review.queue import Assignment, Revealed, ReviewQueue
from services.review.sampling import ReviewSampler, SampleResult, band_knowledge, score_band
from services.review.traffic import Traffic

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class RateWindows(Protocol):
    def window_bounds(
        self, window: timedelta | None, end: datetime | None = None
    ) -> tuple[datetime | None, datetime | None]: ...


@closed
@dataclass(frozen=True)
class Progress:
    reviewers: list[dict]  # {reviewer, role, labels, exposed (not blind: not counted), last}
    # {stratum, route, verdict, score_band (None: unscored), issue_id, claims, slots, labelled, complete}
    strata: list[dict]


class ReviewService:
    def __init__(
        self,
        repo,
        windows: RateWindows,
        *,
        daily_budget: int,
        reviewers_per_claim: int,
        reservation: timedelta,
        guide_version: str,
        min_labels: int,
        max_label_age: timedelta,
        n_boot: int = 1000,
        estimator: str = "ppi",
        plan_width: float = 0.03,
    ):
        self.repo = repo
        self.windows = windows
        self.sampler = ReviewSampler(repo, daily_budget, reviewers_per_claim)
        self.queue = ReviewQueue(repo, reservation, guide_version)
        self.reporter = AgreementReporter(reviewers_per_claim, n_boot=n_boot)
        self.calibrator = Calibrator(min_labels, max_label_age, n_boot=n_boot, estimator=estimator)
        self.planner = LabelPlanner(estimator, min_labels)
        self.plan_width = plan_width

    def _span(self, window: timedelta | None) -> tuple[datetime, datetime] | None:
        """[since, until) in event time: the rates' window, through its end minute (RateRepository.window_end)."""
        start, end = self.windows.window_bounds(window)
        if end is None:
            return None
        return start or EPOCH, end + timedelta(minutes=1)

    # -- the queue -----------------------------------------------------------------------------
    def sample(
        self, window: timedelta | None, now: datetime, seed: int = 0, include_eval: bool = False
    ) -> SampleResult:
        """Queue today's claims where the review plan (at review.plan_width) needs labels most, and inside a route
        where the verifier is least sure (as far as its settled labels show)."""
        span = self._span(window)
        result = SampleResult(0, 0, {})
        if span:
            reviewed = self.reviewed()
            plans = self.planner.plan_all(self._calibrated(span, now, None, reviewed).values(), self.plan_width)
            known = band_knowledge(settled_labels(reviewed))
            result = self.sampler.sample(*span, now, seed, self.planner.needs(plans), known)
        if include_eval:
            self.sampler.enqueue_eval(now)
        return result

    def next(self, reviewer: str, now: datetime) -> Assignment:
        return self.queue.next(reviewer, now)

    def label(self, slot: str, reviewer: str, label: str, span: str, now: datetime) -> Revealed:
        return self.queue.label(slot, reviewer, label, span, now)

    def adjudicate(self, claim_key: str, adjudicator: str, label: str, span: str, now: datetime) -> Revealed:
        return self.queue.adjudicate(claim_key, adjudicator, label, span, now)

    def progress(self) -> Progress:
        strata = [{**s, "score_band": score_band(s["stratum"])} for s in self.repo.stratum_progress()]
        return Progress(self.repo.reviewer_progress(), strata)

    # -- figures -------------------------------------------------------------------------------
    def reviewed(self) -> list[ReviewedClaim]:
        return [ReviewedClaim.from_row(r) for r in self.repo.labelled()]

    def agreement(self) -> AgreementReport:
        return self.reporter.report(self.reviewed())

    def calibrated(
        self, window: timedelta | None, now: datetime, routes: Collection[str] | None = None
    ) -> dict[str, CalibratedRate]:
        """Per route with traffic in the window (of ``routes``, when given), its calibrated rate (stale ones say
        why)."""
        span = self._span(window)
        return self._calibrated(span, now, routes) if span else {}

    def _calibrated(
        self,
        span: tuple[datetime, datetime],
        now: datetime,
        routes: Collection[str] | None = None,
        reviewed: list[ReviewedClaim] | None = None,
    ) -> dict[str, CalibratedRate]:
        traffic = [Traffic.from_row(r) for r in self.repo.answer_profile(*span, routes)]
        return self.calibrator.calibrate_all(traffic, self.reviewed() if reviewed is None else reviewed, now)

    def plan(self, window: timedelta | None, now: datetime, width: float | None = None) -> list[LabelPlan]:
        """Per route with traffic in the window, how many more settled labels bring its calibrated interval under
        ``width`` (default review.plan_width), and how to split them; those needing most first."""
        return self.planner.plan_all(self.calibrated(window, now).values(), width or self.plan_width)

    def snapshot(self, window: timedelta | None, now: datetime) -> int:
        """Store every route's calibrated rate over ``window`` (table calibrated_rates, which Grafana reads)."""
        span = self._span(window)
        if span is None:
            return 0
        rows = [
            {
                "computed_at": now,
                "route": route,
                "window_start": span[0],
                "window_end": span[1],
                "raw": c.raw,
                "rate": c.value,
                "lower": c.interval[0] if c.interval else None,
                "upper": c.interval[1] if c.interval else None,
                "sensitivity": c.sensitivity,
                "specificity": c.specificity,
                "labels": c.labels,
                "pooled": int(c.pooled),
                "stale": int(c.stale),
                "reasons": "; ".join(c.reasons),
                "verifier_version": c.verifier_version,
            }
            for route, c in self.calibrated(window, now).items()
        ]
        return self.repo.save_calibrated(rows)

    def review_tick(self, window: timedelta, now: datetime) -> SampleResult:
        """The leader's review timer: queue today's sample, then store the calibrated rates for Grafana."""
        result = self.sample(window, now)
        self.snapshot(window, now)
        return result

    def calibrated_answers(self, failed: np.ndarray, claims: np.ndarray, now: datetime) -> CalibratedRate:
        """The failed-claim rate of chosen answers (the eval set's), corrected with the error rates the current
        verifier (the version labelled most recently) shows on production labels, pooled over its routes."""
        reviewed = self.reviewed()
        settled = settled_labels(reviewed)
        version = max(settled, key=lambda c: c.settled_at).verifier_version if settled else ""
        traffic = Traffic(
            "eval set", version, np.asarray(failed, float), np.asarray(claims, float), np.ones(len(claims))
        )
        return self.calibrator.calibrate(traffic, reviewed, now)

    def verifier_kappa(self) -> Figure | None:
        """Verifier-vs-human kappa over every reviewed claim (production and eval)."""
        verifier = self.reporter.report(self.reviewed()).overall.verifier
        return verifier.kappa if verifier else None
