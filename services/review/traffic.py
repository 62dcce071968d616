"""A route's traffic in a calibration window: its answers as (failed, claims) patterns, and its claims per verdict
class x score band (services/core/score_bands.py), with what answer resampling needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from services.core.score_bands import N_CELLS


@dataclass(frozen=True)
class Traffic:
    """A route's answers in a window, as distinct (failed, claims) patterns and how many answers had each. With
    sampled verification, ``weights`` and ``weights_sq`` are each pattern's Σ 1/sampling.rate and Σ of its square
    (None: every answer weighs 1), so the raw rate and its variance are the whole traffic's."""

    route: str
    verifier_version: str
    failed: np.ndarray
    claims: np.ndarray
    answers: np.ndarray
    weights: np.ndarray | None = None
    weights_sq: np.ndarray | None = None
    # Claims per (verdict class, score band) cell and their cross products over answers (services/core/score_bands.py,
    # score_strata.py); None: not known, calibration by verdict alone.
    cells: np.ndarray | None = None
    cross: np.ndarray | None = None

    @classmethod
    def from_row(cls, row: Mapping) -> Traffic:
        failed, claims, answers, weights, weights_sq = np.array(row["profile"], dtype=np.float64).reshape(-1, 5).T
        cells = row.get("cells")
        return cls(
            row["route"],
            row["verifier_version"],
            failed,
            claims,
            answers,
            weights,
            weights_sq,
            cells=None if cells is None else np.array(cells, dtype=np.float64),
            cross=None if cells is None else np.array(row["cross"], dtype=np.float64).reshape(N_CELLS, N_CELLS),
        )

    @property
    def answer_weights(self) -> np.ndarray:
        return self.answers if self.weights is None else self.weights

    @property
    def raw(self) -> float | None:
        claims = float(self.answer_weights @ self.claims)
        return float(self.answer_weights @ self.failed) / claims if claims else None

    @property
    def raw_variance(self) -> float | None:
        """The raw rate's variance with answers resampled (the linearised ratio: claims of one answer move
        together; each answer's term weighted by its weight squared)."""
        raw = self.raw
        if raw is None:
            return None
        squares = self.answers if self.weights_sq is None else self.weights_sq
        return float(squares @ (self.failed - raw * self.claims) ** 2) / float(self.answer_weights @ self.claims) ** 2
