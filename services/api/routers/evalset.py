"""Promotion of traces into the eval set (propose, approve, reject, export) and its report, agreement and gate."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from services.api.models import (
    ERROR_RESPONSES,
    ProposeBody,
    RecordRunBody,
    RejectBody,
    Responses,
    ReviewBody,
    path_id,
)
from services.api.security import AUTH_RESPONSES, MUTATION_RESPONSES, Gate
from services.api.serialise import as_json
from services.core.errors import Conflict
from services.evalset.compare import RunComparison
from services.evalset.instrument import InstrumentChecks
from services.evalset.metrics import EvalReport, GateResult
from services.evalset.promotion import EvalItem
from services.evalset.readmodel import AgreementRead
from services.evalset.runs import MAX_ANSWERS, RecordedClaim, RecordedPart, RunAnswer
from services.evalset.service import EvalItemDetail

CLASH: Responses = {
    409: {
        "model": ERROR_RESPONSES[404]["model"],
        "description": "Already reviewed, or a near duplicate of an item in the eval set",
    }
}


MATCHER = "a run id, or version matchers KEY=VALUE[,KEY=VALUE] (the newest run whose versions hold them)"


def router(evalset, gate: Gate) -> APIRouter:
    r = APIRouter(tags=["eval"])
    read = [Depends(gate.read())]
    write = [Depends(gate.mutation())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}
    changes = {**MUTATION_RESPONSES, **ERROR_RESPONSES, **CLASH}

    def reviewable(item_id: str) -> None:
        # 404 for an unknown item and 409 for one already reviewed, before the reviewer's checks run.
        item = evalset.item(item_id)
        if item.state != "proposed":
            raise Conflict(
                f"item {item_id} was already {item.state} by {item.reviewed_by}; "
                "propose the trace again to review it anew"
            )

    @r.post(
        "/api/promotions",
        status_code=201,
        summary="Propose an issue's traces (default: its exemplars) as eval items",
        response_model=list[EvalItem],
        dependencies=write,
        responses=changes,
    )
    def propose(body: ProposeBody, request: Request) -> list[dict]:
        return as_json(evalset.propose(body.issue_id, body.trace_ids, gate.acting_as(request, body.by)))

    @r.get(
        "/api/promotions",
        summary="Eval items, optionally by state (the review queue is state=proposed)",
        response_model=list[EvalItem],
        dependencies=read,
        responses={**guarded, 422: ERROR_RESPONSES[422]},
    )
    def items(state: Literal["proposed", "approved", "rejected"] | None = None) -> list[dict]:
        return as_json(evalset.items(state))

    @r.get(
        "/api/promotions/export",
        summary="Approved items with gold spans and labels, as a JSONL download",
        response_class=StreamingResponse,
        dependencies=read,
        responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}, **guarded},
    )
    def export() -> StreamingResponse:
        return StreamingResponse(
            evalset.export_lines(),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": 'attachment; filename="evalset.jsonl"'},
        )

    @r.get(
        "/api/promotions/{item_id}",
        summary="One eval item with its history",
        response_model=EvalItemDetail,
        dependencies=read,
        responses={**guarded, **ERROR_RESPONSES},
    )
    def item(item_id: str = path_id()) -> dict:
        return as_json(evalset.item(item_id))

    @r.post(
        "/api/promotions/{item_id}/approve",
        summary="Approve a proposed item (not by its proposer)",
        response_model=EvalItem,
        dependencies=write,
        responses=changes,
    )
    def approve(body: ReviewBody, request: Request, item_id: str = path_id()) -> dict:
        reviewable(item_id)
        return as_json(evalset.approve(item_id, gate.signer(request, body.by), body.reason))

    @r.post(
        "/api/promotions/{item_id}/reject",
        summary="Reject a proposed item, saying why",
        response_model=EvalItem,
        dependencies=write,
        responses=changes,
    )
    def reject(body: RejectBody, request: Request, item_id: str = path_id()) -> dict:
        reviewable(item_id)
        return as_json(evalset.reject(item_id, gate.acting_as(request, body.by), body.reason))

    @r.get(
        "/api/eval/report",
        summary="Faithfulness, slices worst first and the abstention pair, with intervals",
        response_model=EvalReport,
        dependencies=read,
        responses=guarded,
    )
    def report() -> dict:
        return as_json(evalset.report())

    @r.get(
        "/api/eval/agreement",
        summary="Verifier-human agreement on the claims both labelled",
        response_model=AgreementRead,
        response_model_exclude_none=True,
        dependencies=read,
        responses=guarded,
    )
    def agreement() -> dict:
        return AgreementRead.of(evalset.agreement()).as_dict()

    @r.get(
        "/api/eval/gate",
        summary="Pass or fail the eval set against thresholds, or a candidate run against a baseline (for CI)",
        response_model=GateResult,
        dependencies=read,
        responses={**guarded, **ERROR_RESPONSES},
    )
    def check_gate(
        min_faithfulness: float | None = Query(None, ge=0, le=1),
        max_over_refusal: float | None = Query(None, ge=0, le=1),
        slice_min: str | None = Query(
            None, max_length=500, description="0.8 (every slice) or stakes=high:0.9,query_type=lookup:0.85"
        ),
        min_calibrated_faithfulness: float | None = Query(
            None,
            ge=0,
            le=1,
            description="faithfulness corrected for the verifier's errors against human "
            "labels; a stale calibration fails",
        ),
        min_kappa: float | None = Query(None, ge=-1, le=1, description="verifier-vs-human kappa over reviewed claims"),
        baseline: str | None = Query(
            None, max_length=500, description="also fail where the candidate run is credibly worse than this one"
        ),
        candidate: str | None = Query(None, max_length=500, description="the run gated against the baseline (newest)"),
    ) -> dict:
        checks = InstrumentChecks(min_calibrated_faithfulness, min_kappa)
        return as_json(evalset.gate(min_faithfulness, max_over_refusal, slice_min, checks, baseline, candidate))

    @r.get(
        "/api/eval/compare",
        summary="Two eval runs on the items both answered: each metric's paired difference with its interval",
        response_model=RunComparison,
        dependencies=read,
        responses={**guarded, **ERROR_RESPONSES},
    )
    def compare(
        baseline: str = Query(..., min_length=1, max_length=500, description=MATCHER),
        candidate: str = Query("", max_length=500, description=f"{MATCHER}; default: the newest run"),
    ) -> dict:
        return as_json(evalset.compare(baseline, candidate))

    @r.post(
        "/api/eval/runs/{run_id}",
        summary="Record a part of an eval run: a system's answers to eval items and its verifier's verdicts",
        description="Adds the items the run has not answered yet and keeps the ones it has (listed in `kept`), so a "
        f"part sent twice changes nothing; at most {MAX_ANSWERS} answers a part. Every part of a run states the same "
        "versions (409 otherwise); an item not in the eval set is a 422.",
        response_model=RecordedPart,
        dependencies=[Depends(gate.mutation(limited=False))],
        responses=changes,
    )
    def record_run(body: RecordRunBody, run_id: str = path_id()) -> dict:
        answers = [
            RunAnswer(
                a.item_id,
                a.action,
                a.answer,
                tuple(RecordedClaim(c.verdict, c.text, c.claim_type, c.span, c.source_id) for c in a.claims),
            )
            for a in body.answers
        ]
        return as_json(evalset.record_run(run_id, body.versions, body.labeler, answers))

    return r
