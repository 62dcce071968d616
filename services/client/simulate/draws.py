"""Every random number one route draws for one minute, by name.

numpy draws a minute's numbers in blocks, one row per field below, in field order: that order is
the random stream, so reordering, adding or removing a field changes every event after it.
The same named tuples name a minute's rows (arrays, for numpy) and one answer's values (floats).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Generic, NamedTuple, TypeVar

import numpy as np

PICK_HIGH = 1 << 30  # AnswerPicks and alias picks are in [0, PICK_HIGH)
T = TypeVar("T", bound=tuple)
V = TypeVar("V")  # a minute's rows (np.ndarray, one value per answer or claim), or one answer's value (float)


class AnswerUniforms(NamedTuple, Generic[V]):
    """One answer's uniforms in [0, 1)."""

    answerable: V
    abstains: V
    question_kind: V  # a plain question, or a risky-looking one that is answered well
    query_type: V
    stakes: V
    action: V
    aliases: V  # the producer sends its verifier's own verdict labels
    textless: V
    human_label: V
    signals: V  # the event carries signals though no failure raised one
    tenant: V
    timestamp_form: V
    premise_similarity: V  # the three signals' values
    support_delta: V
    sample_disagreement: V
    unused: V  # drawn and never read; kept so the stream stays as it is


class AnswerPicks(NamedTuple):
    """One answer's integers in [0, 2**30), each taken modulo the size of what it picks from."""

    question: int  # also the risky question's family
    wording: int  # the risky question within its pool, or the abstention's text
    evidence: int  # the first of three consecutive chunks
    annotator: int  # also the channel
    tenant: int  # also the region
    millisecond: int
    topic: int
    claim_wording: int  # the first of consecutive pool entries, so one answer's claims differ


class ClaimUniforms(NamedTuple, Generic[V]):
    """One claim's uniforms in [0, 1)."""

    failure: V  # fails when below its answer's failure propensity
    trivial: V  # trivial (nothing to check) when below the scenario's trivial share
    verdict: V  # which of its family's verdicts


class SignalValues(NamedTuple):
    """Per answer, each signal's value as [not raised, raised] by a failure, rounded as events carry them."""

    premise_similarity: list[list[float]]
    support_delta: list[list[float]]
    sample_disagreement: list[list[float]]


def signal_values(u: AnswerUniforms[np.ndarray]) -> SignalValues:
    """From a minute's rows; numpy rounds them all at once."""

    def pairs(calm: np.ndarray, raised: np.ndarray) -> list[list[float]]:
        return np.round(np.stack((calm, raised)), 3).T.tolist()

    return SignalValues(
        pairs(0.1 + 0.5 * u.premise_similarity, 0.85 + 0.13 * u.premise_similarity),
        pairs(0.12 * u.support_delta, 0.3 + 0.4 * u.support_delta),
        pairs(0.25 * u.sample_disagreement, 0.55 + 0.4 * u.sample_disagreement),
    )


def per_answer(fields: type[T], rows: np.ndarray) -> list[T]:
    """A named tuple per column of a minute's rows (tuple.__new__ as _make, which is twice as slow)."""
    return list(map(partial(tuple.__new__, fields), rows.T.tolist()))


@dataclass(slots=True)
class MinuteDraws:
    """One route's draws for one minute, as plain lists for the loop that writes the events.
    Answer i owns claims claim_start[i] to claim_start[i + 1]."""

    uniforms: list[AnswerUniforms[float]]
    picks: list[AnswerPicks]
    signals: SignalValues
    answerable: list[bool]
    abstained: list[bool]
    version_code: list[int]  # bit b set: the answer runs on regression b's versions
    claim_start: list[int]
    family: list[int]  # per claim: the index of its failure family, -1 when it does not fail
    checkable: list[bool]
    verdict: list[float]  # per claim: ClaimUniforms.verdict
    alias: list[int]  # per claim: which alias of its verdict, when its producer sends aliases
    score: list[float]
