"""Domain objects as the JSON the API and the CLI emit (one shape for both)."""
from __future__ import annotations

import dataclasses
from typing import Any

import orjson

NO_PAIRS = "no claim has both a verifier and a human label yet; add human labels to approved items"


def as_json(value: Any) -> Any:
    """A domain object (its own ``as_dict``, or a dataclass with datetimes), or a list of them, as JSON-ready data."""
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    return orjson.loads(orjson.dumps(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value,
                                     option=orjson.OPT_NON_STR_KEYS))


def item_json(detail) -> dict:
    """services.evalset.service.EvalItemDetail: the item's fields and its history."""
    return {**as_json(detail.item), "history": as_json(detail.history)}


def agreement_json(summary) -> dict:
    """services.evalset.service.AgreementSummary: the pair count and, once there are pairs, the agreement."""
    if summary.agreement is None:
        return {"pairs": 0, "message": NO_PAIRS}
    return {"pairs": summary.pairs, **as_json(summary.agreement)}
