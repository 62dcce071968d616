"""Who may call what: bearer tokens kept only as sha256 hashes, and a token bucket on mutations.

- Mutations always need a token. With no token hashes configured they are refused
  (403) with a message saying how to make one, never silently opened.
- Reads are open unless ``api.protect_reads``; then they take the bearer header, or
  the read-only session cookie set by the dashboard's sign-in form: a signed, expiring
  value that carries no token, so it can never act as one (no CSRF through a signed-in
  browser, and a stolen cookie cannot change anything).
- A presented token is hashed and compared with ``hmac.compare_digest`` against
  every configured hash, without stopping at the first match, so timing says
  nothing about which hash (or how much of one) matched.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer

log = logging.getLogger(__name__)
HASH_RE = re.compile(r"[0-9a-f]{64}")
TOKEN_PREFIX = "cw_"
READ_COOKIE = "claimwatch_read"
HOW_TO_CONFIGURE = (
    "no API tokens are configured, so changes are refused. Run `claimwatch token new` and keep the "
    "token it prints: it adds the token's sha256 to the token file the API watches (api.token_file), "
    "accepted at once; or add the sha256 to [api] token_hashes in the config file "
    "(or CLAIMWATCH_API__TOKEN_HASHES), then restart"
)


def hash_line(line: str) -> tuple[str, str | None] | None:
    """``<sha256 hex> [name]  # comment`` as (hash, name or None); None for a blank or comment line. Raises
    ValueError for a line that starts with anything but a sha256 hex."""
    words = line.split("#", 1)[0].split(maxsplit=1)
    if not words:
        return None
    digest = words[0].lower()
    if not HASH_RE.fullmatch(digest):
        raise ValueError(f"expected 64 hex digits (a sha256), then an optional name; got {words[0][:20]!r}")
    return digest, (words[1].strip() if len(words) > 1 else None)


def read_hashes_file(path: Path) -> list[tuple[bytes, str | None]]:
    """The (sha256, name) pairs of a token-hashes file, a line each; other lines are skipped."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.warning("cannot read the token hashes in %s: %s", path, exc)
        return []
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            entry = hash_line(line)
        except ValueError as exc:
            log.warning("%s:%d skipped: %s", path, n, exc)
            continue
        if entry is not None:
            found.append((entry[0].encode("ascii"), entry[1]))
    return found


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh random bearer token and the sha256 hex to configure; only the hash is ever stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, hash_token(token)


@dataclass(frozen=True)
class Holder:
    """A valid token's holder: ``name`` when the token was made with one (``claimwatch token new --name``), and
    then every change made with it is recorded as that name; None for an unnamed token, whose caller says who."""

    name: str | None


@dataclass(frozen=True)
class Refusal:
    status: int
    detail: str


MISSING = Refusal(
    401,
    "this endpoint needs a bearer token: send `Authorization: Bearer <token>` "
    "(the CLI sends $CLAIMWATCH_TOKEN; the dashboard asks for it in the token field)",
)
WRONG = Refusal(
    403,
    "the bearer token is not one of the configured tokens; check $CLAIMWATCH_TOKEN "
    "or make a new one with `claimwatch token new`",
)
UNCONFIGURED = Refusal(403, HOW_TO_CONFIGURE)
SESSION_NOT_TOKEN = Refusal(
    401, "a sign-in session only reads; changes need `Authorization: Bearer <token>` with the token itself"
)


def bearer_of(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


class TokenCheck:
    """Decides on a presented token; holds hashes only.

    Besides the configured hashes, ``hashes_file`` (one sha256 hex a line, ``#`` comments) is
    re-read whenever it changes (mtime, size or inode), so a token made by ``claimwatch token
    new`` while the API runs is accepted from the next request, without a restart.
    """

    def __init__(self, token_hashes: Iterable[str], hashes_file: str | Path | None = None):
        hashes = []
        for i, h in enumerate(token_hashes):
            try:
                entry = hash_line(h)
                if entry is None:  # a mistake in a list of hashes, not a comment line
                    raise ValueError("expected 64 hex digits (a sha256), then an optional name; got nothing")
            except ValueError as exc:
                raise ValueError(f"api.token_hashes[{i}]: {exc}; make one with `claimwatch token new`") from None
            hashes.append((entry[0].encode("ascii"), entry[1]))
        self._fixed = tuple(hashes)
        self._file = Path(hashes_file).expanduser() if hashes_file else None
        self._stamp: tuple[int, int, int] | None = None
        self._from_file: tuple[tuple[bytes, str | None], ...] = ()

    @property
    def _hashes(self) -> tuple[tuple[bytes, str | None], ...]:
        if self._file is not None:
            self._reload(self._file)
        return self._fixed + self._from_file

    def _reload(self, file: Path) -> None:
        try:
            st = file.stat()
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return
        self._from_file = tuple(read_hashes_file(file)) if stamp else ()
        self._stamp = stamp

    @property
    def configured(self) -> bool:
        return bool(self._hashes)

    def holder(self, token: str) -> Holder | None:
        """Who holds the token (its name, if it was given one), or None for a token not configured."""
        presented = hash_token(token).encode("ascii")
        found: Holder | None = None
        for known, name in self._hashes:  # no early exit
            if hmac.compare_digest(presented, known) and found is None:
                found = Holder(name)
        return found

    def knows_hash_prefix(self, prefix: str) -> bool:
        """Is a token whose hash starts with ``prefix`` still accepted (a session's token, not revoked)?"""
        if len(prefix) < ReadSession.OF_CHARS:
            return False
        wanted = prefix.encode("ascii", "replace")
        return any(hmac.compare_digest(known[: len(wanted)], wanted) for known, _ in self._hashes)

    def matches(self, token: str) -> bool:
        return self.holder(token) is not None

    def refusal(self, token: str | None) -> Refusal | None:
        """None when the token is accepted, else why not (401 missing, 403 wrong or none configured)."""
        if not self.configured:
            return UNCONFIGURED
        if token is None:
            return MISSING
        return None if self.matches(token) else WRONG


class TokenBucket:
    """Per-client token buckets, in memory: ``burst`` calls at once, refilled at ``rate`` per second.

    The number of clients tracked is bounded; the least recently seen is forgotten first.
    """

    def __init__(self, rate: float, burst: int, max_clients: int = 10_000):
        if rate <= 0 or burst < 1:
            raise ValueError(f"rate limit needs rate > 0 and burst >= 1, got rate={rate}, burst={burst}")
        self.rate, self.burst, self.max_clients = rate, burst, max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client -> (tokens, at)

    def take(self, client: str, now: float) -> float:
        """Spend one call; returns 0 when allowed, else the seconds until the next call is."""
        tokens, at = self._buckets.pop(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait


class ReadSession:
    """Signed, expiring read-only sessions for the dashboard's sign-in. A session names the token it was made with by
    a prefix of that token's hash (never the token), and lasts only while that token is still accepted: revoking the
    token ends its sessions from the next request.

    The signing key is random per process unless one is given, so sessions end when the
    API restarts (signing in again takes one form post).
    """

    SCOPE = "read"
    OF_CHARS = 16  # of the token's sha256 hex: enough to tell the configured tokens apart

    def __init__(self, max_age_seconds: int, key: bytes | None = None):
        self.max_age_seconds = max_age_seconds
        self._signer = URLSafeTimedSerializer(key or secrets.token_bytes(32), salt="claimwatch-read-session")

    def issue(self, token: str) -> str:
        return self._signer.dumps({"scope": self.SCOPE, "of": hash_token(token)[: self.OF_CHARS]})

    def signed(self, value: str | None) -> dict | None:
        """What a session this process signed says (scope, the token's hash prefix), unless forged or expired."""
        if not value:
            return None
        try:
            said = self._signer.loads(value, max_age=self.max_age_seconds)
        except BadSignature:  # also an expired one (SignatureExpired)
            return None
        return said if isinstance(said, dict) and said.get("scope") == self.SCOPE else None

    def valid(self, value: str | None, tokens: TokenCheck) -> bool:
        said = self.signed(value)
        return said is not None and tokens.knows_hash_prefix(str(said.get("of", "")))


def same_origin(host: str | None, origin: str | None, referer: str | None) -> bool:
    """Did a browser send this from our own pages? Origin decides, else Referer.

    Hosts are compared without the scheme, since a TLS-terminating proxy makes the API see
    http for an https page. With neither header the caller is not a browser form (curl),
    which cannot ride a signed-in browser, so it is let through.
    """
    sent = origin if origin is not None else referer
    if sent is None:
        return True
    return bool(host and urlsplit(sent).netloc.lower() == host.lower())  # "null" has no netloc: refused


class ClientAddress:
    """The caller's IP: the peer, or, when the peer is a trusted proxy, the nearest untrusted
    address in X-Forwarded-For (read right to left, since a client can prepend anything)."""

    def __init__(self, trusted_proxies: Iterable[str] = ()):
        try:
            self._trusted = tuple(ipaddress.ip_network(p.strip(), strict=False) for p in trusted_proxies)
        except ValueError as exc:
            raise ValueError(f"api.trusted_proxies: {exc}; list IP addresses or networks such as 10.0.0.0/8") from None

    def trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.strip())
        except ValueError:
            return False
        return any(ip in net for net in self._trusted)

    def of(self, peer: str, forwarded_for: str | None) -> str:
        if not forwarded_for or not self.trusted(peer):
            return peer
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        for hop in reversed(hops):
            if not self.trusted(hop):
                return hop
        return hops[0] if hops else peer
