"""The API's access policy and the FastAPI dependencies that enforce it."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from fastapi import HTTPException, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.api.auth import READ_COOKIE, Refusal, TokenBucket, TokenCheck
from services.api.models import PROBLEM_JSON

# Shown in OpenAPI as the `bearerAuth` scheme; auto_error off so refusals use our messages.
bearer_scheme = HTTPBearer(auto_error=False, scheme_name="bearerAuth",
                           description="A token made by `claimwatch token new`; only its sha256 is configured.")

# Documented on every endpoint that can refuse a caller.
AUTH_RESPONSES = {
    401: {"description": "No bearer token was sent", "content": PROBLEM_JSON},
    403: {"description": "The token is wrong, or no tokens are configured", "content": PROBLEM_JSON},
}
MUTATION_RESPONSES = {
    **AUTH_RESPONSES,
    413: {"description": "The body is larger than api.max_body_bytes", "content": PROBLEM_JSON},
    429: {"description": "Too many changes from this client; retry after Retry-After seconds",
          "content": PROBLEM_JSON},
}


@dataclass(frozen=True)
class ApiPolicy:
    """What the API lets in. Built from ``settings.api``; every field has a safe default."""

    token_hashes: tuple[str, ...] = ()
    token_file: str | None = None  # more hashes, one a line, re-read when the file changes
    protect_reads: bool = False
    mutations_per_minute: float = 60.0
    mutation_burst: int = 20
    max_body_bytes: int = 64 * 1024
    cors_origins: tuple[str, ...] = field(default=())

    @classmethod
    def from_settings(cls, api) -> "ApiPolicy":
        # Fields the settings object does not define yet keep their defaults here.
        given = api.model_dump()
        defaults = cls()
        return cls(
            token_hashes=tuple(given.get("token_hashes") or ()),
            token_file=given.get("token_file") or None,
            protect_reads=bool(given.get("protect_reads", False)),
            mutations_per_minute=float(given.get("mutations_per_minute", defaults.mutations_per_minute)),
            mutation_burst=int(given.get("mutation_burst", defaults.mutation_burst)),
            max_body_bytes=int(given.get("max_body_bytes", defaults.max_body_bytes)),
            cors_origins=tuple(given.get("cors_origins") or ()),
        )


def _refuse(refusal: Refusal) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
    return HTTPException(refusal.status, refusal.detail, headers=headers)


class Gate:
    """Dependencies: ``mutation`` (rate limit, then token) and ``read`` (token only if reads are protected)."""

    def __init__(self, policy: ApiPolicy, clock: Callable[[], float] = time.monotonic):
        self.policy = policy
        self.tokens = TokenCheck(policy.token_hashes, policy.token_file)
        self.bucket = TokenBucket(policy.mutations_per_minute / 60.0, policy.mutation_burst)
        self.clock = clock

    @staticmethod
    def client_of(request: Request) -> str:
        return request.client.host if request.client else "unknown"

    def mutation_check(self, request: Request, token: str | None) -> None:
        # Limit before checking the token, so guessing tokens is throttled too.
        wait = self.bucket.take(self.client_of(request), self.clock())
        if wait > 0:
            retry = max(1, int(wait + 0.999))
            raise HTTPException(429, f"too many changes from this client; retry in {retry}s "
                                     "(limit: api.mutations_per_minute, api.mutation_burst)",
                                headers={"Retry-After": str(retry)})
        refusal = self.tokens.refusal(token)
        if refusal is not None:
            raise _refuse(refusal)

    def read_check(self, request: Request, token: str | None) -> None:
        if not self.policy.protect_reads:
            return
        token = token or request.cookies.get(READ_COOKIE)
        refusal = self.tokens.refusal(token)
        if refusal is not None:
            raise _refuse(refusal)

    def signed_in(self, request: Request) -> bool:
        """For pages: may this browser read (always, unless reads are protected)?"""
        if not self.policy.protect_reads:
            return True
        token = request.cookies.get(READ_COOKIE)
        return token is not None and self.tokens.refusal(token) is None

    # FastAPI dependencies -----------------------------------------------------
    def mutation(self):
        def require_token(request: Request,
                          credentials: HTTPAuthorizationCredentials | None = Security(bearer_scheme)) -> None:
            self.mutation_check(request, credentials.credentials if credentials else None)

        return require_token

    def read(self):
        if not self.policy.protect_reads:  # open reads: no security scheme in OpenAPI either
            return lambda: None

        def allow_read(request: Request,
                       credentials: HTTPAuthorizationCredentials | None = Security(bearer_scheme)) -> None:
            self.read_check(request, credentials.credentials if credentials else None)

        return allow_read
