"""What the eval-set use cases return, defined once: items, their history, the report and the gate are the domain's
own dataclasses, closed where they are defined (services/core/readmodel.py: ``closed``); the agreement answer is
this model, the figures of ``Agreement`` or why there are none."""

from __future__ import annotations

from pydantic import Field

from services.core.readmodel import Read
from services.evalset.metrics import Agreement, DisagreementSlice, Figure

NO_PAIRS = "no claim has both a verifier and a human label yet; add human labels to approved items"


class AgreementRead(Read):
    """Verifier against human labels on the eval set; the figures are absent while no claim has both."""

    pairs: int = Field(description="claims with both a verifier and a human label")
    message: str | None = Field(default=None, description="why there are no figures yet")
    kappa: Figure | None = None
    observed: Figure | None = Field(default=None, description="share of claims where both labels match")
    labels: list[str] | None = None
    confusion: list[list[int]] | None = Field(default=None, description="rows: verifier, columns: human")
    slices: list[DisagreementSlice] | None = Field(default=None, description="most disagreement first")

    def as_dict(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)  # the figures are there, or absent

    @classmethod
    def of(cls, summary) -> AgreementRead:
        """services.evalset.service.AgreementSummary."""
        if summary.agreement is None:
            return cls(pairs=0, message=NO_PAIRS)
        a = summary.agreement
        return cls(pairs=summary.pairs, **{name: getattr(a, name) for name in Agreement.__dataclass_fields__})
