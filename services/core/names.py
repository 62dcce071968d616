"""When two names are one person (what sign-off and token identity compare), and text shown as it is."""

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


# Bidirectional controls: displayed, they reorder the text around them, so a link can read as another one.
_BIDI_CONTROLS = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def visible_controls(text: str) -> str:
    """``text`` with each bidirectional control written out (``<U+202E>``) instead of acting on what follows."""
    return "".join(f"<U+{ord(c):04X}>" if ord(c) in _BIDI_CONTROLS else c for c in text)
