"""OpenSLO v1 documents as ``[[slo]]`` settings (`claimwatch slo import FILE`).

What claimwatch takes of the OpenSLO spec: ``kind: SLO`` documents (and the ``kind: SLI`` documents they reference
with ``indicatorRef``) whose indicator is a ``ratioMetric`` with a metric source of ``type: claimwatch``::

    apiVersion: openslo/v1
    kind: SLO
    metadata: {name: billing-faithfulness}
    spec:
      description: 19 in 20 billing claims grounded
      indicator:
        metadata: {name: billing-claims}
        spec:
          ratioMetric:
            counter: true
            good: {metricSource: {type: claimwatch, spec: {sli: claims, routes: "billing-*"}}}
            total: {metricSource: {type: claimwatch, spec: {sli: claims, routes: "billing-*"}}}
      timeWindow: [{duration: 28d, isRolling: true}]
      budgetingMethod: Occurrences
      objectives: [{target: 0.95}]

The metric source's spec names the SLI (``claims`` or ``served_answers``), the routes (a glob) and at most one of
``corpus``, ``model``, ``prompt``; good and total must name the same. Anything else (calendar windows, timeslice
budgeting, threshold metrics, other metric sources, several objectives) is refused with what to change: claimwatch
counts occurrences of claims and answers, over a rolling window, against one target.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from services.api.models import plain_errors
from services.app.sections import SloSettings

SOURCE_KEYS = ("sli", "routes", "corpus", "model", "prompt")


class OpenSloError(ValueError):
    """A document claimwatch cannot take, and why."""


def _at(doc: Mapping[str, Any], n: int) -> str:
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
    return f"document {n}" + (f" ({doc.get('kind', '?')} {name})" if name else "")


def read_documents(text: str) -> list[Mapping[str, Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise OpenSloError(f"not YAML: {exc}") from None
    for n, doc in enumerate(docs, 1):
        if not isinstance(doc, Mapping):
            raise OpenSloError(f"document {n} is a {type(doc).__name__}, not an OpenSLO object")
        if doc.get("apiVersion") != "openslo/v1":
            raise OpenSloError(f"{_at(doc, n)}: apiVersion {doc.get('apiVersion')!r}: claimwatch reads openslo/v1")
    return docs


def _source(ratio: Mapping[str, Any], part: str, where: str) -> dict[str, Any]:
    found = ratio.get(part)
    source = found.get("metricSource") if isinstance(found, Mapping) else None
    if not isinstance(source, Mapping):
        raise OpenSloError(f"{where}: ratioMetric.{part}.metricSource is missing")
    if source.get("type") != "claimwatch":
        raise OpenSloError(
            f"{where}: ratioMetric.{part}.metricSource.type {source.get('type')!r}: claimwatch computes its own "
            "SLIs; use type: claimwatch with spec {sli, routes}"
        )
    spec = source.get("spec") or {}
    unknown = sorted(set(spec) - set(SOURCE_KEYS))
    if unknown:
        raise OpenSloError(f"{where}: metricSource.spec takes {', '.join(SOURCE_KEYS)}, not {', '.join(unknown)}")
    return dict(spec)


def _indicator(spec: Mapping[str, Any], indicators: Mapping[str, Mapping[str, Any]], where: str) -> dict[str, Any]:
    if "indicatorRef" in spec:
        ref = spec["indicatorRef"]
        if ref not in indicators:
            raise OpenSloError(f"{where}: indicatorRef {ref!r} names no kind: SLI document in the file")
        indicator = indicators[ref]
    else:
        indicator = (spec.get("indicator") or {}).get("spec") or {}
    if "thresholdMetric" in indicator:
        raise OpenSloError(f"{where}: thresholdMetric is not supported: give a ratioMetric of good over total")
    ratio = indicator.get("ratioMetric")
    if not isinstance(ratio, Mapping):
        raise OpenSloError(f"{where}: the indicator needs a ratioMetric (good over total)")
    good, total = _source(ratio, "good", where), _source(ratio, "total", where)
    if good != total:
        raise OpenSloError(
            f"{where}: good and total name different sources ({good} and {total}); claimwatch counts both from one "
            "SLI: give them the same spec"
        )
    return good


def _window(spec: Mapping[str, Any], where: str) -> str:
    windows = spec.get("timeWindow") or []
    if len(windows) != 1 or not isinstance(windows[0], Mapping):
        raise OpenSloError(f"{where}: give exactly one timeWindow")
    window = windows[0]
    if not window.get("isRolling", False) or "calendar" in window:
        raise OpenSloError(f"{where}: calendar windows are not supported; use a rolling one (isRolling: true)")
    return str(window.get("duration", ""))


def _target(spec: Mapping[str, Any], where: str) -> float:
    objectives = spec.get("objectives") or []
    if len(objectives) != 1 or not isinstance(objectives[0], Mapping):
        raise OpenSloError(f"{where}: give exactly one objective; claimwatch alerts on one target per SLO")
    objective = objectives[0]
    if "target" in objective:
        return float(objective["target"])
    if "targetPercent" in objective:
        return float(objective["targetPercent"]) / 100
    raise OpenSloError(f"{where}: the objective needs a target (0.95) or a targetPercent (95)")


def slo_settings(docs: Iterable[Mapping[str, Any]]) -> list[SloSettings]:
    """Each ``kind: SLO`` document as an ``[[slo]]``; OpenSloError naming the document for one it cannot take."""
    docs = list(docs)
    indicators: dict[str, Mapping[str, Any]] = {
        str((d.get("metadata") or {}).get("name")): d.get("spec") or {} for d in docs if d.get("kind") == "SLI"
    }
    found = []
    for n, doc in enumerate(docs, 1):
        if doc.get("kind") != "SLO":
            continue
        where, spec = _at(doc, n), doc.get("spec") or {}
        method = spec.get("budgetingMethod", "Occurrences")
        if method != "Occurrences":
            raise OpenSloError(
                f"{where}: budgetingMethod {method!r} is not supported: claimwatch counts occurrences "
                "(claims or answers); use Occurrences"
            )
        source = _indicator(spec, indicators, where)
        fields: dict[str, Any] = {
            "name": (doc.get("metadata") or {}).get("name"),
            "routes": source.get("routes"),
            "sli": source.get("sli", "claims"),
            "objective": _target(spec, where),
            "window": _window(spec, where),
            "description": spec.get("description", ""),
            **{k: source[k] for k in ("corpus", "model", "prompt") if k in source},
        }
        try:
            found.append(SloSettings(**{k: v for k, v in fields.items() if v is not None}))
        except ValidationError as exc:
            raise OpenSloError(f"{where}: {plain_errors(exc.errors())}") from None
    if not found:
        raise OpenSloError("the file holds no kind: SLO document")
    return found


def as_toml(slos: Iterable[SloSettings]) -> str:
    """``[[slo]]`` tables for the config file."""
    blocks = []
    for slo in slos:
        lines = ["[[slo]]"]
        for key, value in slo.model_dump(exclude_defaults=False).items():
            if value is None or (key == "description" and not value):
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _toml_value(value: object) -> str:
    """A TOML value: JSON's string escapes are TOML's basic string's."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)
