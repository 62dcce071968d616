"""Issue names: class-based TF-IDF keywords plus the facets that dominate the issue.

c-TF-IDF (BERTopic): all texts of one cluster form one document; a term scores high when
it is frequent in the cluster and rare across clusters, so the keywords are what sets the
cluster apart. The name prefixes the dominant verdict and appends the dominant route,
first failed stage and any version the issue concentrates on (compared with the other
claims on its routes: a version the route always runs says nothing), e.g.
``contradicted refund windows · billing-faq · claim_generation``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

from clustering.normalize import PLACEHOLDERS

_PLACEHOLDER_WORDS = {p.strip("<>") for p in PLACEHOLDERS}
STOP_WORDS = sorted(ENGLISH_STOP_WORDS | _PLACEHOLDER_WORDS | {"don", "does", "did", "doesn", "isn", "ll", "ve"})
SEPARATOR = " · "


@dataclass(frozen=True)
class Facets:
    verdict: str | None
    route: str | None
    stage: str | None
    versions: tuple[tuple[str, str], ...]  # (key, value) the issue concentrates on


@dataclass(frozen=True)
class IssueName:
    name: str
    keywords: tuple[str, ...]
    facets: Facets


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
        return sum(n / max(weight, 1) * self.counts[(route, key, value)] / max(self.totals[route], 1)
                   for route, n in routes.items())


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
        vectorizer = CountVectorizer(ngram_range=(1, 2), stop_words=STOP_WORDS, token_pattern=r"(?u)\b[^\W\d_]{2,}\b")
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
            ranked = sorted(zip(line.data.tolist(), line.indices.tolist()),
                            key=lambda pair: (-round(pair[0], 12), -terms[pair[1]].count(" "), terms[pair[1]]))
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

    def name(self, keywords: tuple[str, ...], facets: Facets) -> IssueName:
        head = " ".join(x for x in (facets.verdict, " ".join(keywords)) if x) or "unnamed failures"
        tail = [facets.route, facets.stage, *(f"{k}={v}" for k, v in facets.versions)]
        return IssueName(SEPARATOR.join([head, *(t for t in tail if t)]), keywords, facets)

    def name_all(self, cluster_texts: Sequence[Sequence[str]], cluster_facts: Sequence[Sequence[Mapping]],
                 everyone: Sequence[Mapping]) -> list[IssueName]:
        """One name per cluster; ``cluster_facts`` hold each member's verdict, route, stage and versions."""
        keywords = self.keywords(cluster_texts)
        shares = VersionShares.of(everyone)
        return [self.name(words, self.facets(facts, shares)) for words, facts in zip(keywords, cluster_facts)]
