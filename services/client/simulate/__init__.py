"""Realistic verdict-event traffic, deterministic under a seed: routes with diurnal volume,
correlated claim failures, abstentions, failure families with distinct wording, version and
corpus regressions, late and duplicate deliveries, and bad input labelled with its rule.

    from services.client.simulate import Scenario, generate, expected_counts
    events = list(generate(Scenario.demo(), start, minutes=120, seed=7))
"""

from services.client.simulate.expected import ExpectedCounts, expected_counts, write_jsonl
from services.client.simulate.families import FAMILIES
from services.client.simulate.generate import SimEvent, TrafficGenerator, generate
from services.client.simulate.scenario import BAD_KINDS, Regression, Route, Scenario, ScenarioError

__all__ = [
    "BAD_KINDS",
    "FAMILIES",
    "ExpectedCounts",
    "Regression",
    "Route",
    "Scenario",
    "ScenarioError",
    "SimEvent",
    "TrafficGenerator",
    "expected_counts",
    "generate",
    "write_jsonl",
]
