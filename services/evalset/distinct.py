"""Which traces a promote command can propose together: what the runbook, the issue page and `promote propose`
show as an issue's representative traces (services/issues/service.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from services.evalset.promotion import NEAR_DUP_THRESHOLD, item_id_for, unit_rows
from services.store.evalset import EvalRepository


class DistinctQuestions:
    """Which traces a promote command can propose together, as printed: none already an eval item, none a near
    duplicate (the promotion check's own threshold) of an eval item or of a trace kept before it."""

    def __init__(
        self,
        evals: EvalRepository,
        embed: Callable[[list[str]], np.ndarray],
        threshold: float = NEAR_DUP_THRESHOLD,
        candidates: int = 60,
    ):
        self.evals, self.embed, self.threshold = evals, embed, threshold
        self.candidates = candidates  # bounds the embedding work per call

    def items_of(self, event_ids: Sequence[str]) -> dict[str, str]:
        """The eval item each of ``event_ids`` already is, of those that are one."""
        known = {r["item_id"] for r in self.evals.items()}  # ids only: no vectors
        return {e: item_id_for(e) for e in event_ids if item_id_for(e) in known}

    def pick(self, event_ids: Sequence[str], questions: Sequence[str], limit: int) -> list[int]:
        """Indices into ``questions`` (in their order) of up to ``limit`` distinct ones."""
        known = {r["item_id"]: r["embedding"] for r in self.evals.embeddings()}
        texts: dict[str, int] = {}
        for i, (event_id, question) in enumerate(zip(event_ids, questions)):
            if question.strip() and item_id_for(event_id) not in known and question not in texts:
                texts[question] = i
            if len(texts) == self.candidates:
                break
        if not texts:
            return []
        vectors = unit_rows(np.asarray(self.embed(list(texts)), dtype=np.float32))
        kept_vectors = [np.asarray(v, dtype=np.float32) for v in known.values() if len(v) == vectors.shape[1]]
        kept = []
        for index, vector in zip(texts.values(), vectors):
            if kept_vectors and float(np.max(np.stack(kept_vectors) @ vector)) > self.threshold:
                continue
            kept.append(index)
            kept_vectors.append(vector)
            if len(kept) == limit:
                break
        return kept
