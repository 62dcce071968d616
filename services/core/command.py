"""How the user runs `claimwatch` from the shell they are in: the first word of every command we print to paste."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

NAME = "claimwatch"


def cli_path(
    executable: str = sys.executable, cwd: str | None = os.curdir, which: Callable[[str], str | None] = shutil.which
) -> str:
    """The running interpreter's `claimwatch` script, as the user types it in ``cwd`` (None: in any directory).

    The bare name when the PATH finds that very script. Otherwise (a virtualenv that is not
    activated) its path: relative when it lies below ``cwd`` (``.venv/bin/claimwatch``), else
    absolute. The bare name, too, when the interpreter has no such script (nothing better to say).
    """
    script = Path(executable).parent / NAME
    found = which(NAME)
    if not script.is_file() or (found is not None and os.path.samefile(found, script)):
        return NAME
    relative = os.path.relpath(script, cwd) if cwd is not None else os.pardir
    if relative.startswith(os.pardir):
        return os.path.abspath(script)
    return relative if os.sep in relative else os.path.join(os.curdir, relative)  # `claimwatch` alone means PATH


def cli_command(
    *,
    executable: str = sys.executable,
    cwd: str | None = os.curdir,
    which: Callable[[str], str | None] = shutil.which,
) -> str:
    """``cli_path`` as one shell word, to print at the start of a command line."""
    return shlex.quote(cli_path(executable, cwd, which))
