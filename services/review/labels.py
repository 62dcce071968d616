"""Human labels of one claim and what they settle. Pure: no store, no clock."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from services.contract.model import FAILED_VERDICTS
from services.evalset.metrics import canonical

# The annotation guide's vocabulary (issue 16). no_source and trivial are the verifier's, not a reviewer's.
HUMAN_LABELS = ("supported", "contradicted", "unsupported", "overreach", "stale")
REVIEWER, ADJUDICATOR = "reviewer", "adjudicator"


def human_label(value: str) -> str:
    """The canonical label (aliases such as 'unlinked' accepted), or a ValueError naming the vocabulary."""
    label = canonical(value, "label: ")
    if label not in HUMAN_LABELS:
        raise ValueError(f"label {value!r} is not in the annotation guide; use one of {', '.join(HUMAN_LABELS)}")
    return label


@dataclass(frozen=True)
class Review:
    reviewer: str
    role: str  # reviewer | adjudicator
    label: str
    at: datetime


@dataclass(frozen=True)
class ReviewedClaim:
    """A queued claim with its labels, oldest first."""

    claim_key: str
    route: str
    verdict: str  # the verifier's
    verifier_version: str
    origin: str  # production | eval
    weight: float  # 1 / its stratum's sampling probability
    reviewers: int  # labels it needs
    reviews: tuple[Review, ...]
    stratum: str = ""  # route|verdict|issue it was sampled from (verdict#band when scored)
    score: float | None = None  # the verifier's confidence in its verdict

    @classmethod
    def from_row(cls, row: Mapping) -> ReviewedClaim:
        return cls(
            row["claim_key"],
            row["route"],
            row["verdict"],
            row["verifier_version"],
            row["origin"],
            float(row["weight"]),
            int(row["reviewers"]),
            tuple(Review(*r) for r in row["labels"]),
            row.get("stratum", ""),
            row.get("score"),
        )

    @property
    def human_labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.reviews if r.role == REVIEWER)

    @property
    def adjudicated(self) -> str | None:
        labels = [r.label for r in self.reviews if r.role == ADJUDICATOR]
        return labels[-1] if labels else None

    @property
    def complete(self) -> bool:
        return len(self.human_labels) >= self.reviewers

    @property
    def settled(self) -> str | None:
        """The adjudicator's label, else the reviewers' when all of them gave the same; None otherwise."""
        if self.adjudicated:
            return self.adjudicated
        labels = set(self.human_labels)
        return labels.pop() if self.complete and len(labels) == 1 else None

    @property
    def disputed(self) -> bool:
        """Complete, not unanimous and not adjudicated: waiting for an adjudicator."""
        return self.complete and not self.adjudicated and len(set(self.human_labels)) > 1

    @property
    def human_failed(self) -> bool | None:
        """Whether humans settled it as failed: adjudicated, or every reviewer on the same side of
        supported / failed (two failure labels that differ still agree that the claim failed)."""
        if self.adjudicated:
            return self.adjudicated in FAILED_VERDICTS
        sides = {label in FAILED_VERDICTS for label in self.human_labels}
        return sides.pop() if self.complete and len(sides) == 1 else None

    @property
    def verifier_failed(self) -> bool:
        return self.verdict in FAILED_VERDICTS

    @property
    def settled_at(self) -> datetime | None:
        return max((r.at for r in self.reviews), default=None)
