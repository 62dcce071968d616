"""The OTLP/HTTP intake: ``POST /v1/traces`` and ``POST /v1/logs`` (protobuf or JSON, gzip or not), so an application's
OpenTelemetry SDK or Collector exports verdicts straight to claimwatch (mapping: services/contract/otlp.py).

A second input beside Kafka, not a way around it: the events go onto the verdicts topic, and the worker stores them
as any others, once each (their ids come from the trace and span ids, so an export retried is counted once). A record
that carries verdicts and cannot become a valid event goes onto the topic too, as a refused record the worker
dead-letters under its rule; the answer counts it in OTLP's partial success, with the reasons. Exports need a
token, as every change does; an answer of 200 means the broker holds all of it.
"""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from services.api.auth import bearer_of
from services.api.security import Gate
from services.contract import otlp
from services.contract import otlp_wire as wire
from services.contract.decode import refused_record
from services.contract.errors import RecordError

OTLP_BODY = {
    wire.PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
    wire.JSON: {"schema": {"type": "object"}},
}
STATUS = {"content": OTLP_BODY}  # google.rpc.Status, in the request's encoding
REFUSALS = {
    400: "The body is not an OTLP request of this signal",
    401: "No bearer token was sent",
    403: "The token is wrong, or no tokens are configured",
    413: "The body is larger than api.otlp_max_body_bytes (or unpacks past api.otlp_max_unpacked_bytes)",
    415: "Content-Type is not application/x-protobuf or application/json, or Content-Encoding is not gzip",
    429: "Too many exports without a valid token from this address",
    503: "The broker did not take the export (or this process has none): retry after Retry-After seconds",
}
REASONS_SHOWN = 5  # refused records named in an answer; the dead-letter queue has them all
RETRY_SECONDS = 5


class IntakeUnavailable(RuntimeError):
    """The broker did not take an export: the exporter retries (503)."""


class Intake(Protocol):
    def publish(self, events: list[dict], refused: list[tuple[str | None, bytes]]) -> None:
        """Put the events, and the refused records keyed by route, on the verdicts topic; return once the broker
        holds them all, or raise IntakeUnavailable."""


def summary(mapped: otlp.Mapped, noun: str) -> str:
    """OTLP's error_message: the refused records' reasons (the first few), and what was ignored."""
    parts = []
    if mapped.refused:
        shown = "; ".join(f"{r.reason} ({r.rule})" for r in mapped.refused[:REASONS_SHOWN])
        more = len(mapped.refused) - REASONS_SHOWN
        parts.append(
            f"{len(mapped.refused)} of {mapped.records} {noun} with verdicts refused: {shown}"
            + (f"; and {more} more" if more > 0 else "")
            + ". Each is in the dead-letter queue (`claimwatch dlq`)"
        )
    if mapped.ignored:
        parts.append(
            f"{mapped.ignored} {noun} carried no verdicts (no claimwatch.claims.* attributes, no "
            f"{otlp.EVALUATION_EVENT}) and were ignored"
        )
    return ". ".join(parts)


def refused_messages(mapped: otlp.Mapped, source: str) -> list[tuple[str | None, bytes]]:
    return [
        (
            r.route,
            refused_record(r.rule, r.path, r.reason, source, r.record, r.route, None),
        )
        for r in mapped.refused
    ]


def router(intake: Intake | None, gate: Gate) -> APIRouter:
    r = APIRouter(tags=["otlp"])
    policy = gate.policy

    async def export(request: Request, signal: wire.Signal) -> Response:
        encoding = wire.encoding_of(request.headers.get("content-type"))
        try:
            gate.mutation_check(request, bearer_of(request.headers.get("authorization")), limited=False)
            body = await request.body()
            payload = wire.read(
                signal,
                body,
                request.headers.get("content-type"),
                request.headers.get("content-encoding"),
                policy.otlp_max_unpacked_bytes,
            )
            try:
                mapped = otlp.map_request(payload, signal.name)
            except RecordError as exc:
                raise HTTPException(400, f"not an OTLP {signal.request.__name__}: {exc.field}: {exc.message}") from None
            if intake is None:
                raise HTTPException(
                    503,
                    "this process has no broker to put exports on; send them to `claimwatch up` or `claimwatch api`",
                )
            if mapped.events or mapped.refused:
                try:
                    await run_in_threadpool(intake.publish, mapped.events, refused_messages(mapped, request.url.path))
                except IntakeUnavailable as exc:
                    raise HTTPException(503, str(exc), {"Retry-After": str(RETRY_SECONDS)}) from None
        except wire.WireError as exc:
            return Response(wire.status(exc.status, str(exc), encoding), exc.status, media_type=encoding or wire.JSON)
        except HTTPException as exc:
            return Response(
                wire.status(exc.status_code, str(exc.detail), encoding),
                exc.status_code,
                headers=exc.headers,
                media_type=encoding or wire.JSON,
            )
        assert encoding is not None  # wire.read refused any other
        answer = wire.response(signal, len(mapped.refused), summary(mapped, signal.noun), encoding)
        return Response(answer, media_type=encoding)

    def handler(signal: wire.Signal):
        async def receive(request: Request) -> Response:
            return await export(request, signal)

        return receive

    for signal in wire.SIGNALS.values():
        r.add_api_route(
            f"/v1/{signal.name}",
            handler(signal),
            methods=["POST"],
            summary=f"OTLP/HTTP export of {signal.name}: verdicts onto the verdicts topic",
            description=f"An `{signal.request.__name__}` in `{wire.PROTOBUF}` or `{wire.JSON}`, gzip or "
            "not; needs `Authorization: Bearer <token>`. Answers OTLP's partial success, naming each record refused.",
            response_class=Response,
            responses={
                200: {
                    "description": "Taken; partial success counts and names the records refused",
                    "content": OTLP_BODY,
                },
                **{code: {**STATUS, "description": why} for code, why in REFUSALS.items()},
            },
            openapi_extra={
                "requestBody": {"required": True, "content": OTLP_BODY},
                "security": [{"bearerAuth": []}],
            },
        )
    return r
