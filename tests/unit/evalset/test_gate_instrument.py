"""`eval gate --min-calibrated-faithfulness / --min-kappa`: exact threshold cases on a fixed instrument, then
through the API and the CLI over a real store with human labels."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from services.app.cli import main
from services.evalset.instrument import InstrumentChecks, instrument_failures
from services.evalset.metrics import Figure, ItemOutcome
from tests.support.cli import answer_http_with
from tests.unit.review.test_review_api import AUTH, TOKEN, label_everything, world  # noqa: F401  (world: fixture)

NOW = datetime(2026, 11, 21, tzinfo=UTC)
# 2 items, 5 checkable claims, 2 of them failed by the verifier.
OUTCOMES = [
    ItemOutcome("a", "lookup", "high", True, False, ("supported", "contradicted", "trivial")),
    ItemOutcome("b", "lookup", "high", True, False, ("supported", "supported", "stale")),
]


@dataclass
class Calibrated:
    value: float | None
    interval: tuple[float, float] | None
    labels: int = 40
    stale: bool = False
    reasons: tuple[str, ...] = ()


class FixedInstrument:
    """The review stage's answers, fixed: a calibrated failed rate of 0.20 (0.15–0.25) and kappa 0.41."""

    def __init__(self, calibrated: Calibrated, kappa: Figure | None = Figure(0.41, 0.30, 0.52, 120)):
        self.calibrated, self.kappa, self.asked = calibrated, kappa, []

    def calibrated_answers(self, failed, claims, now):
        self.asked.append((list(failed), list(claims)))
        return self.calibrated

    def verifier_kappa(self):
        return self.kappa


def test_calibrated_faithfulness_is_one_minus_the_calibrated_rate_of_the_eval_answers():
    instrument = FixedInstrument(Calibrated(0.20, (0.15, 0.25)))
    assert instrument_failures(InstrumentChecks(min_calibrated_faithfulness=0.79), OUTCOMES, instrument, NOW) == []
    assert instrument.asked == [([1.0, 1.0], [2.0, 3.0])], "failed and checkable claims per item"
    [failure] = instrument_failures(InstrumentChecks(min_calibrated_faithfulness=0.81), OUTCOMES, instrument, NOW)
    assert failure.metric == "calibrated faithfulness" and failure.value == pytest.approx(0.8)
    assert "is 0.8000 (95% CI 0.7500–0.8500, 2 items), below the minimum 0.8100" in failure.message


@pytest.mark.parametrize(
    "calibrated, fragment",
    [
        (
            Calibrated(0.05, (0.0, 0.1), stale=True, reasons=("only 12 settled labels",)),
            "is 0.9500 but its calibration is stale (only 12 settled labels)",
        ),
        (
            Calibrated(None, None, stale=True, reasons=("no settled label says failed",)),
            "undefined (no settled label says failed); the gate cannot pass on no evidence",
        ),
    ],
)
def test_a_stale_calibration_fails_the_gate_whatever_its_value(calibrated, fragment):
    [failure] = instrument_failures(
        InstrumentChecks(min_calibrated_faithfulness=0.5), OUTCOMES, FixedInstrument(calibrated), NOW
    )
    assert fragment in failure.message


def test_kappa_below_the_minimum_fails_and_no_labels_is_no_evidence():
    fine = FixedInstrument(Calibrated(0.2, (0.15, 0.25)))
    assert instrument_failures(InstrumentChecks(min_kappa=0.40), OUTCOMES, fine, NOW) == []
    [failure] = instrument_failures(InstrumentChecks(min_kappa=0.60), OUTCOMES, fine, NOW)
    assert (
        "verifier-vs-human kappa on reviewed claims is 0.41 (95% CI 0.30–0.52, 120 items), below the minimum "
        "0.60" in failure.message
    )
    [none] = instrument_failures(
        InstrumentChecks(min_kappa=0.1), OUTCOMES, FixedInstrument(Calibrated(0.2, None), kappa=None), NOW
    )
    assert none.value is None and "cannot pass on no evidence" in none.message


def test_without_a_review_stage_the_new_checks_are_refused():
    with pytest.raises(ValueError, match="no human review stage"):
        instrument_failures(InstrumentChecks(min_kappa=0.5), OUTCOMES, None, NOW)
    assert instrument_failures(InstrumentChecks(), OUTCOMES, None, NOW) == []


@pytest.fixture
def labelled(world):  # noqa: F811
    client, clock = world
    label_everything(
        client, clock, ("ann", "bob"), lambda slot: "supported" if slot["claim"].endswith(".0") else "contradicted"
    )
    return client


@pytest.mark.slow
def test_the_api_gate_checks_kappa_on_the_review_labels(labelled):
    kappa = labelled.get("/api/review/agreement").json()["overall"]["verifier"]["kappa"]["value"]
    assert 0 < kappa < 1
    passed = labelled.get("/api/eval/gate", params={"min_kappa": kappa - 0.01}).json()
    assert passed["passed"] and passed["failures"] == []
    assert len(passed["checked"]) == 1
    assert passed["checked"][0].startswith(f"verifier-vs-human kappa on reviewed claims is {kappa:.2f} (")
    assert "at least the minimum" in passed["checked"][0] and " items)" in passed["checked"][0]
    failed = labelled.get("/api/eval/gate", params={"min_kappa": kappa + 0.01}).json()
    assert [f["metric"] for f in failed["failures"]] == ["verifier-vs-human kappa"]
    assert labelled.get("/api/eval/gate", params={"min_kappa": 2}).status_code == 422


@pytest.mark.slow
def test_the_cli_gate_exits_1_naming_the_check_and_0_when_it_holds(labelled, monkeypatch):
    api = answer_http_with(labelled, monkeypatch, TOKEN)
    monkeypatch.setenv("COLUMNS", "200")

    def gate(*args):
        return CliRunner().invoke(main, ["eval", "gate", *args, "--api", "http://testserver"], obj=api)

    assert gate("--min-kappa", "-0.5").exit_code == 0
    strict = gate("--min-kappa", "0.99")
    assert strict.exit_code == 1 and "FAIL" in strict.output and "verifier-vs-human kappa" in strict.output
    # The eval set is empty: a calibrated faithfulness of nothing is no evidence.
    empty = gate("--min-calibrated-faithfulness", "0.5")
    assert empty.exit_code == 1 and "calibrated faithfulness on all is undefined" in empty.output
