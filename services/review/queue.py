"""Slots to label: reservation with a timeout, blind labelling, then the reveal.

A queued claim has N slots (one per reviewer it needs). Reserving one is a race that needs no
lock across processes: each reviewer writes a reservation, then reads the claim's reservations
back in write order; a reservation wins unless an earlier winner was still live when it was made.
Every reader computes the same winner, so two reviewers never hold the same slot.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import orjson

from services.core.errors import Conflict, NotFound
from services.core.names import identity_key
from services.core.readmodel import closed
from services.review.labels import ADJUDICATOR, REVIEWER, ReviewedClaim, human_label

ANSWER_EXCERPT_CHARS = 1200
CANDIDATES_PER_TRY = 50


class QueueStore(Protocol):
    def open_claims(self, reviewer: str, limit: int) -> list[dict]: ...
    def reserve(self, row: Mapping) -> None: ...
    def reservations(self, claim_keys: list[str], live_after: datetime) -> list[dict]: ...
    def reservation(self, token: str) -> dict | None: ...
    def held_by(self, reviewer: str, now: datetime) -> list[dict]: ...
    def labels(self, claim_keys: list[str]) -> list[dict]: ...
    def save_label(self, row: Mapping) -> None: ...
    def queued(self, claim_key: str) -> dict | None: ...
    def claim_context(self, event_id: str, claim_idx: int) -> dict | None: ...
    def exposed_by(self, claim_key: str, reviewer: str) -> list[str]: ...


@closed
@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    source_id: str
    text: str


@closed
@dataclass(frozen=True)
class Assignment:
    """What a reviewer sees before labelling: never the verifier's verdict or anyone's label."""

    slot: str  # the reservation token; label it with POST /api/review/{slot}/label
    claim_key: str
    route: str
    question: str
    answer_excerpt: str
    claim: str
    chunks: tuple[Chunk, ...]
    reviewer: str
    expires_at: datetime
    guide_version: str


@closed
@dataclass(frozen=True)
class OtherLabel:
    reviewer: str
    role: str
    label: str
    span: str


@closed
@dataclass(frozen=True)
class Revealed:
    """The answer to a label: what was saved, then what the reviewer could not see before."""

    claim_key: str
    label: str
    span: str
    chunk_id: str
    reviewer: str
    role: str
    guide_version: str
    labeled_at: datetime
    verifier_verdict: str
    verifier_span: str
    others: tuple[OtherLabel, ...]
    settled: str | None
    # The reads that showed the verdict while the reviewer held the claim (services/store/exposure.py). Not empty:
    # the label is kept but not blind, so it fills no slot and counts in no agreement.
    exposed_by: tuple[str, ...] = ()


def winners(reservations: Iterable[Mapping]) -> dict[tuple[str, int], Mapping]:
    """(claim_key, slot_no) -> the winning reservation, from reservations in write order."""
    won: dict[tuple[str, int], Mapping] = {}
    for r in reservations:
        key = (r["claim_key"], int(r["slot_no"]))
        held = won.get(key)
        if held is None or held["expires_at"] <= r["reserved_at"]:
            won[key] = r
    return won


def chunks_of(evidence_json: str) -> tuple[Chunk, ...]:
    try:
        evidence = orjson.loads(evidence_json or "[]")
    except orjson.JSONDecodeError:
        return ()
    return tuple(
        Chunk(str(e.get("chunk_id", "")), str(e.get("source_id") or ""), str(e.get("text") or ""))
        for e in evidence
        if isinstance(e, dict)
    )


def find_span(span: str, chunks: tuple[Chunk, ...]) -> str:
    """The chunk that quotes ``span`` verbatim; a ValueError when none does."""
    for chunk in chunks:
        if span and span in chunk.text:
            return chunk.chunk_id
    if not any(c.text for c in chunks):
        raise ValueError("this claim's answer carries no evidence text, so no span can be quoted; label without --span")
    raise ValueError(
        f"span {span[:80]!r} is not quoted verbatim from any of the claim's evidence chunks; "
        "copy it exactly from one chunk"
    )


class ReviewQueue:
    def __init__(self, store: QueueStore, reservation: timedelta, guide_version: str):
        self.store = store
        self.reservation = reservation
        self.guide_version = guide_version
        self._lock = threading.Lock()  # in one process, no reservation is wasted on a lost race

    # -- reserving -----------------------------------------------------------------------------
    def next(self, reviewer: str, now: datetime) -> Assignment:
        """The reviewer's live slot if they hold one, else a newly reserved one; NotFound when none is open. A reviewer
        is their name's identity key (``Alice``, ``alice`` and ``alice\u200b`` are one person, as at sign-off), so
        one person never fills two of a claim's slots."""
        reviewer = identity_key(reviewer)
        if not reviewer:
            raise ValueError("reviewer must be a non-empty name")
        with self._lock:
            held = self._held(reviewer, now)
            if held is not None and (shown := self._shown(held)) is not None:
                return shown
            candidates = self.store.open_claims(reviewer, CANDIDATES_PER_TRY)
            reservations = self.store.reservations([c["claim_key"] for c in candidates], self._horizon(now))
            won = {k: r for k, r in winners(reservations).items() if r["expires_at"] > now}
            for claim in candidates:
                key = claim["claim_key"]
                taken = set(claim["filled"]) | {slot for (k, slot) in won if k == key}
                for slot in (s for s in range(int(claim["reviewers"])) if s not in taken):
                    mine = self._try(key, slot, reviewer, now)
                    if mine is not None:
                        shown = self._shown(mine)
                        if shown is not None:
                            return shown
                        break  # its answer is gone (retention): try the next claim
        raise NotFound(
            f"no claim is waiting for {reviewer}: every queued claim is labelled, held by another "
            "reviewer or already labelled by you; queue more with `claimwatch review sample`"
        )

    def _horizon(self, now: datetime) -> datetime:
        # A live loser was made within one reservation length; its winner was live then.
        return now - 2 * self.reservation

    def _try(self, claim_key: str, slot: int, reviewer: str, now: datetime) -> Mapping | None:
        token = uuid.uuid4().hex
        self.store.reserve(
            {
                "token": token,
                "claim_key": claim_key,
                "slot_no": slot,
                "reviewer": reviewer,
                "reserved_at": now,
                "expires_at": now + self.reservation,
            }
        )
        won = winners(self.store.reservations([claim_key], self._horizon(now))).get((claim_key, slot))
        return won if won is not None and won["token"] == token else None

    def _held(self, reviewer: str, now: datetime) -> Mapping | None:
        for r in self.store.held_by(reviewer, now):
            if self._standing(r, now) is None:
                return r
        return None

    def _standing(self, reservation: Mapping, now: datetime) -> str | None:
        """None when the reservation still holds its slot, else why not."""
        key, slot = reservation["claim_key"], int(reservation["slot_no"])
        if reservation["expires_at"] <= now:
            return (
                f"the reservation expired at {reservation['expires_at'].isoformat()}; "
                "ask for the next claim (POST /api/review/next)"
            )
        labels = self.store.labels([key])
        if any(lab["slot_no"] == slot and lab["role"] == REVIEWER and lab["blind"] for lab in labels):
            return "this slot is labelled already"
        if any(lab["reviewer"] == reservation["reviewer"] and lab["role"] == REVIEWER for lab in labels):
            return f"{reservation['reviewer']} has labelled this claim already"
        won = winners(self.store.reservations([key], self._horizon(now))).get((key, slot))
        if won is None or won["token"] != reservation["token"]:
            return "another reviewer holds this slot"
        return None

    def _context(self, claim_key: str) -> tuple[dict, dict]:
        queued = self.store.queued(claim_key)
        context = self.store.claim_context(queued["event_id"], int(queued["claim_idx"])) if queued else None
        if queued is None or context is None:
            raise NotFound(f"claim {claim_key} is not in the review queue or its answer is no longer stored")
        return queued, context

    def _shown(self, reservation: Mapping) -> Assignment | None:
        try:
            return self._assignment(reservation)
        except NotFound:
            return None

    def _assignment(self, reservation: Mapping) -> Assignment:
        queued, context = self._context(reservation["claim_key"])
        return Assignment(
            reservation["token"],
            queued["claim_key"],
            queued["route"],
            context["query_text"],
            context["answer_text"][:ANSWER_EXCERPT_CHARS],
            context["claim"],
            chunks_of(context["evidence"]),
            reservation["reviewer"],
            reservation["expires_at"],
            self.guide_version,
        )

    # -- labelling -----------------------------------------------------------------------------
    def label(self, slot: str, reviewer: str, label: str, span: str, now: datetime) -> Revealed:
        """Save a reviewer's label on the slot they hold, then reveal the verifier's verdict and other labels."""
        reservation = self.store.reservation(slot)
        if reservation is None:
            raise NotFound(f"no slot {slot!r}; reserve one with POST /api/review/next")
        if reservation["reviewer"] != identity_key(reviewer):
            raise Conflict(f"slot {slot} is reserved for {reservation['reviewer']}, not {reviewer}")
        label = human_label(label)
        with self._lock:
            why_not = self._standing(reservation, now)
            if why_not:
                raise Conflict(f"slot {slot}: {why_not}")
            exposed = bool(self.store.exposed_by(reservation["claim_key"], reservation["reviewer"]))
            return self._save(
                reservation["claim_key"],
                int(reservation["slot_no"]),
                reservation["reviewer"],
                REVIEWER,
                label,
                span,
                now,
                blind=not exposed,
            )

    def adjudicate(self, claim_key: str, adjudicator: str, label: str, span: str, now: datetime) -> Revealed:
        """A named adjudicator's label, which settles the claim whatever the reviewers said."""
        if not adjudicator.strip():
            raise ValueError("adjudicator must be a non-empty name")
        labelled = [
            lab
            for lab in self.store.labels([claim_key])
            if lab["role"] == REVIEWER and identity_key(lab["reviewer"]) == identity_key(adjudicator)
        ]
        if labelled:  # four eyes: the settling word is a third person's, not one side's second vote
            raise Conflict(
                f"{adjudicator.strip()} labelled {claim_key} as a reviewer, so cannot settle it; "
                "ask someone who has not labelled it"
            )
        return self._save(claim_key, 0, adjudicator.strip(), ADJUDICATOR, human_label(label), span, now)

    def _save(
        self, claim_key: str, slot: int, who: str, role: str, label: str, span: str, now: datetime, blind: bool = True
    ) -> Revealed:
        queued, context = self._context(claim_key)
        span = (span or "").strip()
        chunk_id = find_span(span, chunks_of(context["evidence"])) if span else ""
        self.store.save_label(
            {
                "claim_key": claim_key,
                "slot_no": slot,
                "reviewer": who,
                "role": role,
                "label": label,
                "span": span,
                "chunk_id": chunk_id,
                "guide_version": self.guide_version,
                "blind": int(blind),
                "labeled_at": now,
            }
        )
        return self.reveal(claim_key, who, role)

    def reveal(self, claim_key: str, who: str, role: str = REVIEWER) -> Revealed:
        """A labeller's own label with everything else about the claim; refused before they have labelled."""
        queued, context = self._context(claim_key)
        labels = self.store.labels([claim_key])
        own = [lab for lab in labels if lab["reviewer"] == who and lab["role"] == role]
        if not own:
            raise Conflict(f"{who} has not labelled {claim_key}; labels stay hidden until then")
        mine = own[-1]
        others = tuple(
            OtherLabel(lab["reviewer"], lab["role"], lab["label"], lab["span"]) for lab in labels if lab is not mine
        )
        claim = ReviewedClaim.from_row(
            {
                **queued,
                "labels": [
                    (lab["reviewer"], lab["role"], lab["label"], lab["labeled_at"])
                    for lab in labels
                    if lab["role"] != REVIEWER or lab["blind"]
                ],
            }
        )
        exposed = () if mine["blind"] else tuple(self.store.exposed_by(claim_key, who))
        return Revealed(
            claim_key,
            mine["label"],
            mine["span"],
            mine["chunk_id"],
            who,
            role,
            mine["guide_version"],
            mine["labeled_at"],
            queued["verdict"],
            context["span"],
            others,
            claim.settled,
            exposed,
        )
