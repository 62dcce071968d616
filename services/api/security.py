"""The API's access policy and the FastAPI dependencies that enforce it."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import HTTPException, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.api.auth import (
    READ_COOKIE,
    SESSION_NOT_TOKEN,
    ClientAddress,
    ReadSession,
    Refusal,
    TokenBucket,
    TokenCheck,
    bearer_of,
    hash_token,
)
from services.api.models import PROBLEM_JSON, Responses
from services.api.policy import ApiPolicy
from services.core.names import identity_key

# Shown in OpenAPI as the `bearerAuth` scheme; auto_error off so refusals use our messages.
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="bearerAuth",
    description="A token made by `claimwatch token new`; only its sha256 is configured.",
)

# Documented on every endpoint that can refuse a caller.
AUTH_RESPONSES: Responses = {
    401: {"description": "No bearer token was sent", "content": PROBLEM_JSON},
    403: {"description": "The token is wrong, or no tokens are configured", "content": PROBLEM_JSON},
}
MUTATION_RESPONSES: Responses = {
    **AUTH_RESPONSES,
    413: {"description": "The body is larger than api.max_body_bytes", "content": PROBLEM_JSON},
    429: {
        "description": "Too many changes from this token (or, without a valid token, from this address); "
        "retry after Retry-After seconds",
        "content": PROBLEM_JSON,
    },
}
# The name a client records a change under when its user gave none (the CLI's identity.name or login name): it
# counts only with a token that has no name, whose changes need a name; a named token's holder is who signs.
DEFAULT_BY_HEADER = "X-Claimwatch-Default-By"
SESSION_SECONDS = 12 * 3600  # how long a dashboard sign-in lasts


def _refuse(refusal: Refusal) -> HTTPException:
    headers = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
    return HTTPException(refusal.status, refusal.detail, headers=headers)


def per_minute(calls: float) -> TokenBucket:
    """A bucket that holds a minute's worth of calls and refills evenly."""
    return TokenBucket(calls / 60.0, max(1, int(calls)))


def retry_after(wait: float) -> int:
    return max(1, int(wait + 0.999))


def too_many(wait: float, who: str, settings: str) -> HTTPException:
    retry = retry_after(wait)
    return HTTPException(
        429, f"too many {who}; retry in {retry}s (limit: {settings})", headers={"Retry-After": str(retry)}
    )


class Gate:
    """Dependencies: ``mutation`` (token, then its rate limit) and ``read`` (token or session if reads are protected).

    Rate limits are kept apart so that no flood can delay a token holder: a valid token spends its
    own bucket (keyed by its hash); missing and wrong tokens share a small bucket per address;
    sign-in attempts and anonymous reads have buckets of their own per address.
    """

    def __init__(self, policy: ApiPolicy, clock: Callable[[], float] = time.monotonic):
        self.policy = policy
        self.tokens = TokenCheck(policy.token_hashes, policy.token_file)
        self.sessions = ReadSession(SESSION_SECONDS)  # per-process key: sessions end at restart
        self.addresses = ClientAddress(policy.trusted_proxies)
        self.holders = TokenBucket(policy.mutations_per_minute / 60.0, policy.mutation_burst)
        self.anonymous_mutations = per_minute(policy.anonymous_mutations_per_minute)
        self.signins = per_minute(policy.signins_per_minute)
        self.anonymous_reads = TokenBucket(
            policy.anonymous_reads_per_minute / 60.0,
            max(1, min(policy.anonymous_read_burst, int(policy.anonymous_reads_per_minute))),
        )
        self.clock = clock

    def client_of(self, request: Request) -> str:
        peer = request.client.host if request.client else "unknown"
        return self.addresses.of(peer, request.headers.get("x-forwarded-for"))

    def holds_token(self, token: str | None) -> bool:
        return token is not None and self.tokens.matches(token)

    def mutation_check(self, request: Request, token: str | None, *, limited: bool = True) -> None:
        """A change needs a valid token; ``limited``: its holder's changes are rate limited (the OTLP intake's
        exports are data, bounded by their size, so they are not)."""
        holder = self.tokens.holder(token) if token is not None else None
        if token is not None and holder is not None:
            wait = self.holders.take(hash_token(token), self.clock()) if limited else 0
            if wait > 0:
                raise too_many(wait, "changes with this token", "api.mutations_per_minute, api.mutation_burst")
            request.state.holder = holder
            return
        # Guessing tokens is throttled, in a bucket no token holder shares.
        wait = self.anonymous_mutations.take(self.client_of(request), self.clock())
        if wait > 0:
            raise too_many(
                wait, "changes without a valid token from this address", "api.anonymous_mutations_per_minute"
            )
        refusal = SESSION_NOT_TOKEN if token is not None and self.sessions.signed(token) else self.tokens.refusal(token)
        if refusal is not None:  # None only if the token file gained this token since holds_token()
            raise _refuse(refusal)

    @staticmethod
    def acting_as(request: Request, claimed: str | None, field: str = "by") -> str:
        """Who a change is recorded as: a named token's holder, whatever the body says (a different ``by`` is
        refused, compared as sign-off compares names); with an unnamed token, the body's ``by``."""
        holder = getattr(request.state, "holder", None)
        name = holder.name if holder is not None else None
        if name is None:
            claimed = claimed if claimed is not None else request.headers.get(DEFAULT_BY_HEADER) or None
            if claimed is None:
                raise RequestValidationError(
                    [
                        {
                            "type": "value_error",
                            "loc": ("body", field),
                            "msg": (
                                "is required with a token that has no name (one made with "
                                "`claimwatch token new --name NAME` records its holder)"
                            ),
                        }
                    ]
                )
            return claimed
        if claimed is not None and identity_key(claimed) != identity_key(name):
            raise HTTPException(
                403,
                f"this token is {name!r}'s, so changes made with it are recorded as {name!r}, "
                f"not {claimed[:200]!r}: leave out by, or use your own token",
            )
        return name

    def signer(self, request: Request, claimed: str | None, field: str = "by") -> str:
        """Who signs off (an eval item's approval, a dispute's adjudication): a named token's holder only. An
        unnamed token is whoever claims a name, so it cannot show that a second person looked."""
        holder = getattr(request.state, "holder", None)
        if holder is None or holder.name is None:
            raise HTTPException(
                403,
                "signing off needs a token with a name, so the second pair of eyes is on record: "
                "make one for the reviewer with `claimwatch token new --name NAME --register`",
            )
        return self.acting_as(request, claimed, field)

    def read_check(self, request: Request, token: str | None) -> None:
        if not self.policy.protect_reads:
            return
        if token is None and self.has_session(request):
            return
        refusal = self.tokens.refusal(token)
        if refusal is not None:
            raise _refuse(refusal)

    def has_session(self, request: Request) -> bool:
        return self.sessions.valid(request.cookies.get(READ_COOKIE), self.tokens)

    def signed_in(self, request: Request) -> bool:
        """For pages: may this browser read (always, unless reads are protected)?"""
        return not self.policy.protect_reads or self.has_session(request)

    def known_reader(self, request: Request) -> bool:
        """Does the read carry a valid token or sign-in session? Those reads are never limited."""
        return self.holds_token(bearer_of(request.headers.get("authorization"))) or self.has_session(request)

    def anonymous_read_wait(self, request: Request) -> float:
        """What the address's anonymous read bucket says: 0 when the read may go ahead."""
        return self.anonymous_reads.take(self.client_of(request), self.clock())

    def signin_wait(self, request: Request) -> float:
        return self.signins.take(self.client_of(request), self.clock())

    # FastAPI dependencies -----------------------------------------------------
    def mutation(self, limited: bool = True):
        """A change's dependency; ``limited=False`` for data sent in parts (an eval run's answers), which the body
        limit bounds, not the changes-per-minute bucket."""

        def require_token(
            request: Request, credentials: HTTPAuthorizationCredentials | None = Security(bearer_scheme)
        ) -> None:
            self.mutation_check(request, credentials.credentials if credentials else None, limited=limited)

        return require_token

    def read(self):
        if not self.policy.protect_reads:  # open reads: no security scheme in OpenAPI either
            return lambda: None

        def allow_read(
            request: Request, credentials: HTTPAuthorizationCredentials | None = Security(bearer_scheme)
        ) -> None:
            self.read_check(request, credentials.credentials if credentials else None)

        return allow_read
