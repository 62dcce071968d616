"""Suggested merges, as Sentry suggests similar issues: two issues whose centroids are close and whose claims are
each other's nearest neighbours are likely one failure mode split in two. Close centroids alone are not enough:
two fine-grained failures side by side are as close as one failure's two halves, but their claims link across
far less (clustering/neighbours.py; measured in docs/performance.md#merge-suggestions), and how much is "far"
depends on how much neighbouring issues of the same clustering link anyway (the background). Each suggestion carries
its evidence: the centroids' cosine similarity, the link ratio beside the ratio it needed, and the words both
issues' titles and keywords use."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from clustering.issue import IssueRecord

MIN_SIMILARITY = 0.70  # cosine of unit centroids; below it, linked pairs were as often two intents as one (benched)
# the link ratio a pair needs: 0.13 at similarity 0.85, and 0.04 more (or less) per 0.1 less (or more) similarity
LINKS_AT_085, LINKS_PER_SIMILARITY = 0.13, 0.4
# A pair's links are weighed against what neighbouring issues' claims share anyway in the same clustering (issues
# small against the 15 neighbours, or a domain the model holds loosely, link every neighbouring pair more): the
# upper quartile of the link ratio over pairs of live issues at centroid cosine >= 0.6, and a pair needs 2.75 times it.
# Fewer than 20 such pairs set no level. Measured in docs/performance.md#merge-suggestions.
BACKGROUND_SIMILARITY, BACKGROUND_QUANTILE, BACKGROUND_TIMES, BACKGROUND_MIN_PAIRS = 0.6, 0.75, 2.75, 20
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
    needed: float  # the links the rule asked of this pair: by its similarity, or BACKGROUND_TIMES the background

    def as_dict(self) -> dict:
        return asdict(self)


def words(record: IssueRecord) -> set[str]:
    text = " ".join([record.name, *record.keywords]).lower()
    return {w for w in _WORD.findall(text) if w not in _COMMON}


def links_needed(similarity: float) -> float:
    """The closer the centroids, the fewer links it takes."""
    return LINKS_AT_085 - LINKS_PER_SIMILARITY * (similarity - 0.85)


def pair_links(a: IssueRecord, b: IssueRecord) -> float:
    """The ratio is symmetric, but each issue keeps only its most linked few, and issues from different runs hold
    different lists: either side's record counts, so a pair is suggested on both pages or neither."""
    return max(a.neighbours.get(b.issue_id, 0.0), b.neighbours.get(a.issue_id, 0.0))


def _comparable(record: IssueRecord, other: IssueRecord) -> bool:
    return (
        not other.merged_into
        and other.config_name == record.config_name
        and other.centroid is not None
        and 0 < len(other.centroid) == len(record.centroid or ())  # a record without one compares with none
    )


def link_background(record: IssueRecord, others: Sequence[IssueRecord]) -> float:
    """The link ratio neighbouring live issues of ``record``'s configuration share anyway (see BACKGROUND_*);
    a pair neither issue keeps among its most linked counts 0. 0 when there are too few such pairs to tell."""
    live = list({r.issue_id: r for r in [record, *others] if _comparable(record, r)}.values())
    if len(live) < 2:
        return 0.0
    centroids = np.asarray([r.centroid for r in live], dtype=np.float32)
    a, b = np.triu_indices(len(live), 1)
    near = (centroids[a] * centroids[b]).sum(axis=1) >= BACKGROUND_SIMILARITY
    if near.sum() < BACKGROUND_MIN_PAIRS:
        return 0.0
    return float(np.quantile([pair_links(live[i], live[j]) for i, j in zip(a[near], b[near])], BACKGROUND_QUANTILE))


def suggest_merges(
    record: IssueRecord,
    others: Sequence[IssueRecord],
    min_similarity: float = MIN_SIMILARITY,
    n: int = SHOWN,
    need_links: bool = True,
    background: float | None = None,
    background_times: float = BACKGROUND_TIMES,
) -> list[MergeCandidate]:
    """The live issues of the same clustering configuration likely the same failure as ``record``, most similar
    first. ``need_links=False`` is the rule before links (centroid similarity alone), kept for bench/clustering.py.
    ``background``: ``link_background(record, others)``, when the caller has it already; ``background_times``: the
    multiple of it a pair's links must reach (bench/clustering.py compares others)."""
    if not record.centroid or record.merged_into:
        return []
    if need_links and background is None:
        background = link_background(record, others)
    floor = background_times * (background or 0.0)
    me = np.asarray(record.centroid, dtype=np.float32)
    mine = words(record)
    found = []
    for other in others:
        if other.issue_id == record.issue_id or not _comparable(record, other):
            continue
        similarity = float(me @ np.asarray(other.centroid, dtype=np.float32))
        links = pair_links(record, other)
        needed = max(links_needed(similarity), floor) if need_links else 0.0
        if similarity >= min_similarity and links >= needed:
            found.append(
                MergeCandidate(
                    other.issue_id,
                    other.name,
                    round(similarity, 3),
                    round(links, 3),
                    tuple(sorted(mine & words(other))),
                    round(needed, 3),
                )
            )
    return sorted(found, key=lambda c: (-c.similarity, c.issue_id))[:n]


def merge_groups(records: Sequence[IssueRecord], **rule) -> dict[str, str]:
    """Every suggestion accepted: each issue's group, the smallest issue id its suggestions join it to, directly or
    through others (bench/clustering.py counts issues before and after). ``rule``: suggest_merges' keywords."""
    parent = {r.issue_id: r.issue_id for r in records}

    def root(i: str) -> str:
        while parent[i] != i:
            i = parent[i]
        return i

    backgrounds: dict[str, float] = {}  # per configuration: computed once, not once per record
    for record in records:
        if record.config_name not in backgrounds and record.centroid:
            backgrounds[record.config_name] = link_background(record, records)
        for candidate in suggest_merges(record, records, background=backgrounds.get(record.config_name), **rule):
            a, b = root(record.issue_id), root(candidate.issue_id)
            parent[max(a, b)] = min(a, b)
    return {i: root(i) for i in parent}
