"""The eval-set workflow behind the API and the CLI: promote with sign-off, export, report, agree, gate."""
from __future__ import annotations

import dataclasses
import io
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import orjson

from services.core.errors import NotFound
from services.evalset.metrics import agreement, eval_report, gate, parse_slice_min
from services.evalset.promotion import (NearDuplicateError, PromotionError, PromotionService, load_label_pairs,
                                       load_outcomes, load_traces)
from services.store.issues import IssueStore


def as_json(value) -> object:
    """Dataclasses (nested, with datetimes) as JSON-ready data."""
    return orjson.loads(orjson.dumps(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value,
                                     option=orjson.OPT_NON_STR_KEYS))


def lazy_embedder(settings, store) -> Callable[[Sequence[str]], np.ndarray]:
    """The clustering model (through the ClickHouse cache), loaded on first use only."""
    from clustering.config import config_from_settings
    from clustering.embed import CachedEmbedder, SentenceTransformerEmbedder
    from services.store.issues import ClickHouseEmbeddingCache

    holder: dict = {}

    def embed(texts: Sequence[str]) -> np.ndarray:
        if "model" not in holder:
            config = config_from_settings(settings.clustering.model, settings.clustering.fields)
            holder["model"] = CachedEmbedder(SentenceTransformerEmbedder(config.model), ClickHouseEmbeddingCache(store))
        return holder["model"].embed(list(texts))

    return embed


class EvalService:
    def __init__(self, store, embed: Callable[[Sequence[str]], np.ndarray], near_dup_threshold: float = 0.95,
                 allow_self_approval: bool = False, n_boot: int = 2000):
        self.store = store
        self.promotion = PromotionService(store, embed, near_dup_threshold=near_dup_threshold,
                                          allow_self_approval=allow_self_approval)
        self.issues = IssueStore(store)
        self.n_boot = n_boot

    def propose(self, issue_id: str, trace_ids: list[str] | None, by: str) -> list[dict]:
        """The issue's representative traces (or the ones named) become proposed items."""
        record = self.issues.get(issue_id)
        chosen_for_user = not trace_ids
        if chosen_for_user:
            members = self.issues.members(issue_id, 500)
            exemplars = set(record.exemplar_ids)
            chosen = [m for m in members if m["claim_key"] in exemplars] or members[:5]
            trace_ids = list(dict.fromkeys(m["trace_id"] for m in chosen if m.get("trace_id")))
        if not trace_ids:
            raise PromotionError(f"issue {issue_id} has no traces to propose yet; wait for its next clustering run")
        traces = load_traces(self.store, trace_ids)
        if chosen_for_user:  # representatives repeat each other (or the eval set): propose the distinct ones
            try:
                return [as_json(i) for i in self.promotion.propose(issue_id, traces, by)]
            except NearDuplicateError as exc:
                covered = {d.trace_id for d in exc.duplicates}
                traces = [t for t in traces if t.trace_id not in covered]
                if not traces:
                    raise PromotionError(f"the eval set already covers every representative trace of issue {issue_id}; "
                                         "name other traces with --traces") from None
        return [as_json(i) for i in self.promotion.propose(issue_id, traces, by)]

    def approve(self, item_id: str, by: str, reason: str = "") -> dict:
        return as_json(self.promotion.approve(item_id, by, reason))

    def reject(self, item_id: str, by: str, reason: str) -> dict:
        return as_json(self.promotion.reject(item_id, by, reason))

    def items(self, state: str | None = None) -> list[dict]:
        return [as_json(i) for i in self.promotion.items(state)]

    def item(self, item_id: str) -> dict:
        try:
            item = self.promotion.get(item_id)
        except PromotionError as exc:
            raise NotFound(str(exc)) from None
        return {**as_json(item), "history": [as_json(h) for h in self.promotion.history(item_id)]}

    def export(self, path: Path, by: str = "") -> int:
        return self.promotion.export(path, by)

    def export_lines(self) -> Iterator[bytes]:
        """Approved items as JSONL, for a download (same content as `evalset export`)."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "evalset.jsonl"
            self.promotion.export(target)
            data = target.read_bytes()
        yield from io.BytesIO(data)

    def _report(self):
        pairs = load_label_pairs(self.store)
        agree = agreement(pairs) if pairs else None
        return eval_report(load_outcomes(self.store), n_boot=self.n_boot, agreement=agree)

    def report(self) -> dict:
        return as_json(self._report())

    def agreement(self) -> dict:
        pairs = load_label_pairs(self.store)
        if not pairs:
            return {"pairs": 0, "message": "no claim has both a verifier and a human label yet; add human labels to "
                                           "approved items"}
        return {"pairs": len(pairs), **as_json(agreement(pairs))}

    def gate(self, min_faithfulness: float | None, max_over_refusal: float | None,
             slice_min: str | float | dict | None = None) -> dict:
        if isinstance(slice_min, str):
            slice_min = parse_slice_min(slice_min)
        result = gate(self._report(), min_faithfulness, max_over_refusal, slice_min)
        return as_json(result)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)
