"""The one composition root: every object of a process, built once from the one Settings.

`build` wires the store's repositories, the embedder and the services that the API, the CLI
and the worker share; the builders below make the rest (the alert evaluator, the backtest's
private store, the issue jobs' vectorizer, ...). services/app/processes.py adds what only a
worker has (the ingest pipeline and the leader timers, handed to Faust in streams/) and serves
the API. Nothing else constructs a service, so each collaborator is passed by constructor and
exists once per process: one store, one embedder, one set of repositories.

In embedded mode one process owns the chDB directory, so the worker, the alert evaluator,
the clustering schedule and the API all run in one process, in one event loop, sharing one store.
With a ClickHouse server, several workers can run side by side.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from clustering.config import ClusteringConfig, config_from_settings
from clustering.embed import CachedEmbedder, Embedder, SentenceTransformerEmbedder
from clustering.screen import TextScreen
from clustering.vectorize import ClaimVectorizer
from runbooks import RunbookRenderer
from runbooks.alerts import AlertRunbooks
from runbooks.issues import IssueRunbooks
from services.alerts.evaluation.backtest import CHUNK, BacktestSummary, BucketLoader, replay
from services.alerts.evaluation.cardinality import RouteCardinalityWatch
from services.alerts.evaluation.evaluator import AlertEvaluator
from services.alerts.evaluation.slo_watch import SloWatch
from services.alerts.explain.explainer import AlertExplainer
from services.alerts.lifecycle.records import AlertRecords, alert_repository
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.receivers import ISSUE_WEBHOOK
from services.alerts.oncall.quality import load_quality
from services.alerts.oncall.rules import Rule, alert_rules
from services.alerts.oncall.service import AlertsService
from services.alerts.oncall.slos import SloReport
from services.app.settings import Settings
from services.contract.decode import Decoder
from services.core.clock import utcnow
from services.core.command import cli_path
from services.core.metrics import Metrics
from services.core.threads import Run, named_executor
from services.evalset.distinct import DistinctQuestions
from services.evalset.service import EvalService
from services.ingest.ingestor import Health, Ingestor
from services.ingest.privacy import Redactor
from services.ingest.routes import ROUTE_LIMIT, RouteGuard
from services.ingest.window import EventTimeWindow
from services.issues.jobs import IssueJobs
from services.issues.owners import Owner, OwnerRule, OwnerRules
from services.issues.records import IssueRecords, issue_repository
from services.issues.schedule import ReclusterPolicy
from services.issues.service import IssuesService
from services.issues.traces import TraceService
from services.review.agreement_alerts import AgreementDropTest
from services.review.service import ReviewService
from services.store.backends import Store, open_store
from services.store.dlq import DeadLetterRepository
from services.store.evalset import EvalRepository
from services.store.issues import ClickHouseEmbeddingCache
from services.store.migrate import migrate
from services.store.notifications import NotificationLog
from services.store.rates import RateRepository
from services.store.retention import Retention, RetentionKeeper
from services.store.review import ReviewRepository
from services.store.scratch import private_store
from services.store.storage import StorageRepository
from services.store.traces import TraceRepository
from services.store.writer import EventWriter
from services.triage.service import TriageService
from services.triage.webhook import IssueWebhook

log = logging.getLogger("claimwatch")


def clustering_config(settings: Settings) -> ClusteringConfig:
    """The clustering configuration the settings name: model, fields and embedding back end."""
    c = settings.clustering
    return config_from_settings(c.model, c.fields, backend=c.backend)


def claim_vectorizer(config: ClusteringConfig) -> Callable[[Embedder], ClaimVectorizer]:
    """The issue jobs' claim vectorizer for an embedder: the one the clustering pipeline builds from ``config``."""
    return lambda embedder: ClaimVectorizer(
        embedder,
        config.fields,
        screen=TextScreen(config.max_chars, config.model),
        require_claim_text=config.require_claim_text,
    )


@dataclass(frozen=True)
class Repositories:
    """One repository per table family, over one store."""

    rates: RateRepository
    dead_letters: DeadLetterRepository
    alerts: AlertRecords
    issues: IssueRecords
    evalset: EvalRepository
    traces: TraceRepository
    review: ReviewRepository
    storage: StorageRepository
    notifications: NotificationLog

    @classmethod
    def on(cls, store: Store, clock: Callable[[], datetime] = utcnow) -> Repositories:
        return cls(
            RateRepository(store, clock),
            DeadLetterRepository(store),
            alert_repository(store),
            issue_repository(store, clock),
            EvalRepository(store),
            TraceRepository(store),
            ReviewRepository(store),
            StorageRepository(store),
            NotificationLog(store),
        )


@dataclass
class Components:
    """What the API, the CLI and the worker share. Built by `build`; closed by its owner."""

    settings: Settings
    store: Store
    repos: Repositories
    clustering: ClusteringConfig
    embedder: CachedEmbedder  # loads the model on first use, once per process
    alerts: AlertsService
    issues: IssuesService
    evalset: EvalService
    issue_jobs: IssueJobs
    traces: TraceService
    review: ReviewService
    triage: TriageService
    owners: OwnerRules
    slos: SloReport
    metrics: Metrics = field(default_factory=Metrics)
    health: Health = field(default_factory=Health)
    store_thread: ThreadPoolExecutor = field(  # ingest's writes and the timers' store work (not alert evaluation)
        default_factory=lambda: named_executor("store")
    )

    def ingestor(self, epoch: str = "") -> Ingestor:
        """The ingest step; ``epoch`` names the incarnation of the consumed topic (broker.topic_epoch)."""
        s = self.settings
        embedded = s.clickhouse.startswith("chdb:")  # this process alone writes: safe to repair while running
        return Ingestor(
            EventWriter(self.store, repair_after_failure=embedded),
            Decoder(s.ingest.max_event_bytes),
            Redactor(s.privacy),
            ingest_window(s),
            epoch,
            self.route_guard(),
        )

    def route_guard(self) -> RouteGuard:
        """The route bound, seeded with the routes the store has seen within the window (newest first)."""
        limit, window, now = (
            self.settings.routes.max_active,
            timedelta(hours=self.settings.routes.active_hours),
            utcnow(),
        )
        seen = self.repos.rates.latest_minute_by_route(now - window)
        newest = sorted(seen, key=seen.__getitem__, reverse=True)[:limit]
        guard = RouteGuard(limit, window, reversed(newest), now)
        self.metrics.watch_routes(guard)
        return guard

    def cardinality_watch(self) -> RouteCardinalityWatch:
        """The route bound's alert: routes refused for routes.max_active, by the producer sending them."""
        return RouteCardinalityWatch(
            partial(self.repos.dead_letters.refused_routes, rule=ROUTE_LIMIT),
            self.repos.alerts,
            self.settings.routes.max_active,
        )

    def close(self) -> None:
        self.store_thread.shutdown(wait=True)
        self.store.close()


def build(
    settings: Settings, store: Store, clock: Callable[[], datetime] = utcnow, cli: str = "claimwatch"
) -> Components:
    """Every shared object, once, each given its collaborators (and ``clock``, the wall clock they read).

    ``cli`` starts the commands runbooks print: a service passes ``service_cli()``; the CLI, how its own user
    runs claimwatch from where they are (services/core/command.py).
    """
    repos = Repositories.on(store, clock)
    metrics = Metrics()
    config = clustering_config(settings)
    embedder = CachedEmbedder(
        SentenceTransformerEmbedder(config.model, backend=config.backend), ClickHouseEmbeddingCache(store)
    )
    explainer = AlertExplainer(
        repos.issues, repos.rates, base_url=settings.external_url, baseline_minutes=settings.drift.baseline_minutes
    )
    distinct = DistinctQuestions(repos.evalset, embedder.embed)
    renderer = RunbookRenderer([Path(settings.runbooks.template_dir)] if settings.runbooks.template_dir else [])
    issues = IssuesService(
        repos.issues,
        repos.rates,
        repos.alerts,
        base_url=settings.external_url,
        clock=clock,
        explainer=explainer,
        distinct=distinct.pick,
        eval_items=distinct.items_of,
        owners=owner_rules(settings),
        runbook=IssueRunbooks(renderer, settings.external_url, cli),
    )
    t = settings.triage
    webhook = IssueWebhook(t.webhook_url, t.webhook_secret) if t.webhook_url else None
    review = review_service(settings, repos)
    latest, least = repos.rates.latest_minute, settings.slo_alerts.min_claims
    slos = SloReport(settings.slos(), repos.rates, latest, repos.alerts, issues.owners.slo_team, repos.issues, least)
    return Components(
        settings=settings,
        store=store,
        repos=repos,
        clustering=config,
        embedder=embedder,
        alerts=AlertsService(
            repos.alerts,
            explainer,
            calibration=lambda route, window, now: review.calibrated(window, now).get(route),
            rules=lambda: rules_in_force(settings),
            runbook=AlertRunbooks(renderer, settings.external_url, cli, slos.find),
            owner_labels=issues.owners.alert_labels,  # each alert's team, as the notifier labels it
            inhibit_rules=settings.notify.inhibit_rules,  # which alerts show as inhibited, as the notifier mutes them
        ),
        issues=issues,
        evalset=EvalService(
            repos.evalset,
            repos.issues,
            embedder.embed,
            instrument=review,
            min_items=settings.eval.min_items,
            compare_tolerance=settings.eval.compare_tolerance,
            representatives=lambda issue_id: [
                m["trace_id"]
                for m in issues.representatives(repos.issues.get(issue_id))
                if m.get("trace_id") and not m.get("eval_item")
            ],
        ),
        issue_jobs=IssueJobs(
            config,
            embedder,
            repos.issues,
            timedelta(hours=settings.clustering.lookback_hours),
            vectorizer=claim_vectorizer(config),
            skipped=metrics.skipped_rows,
        ),
        traces=TraceService(repos.traces),
        review=review,
        metrics=metrics,
        owners=issues.owners,
        slos=slos,
        triage=TriageService(
            repos.issues,
            issues.summary,
            webhook,
            clock,
            resume_from=lambda: repos.notifications.first_logged(ISSUE_WEBHOOK),
        ),
    )


def owner_rules(settings: Settings) -> OwnerRules:
    """The ``[[owners]]`` rules in order, and the default owner (services/issues/owners.py)."""
    rules = [
        OwnerRule(
            Owner(r.team, r.owner),
            r.route,
            {k: v for k, v in (("corpus", r.corpus), ("model", r.model), ("prompt", r.prompt)) if v},
        )
        for r in settings.owners
    ]
    return OwnerRules(rules, Owner(settings.triage.default_team, settings.triage.default_owner))


def dispatcher_for(settings: Settings, c: Components, run: Run) -> Dispatcher:
    """The leader's notifier (services/alerts/notify/dispatch.py): the ``[notify]`` receivers, each team's labels, and
    the notification log, written through ``run`` (a thread of its own)."""
    n = settings.notify
    return Dispatcher(
        n.alertmanager_url,
        n.webhook_url,
        settings.external_url,
        timedelta(seconds=n.resend_seconds),
        c.metrics,
        owner_labels=c.owners.alert_labels,
        inhibit_rules=n.inhibit_rules,
        retry_initial_seconds=n.retry_initial_seconds,
        retry_max_seconds=n.retry_max_seconds,
        attempt_timeout_seconds=n.attempt_timeout_seconds,
        nflog=c.repos.notifications,
        run=run,
    )


def agreement_test() -> AgreementDropTest:
    """The verifier-agreement test the worker runs (the rules listing describes this one)."""
    return AgreementDropTest()


def rules_in_force(settings: Settings) -> list[Rule]:
    """Every alert kind's rule: the configs the evaluator is built with (evaluator_for) and the figures the
    benches measured."""
    drift = settings.drift
    return alert_rules(
        drift.detector_config(),
        drift.input_health,
        agreement_test(),
        load_quality(),
        drift.route_thresholds,
        settings.routes.max_active,
        settings.notify.inhibit_rules,
        settings.slo_alerts.burn_rules(),
    )


def evaluator_for(
    settings: Settings,
    rates: RateRepository,
    dead_letters: DeadLetterRepository,
    alerts: AlertRecords,
    checkpoint: bool = True,
    wall_clock: bool = True,
) -> AlertEvaluator:
    """The alert evaluator the ``[drift]`` settings describe, over ``rates``, ``dead_letters`` and ``alerts``
    (services/alerts/evaluation/evaluator.py)."""
    drift = settings.drift
    return AlertEvaluator(
        drift.detector_config(),
        drift.route_thresholds,
        timedelta(seconds=drift.watermark_seconds),
        rates,
        dead_letters,
        alerts,
        checkpoint,
        drift.input_health,
        wall_clock,
    )


def slo_watch(
    settings: Settings, rates: RateRepository, alerts: AlertRecords, owners: OwnerRules, evaluator: AlertEvaluator
) -> SloWatch:
    """The ``[[slo]]`` burn alerts over the minutes ``evaluator`` has evaluated; an SLO's team is its routes'."""
    rules, least = settings.slo_alerts.burn_rules(), settings.slo_alerts.min_claims
    evaluated, first = (lambda: evaluator.last_minute), (lambda: evaluator.first_minute)
    return SloWatch(settings.slos(), rates, alerts, evaluated, owners.slo_labels, rules, least, first)


def run_backtest(
    events_path: Path,
    alerts_out: Path,
    settings: Settings,
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    rates_out: Path | None = None,
) -> BacktestSummary:
    """`claimwatch backtest` (services/alerts/evaluation/backtest.py ``replay``): a private store in a temporary
    directory, removed after; on it the live decoder and the settings' evaluator, with no watermark, no checkpoint
    and the replay's own clock."""
    settings = settings.model_copy(update={"drift": settings.drift.model_copy(update={"watermark_seconds": 0})})
    workdir = Path(tempfile.mkdtemp(prefix="claimwatch-backtest-"))
    store = private_store(workdir)
    try:
        rates = RateRepository(store)
        loader = BucketLoader(store, Decoder(settings.ingest.max_event_bytes), events_path.name)
        alerts = alert_repository(store)
        evaluator = evaluator_for(settings, rates, DeadLetterRepository(store), alerts, False, False)
        slos = slo_watch(settings, rates, alerts, owner_rules(settings), evaluator)
        return replay(loader, rates, evaluator, events_path, alerts_out, progress, chunk, rates_out, slos)
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


def review_service(settings: Settings, repos: Repositories) -> ReviewService:
    r = settings.review
    return ReviewService(
        repos.review,
        repos.rates,
        daily_budget=r.daily_budget,
        reviewers_per_claim=r.reviewers_per_claim,
        reservation=timedelta(minutes=r.reservation_minutes),
        guide_version=r.guide_version,
        min_labels=r.min_labels,
        max_label_age=timedelta(days=r.max_label_age_days),
        n_boot=r.bootstrap_samples,
        estimator=r.calibration_estimator,
        plan_width=r.plan_width,
    )


def retention_policy(settings: Settings) -> Retention:
    """How long the store keeps raw rows and minute aggregates (services/store/retention.py)."""
    r = settings.retention
    return Retention(r.raw_days, r.aggregate_days)


def ingest_window(settings: Settings) -> EventTimeWindow:
    """The event times live ingest stores: what retention keeps, up to the allowed skew ahead of the clock."""
    retention, i = retention_policy(settings), settings.ingest
    return EventTimeWindow(
        retention.raw_days, retention.aggregate_days, i.backfill, timedelta(seconds=i.max_future_skew_seconds)
    )


def open_migrated(settings: Settings) -> Store:
    """The configured store, opened and migrated to the current schema (closed again if migrating fails)."""
    store = open_store(settings.clickhouse)
    try:
        migrate(store)
    except BaseException:
        store.close()
        raise
    return store


def open_components(settings: Settings, *, starting: bool = False, cli: str = "claimwatch") -> Components:
    """Open (and migrate) the configured store and build on it.

    A starting service (worker, API) also brings the TTLs in line with ``settings.retention``. One-off CLI
    commands leave them alone, so a command run without the service's config file cannot reset them.
    """
    store = open_migrated(settings)
    if starting:
        changed = RetentionKeeper(store).apply(retention_policy(settings))
        if changed:
            log.info(
                "retention: raw %d days, aggregates %d days; TTL changed on %s",
                settings.retention.raw_days,
                settings.retention.aggregate_days,
                ", ".join(changed),
            )
    return build(settings, store, cli=cli)


def service_cli() -> str:
    """How a service's runbook readers run claimwatch: they may be in any directory, so the bare name when the
    service's PATH has this very script, else its absolute path (runbooks with the bare name say to activate)."""
    return cli_path(cwd=None)


def in_process_api(settings: Settings, cli: str) -> tuple[Any, Components]:
    """The API app over the store itself, and the components it runs on (the caller closes them): what the CLI
    asks when no API answers."""
    from services.api.app import create_api

    components = open_components(settings, cli=cli)
    try:
        return create_api(components), components
    except BaseException:
        components.close()
        raise


@contextlib.contextmanager
def opened(settings: Settings, *, starting: bool = False, cli: str = "claimwatch") -> Iterator[Components]:
    components = open_components(settings, starting=starting, cli=cli)
    try:
        yield components
    finally:
        components.close()


def recluster_policy(settings: Settings) -> ReclusterPolicy:
    """When the leader re-clusters (services/issues/schedule.py)."""
    c = settings.clustering
    return ReclusterPolicy(
        c.recluster_min_new_claims, c.recluster_min_new_fraction, timedelta(minutes=c.recluster_max_age_minutes)
    )
