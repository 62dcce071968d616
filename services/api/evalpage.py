"""The eval page's comparison of two runs (`/eval?baseline=...&candidate=...`): what GET /api/eval/compare answers,
each row's interval written as the CLI writes it, or the sentence that refuses the matchers.

The handler lives in services/api/pages.py; these are the page's facts, testable without a request.
"""

from __future__ import annotations

from typing import Any

from services.api.serialise import as_json
from services.core.errors import NotFound
from services.core.numbers import change_interval_text

RUNS_SHOWN = 10  # the newest runs the form offers


def comparison(evalset: Any, baseline: str, candidate: str) -> dict[str, Any]:
    """The form's values, the newest runs, and the comparison asked for (None until a baseline is given; the
    candidate defaults to the newest run, as for `eval gate`), or why it cannot be made."""
    runs = as_json(evalset.runs(RUNS_SHOWN))
    context: dict[str, Any] = {
        "baseline": baseline,
        "candidate": candidate,
        "runs": runs,
        "compared": None,
        "compare_error": "",
    }
    if not baseline.strip():
        if candidate.strip():
            context["compare_error"] = "baseline: give a run id or version matchers, e.g. model=gen-2026-10"
        return context
    try:
        found = as_json(evalset.compare(baseline, candidate))
    except (NotFound, ValueError) as exc:
        context["compare_error"] = str(exc)
        return context
    found["rows"] = [
        m | {"interval_text": m["note"] or change_interval_text(m["lo"], m["hi"])}
        for m in found["metrics"] + found["slices"]
    ]
    context["compared"] = found
    return context
