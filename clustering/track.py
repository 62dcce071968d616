"""Stable issue identity across runs: match this run's clusters to the issues already known.

A cluster inherits an issue's id when their members overlap (Jaccard on claim ids, or most
of one coming from the other) and it holds more of the issue's claims than any other cluster, or,
for an issue none of whose members are in this run any more, when their centroids are close (a
resolved failure family that recurs). Every other
cluster is a new issue with a deterministic id: config name + its smallest member ids, so
the same data, in any arrival order, gets the same ids. Merges and splits are recorded on
both sides; a triaged issue is preferred as the survivor of a merge and is never
absorbed without a recorded ``merged_into``.

An issue keeps its title across runs while the claim it quotes means the same failure: the
dominant verdict and the failed stage it was named with (``Facets.meaning``, kept in the
``created`` or ``renamed`` entry of its history). When either changes, this run's title
replaces it and the history records the rename, from what, to what and why.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np

from clustering.config import ClusteringConfig
from clustering.issue import COMPLETE_SAMPLE, NEW, ONGOING, REGRESSED, RESOLVED, IssueRecord, hash_of
from clustering.run import ClusteringRun, ClusterSummary

OVERLAP, CENTROID = 0, 1  # a link by shared members ranks before one by centroids alone


class _Link(NamedTuple):
    tier: int  # OVERLAP or CENTROID
    score: float
    share: float  # of the issue's live claims in the cluster (1.0 for a centroid link)
    cluster: int  # cluster index in the run
    issue: int  # position in the known issues matched
    jaccard: float  # 0.0 for a centroid link


class IssueTracker:
    def __init__(self, config: ClusteringConfig):
        self.config = config

    def match(self, previous: Sequence[IssueRecord], run: ClusteringRun, now: datetime) -> list[IssueRecord]:
        """The new state of every issue: this config's issues updated, other configs' passed through.

        Also sets ``cluster_issue_ids_`` (issue id per cluster index of ``run``) and ``changes_``.
        """
        mine = [p for p in previous if p.config_name == run.config_name and p.merged_into is None]
        untouched = [p for p in previous if p not in mine]
        alive = set(run.ids)
        clusters = run.clusters_
        links = self._links(clusters, mine, alive)
        # an issue's id goes only where most of its claims went (its home): a fragment made of a few of its claims
        # must not carry its id and title while the bulk joins another issue
        home: dict[int, int] = {}  # issue position -> cluster index
        for link in sorted(links, key=lambda k: (-k.share, -k.score, k.cluster)):
            home.setdefault(link.issue, link.cluster)
        owner_of: dict[int, IssueRecord] = {}
        taken: set[str] = set()

        # overlap links before centroid links; a triaged issue first, so it survives merges; then strength, then the
        # larger part of the cluster: two issues wholly inside one cluster both score 0.5, and the one the bulk of
        # its claims came from (the issue a page named) continues, not the older one that brought a few dozen
        def precedence(k: _Link) -> tuple:
            issue = mine[k.issue]
            return k.tier, not issue.triaged, -k.score, -k.jaccard, issue.first_seen, issue.issue_id, k.cluster

        for link in sorted(links, key=precedence):
            c, p = link.cluster, link.issue
            if c == home[p] and c not in owner_of and mine[p].issue_id not in taken:
                owner_of[c] = mine[p]
                taken.add(mine[p].issue_id)
        # merges and splits follow member overlap only: looking alike is not enough to absorb an issue. An issue
        # not carried on is merged into whichever issue its home cluster now continues.
        overlaps = [k for k in links if k.tier == OVERLAP]
        by_overlap = {k.issue for k in overlaps}
        best_link = {("p", p): c for p, c in home.items() if p in by_overlap}
        for link in sorted(overlaps, key=lambda k: (-k.score, k.cluster, k.issue)):
            best_link.setdefault(("c", link.cluster), link.issue)

        self.changes_: list[str] = []
        ids = {p.issue_id for p in previous}
        cluster_ids: list[str] = []
        out: list[IssueRecord] = []
        for cluster in clusters:
            prior = owner_of.get(cluster.index)
            if prior is not None:
                out.append(self._continue(prior, cluster, run, now))
            else:
                parent = mine[best_link[("c", cluster.index)]] if ("c", cluster.index) in best_link else None
                issue_id = self._new_id(run.config_name, cluster, ids)
                ids.add(issue_id)
                out.append(self._create(issue_id, cluster, run, now, split_from=parent))
            cluster_ids.append(out[-1].issue_id)
        out = _with_neighbours(out, clusters, cluster_ids)
        for p, record in enumerate(mine):
            if record.issue_id in taken:
                continue
            if ("p", p) in best_link:
                survivor = cluster_ids[best_link[("p", p)]]
                out.append(self._merge(record, survivor, now))
            else:
                out.append(self._resolve(record, now))
        # split_into / absorbed are recorded on the surviving side, too
        out = [self._note_relatives(r, out, now) for r in out]
        self.cluster_issue_ids_ = cluster_ids
        return out + untouched

    def adopt(self, previous: Sequence[IssueRecord], run: ClusteringRun, now: datetime) -> list[IssueRecord]:
        """New issues from a focused run over claims no known issue held: every cluster is new (its id avoids the
        known ones) and nothing known changes. The next full run matches them by their members like any issue."""
        self.changes_ = []
        ids = {p.issue_id for p in previous}
        out = []
        for cluster in run.clusters_:
            issue_id = self._new_id(run.config_name, cluster, ids)
            ids.add(issue_id)
            out.append(self._create(issue_id, cluster, run, now, split_from=None))
        self.cluster_issue_ids_ = [r.issue_id for r in out]
        return _with_neighbours(out, run.clusters_, self.cluster_issue_ids_)

    def _links(self, clusters: list[ClusterSummary], mine: list[IssueRecord], alive: set[str]) -> list[_Link]:
        """Every plausible link between a cluster and a known issue (``mine``'s position)."""
        links: list[_Link] = []
        if not clusters or not mine:
            return links
        cluster_of = {m: c.index for c in clusters for m in c.member_ids}
        sorted_hashes = [np.sort(np.fromiter((hash_of(m) for m in c.member_ids), dtype=np.int64)) for c in clusters]
        centroids = np.stack([c.centroid for c in clusters])
        for p, record in enumerate(mine):
            sample_alive = [m for m in record.member_sample if m in alive]
            if sample_alive:
                shared = Counter(cluster_of[m] for m in sample_alive if m in cluster_of)
                for c, both in sorted(shared.items()):
                    # the cluster's members in the hash range the issue's sketch covers
                    inside = int(np.searchsorted(sorted_hashes[c], record.sample_hash_cap, side="right"))
                    jaccard = both / (len(sample_alive) + inside - both)
                    share_of_issue, share_of_cluster = both / len(sample_alive), both / inside
                    if (
                        jaccard >= self.config.match_min_jaccard
                        or share_of_issue >= self.config.match_min_share
                        or share_of_cluster >= self.config.match_min_share
                    ):
                        links.append(
                            _Link(
                                OVERLAP,
                                max(jaccard, 0.5 * max(share_of_issue, share_of_cluster)),
                                share_of_issue,
                                c,
                                p,
                                jaccard,
                            )
                        )
            elif record.centroid is not None and len(record.centroid) == centroids.shape[1]:
                similarity = centroids @ np.asarray(record.centroid, dtype=np.float32)
                c = int(np.argmax(similarity))
                if similarity[c] >= self.config.match_min_centroid_similarity:
                    links.append(_Link(CENTROID, float(similarity[c]), 1.0, c, p, 0.0))
        return links

    def _member_sample(self, cluster: ClusterSummary) -> tuple[tuple[str, ...], int]:
        """Bottom-k sketch of member ids by hash, and the hash cap it covers (all hashes when complete)."""
        ranked = sorted(cluster.member_ids, key=hash_of)
        k = self.config.member_sample_size
        if len(ranked) <= k:
            return tuple(ranked), COMPLETE_SAMPLE
        return tuple(ranked[:k]), hash_of(ranked[k - 1])

    def _hourly(self, old: Mapping[str, int], new: Mapping[str, int], now: datetime) -> dict[str, int]:
        # overlapping lookback windows see the same hour twice: keep the larger count, drop old hours
        oldest = (now.astimezone(UTC) - timedelta(days=self.config.hourly_days_kept)).strftime("%Y-%m-%dT%H")
        merged = {h: max(old.get(h, 0), new.get(h, 0)) for h in set(old) | set(new) if h >= oldest}
        return dict(sorted(merged.items()))

    def _fields(self, cluster: ClusterSummary, now: datetime) -> dict:
        sample, cap = self._member_sample(cluster)
        return dict(
            name=cluster.name,
            subtitle=cluster.subtitle,
            keywords=tuple(cluster.keywords),
            last_seen=now,
            size=cluster.size,
            routes=dict(cluster.routes),
            centroid=[float(x) for x in cluster.centroid],
            member_sample=sample,
            sample_hash_cap=cap,
            exemplar_ids=tuple(cluster.exemplar_ids),
        )

    def _continue(self, prior: IssueRecord, cluster: ClusterSummary, run: ClusteringRun, now: datetime) -> IssueRecord:
        state = REGRESSED if prior.state in (RESOLVED, REGRESSED) else ONGOING
        history, resolved_in = prior.history, prior.resolved_in
        if prior.state == RESOLVED:
            newer = newer_versions(prior.resolved_in, cluster.member_ids, run)
            if newer is None:  # resolved in the next version: recurring on the resolved one is expected
                state = RESOLVED
            else:
                history, resolved_in = (*history, {"at": _iso(now), "event": "regressed", **newer}), {}
                self.changes_.append(
                    f"{prior.issue_id} regressed: resolved before, failing again ({cluster.size} claims)"
                )
        name, renamed = self._title(prior, cluster, now)
        return replace(
            prior,
            **{**self._fields(cluster, now), "name": name},
            state=state,
            resolved_in=resolved_in,
            hourly_counts=self._hourly(prior.hourly_counts, cluster.hourly_counts, now),
            history=(*history, *renamed),
        )

    def _title(self, prior: IssueRecord, cluster: ClusterSummary, now: datetime) -> tuple[str, tuple[dict, ...]]:
        """The issue's title after this run, and the history entry a rename adds."""
        said, says = title_meaning(prior), cluster.facets.meaning
        if cluster.name == prior.name:
            return prior.name, ()
        if said is None:
            why = "the title's meaning was not recorded (named by an earlier version)"
        else:  # a facet not dominant (None) now or when named says nothing against the title
            moved = [
                f"{facet} {said[facet]} -> {value}"
                for facet, value in says.items()
                if None not in (value, said[facet]) and value != said[facet]
            ]
            if not moved:
                return prior.name, ()
            why = "the representative claim now means another failure: " + ", ".join(moved)
        self.changes_.append(f"{prior.issue_id} renamed: {why}")
        return cluster.name, (
            {"at": _iso(now), "event": "renamed", "from": prior.name, "to": cluster.name, "why": why, **says},
        )

    def _create(
        self, issue_id: str, cluster: ClusterSummary, run: ClusteringRun, now: datetime, split_from: IssueRecord | None
    ) -> IssueRecord:
        history: tuple[dict, ...] = ({"at": _iso(now), "event": "created", **cluster.facets.meaning},)
        if split_from is not None:
            history += ({"at": _iso(now), "event": "split_from", "issue_id": split_from.issue_id},)
            self.changes_.append(f"{issue_id} split from {split_from.issue_id}")
        else:
            self.changes_.append(f"{issue_id} new: {cluster.name} ({cluster.size} claims)")
        return IssueRecord(
            issue_id=issue_id,
            config_name=run.config_name,
            first_seen=now,
            state=NEW,
            hourly_counts=self._hourly({}, cluster.hourly_counts, now),
            split_from=None if split_from is None else split_from.issue_id,
            history=history,
            **self._fields(cluster, now),
        )

    def _merge(self, record: IssueRecord, survivor: str, now: datetime) -> IssueRecord:
        note = " (triaged: its triage carries over to the survivor)" if record.triaged else ""
        self.changes_.append(f"{record.issue_id} merged into {survivor}{note}")
        return replace(
            record,
            state=RESOLVED,
            merged_into=survivor,
            history=(*record.history, {"at": _iso(now), "event": "merged_into", "issue_id": survivor}),
        )

    def _resolve(self, record: IssueRecord, now: datetime) -> IssueRecord:
        if record.state == RESOLVED:
            return record
        self.changes_.append(f"{record.issue_id} resolved: no failing claims in this run")
        return replace(
            record, state=RESOLVED, size=0, history=(*record.history, {"at": _iso(now), "event": "resolved"})
        )

    def _note_relatives(self, record: IssueRecord, everything: list[IssueRecord], now: datetime) -> IssueRecord:
        absorbed = [r for r in everything if r.merged_into == record.issue_id and _happened(r, "merged_into", now)]
        spawned = [r for r in everything if r.split_from == record.issue_id and _happened(r, "split_from", now)]
        if not absorbed and not spawned:
            return record
        events = [{"at": _iso(now), "event": "absorbed", "issue_id": r.issue_id} for r in absorbed]
        events += [{"at": _iso(now), "event": "split_into", "issue_id": r.issue_id} for r in spawned]
        triaged = record.triaged or any(r.triaged for r in absorbed)
        return replace(record, triaged=triaged, history=(*record.history, *events))

    def _new_id(self, config_name: str, cluster: ClusterSummary, taken: set[str]) -> str:
        first = sorted(cluster.member_ids)[:5]
        digest = hashlib.sha256("\n".join([config_name, *first]).encode()).hexdigest()[:12]
        issue_id, n = f"iss-{digest}", 1
        while issue_id in taken:  # a resolved issue left behind with these very members
            n += 1
            issue_id = f"iss-{digest}-{n}"
        return issue_id


def _with_neighbours(
    out: list[IssueRecord], clusters: Sequence[ClusterSummary], cluster_ids: list[str]
) -> list[IssueRecord]:
    """The clusters' issues (the first of ``out``) with their neighbours by issue id, known once all have an id."""
    return [
        replace(r, neighbours={cluster_ids[j]: ratio for j, ratio in c.neighbours.items()})
        for r, c in zip(out, clusters)
    ] + out[len(clusters) :]


def newer_versions(resolved_in: Mapping[str, str], member_ids: Sequence[str], run: ClusteringRun) -> dict | None:
    """What makes a recurrence a regression: {} for an issue resolved outright; for one resolved in the next version,
    {"versions": ...} of a member on a version other than the one current at resolve time; None when none is."""
    if not resolved_in:
        return {}
    members = set(member_ids)
    for claim in run.claims:
        if claim.id in members and any(claim.versions.get(k, v) != v for k, v in resolved_in.items()):
            return {"versions": {k: claim.versions.get(k, "") for k in resolved_in}}
    return None


def title_meaning(record: IssueRecord) -> dict | None:
    """What the issue's title says (Facets.meaning) as recorded when it was named; None when no entry says."""
    for entry in reversed(record.history):
        if entry.get("event") in ("created", "renamed") and "verdict" in entry:
            return {"verdict": entry.get("verdict"), "stage": entry.get("stage")}
    return None


def _iso(ts: datetime) -> str:
    return ts.isoformat()


def _happened(record: IssueRecord, event: str, now: datetime) -> bool:
    return any(h.get("event") == event and h.get("at") == _iso(now) for h in record.history)
