"""The eval-set workflow behind the API and the CLI: promote with sign-off, export, report, agree, gate.

Every method returns this stage's dataclasses; the API routers and the CLI serialise them
(services/api/eval_json.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from services.core.clock import utcnow
from services.core.command import cli_command
from services.core.errors import NotFound
from services.core.readmodel import closed
from services.evalset.compare import EvalRun, PairedComparison, RunComparison, parse_matcher, regression_check
from services.evalset.instrument import Instrument, InstrumentChecks, instrument_failures
from services.evalset.metrics import Agreement, EvalReport, GateResult, agreement, eval_report, gate, parse_slice_min
from services.evalset.promotion import (
    NEAR_DUP_THRESHOLD,
    EvalItem,
    HistoryEntry,
    NearDuplicateError,
    PromotionError,
    PromotionService,
    load_label_pairs,
    load_outcomes,
    load_traces,
)
from services.evalset.runs import RecordedPart, RunAnswer, RunRecorder
from services.issues.records import IssueRecords, surviving
from services.store.evalset import EvalRepository


@closed
@dataclass(frozen=True)
class EvalItemDetail(EvalItem):
    """One eval item with its history, oldest first."""

    history: tuple[HistoryEntry, ...] = ()

    @classmethod
    def of(cls, item: EvalItem, history: Sequence[HistoryEntry]) -> EvalItemDetail:
        return cls(**{name: getattr(item, name) for name in EvalItem.__dataclass_fields__}, history=tuple(history))


@dataclass(frozen=True)
class AgreementSummary:
    """Verifier-human agreement; ``agreement`` is None while no claim has both labels."""

    pairs: int
    agreement: Agreement | None


class EvalService:
    def __init__(
        self,
        evals: EvalRepository,
        issues: IssueRecords,
        embed: Callable[[Sequence[str]], np.ndarray],
        near_dup_threshold: float = NEAR_DUP_THRESHOLD,
        allow_self_approval: bool = False,
        n_boot: int = 2000,
        clock: Callable[[], datetime] = utcnow,
        instrument: Instrument | None = None,
        representatives: Callable[[str], list[str]] | None = None,
        min_items: int = 0,
        compare_tolerance: float = 0.01,
    ):
        self.evals = evals
        self.min_items = min_items  # eval.min_items: the gate passes on no fewer items
        self.compare_tolerance = compare_tolerance  # eval.compare_tolerance: a loss the gate lets a candidate have
        self.instrument = instrument  # the review stage: calibration and verifier-vs-human kappa for the gate
        self.clock = clock
        self.promotion = PromotionService(
            evals, embed, near_dup_threshold=near_dup_threshold, allow_self_approval=allow_self_approval, clock=clock
        )
        self.issues = issues
        self.n_boot = n_boot
        self.representatives = representatives  # issue id -> the trace ids its runbook and page show

    def propose(self, issue_id: str, trace_ids: list[str] | None, by: str) -> list[EvalItem]:
        """The issue's representative traces (or the ones named) become proposed items. A merged issue's go to the
        issue it was merged into, as triage's do: a re-cluster may merge the issue a page named minutes after."""
        record = surviving(self.issues, self.issues.get(issue_id))
        issue_id = record.issue_id
        chosen_for_user = not trace_ids
        if chosen_for_user and self.representatives is not None:
            trace_ids = self.representatives(issue_id)
        elif chosen_for_user:
            members = self.issues.members(issue_id, 500)
            exemplars = set(record.exemplar_ids)
            chosen = [m for m in members if m["claim_key"] in exemplars] or members[:5]
            trace_ids = list(dict.fromkeys(m["trace_id"] for m in chosen if m.get("trace_id")))
        if not trace_ids:
            raise PromotionError(self.nothing_to_propose(issue_id))
        traces = load_traces(self.evals, trace_ids)
        if chosen_for_user:  # representatives repeat each other (or the eval set): propose the distinct ones
            try:
                return self.promotion.propose(issue_id, traces, by)
            except NearDuplicateError as exc:
                covered = {d.trace_id for d in exc.duplicates}
                traces = [t for t in traces if t.trace_id not in covered]
                if not traces:
                    raise PromotionError(
                        f"the eval set already covers every representative trace of issue {issue_id}; "
                        "name other traces with --traces"
                    ) from None
        return self.promotion.propose(issue_id, traces, by)

    def nothing_to_propose(self, issue_id: str) -> str:
        """Why an issue has no representative trace left to propose: its eval items already hold them (named, with
        their states), or clustering has given it none yet."""
        held = [i for i in self.items() if i.origin_issue_id == issue_id]
        if not held:
            return f"issue {issue_id} has no traces to propose yet; wait for its next clustering run"
        named = ", ".join(f"{i.item_id} ({i.state}, trace {i.origin_trace_id})" for i in held[:5])
        more = f" and {len(held) - 5} more" if len(held) > 5 else ""
        return (
            f"every representative trace of issue {issue_id} is already in the eval set: {named}{more}. "
            f"See them with: {cli_command()} evalset items; to add others, name them with --traces"
        )

    def approve(self, item_id: str, by: str, reason: str = "") -> EvalItem:
        return self.promotion.approve(item_id, by, reason)

    def reject(self, item_id: str, by: str, reason: str) -> EvalItem:
        return self.promotion.reject(item_id, by, reason)

    def items(self, state: str | None = None) -> list[EvalItem]:
        return self.promotion.items(state)

    def item(self, item_id: str) -> EvalItemDetail:
        try:
            item = self.promotion.get(item_id)
        except PromotionError as exc:
            raise NotFound(str(exc)) from None
        return EvalItemDetail.of(item, self.promotion.history(item_id))

    def export(self, path: Path, by: str = "") -> int:
        return self.promotion.export(path, by)

    def export_lines(self) -> Iterator[bytes]:
        """Approved items as JSONL, for a download (same content as `evalset export`)."""
        yield from self.promotion.export_lines()

    def report(self, outcomes: list | None = None) -> EvalReport:
        pairs = load_label_pairs(self.evals)
        agree = agreement(pairs) if pairs else None
        return eval_report(
            load_outcomes(self.evals) if outcomes is None else outcomes, n_boot=self.n_boot, agreement=agree
        )

    def agreement(self) -> AgreementSummary:
        pairs = load_label_pairs(self.evals)
        return AgreementSummary(len(pairs), agreement(pairs) if pairs else None)

    def gate(
        self,
        min_faithfulness: float | None,
        max_over_refusal: float | None,
        slice_min: str | float | dict | None = None,
        checks: InstrumentChecks = InstrumentChecks(),
        baseline: str | None = None,
        candidate: str | None = None,
    ) -> GateResult:
        """The thresholds on the eval set's origin answers; with ``baseline``, also the candidate run (default: the
        newest) against it, failing where the candidate is credibly worse by more than eval.compare_tolerance."""
        if isinstance(slice_min, str):
            slice_min = parse_slice_min(slice_min)
        if candidate and not baseline:
            raise ValueError("candidate: give a baseline too, to compare the candidate run with")
        comparison = self.compare(baseline, candidate or "") if baseline else None
        outcomes = load_outcomes(self.evals)
        result = gate(self.report(outcomes), min_faithfulness, max_over_refusal, slice_min, self.min_items)
        met = list(result.checked)
        failures = result.failures + tuple(instrument_failures(checks, outcomes, self.instrument, self.clock(), met))
        if comparison is not None:
            regressions, compared = regression_check(comparison, self.compare_tolerance, self.min_items)
            failures, met = failures + tuple(regressions), met + compared
        return GateResult(not failures, failures, tuple(met))

    def runs(self, limit: int = 20) -> list[EvalRun]:
        """Eval runs, newest first."""
        return [_run(r) for r in self.evals.runs(limit=limit)]

    def find_run(self, matcher: str, name: str = "run") -> EvalRun:
        """The run a matcher names: a run id, or the newest run whose versions hold every KEY=VALUE given; an
        empty matcher is the newest run."""
        run_id, versions = parse_matcher(matcher, name) if matcher.strip() else ("", {})
        found = self.evals.runs(run_id, versions, limit=1)
        if found:
            return _run(found[0], matcher.strip())
        newest = ", ".join(r.label for r in self.runs(5))
        known = f"the newest runs are {newest}" if newest else "no eval run is recorded yet"
        asked = repr(matcher.strip()) if matcher.strip() else "(the newest run)"
        raise NotFound(f"{name} {asked} matches no eval run; {known}")

    def record_run(
        self, run_id: str, versions: Mapping[str, str], labeler: str, answers: Sequence[RunAnswer]
    ) -> RecordedPart:
        """Add a part of an eval run: see services/evalset/runs.py."""
        return RunRecorder(self.evals).record(run_id, versions, labeler, answers, self.clock())

    def compare(self, baseline: str, candidate: str) -> RunComparison:
        """The candidate run against the baseline on the approved items both answered, with paired intervals."""
        base, cand = self.find_run(baseline, "baseline"), self.find_run(candidate, "candidate")
        if base.run_id == cand.run_id:
            raise ValueError(
                f"baseline and candidate are the same run, {base.label}; name two different runs to compare"
            )
        paired = PairedComparison(self.n_boot).compare(
            load_outcomes(self.evals, base.run_id), load_outcomes(self.evals, cand.run_id)
        )
        return RunComparison.of(base, cand, paired)


def _run(row: dict, matcher: str = "") -> EvalRun:
    return EvalRun.of(row["run_id"], row["versions"], row["items"], row["produced_at"], matcher, row["total"])
