"""Suggested merges, as Sentry suggests similar issues: two issues whose centroids are close and whose claims are
each other's nearest neighbours are likely one failure mode split in two. Close centroids alone are not enough:
two fine-grained failures side by side are as close as one failure's two halves, but their claims link across
far less (clustering/neighbours.py; measured in docs/performance.md#merge-suggestions). Each suggestion carries
its evidence: the centroids' cosine similarity, the link ratio, and the words both issues' titles and keywords use."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from clustering.issue import IssueRecord

MIN_SIMILARITY = 0.70  # cosine of unit centroids; below it, linked pairs were as often two intents as one (benched)
# the link ratio a pair needs: 0.13 at similarity 0.85, and 0.04 more (or less) per 0.1 less (or more) similarity
LINKS_AT_085, LINKS_PER_SIMILARITY = 0.13, 0.4
SHOWN = 3
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
_COMMON = {"the", "and", "for", "with", "that", "this", "are", "was", "not", "num", "from", "its", "claims", "claim"}


@dataclass(frozen=True)
class MergeCandidate:
    issue_id: str
    name: str
    similarity: float  # cosine of the two centroids
    links: float  # links between their claims' nearest neighbours per link within either (clustering/neighbours.py)
    shared_words: tuple[str, ...]  # in both issues' titles and keywords

    def as_dict(self) -> dict:
        return asdict(self)


def words(record: IssueRecord) -> set[str]:
    text = " ".join([record.name, *record.keywords]).lower()
    return {w for w in _WORD.findall(text) if w not in _COMMON}


def links_needed(similarity: float) -> float:
    """The closer the centroids, the fewer links it takes."""
    return LINKS_AT_085 - LINKS_PER_SIMILARITY * (similarity - 0.85)


def suggest_merges(record: IssueRecord, others: Sequence[IssueRecord], min_similarity: float = MIN_SIMILARITY,
                   n: int = SHOWN, need_links: bool = True) -> list[MergeCandidate]:
    """The live issues of the same clustering configuration likely the same failure as ``record``, most similar
    first. ``need_links=False`` is the rule before links (centroid similarity alone), kept for bench/clustering.py."""
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
        # the ratio is symmetric, but each issue keeps only its most linked few, and issues from different runs
        # hold different lists: either side's record counts, so a pair is suggested on both pages or neither
        links = max(record.neighbours.get(other.issue_id, 0.0), other.neighbours.get(record.issue_id, 0.0))
        if similarity >= min_similarity and (not need_links or links >= links_needed(similarity)):
            found.append(MergeCandidate(other.issue_id, other.name, round(similarity, 3), round(links, 3),
                                        tuple(sorted(mine & words(other)))))
    return sorted(found, key=lambda c: (-c.similarity, c.issue_id))[:n]


def merge_groups(records: Sequence[IssueRecord], **rule) -> dict[str, str]:
    """Every suggestion accepted: each issue's group, the smallest issue id its suggestions join it to, directly or
    through others (bench/clustering.py counts issues before and after). ``rule``: suggest_merges' keywords."""
    parent = {r.issue_id: r.issue_id for r in records}

    def root(i: str) -> str:
        while parent[i] != i:
            i = parent[i]
        return i

    for record in records:
        for candidate in suggest_merges(record, records, **rule):
            a, b = root(record.issue_id), root(candidate.issue_id)
            parent[max(a, b)] = min(a, b)
    return {i: root(i) for i in parent}
