"""Human labels on eval items, as tests lay them down: ``claim_labels`` rows labelled ``human:NAME`` beside the
verifier's, through the repository's own writer (services/store/evalset.py: save_claim_labels).

The eval set's agreement and its human-labelled outcomes read these rows (label_pairs, outcomes); claimwatch
itself writes a human row only when a promoted trace's claim came labelled ``human:`` by its producer.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from services.contract.model import canonical_verdict
from services.evalset.promotion import ORIGIN_RUN
from services.store.evalset import EvalRepository


def add_human_labels(evals: EvalRepository, item_id: str, verdicts: Mapping[int, str], by: str, at: datetime) -> int:
    """``verdicts``: claim index -> verdict (any alias) of the item's origin run, labelled by ``human:{by}`` at
    ``at``. Rows written."""
    claims = evals.labelled_claims(item_id, ORIGIN_RUN)
    unknown = sorted(set(verdicts) - set(claims))
    if unknown:
        raise ValueError(f"item {item_id} has no claim {unknown}; its claims are {sorted(claims)}")
    return evals.save_claim_labels(
        [
            {
                "run_id": ORIGIN_RUN,
                "item_id": item_id,
                "claim_idx": idx,
                "claim_text": claims[idx]["claim_text"],
                "claim_type": claims[idx]["claim_type"],
                "verdict": canonical_verdict(verdict),
                "supporting_span": "",
                "source_id": "",
                "labeler": f"human:{by}",
                "labeled_at": at,
            }
            for idx, verdict in sorted(verdicts.items())
        ]
    )
