"""What traffic to simulate: routes, their volumes and failure rates, regressions, bad input."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from services.client.simulate.domains import DOMAIN_NAMES
from services.client.simulate.families import FAMILIES

ROUTE_RE = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
BAD_KINDS = (
    "not_utf8",
    "not_json",
    "wrong_type",
    "unknown_verdict",
    "missing_field",
    "too_large",
    "timestamp_without_offset",
    "bad_route",
)
# too_large events weigh over 1 MiB each, so they are rarer than the others by default.
DEFAULT_BAD_WEIGHTS = MappingProxyType({**dict.fromkeys(BAD_KINDS, 1.0), "too_large": 0.1})


class ScenarioError(ValueError):
    """A scenario parameter is out of range; the message names the field."""


def _check(ok: bool, where: str, message: str) -> None:
    if not ok:
        raise ScenarioError(f"{where}: {message}")


def _unit(value: float, where: str, upper_open: bool = False) -> None:
    ok = 0 <= value < 1 if upper_open else 0 <= value <= 1
    _check(
        isinstance(value, (int, float)) and ok, where, f"must be in [0, 1{')' if upper_open else ']'}, got {value!r}"
    )


@dataclass(frozen=True)
class Route:
    name: str
    per_minute: float  # mean answers per minute, averaged over the day
    base_rate: float  # failure rate of non-trivial claims on answerable questions
    families: Mapping[str, float]  # relative weights of the failure families behind base_rate
    versions: Mapping[str, str]
    domain: str | None = None  # wording domain; defaults to the route name, else one by position
    mean_claims: float = 3.5  # 1..8 claims per answer
    unanswerable_share: float = 0.08
    stakes: tuple[float, float, float] = (0.5, 0.35, 0.15)  # low, medium, high
    rate_swing: float = 0.0  # base_rate + rate_swing*cos(2π(hour - rate_peak_hour)/24): a daily swing
    rate_peak_hour: float = 14.0  # UTC

    def base_rate_at(self, hour: float) -> float:
        return self.base_rate + self.rate_swing * math.cos(2 * math.pi * (hour - self.rate_peak_hour) / 24)


@dataclass(frozen=True)
class Regression:
    """From ``at_minute`` on, ``share`` of the route's traffic runs on ``versions`` (merged over
    the route's), and only that traffic fails ``rate_increase`` more often, as ``family``.
    A model or prompt change says "the system changed"; a corpus change says "the evidence changed"."""

    route: str
    at_minute: int
    versions: Mapping[str, str]
    rate_increase: float = 0.05
    family: str = "invented_numbers"
    share: float = 1.0
    ramp_minutes: int = 0  # the new version's share grows linearly to ``share`` over this time

    def share_at(self, minute: int) -> float:
        if minute < self.at_minute:
            return 0.0
        if self.ramp_minutes <= 0:
            return self.share
        return self.share * min(1.0, (minute - self.at_minute + 1) / self.ramp_minutes)


@dataclass(frozen=True)
class Scenario:
    routes: tuple[Route, ...]
    regressions: tuple[Regression, ...] = ()
    diurnal_amplitude: float = 0.5  # volume = mean * (1 + a*cos(2π(hour - peak_hour)/24))
    peak_hour: float = 14.0  # UTC
    intra_answer_correlation: float = 0.1  # ICC of claim failures within one answer (beta-binomial)
    unanswerable_answered_rate: float = 0.5  # failure rate when an unanswerable question gets an answer
    trivial_share: float = 0.06
    correct_abstention: float = 0.85  # abstained ÷ unanswerable
    over_refusal: float = 0.02  # abstained ÷ answerable
    bad_fraction: float = 0.05  # share of all messages that break the contract
    bad_weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_BAD_WEIGHTS))
    too_large_bytes: int = (1 << 20) + 256
    duplicate_fraction: float = 0.01  # valid events delivered a second time (same bytes)
    late_fraction: float = 0.01  # events emitted 1..max_late_minutes after their event time
    max_late_minutes: int = 3
    alias_fraction: float = 0.1  # events whose producer sends alias verdicts ('unlinked', 'REFUTED', ...)
    textless_fraction: float = 0.02  # count-only events that carry no text
    human_label_fraction: float = 0.03
    signals_fraction: float = 0.9  # events that carry signals when no family needs them
    topics_per_family: int = 1  # topics (of a route's 10) that one family's failures concern

    def __post_init__(self) -> None:
        _check(len(self.routes) > 0, "Scenario.routes", "needs at least one route")
        names = [r.name for r in self.routes]
        _check(len(set(names)) == len(names), "Scenario.routes", f"route names repeat: {names}")
        for i, r in enumerate(self.routes):
            where = f"Scenario.routes[{i}]"
            _check(
                isinstance(r.name, str) and bool(ROUTE_RE.fullmatch(r.name)),
                f"{where}.name",
                f"must be 1-128 chars of A-Z a-z 0-9 . _ : / -, got {r.name!r}",
            )
            _check(
                r.per_minute >= 0 and math.isfinite(r.per_minute),
                f"{where}.per_minute",
                f"must be >= 0, got {r.per_minute!r}",
            )
            _unit(r.base_rate, f"{where}.base_rate", upper_open=True)
            _check(
                isinstance(r.rate_swing, (int, float)) and 0 <= r.rate_swing <= min(r.base_rate, 1 - r.base_rate),
                f"{where}.rate_swing",
                f"must be >= 0 and keep base_rate ± rate_swing within [0, 1], got {r.rate_swing!r}",
            )
            _unit(r.unanswerable_share, f"{where}.unanswerable_share")
            _check(1 <= r.mean_claims <= 8, f"{where}.mean_claims", f"must be in [1, 8], got {r.mean_claims!r}")
            _check(r.domain is None or r.domain in DOMAIN_NAMES, f"{where}.domain", f"must be one of {DOMAIN_NAMES}")
            unknown = set(r.families) - set(FAMILIES)
            _check(not unknown, f"{where}.families", f"unknown families {sorted(unknown)}; known: {FAMILIES}")
            _check(
                sum(r.families.values()) > 0 and min(r.families.values()) >= 0,
                f"{where}.families",
                "weights must be >= 0 with a positive sum",
            )
            _check(
                len(r.stakes) == 3 and min(r.stakes) >= 0 and sum(r.stakes) > 0,
                f"{where}.stakes",
                "must be three weights (low, medium, high) >= 0 with a positive sum",
            )
            _check(
                all(isinstance(k, str) and isinstance(v, str) for k, v in r.versions.items()),
                f"{where}.versions",
                "must map strings to strings",
            )
        for i, g in enumerate(self.regressions):
            where = f"Scenario.regressions[{i}]"
            _check(g.route in names, f"{where}.route", f"unknown route {g.route!r}; routes: {names}")
            _check(g.family in FAMILIES, f"{where}.family", f"unknown family {g.family!r}; known: {FAMILIES}")
            _check(isinstance(g.at_minute, int) and g.at_minute >= 0, f"{where}.at_minute", "must be an int >= 0")
            _unit(g.rate_increase, f"{where}.rate_increase", upper_open=True)
            _unit(g.share, f"{where}.share")
            _check(bool(g.versions), f"{where}.versions", "must change at least one version key")
        for name in (
            "diurnal_amplitude",
            "trivial_share",
            "correct_abstention",
            "over_refusal",
            "duplicate_fraction",
            "late_fraction",
            "alias_fraction",
            "textless_fraction",
            "human_label_fraction",
            "signals_fraction",
            "unanswerable_answered_rate",
        ):
            _unit(getattr(self, name), f"Scenario.{name}")
        _check(0 < self.intra_answer_correlation < 1, "Scenario.intra_answer_correlation", "must be in (0, 1)")
        _unit(self.bad_fraction, "Scenario.bad_fraction", upper_open=True)
        unknown = set(self.bad_weights) - set(BAD_KINDS)
        _check(not unknown, "Scenario.bad_weights", f"unknown kinds {sorted(unknown)}; known: {BAD_KINDS}")
        _check(
            self.bad_fraction == 0 or sum(self.bad_weights.values()) > 0,
            "Scenario.bad_weights",
            "need a positive weight when bad_fraction > 0",
        )
        _check(self.too_large_bytes > 1 << 20, "Scenario.too_large_bytes", "must exceed 1 MiB (the contract's limit)")
        _check(
            isinstance(self.topics_per_family, int) and self.topics_per_family >= 1,
            "Scenario.topics_per_family",
            "must be an int >= 1",
        )
        _check(
            isinstance(self.max_late_minutes, int) and self.max_late_minutes >= 1,
            "Scenario.max_late_minutes",
            "must be an int >= 1",
        )

    def domain_of(self, index: int) -> str:
        route = self.routes[index]
        if route.domain:
            return route.domain
        return route.name if route.name in DOMAIN_NAMES else DOMAIN_NAMES[index % len(DOMAIN_NAMES)]

    def scaled(self, factor: float) -> Scenario:
        """The same traffic mix at ``factor`` times the volume (for benchmarks)."""
        _check(factor > 0, "Scenario.scaled(factor)", f"must be > 0, got {factor!r}")
        return replace(self, routes=tuple(replace(r, per_minute=r.per_minute * factor) for r in self.routes))

    def replace(self, **changes) -> Scenario:
        return replace(self, **changes)

    @classmethod
    def demo(cls, regression_at: int = 60, corpus_change_at: int | None = 120, **changes) -> Scenario:
        """Five routes, ~300 answers/min at the daily mean. Each failure family has a home route (and
        a trickle elsewhere) and, per route, one topic, so each family reads as one issue. A new model
        on billing-faq from ``regression_at`` invents numbers (+6 points); a corpus update on
        parcel-status from ``corpus_change_at`` serves stale sources (+5 points). Pass
        ``corpus_change_at=None`` for the model regression alone."""

        def mix(**weights: float) -> dict[str, float]:
            return {f: weights.get(f, 0.02) for f in FAMILIES}  # each family shows up on every route, a little

        verifier = "nli-judge@2.1"
        routes = (
            Route(
                "billing-faq",
                60,
                0.06,
                mix(invented_numbers=0.7),
                {
                    "model": "gen-2026-10",
                    "prompt": "faq-v14",
                    "corpus": "policies@2026-11-01",
                    "retriever": "hybrid-v3",
                    "verifier": verifier,
                },
                stakes=(0.4, 0.45, 0.15),
            ),
            Route(
                "parcel-status",
                120,
                0.04,
                mix(evidence_admission=0.5, unstable_generation=0.4),
                {
                    "model": "gen-2026-10",
                    "prompt": "parcel-v7",
                    "corpus": "carrier-docs@2026-11-01",
                    "retriever": "bm25-v2",
                    "verifier": verifier,
                },
                mean_claims=2.5,
                stakes=(0.7, 0.25, 0.05),
            ),
            Route(
                "hr-policy",
                20,
                0.09,
                mix(stale_sources=0.7),
                {
                    "model": "gen-2026-09",
                    "prompt": "hr-v3",
                    "corpus": "handbook@2026-10-15",
                    "retriever": "hybrid-v3",
                    "verifier": verifier,
                },
                stakes=(0.3, 0.5, 0.2),
            ),
            Route(
                "product-search",
                90,
                0.07,
                mix(cherry_picked=0.5, sycophancy=0.4),
                {
                    "model": "gen-2026-10-mini",
                    "prompt": "shop-v22",
                    "corpus": "catalog@2026-11-18",
                    "retriever": "dense-v5",
                    "verifier": verifier,
                },
                mean_claims=4.5,
                stakes=(0.75, 0.2, 0.05),
            ),
            Route(
                "legal-terms",
                10,
                0.12,
                mix(phantom_citation=0.5, dropped_qualifiers=0.4),
                {
                    "model": "gen-2026-10",
                    "prompt": "legal-v5",
                    "corpus": "contracts@2026-09-30",
                    "retriever": "hybrid-v3",
                    "verifier": "nli-judge@2.2",
                },
                mean_claims=5.0,
                stakes=(0.1, 0.3, 0.6),
            ),
        )
        regressions = [Regression("billing-faq", regression_at, {"model": "gen-2026-11"}, 0.06, "invented_numbers")]
        if corpus_change_at is not None:
            regressions.append(
                Regression(
                    "parcel-status", corpus_change_at, {"corpus": "carrier-docs@2026-11-15"}, 0.05, "stale_sources"
                )
            )
        return cls(routes=routes, regressions=tuple(regressions), **changes)
