"""Response shapes of an issue's triage (services/triage), which every issue view carries; and ``Out``, the base of
every response shape (services/api/responses.py)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Out(BaseModel):
    """Extra keys allowed: the services may add fields, and OpenAPI still describes every field always there."""

    model_config = ConfigDict(extra="allow")


class ArchiveView(Out):
    until: Literal["escalating", "duration", "claims"]
    since: str
    ends_at: str | None = Field(description="duration: when it wakes up")
    claims: int | None = Field(description="claims: how many more failing claims wake it up")
    text: str = Field(description="the condition in words, e.g. until escalating")


class TriageView(Out):
    team: str = Field(description="the team of the [[owners]] rule its dominant route matches, else the default")
    owner: str = Field(description="the assignee, else the rule's owner, else the team")
    assignee: str = ""
    archive: ArchiveView | None = Field(None, description="set while archived (state archived)")
    ticket_url: str = ""


class TriageDetail(Out):
    activity: list[dict] = Field(default_factory=list, description=(
        "every change, note and merge, newest first: at, event, by (claimwatch for its own), summary, details"))
    merge_candidates: list[dict] = Field(default_factory=list, description=(
        "issues likely the same failure: issue_id, name, similarity (centroids' cosine), links (their claims' "
        "nearest-neighbour links between them per link within either), shared_words, needed (the links the rule "
        "asked of this pair: more the less similar the centroids, and at least 2.75 times what neighbouring issues "
        "share anyway)"))
