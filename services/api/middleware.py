"""ASGI middleware: refuse oversize bodies before anything parses them; limit anonymous reads; security headers.

(FastAPI's own ``max_body_size`` answers 413 in plain text and only once the body is
read; here the refusal is JSON, or the styled error page for a page request, says which
setting to change, and a declared Content-Length over the limit is refused before the
request reaches the app.)
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from services.api.pages import error_page, wants_page
from services.api.security import Gate, retry_after

# No inline scripts anywhere: pages load /static/*.js only, and pass data in data- attributes.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class BodyTooLarge(HTTPException):
    """Raised from ``receive``; an HTTPException so that body parsing passes it on as a 413."""

    def __init__(self, detail: str):
        super().__init__(413, detail)


async def _refuse(scope, receive, send, status: int, detail: str, headers: Mapping[str, str] | None = None) -> None:
    """The styled error page for a page request, else JSON ``{"detail": ...}``."""
    response: Response
    if wants_page(Request(scope)):
        response = error_page(status, detail, headers)
    else:
        response = JSONResponse({"detail": detail}, status, headers)
    await response(scope, receive, send)


class BodyLimit:
    """413 for a body over ``max_bytes``: from Content-Length up front, else as soon as the stream passes it.
    ``wider`` gives path prefixes a limit (and its setting) of their own: the OTLP intake's batches."""

    def __init__(self, app, max_bytes: int, wider: Mapping[str, tuple[int, str]] | None = None):
        self.app, self.max_bytes, self.wider = app, max_bytes, dict(wider or {})

    def limit(self, path: str) -> tuple[int, str]:
        return next(
            (v for prefix, v in self.wider.items() if path.startswith(prefix)), (self.max_bytes, "max_body_bytes")
        )

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        max_bytes, setting = self.limit(scope.get("path", ""))
        too_large = f"request body over {max_bytes} bytes; send less (limit: api.{setting})"
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return await _refuse(scope, receive, send, 400, "Content-Length is not a number")
                if declared > max_bytes:
                    return await _refuse(scope, receive, send, 413, too_large)
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_bytes:
                    raise BodyTooLarge(too_large)
            return message

        async def tracked_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge as exc:
            if started:
                raise
            await _refuse(scope, receive, send, 413, exc.detail)


class AnonymousReadLimit:
    """Reads (GET, HEAD) without a valid token or sign-in session are limited twice, so that no crowd of
    readers can starve token holders or the worker sharing this process:

    - per address: 429 beyond api.anonymous_reads_per_minute (api.anonymous_read_burst at once);
    - all together: at most api.anonymous_concurrency are served at once; the rest wait their turn (holding
      no thread) up to ``QUEUE_SECONDS``, then get 503.

    A middleware so pages and static files count too."""

    UNLIMITED = ("/healthz", "/readyz")  # probes must not fail because someone else floods from their address
    QUEUE_SECONDS = 10.0

    def __init__(self, app, gate: Gate):
        self.app, self.gate = app, gate
        self._slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a semaphore per serving loop

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] != "http"
            or scope["method"] not in ("GET", "HEAD")
            or scope["path"] in self.UNLIMITED
            or self.gate.known_reader(request := Request(scope))
        ):
            return await self.app(scope, receive, send)
        wait = self.gate.anonymous_read_wait(request)
        if wait > 0:
            retry = retry_after(wait)
            return await _refuse(
                scope,
                receive,
                send,
                429,
                f"Too many requests from your address without signing in; try again in {retry} seconds.",
                {"Retry-After": str(retry)},
            )
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop) or self._slots.setdefault(
            loop, asyncio.Semaphore(self.gate.policy.anonymous_concurrency)
        )
        try:
            await asyncio.wait_for(slots.acquire(), self.QUEUE_SECONDS)
        except TimeoutError:
            return await _refuse(
                scope,
                receive,
                send,
                503,
                "Too many readers without signing in right now; try again shortly, or sign in.",
                {"Retry-After": "5"},
            )
        try:
            await self.app(scope, receive, send)
        finally:
            slots.release()


class SecurityHeaders:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", ())}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)
