"""One route's simulated day with a model regression at minute 200, and the settings its alert tests run with."""

from __future__ import annotations

from datetime import UTC, datetime

from services.app.settings import Settings, load_settings
from services.client.simulate import Regression, Scenario, generate
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent

START = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


def billing_regression(minutes: int = 260, seed: int = 4) -> list[VerdictEvent]:
    """billing-faq alone from START, its new model raising failures by 7 points from minute 200."""
    scenario = Scenario(
        routes=Scenario.demo().routes[:1],
        bad_fraction=0.0,
        regressions=(Regression("billing-faq", 200, {"model": "gen-2026-11"}, 0.07),),
    )
    decoder = Decoder()
    return [decoder.decode(s.raw) for s in generate(scenario, START, minutes, seed=seed)]


def prompt_settings() -> Settings:
    """No watermark, and a baseline that learns for 8,000 claims (the day's first hours)."""
    return load_settings(
        None, {"CLAIMWATCH_DRIFT__WATERMARK_SECONDS": "0"}, {"drift": {"detector": {"min_baseline_claims": 8000}}}
    )
