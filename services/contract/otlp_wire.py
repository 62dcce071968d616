"""OTLP/HTTP on the wire: a request body (protobuf or JSON, gzip or not) read as OTLP/JSON, and the answers OTLP asks
for (an Export*ServiceResponse with partial success; a google.rpc.Status on error), in the request's encoding.

Protobuf is decoded with opentelemetry-proto and written out as OTLP/JSON (``MessageToDict``), its trace and span ids
as hex rather than protobuf JSON's base64, so one mapping (services/contract/otlp.py) reads both.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass
from typing import Any

import orjson
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
ENCODINGS = (PROTOBUF, JSON)
# google.rpc.Code: what each refusal's status says in its body
RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 413: 8, 415: 3, 429: 8, 503: 14}


@dataclass(frozen=True)
class Signal:
    name: str  # traces, logs
    request: type[Message]
    response: type[Message]
    rejected_field: str  # the partial success's count
    noun: str  # what a record is called in messages


SIGNALS = {
    "traces": Signal(
        "traces",
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
        "rejected_spans",
        "spans",
    ),
    "logs": Signal(
        "logs",
        logs_service_pb2.ExportLogsServiceRequest,
        logs_service_pb2.ExportLogsServiceResponse,
        "rejected_log_records",
        "log records",
    ),
}


class WireError(ValueError):
    """A body OTLP/HTTP refuses whole: ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def encoding_of(content_type: str | None) -> str | None:
    """``application/x-protobuf`` or ``application/json`` from a Content-Type header; None for anything else."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media if media in ENCODINGS else None


def gunzip(body: bytes, max_bytes: int) -> bytes:
    """A gzip body unpacked, refused past ``max_bytes`` unpacked (before it is all unpacked: no zip bomb)."""
    unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise WireError(400, f"the body is not gzip ({exc}); send it as it is, without Content-Encoding") from None
    if len(out) > max_bytes:
        raise WireError(413, f"the body unpacks to over {max_bytes} bytes; export smaller batches")
    if not unpacker.eof:
        raise WireError(400, "the gzip body ends early; send the whole of it")
    return out


def read(
    signal: Signal, body: bytes, content_type: str | None, content_encoding: str | None, max_bytes: int
) -> dict[str, Any]:
    """The request as OTLP/JSON. Raises WireError (415 for an encoding it does not take, 400 for a body that is not
    one, 413 past ``max_bytes`` unpacked)."""
    encoding = encoding_of(content_type)
    if encoding is None:
        raise WireError(415, f"Content-Type {content_type!r:.60} is not OTLP/HTTP's: send {PROTOBUF} or {JSON}")
    packing = (content_encoding or "identity").strip().lower()
    if packing == "gzip":
        body = gunzip(body, max_bytes)
    elif packing != "identity":
        raise WireError(415, f"Content-Encoding {packing!r:.40} is not taken: send gzip, or none")
    if encoding == JSON:
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise WireError(400, f"the body is not JSON: {exc}") from None
        if not isinstance(payload, dict):
            raise WireError(400, f"the body is JSON {type(payload).__name__}, not an OTLP request object")
        return payload
    message = signal.request()
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise WireError(400, f"the body is not a protobuf {signal.request.__name__}: {exc}") from None
    return hex_ids(MessageToDict(message))


def _hex(value: Any) -> Any:
    return base64.b64decode(value).hex() if isinstance(value, str) else value


def hex_ids(payload: dict[str, Any]) -> dict[str, Any]:
    """Protobuf JSON's base64 trace and span ids as OTLP/JSON's hex, in place."""
    for top, scopes, items in (("resourceSpans", "scopeSpans", "spans"), ("resourceLogs", "scopeLogs", "logRecords")):
        for block in payload.get(top, ()):
            for scope in block.get(scopes, ()):
                for record in scope.get(items, ()):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in record:
                            record[key] = _hex(record[key])
    return payload


def response(signal: Signal, rejected: int, message: str, encoding: str) -> bytes:
    """The Export*ServiceResponse: partial success when records were refused, or when ``message`` warns."""
    answer = signal.response()
    if rejected or message:
        partial = answer.partial_success
        setattr(partial, signal.rejected_field, rejected)
        partial.error_message = message
    return _encoded(answer, encoding)


def status(http_status: int, message: str, encoding: str | None) -> bytes:
    """A refusal's body: google.rpc.Status, as OTLP/HTTP asks (JSON when the request's encoding is unknown)."""
    return _encoded(status_pb2.Status(code=RPC_CODES.get(http_status, 2), message=message), encoding or JSON)


def _encoded(message: Message, encoding: str) -> bytes:
    if encoding == PROTOBUF:
        return bytes(message.SerializeToString())
    return orjson.dumps(MessageToDict(message))
