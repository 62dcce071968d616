"""The base of every read model: what a use case returns, defined once beside it (e.g.
services/alerts/oncall/readmodel.py).

The API answers with these objects, so its OpenAPI document describes exactly what it sends; the CLI, the pages and
the runbooks read the same fields. Exact: a field the model does not name is an error where the object is made,
not a key that one surface shows and another misses."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter


class Read(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready data: what the API sends (services/api/serialise.py reads objects through this)."""
        return self.model_dump(mode="json")


def closed(cls: type) -> type:
    """A domain dataclass whose JSON (``dataclasses.asdict``) is what a use case answers, made its own read model:
    as a response model it describes exactly that JSON, and a key it does not name is an error, as with ``Read``."""
    cls.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    return cls


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:  # a type expression: a read model, list[...] or dict[...]
    return TypeAdapter(shape)


def exactly(shape: Any, data: object) -> Any:
    """``data`` as the API sends it in ``shape`` (a read model, or a list or dict of one): validated, so a surface
    that renders a use case's answer itself (the pages) reads the fields the API's answer has, and no others."""
    adapter = _adapter(shape)
    return adapter.dump_python(adapter.validate_python(data), mode="json")
