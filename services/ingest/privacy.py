"""Redaction before storage: personal data in an event's free text is masked or dropped.

Only text changes. Verdicts, ids, routes, versions, actions and claim counts are never
touched, so rates, alerts and issue counts are the same with redaction on or off. The
features that read text (clustering, near-duplicate checks, eval promotion, examples)
degrade; ``Redactor.degraded`` says which, so the UI and CLI can tell the user.

    mask  "mail a@b.io or +1 (415) 555-2671"  ->  "mail [EMAIL] or [PHONE]"
    drop  any covered text                     ->  "" and an HMAC-SHA256 of it, kept in
                                                   attributes["claimwatch.redaction"]
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import orjson
import phonenumbers
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from services.contract.model import VerdictEvent

PatternName = Literal["email", "phone", "card", "ip"]
TextField = Literal["query", "answer", "claim", "evidence", "span"]
BUILTIN_PATTERNS: tuple[PatternName, ...] = ("email", "phone", "card", "ip")
DEFAULT_PATTERNS: tuple[PatternName, ...] = ("email", "phone", "card")
TEXT_FIELDS: tuple[TextField, ...] = ("query", "answer", "claim", "evidence", "span")
HASHES_ATTRIBUTE = "claimwatch.redaction"
_CUSTOM_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


class RedactionSettings(BaseModel):
    """The ``privacy`` section of Settings."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    patterns: list[PatternName] = Field(default_factory=lambda: list(DEFAULT_PATTERNS))
    custom: dict[str, str] = Field(default_factory=dict, description="name -> regex; matches become [NAME]")
    fields: list[TextField] = Field(default_factory=lambda: list(TEXT_FIELDS))
    mode: Literal["mask", "drop"] = "mask"
    hash_salt: SecretStr = Field(
        default=SecretStr(""), description="HMAC key for drop-mode hashes; keep it secret and stable"
    )
    phone_regions: list[str] = Field(
        default_factory=lambda: ["US"],
        description="regions whose national formats count as phone numbers; +CC numbers always do",
    )

    @field_validator("custom")
    @classmethod
    def _custom_patterns_compile(cls, custom: dict[str, str]) -> dict[str, str]:
        for name, pattern in custom.items():
            if not _CUSTOM_NAME.fullmatch(name):
                raise ValueError(
                    f"custom pattern name {name!r} must be a letter followed by up to 31 letters, "
                    "digits or _ (it becomes the placeholder [NAME])"
                )
            if name.lower() in BUILTIN_PATTERNS:
                raise ValueError(f"custom[{name!r}] reuses a built-in pattern's name; list it in patterns or rename it")
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"custom[{name!r}] = {pattern!r} is not a valid regular expression ({exc}); "
                    "fix it or remove the entry"
                ) from None
            if compiled.fullmatch(""):
                raise ValueError(
                    f"custom[{name!r}] = {pattern!r} matches the empty string and would mark every "
                    "position; make it match at least one character"
                )
        return custom

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, regions: list[str]) -> list[str]:
        upper = [r.upper() for r in regions]
        unknown = [r for r in upper if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"phone_regions has unknown region codes {unknown}; use ISO 3166 codes such as US, GB, DE")
        return upper

    @model_validator(mode="after")
    def _redacts_something(self) -> RedactionSettings:
        if not self.enabled:
            return self
        if not self.fields:
            raise ValueError(
                "fields is empty, so nothing would be redacted; list some of "
                f"{list(TEXT_FIELDS)} or set enabled = false"
            )
        if self.mode == "mask" and not self.patterns and not self.custom:
            raise ValueError(
                "mode 'mask' with no patterns and no custom patterns redacts nothing; "
                f"list some of {list(BUILTIN_PATTERNS)}, add custom patterns, or use mode 'drop'"
            )
        if self.mode == "drop" and not self.hash_salt.get_secret_value():
            raise ValueError(
                "hash_salt must be set to a secret string when mode is 'drop': unkeyed hashes of "
                "short texts (emails, common questions) can be reversed by guessing"
            )
        return self


@dataclass(frozen=True)
class Degradation:
    """A text-dependent feature that redaction weakens (``effect`` 'reduced') or disables ('lost')."""

    feature: str
    effect: Literal["reduced", "lost"]
    reason: str

    def __str__(self) -> str:
        return f"{self.feature} {self.effect}: {self.reason}"


# --- maskers: each replaces one kind of match with its placeholder; cheap guards skip most texts.

_SEVEN_DIGITS = re.compile(r"\d(?:\D{0,4}\d){6}")  # fewer, further apart: no phone number
# Digits joined by short runs of phone punctuation, with an optional leading + or (.
_PHONE_RUN = re.compile(r"[+(]?\d(?:[ ().-]{0,3}\d)*")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w-])")
# A run of digit groups joined by single spaces or dashes, 13 digits or more; shape and Luhn decide.
_DIGIT_RUN = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,}")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{0,4})(?![\w:])")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_SEPARATOR = re.compile(r"[ -]")


def card_shaped(lengths: list[int]) -> bool:
    """How card numbers are written: 13-19 digits in one group, 4-4-4-x, 4-4-4-4-x, or 4-6-x (Amex, Diners)."""
    if not 13 <= sum(lengths) <= 19:
        return False
    if len(lengths) == 1:
        return True
    if lengths[:3] == [4, 4, 4]:
        return len(lengths) == 4 or (len(lengths) == 5 and lengths[3] == 4)
    return len(lengths) == 3 and lengths[:2] == [4, 6]


def _mask_cards(match: re.Match[str]) -> str:
    """Card-shaped, Luhn-valid stretches of whole groups inside a digit run become [CARD]: the run
    ``+44 20 7946 0958 4111 1111 1111 1111`` hides the card and leaves the phone number to its masker."""
    run = match.group()
    groups = _SEPARATOR.split(run)
    starts, pos = [], 0
    for group in groups:
        starts.append(pos)
        pos += len(group) + 1
    out, done, i = [], 0, 0
    while i < len(groups):
        if len(groups[i]) != 4 and not 13 <= len(groups[i]) <= 19:  # no card shape starts here
            i += 1
            continue
        for j in range(min(len(groups), i + 5), i, -1):  # longest first; a card has at most 5 groups
            window = groups[i:j]
            if card_shaped([len(g) for g in window]) and luhn_valid("".join(window)):
                out += [run[done : starts[i]], "[CARD]"]
                done, i = starts[j - 1] + len(groups[j - 1]), j
                break
        else:
            i += 1
    return "".join(out) + run[done:] if out else run


def _mask_ip(match: re.Match[str]) -> str:
    try:
        ipaddress.ip_address(match.group())
    except ValueError:
        return match.group()
    return "[IP]"


class RegexMasker:
    """``replace`` is a placeholder, or a function that decides per match (checksums, address parsing)."""

    def __init__(
        self,
        pattern: re.Pattern[str],
        replace: str | Callable[[re.Match[str]], str],
        guard: Callable[[str], bool] | None = None,
    ):
        self.pattern, self.replace, self.guard = pattern, replace, guard

    def mask(self, text: str) -> str:
        if self.guard is not None and not self.guard(text):
            return text
        return self.pattern.sub(self.replace, text)


class PhoneMasker:
    """libphonenumber's matcher at VALID leniency: it knows each region's formats and skips dates and ids.

    The matcher is pure Python and slow on digit-heavy text, so it only sees runs of digits and phone
    punctuation (long runs in overlapping windows that any number fits in), within a budget of calls
    per text. Past the budget it fails closed: a remaining run of seven digits or more is masked whole,
    so a hostile text costs at most ``max_calls`` matcher calls and leaks nothing."""

    placeholder = "[PHONE]"
    window = 48
    max_calls = 128

    def __init__(self, regions: list[str]):
        self.regions = regions

    def mask(self, text: str) -> str:
        if not _SEVEN_DIGITS.search(text):
            return text
        spans = sorted(self._spans(text))
        if not spans:
            return text
        out, pos = [], 0
        for start, end in spans:
            if end <= pos:
                continue
            out += [text[pos : max(start, pos)], self.placeholder]
            pos = end
        return "".join(out) + text[pos:]

    def _spans(self, text: str):
        half, budget = self.window // 2, self.max_calls
        for run in _PHONE_RUN.finditer(text):
            if not _SEVEN_DIGITS.search(run.group()):
                continue
            first, last = run.span()
            offsets = range(first, max(first + 1, last - half), half)
            budget -= len(offsets) * len(self.regions)
            if budget < 0:
                yield first, last
                continue
            for offset in offsets:
                piece = text[offset : min(last, offset + self.window)]
                for region in self.regions:
                    for m in phonenumbers.PhoneNumberMatcher(piece, region, leniency=phonenumbers.Leniency.VALID):
                        yield offset + m.start, offset + m.end


def build_maskers(settings: RedactionSettings) -> tuple[tuple[RegexMasker | PhoneMasker, ...], tuple[RegexMasker, ...]]:
    """(built-ins, custom). Built-ins run widest first (an email can hold digits, a card number looks
    like a phone number); placeholders hold no digits or @, so later maskers pass over them."""
    chosen = set(settings.patterns)
    builtins: list[RegexMasker | PhoneMasker] = []
    if "email" in chosen:
        builtins.append(RegexMasker(_EMAIL, "[EMAIL]", guard=lambda t: "@" in t))
    if "card" in chosen:
        builtins.append(RegexMasker(_DIGIT_RUN, _mask_cards))
    if "ip" in chosen:
        builtins.append(RegexMasker(_IPV6, _mask_ip, guard=lambda t: t.count(":") >= 2))
        builtins.append(RegexMasker(_IPV4, _mask_ip))
    if "phone" in chosen:
        builtins.append(PhoneMasker(settings.phone_regions))
    custom = tuple(RegexMasker(re.compile(pattern), f"[{name.upper()}]") for name, pattern in settings.custom.items())
    return tuple(builtins), custom


def pii_hint(patterns: Iterable[str]) -> re.Pattern[str]:
    """One scan that every built-in match needs to pass, so most texts skip the built-in maskers."""
    chosen, hints = set(patterns), []
    if "email" in chosen:
        hints.append("@")
    if chosen & {"phone", "card"}:
        hints.append(_SEVEN_DIGITS.pattern)
    if "ip" in chosen:
        hints += [r"\d\.\d", r":[0-9A-Fa-f]{0,4}:"]
    return re.compile("|".join(hints) or r"(?!)")


def degradations(settings: RedactionSettings) -> tuple[Degradation, ...]:
    if not settings.enabled:
        return ()
    fields = set(settings.fields)
    out: list[Degradation] = []
    if settings.mode == "drop":
        if "claim" in fields:
            out.append(
                Degradation(
                    "clustering",
                    "lost",
                    "claim text is dropped before storage, so failing claims "
                    "cannot be clustered into named issues; identical claims stay linkable by hash",
                )
            )
        elif fields & {"query", "span", "answer"}:
            dropped = ", ".join(sorted(fields & {"query", "span", "answer"}))
            out.append(
                Degradation(
                    "clustering", "reduced", f"{dropped} text is dropped, so clusters rest on the remaining text only"
                )
            )
        if "query" in fields:
            out.append(
                Degradation(
                    "near_duplicates",
                    "lost",
                    "question text is dropped, so eval-set near-duplicate "
                    "checks cannot compare questions; identical questions stay linkable by hash",
                )
            )
            out.append(
                Degradation("eval_promotion", "lost", "an eval item needs its question text, which is not stored")
            )
        out.append(Degradation("examples", "lost", f"runbooks and pages show no {', '.join(sorted(fields))} text"))
    else:
        masked = ", ".join(p for p in [*settings.patterns, *settings.custom])
        if "claim" in fields:
            out.append(
                Degradation(
                    "clustering", "reduced", f"claims that differ only in masked values ({masked}) group together"
                )
            )
        if fields & {"claim", "query"}:
            out.append(
                Degradation(
                    "near_duplicates",
                    "reduced",
                    f"texts that differ only in masked values ({masked}) count as duplicates",
                )
            )
    return tuple(out)


class Redactor:
    """Pure: ``redact`` returns a new frozen event (or the same one when nothing changes)."""

    def __init__(self, settings: RedactionSettings):
        self.settings = settings
        self.fields = frozenset(settings.fields) if settings.enabled else frozenset()
        self.drop = settings.mode == "drop"
        masking = self.fields and not self.drop
        self.builtin_maskers, self.custom_maskers = build_maskers(settings) if masking else ((), ())
        self.hint = pii_hint(settings.patterns)
        self.degraded = degradations(settings)
        self._key = settings.hash_salt.get_secret_value().encode("utf-8")

    @property
    def enabled(self) -> bool:
        return bool(self.fields)

    def text_hash(self, text: str) -> str:
        """Keyed SHA-256 of a text: equal texts link, and without the salt a guess cannot be checked."""
        return hmac.new(self._key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def redact_text(self, text: str) -> str:
        if not self.fields:
            return text
        if self.drop:
            return ""
        if self.builtin_maskers and self.hint.search(text) is not None:
            for masker in self.builtin_maskers:
                text = masker.mask(text)
        for masker in self.custom_maskers:
            text = masker.mask(text)
        return text

    def redact_raw(self, raw: bytes) -> bytes:
        """An invalid message as the store may keep it: masked as text, or nothing in drop mode."""
        if not self.fields:
            return raw
        return self.redact_text(raw.decode("utf-8", "replace")).encode("utf-8")

    def redact(self, event: VerdictEvent) -> VerdictEvent:
        if not self.fields:
            return event
        update = self._rewrite(event)
        if self.drop and (hashes := self._hashes(event)):
            update["attributes"] = {
                **event.attributes,
                HASHES_ATTRIBUTE: orjson.dumps({"alg": "hmac-sha256", **hashes}).decode(),
            }
        return msgspec.structs.replace(event, **update) if update else event

    def _rewrite(self, event: VerdictEvent) -> dict:
        fields = self.fields
        update: dict[str, Any] = {}  # replace()'s keyword arguments: parts of several types
        for name, part in (("query", event.query), ("answer", event.answer)):
            if name in fields and (new := self._rewrite_part(part, ["text"])) is not part:
                update[name] = new
        claim_attrs = [attr for field, attr in (("claim", "text"), ("span", "span")) if field in fields]
        for name, parts, attrs in (
            ("claims", event.claims, claim_attrs),
            ("evidence", event.evidence, ["text"] if "evidence" in fields else []),
        ):
            if attrs:
                new_parts = [self._rewrite_part(p, attrs) for p in parts]
                if any(new is not old for new, old in zip(new_parts, parts)):
                    update[name] = new_parts
        return update

    def _rewrite_part(self, part, attrs: list[str]):
        changed = {}
        for attr in attrs:
            value = getattr(part, attr)
            if value and (text := self.redact_text(value)) != value:
                changed[attr] = text
        return msgspec.structs.replace(part, **changed) if changed else part

    def _hashes(self, event: VerdictEvent) -> dict:
        """Hashes by field; list fields line up with claims / evidence (null where there was no text)."""
        out: dict[str, str | list[str | None]] = {}
        for field, values in (
            ("query", event.query.text),
            ("answer", event.answer.text),
            ("claim", [c.text for c in event.claims]),
            ("span", [c.span for c in event.claims]),
            ("evidence", [e.text for e in event.evidence]),
        ):
            if field not in self.fields or not values:
                continue
            if isinstance(values, str):
                out[field] = self.text_hash(values)
            elif any(values):
                out[field] = [self.text_hash(v) if v else None for v in values]
        return out
