"""Who a change is recorded as (`--by`): the name given, else the configured one, else the login name.

API tokens are kept as hashes with no owner, so the server cannot say who holds one; the
name comes from the user's side.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable

WHERE_TO_SET = "identity.name in the config file, or CLAIMWATCH_IDENTITY__NAME"


class IdentityError(ValueError):
    """No usable name: the message says what to pass."""


def login_name() -> str | None:
    """The OS login name ($LOGNAME, $USER, ... then the password database), or None when there is none."""
    try:
        return getpass.getuser().strip() or None
    except (OSError, KeyError, ImportError):  # no such variables and no passwd entry (e.g. a bare container uid)
        return None


def signer(given: str | None, configured: str | None, login: Callable[[], str | None] = login_name) -> str:
    """``given`` (--by) when it was passed, else ``configured``, else ``login()``; an empty --by is refused."""
    if given is not None:
        if not given.strip():
            raise IdentityError(
                "by: must not be empty; pass --by NAME, or leave --by out to be recorded "
                f"as {configured or login() or 'the name in ' + WHERE_TO_SET}"
            )
        return given
    name = configured or login()
    if not name:
        raise IdentityError(f"no name to record this change under: pass --by NAME (or set {WHERE_TO_SET})")
    return name
