"""Suggested merges, as Sentry suggests similar issues: an issue whose centroid lies close to another's is likely the
same failure mode split in two. Each suggestion carries its evidence: the centroids' cosine similarity and the
words both issues' titles and keywords use."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from clustering.issue import IssueRecord

MIN_SIMILARITY = 0.85  # cosine of unit centroids; issues the tracker keeps apart sit well below (not yet benched)
SHOWN = 3
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_COMMON = {"the", "and", "for", "with", "that", "this", "are", "was", "not", "num", "from", "its", "claims", "claim"}


@dataclass(frozen=True)
class MergeCandidate:
    issue_id: str
    name: str
    similarity: float  # cosine of the two centroids
    shared_words: tuple[str, ...]  # in both issues' titles and keywords

    def as_dict(self) -> dict:
        return asdict(self)


def words(record: IssueRecord) -> set[str]:
    text = " ".join([record.name, *record.keywords]).lower()
    return {w for w in _WORD.findall(text) if w not in _COMMON}


def suggest_merges(record: IssueRecord, others: Sequence[IssueRecord], min_similarity: float = MIN_SIMILARITY,
                   n: int = SHOWN) -> list[MergeCandidate]:
    """The live issues of the same clustering configuration nearest to ``record``, most similar first."""
    if not record.centroid or record.merged_into:
        return []
    me = np.asarray(record.centroid, dtype=np.float32)
    mine = words(record)
    found = []
    for other in others:
        if (other.issue_id == record.issue_id or other.merged_into or other.config_name != record.config_name
                or not other.centroid or len(other.centroid) != len(me)):
            continue
        similarity = float(me @ np.asarray(other.centroid, dtype=np.float32))
        if similarity >= min_similarity:
            found.append(MergeCandidate(other.issue_id, other.name, round(similarity, 3),
                                        tuple(sorted(mine & words(other)))))
    return sorted(found, key=lambda c: (-c.similarity, c.issue_id))[:n]


def merge_groups(centroids: Sequence[Sequence[float]], min_similarity: float = MIN_SIMILARITY,
                 n: int = SHOWN) -> list[int]:
    """Every suggestion accepted: each issue's group, the smallest index its top ``n`` suggestions join it to,
    directly or through others (bench/clustering.py counts issues before and after)."""
    if len(centroids) == 0:
        return []
    vectors = np.asarray(centroids, dtype=np.float32)
    parent = list(range(len(vectors)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    for i in range(len(vectors)):
        for j in np.argsort(-similarity[i])[:n]:
            if similarity[i, j] >= min_similarity:
                a, b = root(i), root(int(j))
                parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(vectors))]
