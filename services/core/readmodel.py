"""The base of every read model: what a use case returns, defined once beside it (e.g. services/alerts/readmodel.py).

The API answers with these objects, so its OpenAPI document describes exactly what it sends; the CLI, the pages and
the runbooks read the same fields. Exact: a field the model does not name is an error where the object is made,
not a key that one surface shows and another misses."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Read(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def as_dict(self) -> dict:
        """JSON-ready data: what the API sends (services/api/serialise.py reads objects through this)."""
        return self.model_dump(mode="json")
