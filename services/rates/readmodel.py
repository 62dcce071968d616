"""What the rates use cases return (the route list, slices, one route over time), defined once
(services/core/readmodel.py): the API answers with these, and the CLI and the pages read the same fields."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from services.core.readmodel import Read


class ShareRead(Read):
    rate: float | None
    lo: float | None
    hi: float | None
    count: int
    of: int


class AbstentionPairRead(Read):
    correct_abstention: ShareRead
    over_refusal: ShareRead


class WeightedTotalsRead(Read):
    events: float
    claims: float
    failed: float


class ScoreCellRead(Read):
    cell: str = Field(description="verdict class and score band(s), e.g. 'passed >= 0.95'")
    share: float
    failed: float
    labels: int


class CalibratedRead(Read):
    rate: float | None = Field(description="the rate corrected for the verifier's errors measured against human labels")
    interval: list[float] | None
    sensitivity: float | None
    specificity: float | None
    labels: int = Field(description="settled human labels behind the correction")
    pooled: bool = Field(description="labels of other routes lent to this one (too few of its own)")
    label_routes: list[str]
    verifier_version: str
    stale: bool
    status: Literal["no labels yet", "stale", "current"]
    reasons: list[str] = Field(description="why it is stale")
    newest_label: str | None
    own_labels: int
    estimator: str
    estimator_note: str
    failed_if_flagged: float | None
    failed_if_passed: float | None
    score_cells: list[ScoreCellRead] = Field(
        description="post-stratified on the verifier's score bands: each cell's share of the window, failed "
        "share of its labels and labels (empty: by the verdict alone)"
    )


class RateRead(Read):
    route: str
    events: int = Field(description="answers stored")
    claims: int = Field(description="non-trivial claims stored")
    failed: int
    rate: float | None = Field(
        description="the whole traffic's rate: failed / claims, each answer weighted by 1 / "
        "its sampling.rate (so failed / claims when every answer is verified); null without claims"
    )
    verdicts: dict[str, int]
    verdict_shares: dict[str, float | None] = Field(
        description="each checked verdict's share of the claims, of the whole traffic as rate is"
    )
    interval: list[float] | None = Field(description="95% interval [lo, hi] of rate, resampling answers")
    unsafe_serve: ShareRead
    abstention: ShareRead
    abstention_pair: AbstentionPairRead = Field(description="correct abstention and over-refusal, never one alone")
    weighted: WeightedTotalsRead = Field(
        description="the traffic the stored answers stand for (each 1 / sampling.rate)"
    )
    effective_claims: float = Field(description="what the claims are worth as an unweighted sample (Kish)")
    sampling: Literal["none", "mixed", "all"] = Field(
        description="how many of the answers were sampled "
        "(sampling.rate below 1): mixed means weighted and unweighted "
        "answers share this slice"
    )
    sampled_events: int


class RouteRateRead(RateRead):
    expected: float | None = Field(
        description="the drift detector's expectation for the route, as its alerts carry "
        "it (a recent level while learning); null before it has one or has run"
    )
    expected_basis: str = Field(description="what the expectation rests on, or why there is none yet")
    learning: bool = Field(description="under a day of history: no time-of-day profile yet")
    history_hours: int | None = Field(description="while learning, the route's whole hours of history")
    detectable_rise: float | None = Field(
        default=None,
        description="the smallest rise the route's drift alert sees within an hour on average, where its volume (or "
        "learning margin) makes that more than the threshold: silence from a quiet route is not health; null: the "
        "threshold itself",
    )
    delta: float | None = Field(description="rate - expected")
    delta_lo: float | None = Field(description="the 95% interval's lower end - expected: the rise the data is sure of")
    firing_alerts: list[str] = Field(description="ids of the route's firing alerts")
    calibrated: CalibratedRead | None = Field(
        None, description="with ?calibrated=true: the corrected rate (null for a route without answers to correct)"
    )


class SliceRead(RateRead):
    dim: str
    value: str


class RouteWindowRead(RateRead):
    window_minutes: int
    end: str


class RouteNowRead(RouteRateRead):
    window_minutes: int
    end: str


class SeriesPointRead(Read):
    minute: str = Field(description="start of the bucket, UTC ISO 8601")
    events: int
    claims: int
    failed: int
    rate: float | None
    lo: float | None
    hi: float | None


class BaselineRead(Read):
    rate: float | None
    interval: list[float] | None
    source: str = Field(
        description="what the expected rate drawn is: the drift detector's expectation, or the window before"
    )
    expectation: bool = Field(description="true when it is the drift detector's expectation now")


class AlertSpanRead(Read):
    alert_id: str
    state: str
    severity: str
    start: str = Field(description="pending_since")
    firing_at: str | None
    end: str | None


class VersionSeenRead(Read):
    key: str = Field(description="versions key, e.g. model")
    value: str
    first_seen: str
    last_seen: str
    events: int


class BaselineStatusRead(Read):
    learning: bool = Field(
        description="under a day of history: a local level and a wider test, no time-of-day profile yet"
    )
    history_hours: float = Field(description="hours from the route's first stored minute to the end of the range")
    basis: str = Field(description="what the drift detector's expectation rests on, in words")


class RouteDetailRead(Read):
    route: str
    start: str
    end: str
    step_minutes: int
    totals: RateRead
    current: RouteNowRead | RouteWindowRead | None = Field(
        None,
        description=(
            "the last 30 minutes, as the overview's default window; beside the expectation unless `end` is given"
        ),
    )
    series: list[SeriesPointRead]
    baseline: BaselineRead | None
    baseline_status: BaselineStatusRead
    alerts: list[AlertSpanRead]
    versions: list[VersionSeenRead] = Field(
        description="the 50 version values first seen last in the range, oldest first"
    )
    versions_seen: int = Field(description="version values seen in the range in all")
