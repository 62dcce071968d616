"""Issue titles and subtitles: the failing claim itself as a sentence, and what sets the issue apart.

The title (``name``) quotes the issue's most representative claim (its first exemplar: the
firmest member closest to the centroid), cleaned by the normalisation table so volatile
numbers and ids read as placeholders, cut at a word boundary, and phrased by the dominant
verdict, e.g. ``"the robot vacuum empties itself" contradicts review-digest`` (Sentry titles an
issue with the error itself). Titles are unique within a run: a clash takes the next exemplar.

The subtitle holds the class-based TF-IDF keywords (BERTopic: all texts of one cluster form
one document; a term scores high when it is frequent in the cluster and rare across
clusters), the dominant verdict, route, first failed stage and any version the issue
concentrates on (compared with the other claims on its routes: a version the route always
runs says nothing), e.g. ``refund windows · contradicted · billing-faq · claim_generation``.
Titles are presentation: issue ids never depend on them (clustering/track.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from clustering.normalize import PLACEHOLDERS, normalize

_PLACEHOLDER_WORDS = {p.strip("<>") for p in PLACEHOLDERS}
_MORE_STOP_WORDS = {"don", "does", "did", "doesn", "isn", "ll", "ve"}


def stop_words() -> list[str]:
    from sklearn.feature_extraction.text import (
        ENGLISH_STOP_WORDS,
    )  # ~170 MB: only where issues are named, not in ingest

    return sorted(ENGLISH_STOP_WORDS | _PLACEHOLDER_WORDS | _MORE_STOP_WORDS)


SEPARATOR = " · "
TITLE_MAX_CHARS = 60  # of the quoted claim; longer claims are cut at a word boundary with "…"
UNNAMED = "unnamed failures"
# the title's phrasing per dominant verdict; {source} is the quoted claim's source id
PHRASES = {
    "contradicted": '"{claim}" contradicts {source}',
    "unsupported": '"{claim}" has no support',
    "stale": '"{claim}" from a superseded source',
    "overreach": '"{claim}" overstates its source',
    "no_source": '"{claim}" with no retrieved source',
}
_TRAILING = " .,;:!?-–—"


@dataclass(frozen=True)
class Facets:
    verdict: str | None
    route: str | None
    stage: str | None
    versions: tuple[tuple[str, str], ...]  # (key, value) the issue concentrates on

    @property
    def meaning(self) -> dict[str, str | None]:
        """What a title says about the failure: the verdict that phrases it and its family (the failed stage).
        While these hold, a re-cluster keeps the title (clustering/track.py)."""
        return {"verdict": self.verdict, "stage": self.stage}


NO_FACETS = Facets(None, None, None, ())


@dataclass(frozen=True)
class IssueName:
    name: str  # the title
    keywords: tuple[str, ...]
    facets: Facets
    subtitle: str = ""


def quoted(text: str | None, limit: int = TITLE_MAX_CHARS) -> str:
    """A claim as a title quotes it: normalised (placeholders for numbers, ids, dates), no double quotes, no
    trailing punctuation, cut at the last word boundary within ``limit`` characters with "…"."""
    clean = normalize((text or "").replace('"', "'")).strip(_TRAILING)
    if len(clean) <= limit:
        return clean
    cut = clean[: limit + 1]
    space = cut.rfind(" ")
    cut = cut[:space] if space >= limit // 2 else clean[:limit]
    return cut.rstrip(_TRAILING) + "…"


@dataclass(frozen=True)
class VersionShares:
    """How common each (version key, value) is among the run's claims on each route: the baseline for lift.

    Per route, because every route runs its own versions: against all claims, an issue on one
    route would "concentrate" on every version that route runs and its name would list them all.
    """

    counts: Counter  # (route, key, value) -> claims
    totals: Counter  # route -> claims

    @classmethod
    def of(cls, everyone: Sequence[Mapping]) -> VersionShares:
        counts = Counter((m.get("route"), k, v) for m in everyone for k, v in (m.get("versions") or {}).items())
        return cls(counts, Counter(m.get("route") for m in everyone))

    def share(self, key: str, value: str, routes: Mapping | None = None) -> float:
        """Expected share of claims with key=value among claims spread over ``routes`` (route -> claims) as
        given; over all claims when None."""
        if routes is None:
            total = sum(self.totals.values())
            return sum(n for (_, k, v), n in self.counts.items() if (k, v) == (key, value)) / max(total, 1)
        weight = sum(routes.values())
        return sum(
            n / max(weight, 1) * self.counts[(route, key, value)] / max(self.totals[route], 1)
            for route, n in routes.items()
        )


class IssueNamer:
    def __init__(self, n_keywords: int = 3, facet_min_share: float = 0.6, version_min_lift: float = 1.5):
        self.n_keywords = n_keywords
        self.facet_min_share = facet_min_share
        self.version_min_lift = version_min_lift

    def keywords(self, cluster_texts: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
        """Top c-TF-IDF terms per cluster (unigrams and bigrams), without terms repeated inside a bigram."""
        documents = [" ".join(texts) for texts in cluster_texts]
        if not any(doc.strip() for doc in documents):
            return [() for _ in documents]
        from sklearn.feature_extraction.text import CountVectorizer

        vectorizer = CountVectorizer(ngram_range=(1, 2), stop_words=stop_words(), token_pattern=r"(?u)\b[^\W\d_]{2,}\b")
        try:
            counts = vectorizer.fit_transform(documents).astype(float)
        except ValueError:  # every word is a stop word
            return [() for _ in documents]
        terms = vectorizer.get_feature_names_out()
        tf = counts.multiply(1.0 / np.maximum(counts.sum(axis=1), 1)).tocsr()
        term_freq = np.asarray(counts.sum(axis=0)).ravel()
        average_words = counts.sum() / max(len(documents), 1)
        idf = np.log1p(average_words / np.maximum(term_freq, 1))
        scores = tf.multiply(idf).tocsr()
        out = []
        for row in range(len(documents)):
            line = scores.getrow(row)
            # ties go to bigrams (more specific), then alphabetical for determinism
            ranked = sorted(
                zip(line.data.tolist(), line.indices.tolist()),
                key=lambda pair: (-round(pair[0], 12), -terms[pair[1]].count(" "), terms[pair[1]]),
            )
            out.append(self._pick([terms[i] for _, i in ranked]))
        return out

    def _pick(self, ranked: list[str]) -> tuple[str, ...]:
        chosen: list[str] = []
        for term in ranked:
            words = set(term.split())
            if any(words & set(c.split()) for c in chosen):
                continue  # "refund" after "refund window" adds nothing
            chosen.append(term)
            if sum(len(c.split()) for c in chosen) >= self.n_keywords:
                break
        return tuple(chosen)

    def facets(self, members: Sequence[Mapping], shares: VersionShares) -> Facets:
        """Dominant verdict, route, stage; versions over-represented in the issue compared with the other
        claims on the same routes."""
        return Facets(
            verdict=self._dominant([m.get("verdict") for m in members]),
            route=self._dominant([m.get("route") for m in members]),
            stage=self._dominant([m.get("stage") for m in members]),
            versions=self._concentrated_versions(members, shares),
        )

    def _dominant(self, values: list) -> str | None:
        present = [v for v in values if v]
        if not present:
            return None
        value, count = Counter(present).most_common(1)[0]
        return value if count / len(values) >= self.facet_min_share else None

    def _concentrated_versions(self, members: Sequence[Mapping], overall: VersionShares) -> tuple:
        inside = Counter((k, v) for m in members for k, v in (m.get("versions") or {}).items())
        routes = Counter(m.get("route") for m in members)
        picked = []
        for (key, value), count in sorted(inside.items()):
            share = count / len(members)
            base = overall.share(key, value, routes)
            if share >= self.facet_min_share and share >= self.version_min_lift * base:
                picked.append((key, value))
        return tuple(picked)

    def title(
        self, claim: str | None, facets: Facets, source: str | None = None, keywords: tuple[str, ...] = ()
    ) -> str:
        """The quoted claim phrased by the dominant verdict; the keywords when there is no claim text."""
        text = quoted(claim)
        if not text:
            return " ".join(x for x in (facets.verdict, " ".join(keywords)) if x) or UNNAMED
        phrase = PHRASES.get(facets.verdict or "", '"{claim}"')
        return phrase.format(claim=text, source=source or "its source")

    @staticmethod
    def subtitle(keywords: tuple[str, ...], facets: Facets) -> str:
        parts = [
            " ".join(keywords),
            facets.verdict,
            facets.route,
            facets.stage,
            *(f"{k}={v}" for k, v in facets.versions),
        ]
        return SEPARATOR.join(p for p in parts if p)

    def name(
        self, keywords: tuple[str, ...], facets: Facets, claim: str | None = None, source: str | None = None
    ) -> IssueName:
        return IssueName(self.title(claim, facets, source, keywords), keywords, facets, self.subtitle(keywords, facets))

    def name_all(
        self,
        cluster_texts: Sequence[Sequence[str]],
        cluster_facts: Sequence[Sequence[Mapping]],
        everyone: Sequence[Mapping],
        representatives: Sequence[Sequence[Mapping]] | None = None,
    ) -> list[IssueName]:
        """One name per cluster; ``cluster_facts`` hold each member's verdict, route, stage and versions;
        ``representatives`` each cluster's candidate claims for its title, most representative first
        (``{"text", "verdict", "source_id"}``). Larger clusters choose first; a title already taken goes to the
        next candidate, and with none left the keywords tell the two apart."""
        keywords = self.keywords(cluster_texts)
        shares = VersionShares.of(everyone)
        facets = [self.facets(facts, shares) for facts in cluster_facts]
        reps = list(representatives or [[] for _ in cluster_facts])
        names: list[IssueName | None] = [None] * len(cluster_facts)
        taken: set[str] = set()
        for i in sorted(range(len(cluster_facts)), key=lambda i: (-len(cluster_facts[i]), i)):
            candidates: Sequence[tuple[str | None, str | None]] = self._candidates(reps[i], facets[i]) or [(None, None)]
            titles = [self.title(text, facets[i], source, keywords[i]) for text, source in candidates]
            title = next((t for t in titles if t not in taken), None)
            if title is None:
                title = f"{titles[0]} ({' '.join(keywords[i]) or 'another'})"
                n = 2
                while title in taken:
                    title, n = f"{titles[0]} ({n})", n + 1
            taken.add(title)
            names[i] = IssueName(title, keywords[i], facets[i], self.subtitle(keywords[i], facets[i]))
        return names  # type: ignore[return-value]

    @staticmethod
    def _candidates(representatives: Sequence[Mapping], facets: Facets) -> list[tuple[str, str | None]]:
        """(text, source) of the claims that can title the issue: those with the issue's verdict first."""
        usable = [r for r in representatives if (r.get("text") or "").strip()]
        matching = [r for r in usable if facets.verdict is None or r.get("verdict") == facets.verdict]
        ordered = matching + [r for r in usable if r not in matching]
        return [(r["text"], r.get("source_id")) for r in ordered]
