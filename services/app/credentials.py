"""Where API tokens live for the user, the way gh and kubectl keep theirs.

``$XDG_CONFIG_HOME/claimwatch/`` (default ``~/.config/claimwatch/``, mode 0700) holds:

- ``hosts.toml`` (mode 0600): one table per API URL, ``["http://127.0.0.1:8080"]`` with
  ``token = "cw_..."``. ``claimwatch up`` writes its token there, so the CLI finds it from
  any directory.
- ``token-hashes``: sha256 hashes of tokens made by ``claimwatch token new``, one a line. A
  stack started by ``claimwatch up`` re-reads it when it changes, so a new token works at once.

The CLI's token: ``$CLAIMWATCH_TOKEN``, else the ``hosts.toml`` entry for the API URL.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

DEMO_REVIEWER = ("reviewer", Path("var/reviewer-token"))  # the demo's second person, who signs off, and their token
HOSTS = "hosts.toml"
HASHES = "token-hashes"


class CredentialsError(RuntimeError):
    """The credentials file cannot be read or written; the message names it."""


def config_dir(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_CONFIG_HOME") or ""
    return (Path(base) if base.strip() else Path.home() / ".config") / "claimwatch"


def hosts_path(environ: Mapping[str, str] = os.environ) -> Path:
    return config_dir(environ) / HOSTS


def hashes_path(environ: Mapping[str, str] = os.environ) -> Path:
    return config_dir(environ) / HASHES


def _key(url: str) -> str:
    return url.strip().rstrip("/")


def read_hosts(path: Path) -> dict[str, dict]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CredentialsError(f"cannot read {path}: {exc}; fix or remove it") from None
    return {k: v for k, v in data.items() if isinstance(v, dict)}


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)


def save_token(url: str, token: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Store ``token`` for the API at ``url`` in hosts.toml (0600, replaced atomically); returns its path."""
    path = hosts_path(environ)
    hosts = read_hosts(path)
    hosts[_key(url)] = {**hosts.get(_key(url), {}), "token": token}
    lines = ["# claimwatch API tokens by API URL (written by `claimwatch up`; keep it private)"]
    for host, fields in sorted(hosts.items()):
        lines += ["", f"[{json.dumps(host)}]"]
        lines += [f"{name} = {json.dumps(str(value))}" for name, value in sorted(fields.items())]
    _private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def stored_token(url: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The token hosts.toml keeps for ``url``, if any."""
    token = read_hosts(hosts_path(environ)).get(_key(url), {}).get("token")
    return token.strip() if isinstance(token, str) and token.strip() else None


def find_token(url: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(token, where it came from) for the API at ``url``: $CLAIMWATCH_TOKEN, else hosts.toml."""
    if environ.get("CLAIMWATCH_TOKEN", "").strip():
        return environ["CLAIMWATCH_TOKEN"].strip(), "$CLAIMWATCH_TOKEN"
    try:
        token = stored_token(url, environ)
    except CredentialsError:
        token = None
    return (token, f"{hosts_path(environ)} [{_key(url)}]") if token else None


def add_token_hash(digest: str, path: Path, note: str = "", name: str | None = None) -> Path:
    """Append a sha256 (and its holder's name) to a token-hashes file (created 0600) in one write, so a reader
    never sees half a line."""
    _private_dir(path.parent)
    line = digest + (f" {name}" if name else "") + (f"  # {' '.join(note.split())}" if note else "") + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return path


def holder_token(path: Path, name: str, hashes: Path) -> str:
    """A token whose holder is ``name``, kept in ``path`` (0600) and registered in the token-hashes file ``hashes``:
    the one kept there while it is still registered, else a new one (the demo's second person, who signs off)."""
    from services.api.auth import hash_token, new_token, read_hashes_file

    kept = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    if kept and hashes.is_file() and (hash_token(kept).encode(), name) in read_hashes_file(hashes):
        return kept
    token, digest = new_token()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    add_token_hash(digest, hashes, note=f"{name}'s token, made by claimwatch demo", name=name)
    return token


def with_serving_tokens(settings):
    """``settings`` for an API served from here (`claimwatch up`, or the CLI's in-process API): it watches the
    per-user token-hashes file, and with no token configured it accepts the one hosts.toml keeps for its URL, made
    and kept there when there is none (reused across runs). Returns (settings, hosts.toml's path, or None when
    tokens are configured)."""
    from services.api.auth import hash_token, new_token

    api = settings.api.model_copy(update={"token_file": settings.api.token_file or str(hashes_path())})
    where = None
    if not api.token_hashes:
        token = stored_token(api.url)
        if token is None:  # kept from the first run on: every later one (and every offline command) only reads it
            token = new_token()[0]
            where = save_token(api.url, token)
        else:
            where = hosts_path()
        api = api.model_copy(update={"token_hashes": (hash_token(token),)})
    return settings.model_copy(update={"api": api}), where
