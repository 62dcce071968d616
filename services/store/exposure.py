"""Blind review's guard on the reads that show a claim's verdict: issue members, exemplars and traces.

Any reader may be the reviewer holding a claim, so a read that shows the verdict of a claim reserved and not
yet labelled marks that reservation exposed. Its label is then kept but not counted as blind
(services/review/queue.py). One read query per call; a write only when a reservation was live.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.store.backends import Store

MEMBERS, EXEMPLAR, TRACE = "issue members", "exemplar", "trace"


def note_shown(store: Store, claim_keys: Iterable[str], via: str) -> int:
    """Mark the live, unlabelled reservations of ``claim_keys`` exposed by a read ``via``; returns how many."""
    keys = sorted(set(claim_keys))
    if not keys:
        return 0
    held = store.query(
        "SELECT token, claim_key FROM review_reservations WHERE claim_key IN {keys:Array(String)} "
        "AND expires_at > now64(3) AND (claim_key, reviewer) NOT IN "
        "(SELECT claim_key, reviewer FROM review_labels WHERE role = 'reviewer' AND claim_key IN {keys:Array(String)})",
        {"keys": keys},
    )
    if held:
        store.insert("review_exposures", [{"token": r["token"], "claim_key": r["claim_key"], "via": via} for r in held])
    return len(held)


def exposed_by(store: Store, claim_key: str, reviewer: str) -> list[str]:
    """The reads that showed the claim with its verdict while ``reviewer`` held it, in any of their reservations
    of it (empty: still blind)."""
    rows = store.query(
        "SELECT DISTINCT via FROM review_exposures WHERE claim_key = {k:String} AND token IN (SELECT token FROM "
        "review_reservations WHERE claim_key = {k:String} AND reviewer = {r:String}) ORDER BY via",
        {"k": claim_key, "r": reviewer},
    )
    return [r["via"] for r in rows]
