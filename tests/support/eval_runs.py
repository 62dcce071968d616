"""Eval runs as tests lay them down: approved items, and what a run answered on each (``eval_results`` with the
run's versions, ``claim_labels`` with its verifier's verdicts), through the repository's own writers
(services/store/evalset.py: save_items, save_results, save_claim_labels).

``eval compare`` and ``eval gate --baseline`` read these rows (runs, outcomes); claimwatch itself writes only the
origin run, when a trace is promoted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from services.evalset.promotion import EvalItem
from services.store.evalset import EvalRepository


@dataclass(frozen=True)
class Answer:
    """One run's answer to one item: abstained, or served with these claim verdicts."""

    verdicts: tuple[str, ...] = ()
    abstained: bool = False


def add_approved_items(evals: EvalRepository, items: Sequence[tuple[str, str, str, bool | None]], at: datetime) -> int:
    """``(item_id, query_type, stakes, answerable)`` as approved items (proposed by ann, approved by bob)."""
    rows = [
        EvalItem(
            item_id, f"question {item_id}", query_type, answerable, stakes, None, "corpus@1", "iss-1",
            f"t-{item_id}", f"e-{item_id}", "billing-faq", "approved", "ann", at, "bob", at, "", 1,
        ).to_row([1.0, 0.0])
        for item_id, query_type, stakes, answerable in items
    ]  # fmt: skip
    return evals.save_items(rows)


def record_run(
    evals: EvalRepository,
    run_id: str,
    versions: Mapping[str, str],
    answers: Mapping[str, Answer],
    at: datetime,
    labeler: str = "verifier:v1",
) -> int:
    """What ``run_id`` (answering with ``versions``) did on each item, its claims labelled by ``labeler``. Rows
    written."""
    results = evals.save_results(
        [
            {
                "run_id": run_id,
                "item_id": item_id,
                "action": "abstained" if a.abstained else "served",
                "answer_text": "" if a.abstained else f"answer of {run_id} to {item_id}",
                "produced_at": at,
                "versions": dict(versions),
            }
            for item_id, a in answers.items()
        ]
    )
    labels = evals.save_claim_labels(
        [
            {
                "run_id": run_id,
                "item_id": item_id,
                "claim_idx": idx,
                "claim_text": f"claim {idx} of {item_id}",
                "claim_type": "numeric",
                "verdict": verdict,
                "supporting_span": "",
                "source_id": "",
                "labeler": labeler,
                "labeled_at": at,
            }
            for item_id, a in answers.items()
            for idx, verdict in enumerate(a.verdicts)
        ]
    )
    return results + labels
