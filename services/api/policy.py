"""What the API lets in: its limits (rate limits, body size, ...), each defined here once, with its default, bounds
and description. ``settings.api`` (services/app/settings.py) is an ``ApiPolicy`` with the server's own settings
beside; this module imports only pydantic, so the settings (and every CLI command) load without FastAPI.
services/api/security.py enforces it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ApiPolicy(BaseModel):
    """What the API lets in; every field has a safe default."""

    model_config = ConfigDict(extra="forbid")

    token_hashes: tuple[str, ...] = Field(
        default=(),
        description="sha256 hex of accepted bearer tokens, each "
        "optionally followed by a space and its holder's name (changes made with it are recorded "
        "as that name)",
    )
    token_file: str | None = Field(
        default=None,
        description="file of more accepted sha256 hashes, one a line, re-read when it "
        "changes (`claimwatch up` watches ~/.config/claimwatch/token-hashes, where "
        "`claimwatch token new` adds them)",
    )
    protect_reads: bool = False
    mutations_per_minute: float = Field(
        default=60.0, gt=0, description="rate limit per valid token on mutating endpoints"
    )
    mutation_burst: int = Field(default=20, ge=1)
    anonymous_mutations_per_minute: float = Field(
        default=10.0,
        gt=0,
        description="per address, for changes with a missing or wrong token; never shared with token holders",
    )
    signins_per_minute: float = Field(default=10.0, gt=0, description="dashboard sign-in attempts per address")
    anonymous_reads_per_minute: float = Field(
        default=120.0, gt=0, description="reads per address without a valid token or sign-in session"
    )
    anonymous_read_burst: int = Field(default=30, ge=1, description="of those, how many at once")
    anonymous_concurrency: int = Field(
        default=2,
        ge=1,
        le=64,
        description="reads without a token or session served at once from every address together; the rest queue "
        "(up to 10 s, then 503)",
    )
    trusted_proxies: tuple[str, ...] = Field(
        default=(),
        description="IPs or networks of reverse proxies whose "
        "X-Forwarded-For names the caller; empty: the peer address is the caller",
    )
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)
    otlp_max_body_bytes: int = Field(
        default=8 << 20, ge=1024, description="the OTLP intake's request bodies (POST /v1/logs, /v1/traces), as sent"
    )
    otlp_max_unpacked_bytes: int = Field(default=32 << 20, ge=1024, description="... and once a gzip body is unpacked")
    cors_origins: tuple[str, ...] = Field(default=(), description="CORS is off unless origins are listed")
