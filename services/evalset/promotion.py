"""Promotion of representative traces into the eval set, with a person's sign-off.

proposed --approve--> approved (is exported); proposed --reject---> rejected.
Every state change appends to eval_item_history. Each method checks everything
before its first write, so a refused request changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import orjson

from services.contract.model import VERDICT_ALIASES, canonical_verdict
from services.core.clock import utcnow
from services.core.names import identity_key
from services.core.readmodel import closed
from services.evalset.metrics import ItemOutcome, LabelPair
from services.store.evalset import EvalRepository

ORIGIN_RUN = "origin"  # run_id of the production answer an item came from
GOLD_VERDICTS = ("supported", "contradicted", "overreach")  # their spans hold the right evidence; stale ones do not
NEAR_DUP_THRESHOLD = 0.95  # cosine between questions above which a trace adds nothing to the eval set


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class PromotionError(ValueError):
    """A promotion request was refused; nothing changed. The message says what to do next."""


@dataclass(frozen=True)
class Duplicate:
    trace_id: str
    item_id: str
    state: str
    similarity: float


class NearDuplicateError(PromotionError):
    def __init__(self, duplicates: Sequence[Duplicate]):
        self.duplicates = tuple(duplicates)
        lines = "; ".join(
            f"trace {d.trace_id} is a near duplicate (cosine {d.similarity:.3f}) of eval item {d.item_id} ({d.state})"
            for d in duplicates
        )
        super().__init__(f"{lines}. Drop these traces from --traces; nothing was proposed.")


@dataclass(frozen=True)
class TraceClaim:
    text: str
    claim_type: str
    verdict: str
    span: str = ""
    source_id: str = ""
    labeler: str = ""  # 'verifier:NAME@VERSION' as the upstream verifier wrote it


@dataclass(frozen=True)
class TraceRecord:
    event_id: str
    trace_id: str
    route: str
    question: str
    query_type: str
    answerable: bool | None
    stakes: str
    answer_text: str
    corpus_version: str
    claims: tuple[TraceClaim, ...]
    action: str = "served"


@closed
@dataclass(frozen=True)
class EvalItem:
    item_id: str
    query: str
    query_type: str
    answerable: bool | None
    stakes: str
    gold_answer: str | None
    source_corpus_ver: str
    origin_issue_id: str
    origin_trace_id: str
    origin_event_id: str
    origin_route: str
    state: str
    proposed_by: str
    proposed_at: datetime
    reviewed_by: str
    reviewed_at: datetime | None
    review_reason: str
    version: int

    @classmethod
    def from_row(cls, row: dict) -> EvalItem:
        """From an EvalRepository item row (times already datetimes)."""
        return cls(
            **{
                **row,
                "answerable": None if row["answerable"] < 0 else bool(row["answerable"]),
                "version": int(row["version"]),
            }
        )

    def to_row(self, embedding: Sequence[float]) -> dict:
        row = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return {
            **row,
            "answerable": -1 if self.answerable is None else int(self.answerable),
            "embedding": list(embedding),
        }


@closed
@dataclass(frozen=True)
class HistoryEntry:
    item_id: str
    action: str
    by: str
    reason: str
    at: datetime


def item_id_for(event_id: str) -> str:
    return "ei-" + hashlib.sha256(event_id.encode()).hexdigest()[:16]


def _canonical(verdict: str, where: str) -> str:
    """The canonical verdict; an unknown one is a refused request (PromotionError), naming where it was."""
    try:
        return canonical_verdict(str(verdict))
    except ValueError:
        raise PromotionError(
            f"{where}: unknown verdict {verdict!r}; use one of {sorted(set(VERDICT_ALIASES.values()))}"
        ) from None


def _required(value: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PromotionError(f"{field} is required (got {value!r})")
    return value.strip()


class PromotionService:
    def __init__(
        self,
        evals: EvalRepository,
        embed: Callable[[list[str]], np.ndarray],
        near_dup_threshold: float = NEAR_DUP_THRESHOLD,
        allow_self_approval: bool = False,
        clock: Callable[[], datetime] = utcnow,
    ):
        if not 0 < near_dup_threshold <= 1:
            raise PromotionError(f"near_dup_threshold must be in (0, 1], got {near_dup_threshold}")
        self.evals, self.embed, self.clock = evals, embed, clock
        self.near_dup_threshold, self.allow_self_approval = near_dup_threshold, allow_self_approval

    # -- reads ---------------------------------------------------------------------------------
    def get(self, item_id: str) -> EvalItem:
        row = self.evals.item(item_id)
        if row is None:
            raise PromotionError(f"no eval item {item_id!r}; list items with `claimwatch evalset items`")
        return EvalItem.from_row(row)

    def items(self, state: str | None = None) -> list[EvalItem]:
        return [EvalItem.from_row(r) for r in self.evals.items(state)]

    def history(self, item_id: str) -> list[HistoryEntry]:
        return [HistoryEntry(**r) for r in self.evals.history(item_id)]

    # -- the workflow ----------------------------------------------------------------------------
    def propose(self, issue_id: str, traces: Sequence[TraceRecord], by: str) -> list[EvalItem]:
        issue_id, by = _required(issue_id, "issue_id"), _required(by, "--by")
        if not traces:
            raise PromotionError("no traces to propose; pass --traces with the trace ids from the runbook")
        seen: set[str] = set()
        for trace in traces:
            _required(trace.event_id, "trace event_id")
            _required(trace.question, f"trace {trace.trace_id}: question text (an eval item needs its query)")
            if trace.event_id in seen:
                raise PromotionError(f"trace {trace.trace_id} is listed twice; list each trace once")
            seen.add(trace.event_id)
            for i, claim in enumerate(trace.claims):
                _canonical(claim.verdict, f"trace {trace.trace_id} claim {i}")
        vectors = self._embed([t.question for t in traces])
        self._refuse_duplicates(traces, vectors)

        now = self.clock()
        items = [
            EvalItem(
                item_id_for(t.event_id),
                t.question,
                t.query_type,
                t.answerable,
                t.stakes,
                None,
                t.corpus_version,
                issue_id,
                t.trace_id,
                t.event_id,
                t.route,
                "proposed",
                by,
                now,
                "",
                None,
                "",
                1,
            )
            for t in traces
        ]
        self.evals.save_items([item.to_row(v) for item, v in zip(items, vectors.tolist())])
        self.evals.save_gold_spans([row for item, t in zip(items, traces) for row in _gold_spans(item.item_id, t)])
        self.evals.save_claim_labels(
            [
                {
                    "run_id": ORIGIN_RUN,
                    "item_id": item.item_id,
                    "claim_idx": i,
                    "claim_text": c.text,
                    "claim_type": c.claim_type,
                    "verdict": _canonical(c.verdict, ""),
                    "supporting_span": c.span,
                    "source_id": c.source_id,
                    "labeler": c.labeler
                    if c.labeler.startswith(("verifier:", "human:"))
                    else f"verifier:{c.labeler or 'unknown'}",
                    "labeled_at": now,
                }
                for item, t in zip(items, traces)
                for i, c in enumerate(t.claims)
            ]
        )
        self.evals.save_results(
            [
                {
                    "run_id": ORIGIN_RUN,
                    "item_id": item.item_id,
                    "action": t.action,
                    "answer_text": t.answer_text,
                    "produced_at": now,
                }
                for item, t in zip(items, traces)
            ]
        )
        self._record(
            [(item.item_id, "proposed", by, f"from issue {issue_id}, trace {item.origin_trace_id}") for item in items],
            now,
        )
        return items

    def approve(self, item_id: str, by: str, reason: str = "") -> EvalItem:
        by = _required(by, "--by")
        item = self._reviewable(item_id)
        if identity_key(by) == identity_key(item.proposed_by) and not self.allow_self_approval:
            raise PromotionError(
                f"{by} proposed item {item_id} and cannot approve it too; ask another reviewer "
                "(or set allow_self_approval)"
            )
        return self._review(item, "approved", by, reason.strip())

    def reject(self, item_id: str, by: str, reason: str) -> EvalItem:
        by = _required(by, "--by")
        reason = _required(reason, "--reason (say why the item is rejected)")
        return self._review(self._reviewable(item_id), "rejected", by, reason)

    def export(self, path: str | Path, by: str = "") -> int:
        """Approved items with spans and labels, one JSON object per line; written to a temp file, then renamed."""
        path = Path(path)
        records = self._export_records()
        lines = [orjson.dumps(record) for record in records]
        try:
            handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        except OSError as exc:
            raise PromotionError(f"cannot write the export to {path}: {exc.strerror}; choose a writable --out") from exc
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(b"".join(line + b"\n" for line in lines))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, path)
        except OSError as exc:
            Path(temp).unlink(missing_ok=True)
            raise PromotionError(f"cannot write the export to {path}: {exc.strerror}; choose a writable --out") from exc
        self._record([(record["item_id"], "exported", by, str(path)) for record in records], self.clock())
        return len(lines)

    def export_lines(self, by: str = "", where: str = "download") -> list[bytes]:
        """The same lines as ``export`` (each ending in a newline), for a download; recorded as exported to
        ``where``."""
        records = self._export_records()
        self._record([(record["item_id"], "exported", by, where) for record in records], self.clock())
        return [orjson.dumps(record) + b"\n" for record in records]

    # -- internals -------------------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embed(texts), dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts) or not np.isfinite(vectors).all():
            raise PromotionError(
                f"the embedder returned shape {vectors.shape} for {len(texts)} texts; expected (n, dim), finite"
            )
        return unit_rows(vectors)

    def _refuse_duplicates(self, traces: Sequence[TraceRecord], vectors: np.ndarray) -> None:
        existing = self.evals.embeddings()
        known = {r["item_id"]: r["state"] for r in existing}
        duplicates = [
            Duplicate(t.trace_id, item_id_for(t.event_id), known[item_id_for(t.event_id)], 1.0)
            for t in traces
            if item_id_for(t.event_id) in known
        ]
        ids, states = [r["item_id"] for r in existing], [r["state"] for r in existing]
        matrix = (
            np.array([r["embedding"] for r in existing], dtype=np.float32)
            if existing
            else np.zeros((0, vectors.shape[1]), dtype=np.float32)
        )
        if matrix.ndim != 2 or matrix.shape[1] != vectors.shape[1]:
            raise PromotionError(
                f"eval items were embedded with dimension {matrix.shape[1]} but the embedder returns "
                f"{vectors.shape[1]}; use the same embedding model as the eval set"
            )
        for i, trace in enumerate(traces):
            if any(d.trace_id == trace.trace_id for d in duplicates):
                continue
            # Compare with stored items and with the traces before it in this same request.
            similarity = np.concatenate([matrix @ vectors[i], vectors[:i] @ vectors[i]])
            names = ids + [item_id_for(t.event_id) for t in traces[:i]]
            labels = states + ["proposed in this request"] * i
            if similarity.size and similarity.max() > self.near_dup_threshold:
                j = int(similarity.argmax())
                duplicates.append(Duplicate(trace.trace_id, names[j], labels[j], float(similarity[j])))
        if duplicates:
            raise NearDuplicateError(duplicates)

    def _reviewable(self, item_id: str) -> EvalItem:
        item = self.get(item_id)
        if item.state != "proposed":
            raise PromotionError(
                f"item {item_id} was already {item.state} by {item.reviewed_by} at "
                f"{item.reviewed_at:%Y-%m-%d %H:%M} UTC; a review is final"
            )
        return item

    def _review(self, item: EvalItem, state: str, by: str, reason: str) -> EvalItem:
        now = self.clock()
        embedding = self.evals.embedding(item.item_id)
        reviewed = EvalItem(
            **{
                **item.__dict__,
                "state": state,
                "reviewed_by": by,
                "reviewed_at": now,
                "review_reason": reason,
                "version": item.version + 1,
            }
        )
        self.evals.save_items([reviewed.to_row(embedding)])
        self._record([(item.item_id, state, by, reason)], now)
        return reviewed

    def _record(self, entries: Sequence[tuple[str, str, str, str]], at: datetime) -> None:
        self.evals.record_history(
            [
                {"item_id": item_id, "action": action, "by": by, "reason": reason, "at": at}
                for item_id, action, by, reason in entries
            ]
        )

    def _export_records(self) -> list[dict]:
        items = self.items("approved")
        ids = [item.item_id for item in items]
        spans: dict[str, list[dict]] = {}
        labels: dict[str, list[dict]] = {}
        for r in self.evals.gold_spans(ids):
            spans.setdefault(r.pop("item_id"), []).append({**r, "required": bool(r["required"])})
        for r in self.evals.claim_labels(ids):
            labels.setdefault(r.pop("item_id"), []).append(r)
        return [
            {
                "item_id": i.item_id,
                "query": i.query,
                "query_type": i.query_type,
                "answerable": i.answerable,
                "stakes": i.stakes,
                "gold_answer": i.gold_answer,
                "source_corpus_ver": i.source_corpus_ver,
                "origin": {
                    "issue_id": i.origin_issue_id,
                    "trace_id": i.origin_trace_id,
                    "event_id": i.origin_event_id,
                    "route": i.origin_route,
                },
                "reviewed_by": i.reviewed_by,
                "reviewed_at": i.reviewed_at.isoformat() if i.reviewed_at else None,  # an approved item has one
                "review_reason": i.review_reason,
                "gold_spans": spans.get(i.item_id, []),
                "claim_labels": labels.get(i.item_id, []),
            }
            for i in items
        ]


def _gold_spans(item_id: str, trace: TraceRecord) -> list[dict]:
    """Evidence spans of the trace's claims whose verdict rests on current, relevant evidence."""
    found: dict[tuple[str, str], None] = {}
    for claim in trace.claims:
        if claim.span.strip() and _canonical(claim.verdict, "") in GOLD_VERDICTS:
            found.setdefault((claim.source_id, claim.span), None)
    return [
        {"item_id": item_id, "span_idx": i, "source_id": source, "span_text": span, "required": 1}
        for i, (source, span) in enumerate(found)
    ]


# -- readers for the lead's CLI/API: the eval set as metrics inputs, traces as promotion inputs ----------


def load_traces(evals: EvalRepository, trace_ids: Sequence[str]) -> list[TraceRecord]:
    """The stored answers for ``trace_ids`` (the latest event of each), in the order given."""
    found = evals.latest_traces(trace_ids)
    missing = [t for t in trace_ids if t not in found]
    if missing:
        raise PromotionError(f"unknown trace ids: {', '.join(missing)}; copy them from the runbook or the issue page")
    records = []
    for trace_id in trace_ids:
        (
            event_id,
            route,
            question,
            query_type,
            answerable,
            stakes,
            answer,
            action,
            corpus,
            texts,
            types,
            verdicts,
            spans,
            sources,
            labelers,
        ) = found[trace_id]
        claims = tuple(TraceClaim(*fields) for fields in zip(texts, types, verdicts, spans, sources, labelers))
        records.append(
            TraceRecord(
                event_id,
                trace_id,
                route,
                question,
                query_type,
                None if int(answerable) < 0 else bool(int(answerable)),
                stakes,
                answer,
                corpus,
                claims,
                action or "served",
            )
        )
    return records


def load_outcomes(evals: EvalRepository, run_id: str = ORIGIN_RUN, labeler: str = "verifier") -> list[ItemOutcome]:
    """Approved items as ``run_id`` answered them, with the latest ``labeler:``-kind verdict per claim."""
    rows = evals.outcomes(run_id, labeler)
    return [
        ItemOutcome(
            r["item_id"],
            r["query_type"],
            r["stakes"],
            None if r["answerable"] < 0 else bool(r["answerable"]),
            r["action"] == "abstained",
            tuple(r["verdicts"]),
        )
        for r in rows
    ]


def load_label_pairs(evals: EvalRepository, run_id: str = ORIGIN_RUN) -> list[LabelPair]:
    """Claims of approved items that carry both a verifier and a human label (the latest of each)."""
    rows = evals.label_pairs(run_id)
    return [
        LabelPair(
            r["item_id"], r["claim_idx"], r["verifier"], r["human"], r["query_type"], r["stakes"], r["claim_type"]
        )
        for r in rows
    ]
