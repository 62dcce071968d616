"""Pre-rendered text pools per route domain, built once per seed so generation only indexes lists."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache

from services.client.simulate.domains import DOMAINS, REGIONS, Domain
from services.client.simulate.families import (
    ABSTENTIONS,
    FAMILY_LIST,
    GENERIC_QUESTIONS,
    SUPPORTED_CLAIMS,
    TRIVIAL_CLAIMS,
    UNANSWERABLE_QUESTIONS,
    Family,
)

POOL_PER_TOPIC = 24  # supported texts per topic
FAILING_PER_TOPIC = 96  # failing texts per (family, topic); numbers, dates and phrasing vary between them
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@dataclass(frozen=True)
class FailingText:
    question: str
    claim: str
    span: str | None
    aux: str | None  # stale: the superseded chunk version; phantom: the cited source; off_topic: the admitted source


@dataclass(frozen=True)
class DomainWording:
    """Pools indexed by topic (one of the domain's items) so one answer stays on one subject."""

    domain: Domain
    seed: int
    topics: tuple[str, ...]
    supported: tuple[tuple[tuple[str, str], ...], ...]  # [topic] -> (claim, span)
    trivial: tuple[tuple[str, ...], ...]  # [topic]
    questions: tuple[tuple[str, ...], ...]  # [topic]
    family_questions: tuple[tuple[tuple[str, ...], ...], ...]  # [family][topic]: risky questions, often answered well
    unanswerable: tuple[tuple[str, ...], ...]  # [topic]
    abstentions: tuple[str, ...]
    chunks: tuple[tuple[str, str, str], ...]  # (chunk_id, source_id, text)
    _failing: dict = field(default_factory=dict, repr=False, compare=False)

    def failing(self, family: int, topic: int) -> tuple[FailingText, ...]:
        """Failing texts of FAMILY_LIST[family] about topic, rendered on first use from their own
        seeded stream (so the order of use never changes them)."""
        pool = self._failing.get((family, topic))
        if pool is None:
            rnd = random.Random(f"{self.seed}/{self.domain.name}/{family}/{topic}")
            fam, subject = FAMILY_LIST[family], self.topics[topic]
            pool = _unique(
                lambda: _failing_text(fam, self.domain, subject, rnd), FAILING_PER_TOPIC, key=lambda x: x.claim
            )
            self._failing[(family, topic)] = pool
        return pool


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class Slots(dict):
    """Template slot values drawn on first use, so one rendering shares its values across
    the question, the claim and the evidence span (same item, two different numbers)."""

    def __init__(self, domain: Domain, rnd: random.Random, topic: str | None = None):
        super().__init__()
        self.domain, self.rnd = domain, rnd
        # A topic anchors the premise, region and system too: one issue keeps its subject.
        self.anchor = None if topic is None else domain.items.index(topic)
        if topic is not None:
            self["item"] = topic

    def _anchored(self, options: tuple):
        return self.rnd.choice(options) if self.anchor is None else options[self.anchor % len(options)]

    def __missing__(self, key: str) -> str:
        if key in ("premise", "truth"):
            premise, truth = self._anchored(self.domain.premises)
            self["premise"], self["truth"] = premise, truth.format_map(self)
            return self[key]
        value = self.DRAW[key](self)
        self[key] = value
        return value

    def _other(self, low: int, high: int, avoid: str, step: int = 1) -> str:
        taken = int(self[avoid])
        value = self.rnd.randrange(low, high + 1, step)
        if value == taken:  # the evidence must state a different number than the claim
            value = value + step if value + step <= high else low
        return str(value)

    def _amount(self) -> str:
        whole = self.rnd.choice((self.rnd.randint(3, 99), self.rnd.randint(100, 2500)))
        cents = self.rnd.choice(("", "", ".50", ".99"))
        return f"{self.domain.currency}{whole:,}{cents}"

    def _date(self) -> str:
        year, month, day = self.rnd.randint(2023, 2027), self.rnd.randint(1, 12), self.rnd.randint(1, 28)
        return self.rnd.choice(
            (f"{MONTHS[month - 1]} {day}, {year}", f"{day} {MONTHS[month - 1]} {year}", f"{year}-{month:02d}-{day:02d}")
        )

    DRAW = {
        "item": lambda s: s.rnd.choice(s.domain.items),
        "action": lambda s: s.rnd.choice(s.domain.actions),
        "doc": lambda s: s.rnd.choice(s.domain.docs),
        "system": lambda s: s._anchored(s.domain.systems),
        "fake_doc": lambda s: s.rnd.choice(s.domain.fake_docs),
        "standard": lambda s: s.rnd.choice(s.domain.standards),
        "region": lambda s: s._anchored(REGIONS),
        "n": lambda s: str(s.rnd.randint(2, 45)),
        "n2": lambda s: s._other(2, 45, "n"),
        "pct": lambda s: str(s.rnd.randrange(5, 100, 5)),
        "pct2": lambda s: s._other(5, 95, "pct", step=5),
        "amount": _amount,
        "amount2": _amount,
        "date": _date,
        "date2": _date,
        "year_old": lambda s: str(s.rnd.randint(2018, 2024)),
        "memo": lambda s: f"{s.rnd.choice(('FIN', 'OPS', 'LEG', 'HR'))}-{s.rnd.randint(100, 9999)}",
        "kb": lambda s: str(s.rnd.randint(1000, 99999)),
    }


def _failing_text(family: Family, domain: Domain, topic: str, rnd: random.Random) -> FailingText:
    slots = Slots(domain, rnd, topic)
    claim_t, span_t = rnd.choice(family.claims)
    claim = claim_t.format_map(slots)
    claim = claim[0].upper() + claim[1:]
    span = span_t.format_map(slots) if span_t else None
    question = rnd.choice(family.questions).format_map(slots)
    aux = None
    if family.link == "stale":
        aux = f"{slots['year_old']}-{rnd.randint(1, 12):02d}-01"
    elif family.link == "phantom":
        aux = (
            f"memo-{slots['memo'].lower()}"
            if "memo" in slots
            else f"kb-{slots['kb']}"
            if "kb" in slots
            else slug(slots["fake_doc"])
        )
    elif family.link == "off_topic":
        aux = f"{slug(slots['region'])}-{rnd.choice(domain.sources)}"
    return FailingText(question, claim, span, aux)


def _unique(make, size: int, key=lambda x: x) -> tuple:
    """Up to ``size`` distinct renderings, so neighbouring pool entries (one answer's claims) differ."""
    seen, out = set(), []
    for _ in range(size * 4):
        value = make()
        if key(value) not in seen:
            seen.add(key(value))
            out.append(value)
            if len(out) == size:
                break
    return tuple(out)


def _render(
    templates: tuple[str, ...], domain: Domain, topic: str | None, rnd: random.Random, size: int
) -> tuple[str, ...]:
    return _unique(lambda: rnd.choice(templates).format_map(Slots(domain, rnd, topic)), size)


def _supported(domain: Domain, topic: str, rnd: random.Random) -> tuple[str, str]:
    slots = Slots(domain, rnd, topic)
    claim_t, span_t = rnd.choice(SUPPORTED_CLAIMS)
    return claim_t.format_map(slots), span_t.format_map(slots)


@lru_cache(maxsize=64)
def domain_wording(name: str, seed: int, per_topic: int = POOL_PER_TOPIC) -> DomainWording:
    """Deterministic in (name, seed); cached because tests generate many short runs."""
    domain = DOMAINS[name]
    rnd = random.Random(f"{seed}/{name}")
    topics = domain.items
    supported = tuple(_unique(lambda t=t: _supported(domain, t, rnd), per_topic, key=lambda x: x[0]) for t in topics)
    chunks = []
    for doc_no, source in enumerate(domain.sources):
        for para in range(1, 17):
            chunks.append((f"{source}-{doc_no + 1:02d}#{para}", source, rnd.choice(rnd.choice(supported))[1]))
    return DomainWording(
        domain=domain,
        seed=seed,
        topics=topics,
        supported=supported,
        trivial=tuple(_render(TRIVIAL_CLAIMS, domain, t, rnd, 8) for t in topics),
        questions=tuple(_render(GENERIC_QUESTIONS, domain, t, rnd, 12) for t in topics),
        family_questions=tuple(tuple(_render(f.questions, domain, t, rnd, 6) for t in topics) for f in FAMILY_LIST),
        unanswerable=tuple(_render(UNANSWERABLE_QUESTIONS, domain, t, rnd, 8) for t in topics),
        abstentions=_render(ABSTENTIONS, domain, None, rnd, 32),
        chunks=tuple(chunks),
    )
