"""Human review: reserve a claim, label it blind, then see the verifier's verdict; progress, agreement and the
labels each route still needs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from fastapi import APIRouter, Depends, Query, Request

from services.api.models import ERROR_RESPONSES, AdjudicateBody, LabelBody, Responses, ReviewerBody, SampleBody, path_id
from services.api.routers.rates import window_of
from services.api.security import AUTH_RESPONSES, MUTATION_RESPONSES, Gate
from services.api.serialise import as_json
from services.review.agreement import AgreementReport
from services.review.planning import LabelPlan
from services.review.queue import Assignment, Revealed
from services.review.sampling import SampleResult
from services.review.service import Progress

CLASH: Responses = {
    409: {
        "model": ERROR_RESPONSES[404]["model"],
        "description": "The slot expired, is another reviewer's, or is labelled already",
    }
}


def router(review, gate: Gate, now: Callable[[], datetime]) -> APIRouter:
    r = APIRouter(tags=["review"])
    read = [Depends(gate.read())]
    write = [Depends(gate.mutation())]
    guarded = AUTH_RESPONSES if gate.policy.protect_reads else {}
    changes = {**MUTATION_RESPONSES, **ERROR_RESPONSES, **CLASH}

    @r.post(
        "/api/review/sample",
        summary="Queue production claims for review, stratified, within the daily budget",
        response_model=SampleResult,
        dependencies=write,
        responses=changes,
    )
    def sample(body: SampleBody) -> dict:
        return as_json(review.sample(window_of(body.window), now(), body.seed, body.include_eval))

    @r.post(
        "/api/review/next",
        summary="Reserve the next claim to label (the reviewer's held one, if any); "
        "the verifier's verdict and other labels stay hidden",
        response_model=Assignment,
        dependencies=write,
        responses=changes,
    )
    def next_claim(body: ReviewerBody, request: Request) -> dict:
        return as_json(review.next(gate.acting_as(request, body.reviewer, "reviewer"), now()))

    @r.post(
        "/api/review/{slot}/label",
        summary="Label the reserved claim; the answer reveals the verifier's verdict and the other labels",
        response_model=Revealed,
        dependencies=write,
        responses=changes,
    )
    def label(body: LabelBody, request: Request, slot: str = path_id()) -> dict:
        return as_json(
            review.label(slot, gate.acting_as(request, body.reviewer, "reviewer"), body.label, body.span, now())
        )

    @r.post(
        "/api/review/claims/{claim_key}/adjudicate",
        summary="An adjudicator's label, which settles the claim",
        response_model=Revealed,
        dependencies=write,
        responses=changes,
    )
    def adjudicate(body: AdjudicateBody, request: Request, claim_key: str = path_id()) -> dict:
        return as_json(
            review.adjudicate(
                claim_key, gate.signer(request, body.adjudicator, "adjudicator"), body.label, body.span, now()
            )
        )

    @r.get(
        "/api/review/progress",
        summary="Labels per reviewer and per stratum (route, verdict, score band, issue)",
        response_model=Progress,
        dependencies=read,
        responses=guarded,
    )
    def progress() -> dict:
        return as_json(review.progress())

    @r.get(
        "/api/review/agreement",
        summary="Human-human and verifier-human kappa per route, with intervals that "
        "resample claims; disagreements waiting for an adjudicator",
        response_model=AgreementReport,
        dependencies=read,
        responses=guarded,
    )
    def agreement() -> dict:
        return as_json(review.agreement())

    @r.get(
        "/api/review/plan",
        summary="Per route, how many more settled labels bring its calibrated interval under "
        "a width, split between the claims the verifier flagged and those it passed; the routes needing most "
        "first (more is null when the window's own noise is wider than asked)",
        response_model=list[LabelPlan],
        dependencies=read,
        responses=guarded,
    )
    def plan(
        width: float | None = Query(
            None,
            gt=0,
            lt=1,
            description="the 95% interval's full width as a share (0.03: 3 points); default review.plan_width",
        ),
        window: str = Query("24h", max_length=20, description="the calibrated rates' window: 5m, 24h, 7d, ... or all"),
    ) -> list[dict]:
        return as_json(review.plan(window_of(window), now(), width))

    return r
