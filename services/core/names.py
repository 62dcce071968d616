"""When two names are one person: what sign-off and token identity compare."""
from __future__ import annotations

import unicodedata

# Invisible letters the Unicode "default ignorable" set adds to the format (Cf) characters: fillers, selectors.
_IGNORABLE = {0x115F, 0x1160, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)}


def identity_key(name: str) -> str:
    """What the four-eyes check compares: NFKC, case-folded, with invisible characters dropped, so that
    ``Alice``, ``ａｌｉｃｅ`` and ``alice\u200b`` are all the proposer ``alice``."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    visible = "".join(c for c in folded if unicodedata.category(c)[0] != "C" and ord(c) not in _IGNORABLE)
    return " ".join(visible.split())
