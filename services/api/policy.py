"""What the API lets in: its limits (rate limits, body size, ...), defined here once with their defaults.

``settings.api`` (services/app/settings.py) takes its defaults from ``ApiPolicy``; this module imports nothing
heavy, so the settings (and every CLI command) load without FastAPI. services/api/security.py enforces it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiPolicy:
    """What the API lets in. Built from ``settings.api``; every field has a safe default."""

    token_hashes: tuple[str, ...] = ()
    token_file: str | None = None  # more hashes, one a line, re-read when the file changes
    protect_reads: bool = False
    mutations_per_minute: float = 60.0  # per valid token
    mutation_burst: int = 20
    anonymous_mutations_per_minute: float = 10.0  # per address, for missing and wrong tokens
    signins_per_minute: float = 10.0  # per address
    anonymous_reads_per_minute: float = 120.0  # per address, for reads without a valid token or session
    anonymous_read_burst: int = 30  # of those, at once
    anonymous_concurrency: int = 2  # anonymous reads served at once, from every address together
    trusted_proxies: tuple[str, ...] = ()  # peers whose X-Forwarded-For names the caller
    max_body_bytes: int = 64 * 1024
    cors_origins: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, api) -> ApiPolicy:
        """From ``settings.api``, which has every field (its defaults are this class's)."""
        return cls(
            token_hashes=tuple(api.token_hashes),
            token_file=api.token_file or None,
            protect_reads=bool(api.protect_reads),
            mutations_per_minute=float(api.mutations_per_minute),
            mutation_burst=int(api.mutation_burst),
            anonymous_mutations_per_minute=float(api.anonymous_mutations_per_minute),
            signins_per_minute=float(api.signins_per_minute),
            anonymous_reads_per_minute=float(api.anonymous_reads_per_minute),
            anonymous_read_burst=int(api.anonymous_read_burst),
            anonymous_concurrency=int(api.anonymous_concurrency),
            trusted_proxies=tuple(api.trusted_proxies),
            max_body_bytes=int(api.max_body_bytes),
            cors_origins=tuple(api.cors_origins),
        )
