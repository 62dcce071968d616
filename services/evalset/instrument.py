"""The gate's checks on the instrument (issue 16): faithfulness corrected for the verifier's measured errors,
and a minimum verifier-vs-human kappa.

The review stage measures both; this module only asks it and turns the answers into gate failures, so the
eval set does not depend on how review works. A stale calibration fails the gate with its reasons: a
correction from too few, too old or another verifier's labels is no evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np

from services.evalset.metrics import Figure, GateFailure, ItemOutcome, check_figure, claim_counts, met_text


class Calibrated(Protocol):  # services.review.calibration.CalibratedRate; read-only, as it is frozen
    @property
    def value(self) -> float | None: ...
    @property
    def interval(self) -> tuple[float, float] | None: ...
    @property
    def labels(self) -> int: ...
    @property
    def stale(self) -> bool: ...
    @property
    def reasons(self) -> tuple[str, ...]: ...


class Instrument(Protocol):  # services.review.service.ReviewService
    def calibrated_answers(self, failed: np.ndarray, claims: np.ndarray, now: datetime) -> Calibrated: ...
    def verifier_kappa(self) -> Figure | None: ...


@dataclass(frozen=True)
class InstrumentChecks:
    min_calibrated_faithfulness: float | None = None
    min_kappa: float | None = None

    def __bool__(self) -> bool:
        return self.min_calibrated_faithfulness is not None or self.min_kappa is not None


def calibrated_faithfulness(
    outcomes: Sequence[ItemOutcome], instrument: Instrument, now: datetime
) -> tuple[Figure, Calibrated]:
    """1 - the calibrated failed-claim rate of the eval set's answers, its interval flipped likewise."""
    supported, checkable = claim_counts(outcomes)
    keep = checkable > 0
    found = instrument.calibrated_answers(checkable[keep] - supported[keep], checkable[keep], now)
    lo, hi = (1 - found.interval[1], 1 - found.interval[0]) if found.interval else (None, None)
    value = None if found.value is None else 1 - found.value
    note = "" if found.interval else "no interval: the verifier's error rates are too uncertain"
    return Figure(value, lo, hi, int(keep.sum()), note=note), found


def instrument_failures(
    checks: InstrumentChecks,
    outcomes: Sequence[ItemOutcome],
    instrument: Instrument | None,
    now: datetime,
    met: list[str] | None = None,
) -> list[GateFailure]:
    """The checks' failures; each check met is added to ``met`` as a passing gate states it."""
    met = [] if met is None else met
    if not checks:
        return []
    if instrument is None:
        raise ValueError(
            "this service has no human review stage: --min-calibrated-faithfulness and --min-kappa need one"
        )
    failures = []
    if checks.min_calibrated_faithfulness is not None:
        threshold = checks.min_calibrated_faithfulness
        figure, found = calibrated_faithfulness(outcomes, instrument, now)
        if found.stale and figure.value is not None:
            failures.append(
                GateFailure(
                    "all",
                    "calibrated faithfulness",
                    figure.value,
                    threshold,
                    f"calibrated faithfulness on all is {figure.value:.4f} but its calibration is "
                    f"stale ({'; '.join(found.reasons)}); the gate cannot pass on it",
                )
            )
        elif found.stale:
            failures.append(
                GateFailure(
                    "all",
                    "calibrated faithfulness",
                    None,
                    threshold,
                    f"calibrated faithfulness on all is undefined ({'; '.join(found.reasons)}); "
                    "the gate cannot pass on no evidence",
                )
            )
        elif failure := check_figure("all", "calibrated faithfulness", figure, threshold, True):
            failures.append(failure)
        else:
            met.append(met_text("all", "calibrated faithfulness", figure, threshold, True))
    if checks.min_kappa is not None:
        kappa = instrument.verifier_kappa()
        failure = check_figure("reviewed claims", "verifier-vs-human kappa", kappa, checks.min_kappa, True, decimals=2)
        if failure:
            failures.append(failure)
        elif kappa is not None:  # always: check_figure fails a missing figure
            met.append(met_text("reviewed claims", "verifier-vs-human kappa", kappa, checks.min_kappa, True, 2))
    return failures
