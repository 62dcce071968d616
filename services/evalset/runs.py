"""Eval runs recorded: a system's answers to eval items, with the versions it answered with and its verifier's verdict
on each claim, so `eval compare` and `eval gate --baseline` can set two runs side by side.

A run is recorded in parts (the CLI sends a file a part at a time): each part adds the items the run has not
answered yet, and keeps the ones it has as they were, so a part sent twice changes nothing. Every part of a run
states the same versions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from services.core.errors import Conflict
from services.core.numbers import plural
from services.core.readmodel import closed
from services.store.evalset import EvalRepository

ORIGIN_RUN = "origin"  # promotion's run: the production answers items came from
MAX_ANSWERS = 500  # answers in one part
NAMED = 5  # ids a refusal names
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")  # no "=" or ",": `eval compare` reads those as versions


@dataclass(frozen=True)
class RecordedClaim:
    verdict: str  # canonical: the API checks it against the contract's vocabulary
    text: str = ""
    claim_type: str = "other"
    span: str = ""
    source_id: str = ""


@dataclass(frozen=True)
class RunAnswer:
    item_id: str
    action: str = "served"
    answer_text: str = ""
    claims: tuple[RecordedClaim, ...] = ()


@closed
@dataclass(frozen=True)
class RecordedPart:
    run_id: str
    recorded: int  # answers added now
    claims: int  # their claims
    kept: list[str] = field(default_factory=list)  # items the run had answered already: kept as they were
    items: int = 0  # answers the run holds now
    previous: str | None = None  # the newest other run: what to compare this one with


def _named(ids: Sequence[str]) -> str:
    shown = ", ".join(sorted(ids)[:NAMED])
    return shown + (f" and {len(ids) - NAMED} more" if len(ids) > NAMED else "")


class RunRecorder:
    def __init__(self, evals: EvalRepository):
        self.evals = evals

    def record(
        self, run_id: str, versions: Mapping[str, str], labeler: str, answers: Sequence[RunAnswer], at: datetime
    ) -> RecordedPart:
        """Add ``answers`` to ``run_id``. ValueError (422) for a part that cannot be a run's, Conflict (409) for
        versions other than the run's."""
        if not RUN_ID.fullmatch(run_id):
            raise ValueError(
                f"run id {run_id[:70]!r} must be 1-64 letters, digits and . _ : - (starting with a letter or digit)"
            )
        if run_id == ORIGIN_RUN:
            raise ValueError(f"run id {ORIGIN_RUN!r} is promotion's own (the production answers); choose another")
        if not labeler.startswith(("verifier:", "human:")):
            raise ValueError(f"labeler {labeler!r} must be verifier:NAME[@VERSION] or human:ID")
        ids = [a.item_id for a in answers]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"{plural(len(twice), 'item')} answered twice in one part: {_named(twice)}")
        unknown = sorted(set(ids) - self.evals.known_items(ids))
        if unknown:
            raise ValueError(
                f"{plural(len(unknown), 'item')} not in the eval set: {_named(unknown)}; a run answers eval items "
                "(`claimwatch evalset items` lists them)"
            )
        earlier = self.evals.runs(run_id, limit=1)
        if earlier and earlier[0]["versions"] != dict(versions):
            raise Conflict(
                f"run {run_id} was recorded with versions {_pairs(earlier[0]['versions'])}, not {_pairs(versions)}: "
                "a run answers with one set of versions; record these answers as another run"
            )
        kept = sorted(self.evals.answered(run_id, ids))
        new = [a for a in answers if a.item_id not in set(kept)]
        self.evals.save_results(
            {
                "run_id": run_id,
                "item_id": a.item_id,
                "action": a.action,
                "answer_text": a.answer_text,
                "produced_at": at,
                "versions": dict(versions),
            }
            for a in new
        )
        self.evals.save_claim_labels(_label_rows(run_id, labeler, new, at))
        held = (earlier[0]["items"] if earlier else 0) + len(new)
        previous = next((r["run_id"] for r in self.evals.runs(limit=2) if r["run_id"] != run_id), None)
        return RecordedPart(run_id, len(new), sum(len(a.claims) for a in new), kept, held, previous)


def _pairs(versions: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(versions.items())) or "(none)"


def _label_rows(run_id: str, labeler: str, answers: Sequence[RunAnswer], at: datetime) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id,
            "item_id": a.item_id,
            "claim_idx": idx,
            "claim_text": c.text,
            "claim_type": c.claim_type,
            "verdict": c.verdict,
            "supporting_span": c.span,
            "source_id": c.source_id,
            "labeler": labeler,
            "labeled_at": at,
        }
        for a in answers
        for idx, c in enumerate(a.claims)
    ]
