"""Every JSON answer of the API is a read model defined once (issue 50): OpenAPI describes each closed, so a key the
model does not name can neither be sent nor documented away, and the pages render the same objects."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from services.core.readmodel import exactly
from services.issues.readmodel import IssueRead
from tests.unit.api.test_api import world  # noqa: F401  (a fixture)
from tests.unit.api.test_traces import client, store  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[3]
UNTYPED = {"/api/issues/{issue_id}/runbook", "/api/alerts/{alert_id}/runbook", "/api/promotions/export", "/metrics"}


def schemas_under(schema: dict, components: dict, seen: set[str]) -> list[tuple[str, dict]]:
    """Every object schema reachable from ``schema``, named by its component (or "inline")."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        if name in seen:
            return []
        seen.add(name)
        return [(name, components[name]), *schemas_under(components[name], components, seen)]
    found = []
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += schemas_under(schema[key], components, seen)
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for part in schema.get(key, []):
            found += schemas_under(part, components, seen)
    for part in schema.get("properties", {}).values():
        found += schemas_under(part, components, seen)
    return found


def test_every_json_answer_is_described_by_a_closed_model(client):  # noqa: F811
    spec = client.get("/openapi.json").json()
    components, open_shapes, untyped = spec["components"]["schemas"], set(), []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            answer = op["responses"].get("200") or op["responses"].get("201") or {}
            body = answer.get("content", {}).get("application/json", {}).get("schema")
            if path in UNTYPED or not answer.get("content", {}).get("application/json"):
                continue
            if not body:
                untyped.append(f"{method.upper()} {path}")
                continue
            for name, shape in schemas_under(body, components, set()):
                if (
                    shape.get("type") == "object"
                    and shape.get("properties")
                    and shape.get("additionalProperties") is not False
                ):
                    open_shapes.add(name)
    assert not untyped, f"JSON answers without a read model: {untyped}"
    assert not open_shapes, f"read models that let unnamed keys through: {sorted(open_shapes)}"


def test_the_hand_written_response_shapes_are_gone():
    assert not (ROOT / "services/api/responses.py").exists()
    assert not (ROOT / "services/api/triage_responses.py").exists()


def test_a_page_refuses_a_field_its_read_model_does_not_name(client):  # noqa: F811
    [issue] = client.get("/api/issues", params={"limit": 1}).json()
    assert exactly(list[IssueRead], [issue]) == [issue]  # what the API sent is what the page renders
    with pytest.raises(ValidationError, match="extra"):
        exactly(list[IssueRead], [{**issue, "invented": 1}])
