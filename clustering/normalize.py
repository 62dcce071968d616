"""Sentry-style grouping normalisation: named regexes replace volatile tokens with placeholders.

Two claims that differ only in an invented date, amount or order id normalise to the same
text, so they embed (and cache) identically. Order matters: wider patterns (urls, emails,
uuids, dates) run before the narrow ones (bare numbers) that would eat their parts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_CURRENCY_CODE = r"(?:usd|eur|gbp|jpy|chf|cad|aud|inr|cny|sek|nok|dkk|pln|brl|dollars?|euros?|pounds?|cents?)"


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    placeholder: str


def _rule(name: str, pattern: str, placeholder: str) -> Rule:
    return Rule(name, re.compile(pattern, re.IGNORECASE), placeholder)


RULES: tuple[Rule, ...] = (
    _rule("url", r"\b(?:https?://|www\.)[^\s<>\"']+", "<url>"),
    _rule("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", "<email>"),
    _rule("uuid", r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>"),
    _rule("hash", r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b", "<hash>"),
    _rule(
        "iso_datetime",
        r"\b\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?(?!\w)",
        "<date>",
    ),
    _rule("iso_date", r"\b\d{4}-\d{1,2}-\d{1,2}\b", "<date>"),
    _rule("slash_date", r"\b\d{1,4}[/.]\d{1,2}[/.]\d{2,4}\b", "<date>"),
    _rule("day_month_year", rf"\b{_DAY}(?:\s+of)?\s+{_MONTH}\.?(?:,?\s+\d{{4}})?\b", "<date>"),
    _rule("month_day_year", rf"\b{_MONTH}\.?\s+{_DAY}(?:,?\s+\d{{4}})?\b", "<date>"),
    _rule("month_year", rf"\b{_MONTH}\.?\s+\d{{4}}\b", "<date>"),
    _rule("time", r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?(?!\w)|\b\d{1,2}\s*[ap]\.?m\.?(?!\w)", "<time>"),
    _rule("amount_symbol", r"[$€£¥₹]\s?\d[\d,]*(?:\.\d+)?(?:\s?[km]\b)?", "<amount>"),
    _rule(
        "amount_code",
        rf"\b\d[\d,]*(?:\.\d+)?\s?{_CURRENCY_CODE}\b|\b{_CURRENCY_CODE}\s?\d[\d,]*(?:\.\d+)?\b",
        "<amount>",
    ),
    _rule("percent", r"\b\d+(?:\.\d+)?\s?(?:%|per\s?cent\b)", "<percent>"),
    _rule("ticket", r"#\d+\b", "<id>"),
    _rule(
        "identifier",
        r"\b(?=[\w-]*\d)(?=[\w-]*[a-z])[a-z0-9]+(?:[-_][a-z0-9]+)+\b|\b(?=[a-z]*\d)[a-z]+\d[a-z0-9]{2,}\b",
        "<id>",
    ),
    _rule("digit_group", r"\b\d+(?:-\d+)+\b", "<id>"),
    _rule("number", r"\b\d+(?:[.,]\d+)*(?:st|nd|rd|th)?\b", "<num>"),
)
PLACEHOLDERS = frozenset(rule.placeholder for rule in RULES)
_SPACES = re.compile(r"\s+")


class Normalizer:
    """Applies a rule table in order; ``normalize`` is pure and idempotent."""

    def __init__(self, rules: tuple[Rule, ...] = RULES, lowercase: bool = True):
        self.rules = rules
        self.lowercase = lowercase

    def normalize(self, text: str) -> str:
        for rule in self.rules:
            text = rule.pattern.sub(rule.placeholder, text)
        text = _SPACES.sub(" ", text).strip()
        # The default model's vocabulary is uncased, so lowering loses nothing and merges cache keys.
        return text.lower() if self.lowercase else text

    def apply(self, name: str, text: str) -> str:
        """Apply one named rule only (what the rule table test exercises)."""
        for rule in self.rules:
            if rule.name == name:
                return rule.pattern.sub(rule.placeholder, text)
        raise KeyError(f"no normalisation rule named {name!r}; known: {[r.name for r in self.rules]}")


def normalize(text: str) -> str:
    return _DEFAULT.normalize(text)


_DEFAULT = Normalizer()
