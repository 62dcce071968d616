"""Domain objects as the JSON the API and the CLI emit (one shape for both)."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson


def as_json(value: Any) -> Any:
    """A domain object (its own ``as_dict``, or a dataclass with datetimes), or a list of them, as JSON-ready data."""
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    return orjson.loads(
        orjson.dumps(
            dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value,
            option=orjson.OPT_NON_STR_KEYS,
        )
    )
