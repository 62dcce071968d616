"""Request bodies. Extra fields are refused so typos surface as 422s naming the field."""
from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AckBody(Body):
    by: str = Field(min_length=1, max_length=200, description="who acknowledges")
    note: str = Field("", max_length=2000)


class SilenceBody(Body):
    matchers: list[str] = Field(min_length=1, max_length=20, description="e.g. route=billing-faq, severity=~warn.*")
    by: str = Field(min_length=1, max_length=200)
    comment: str = Field(min_length=1, max_length=2000, description="why")
    duration: str | None = Field(None, description="e.g. 2h; give this or ends_at")
    ends_at: AwareDatetime | None = None

