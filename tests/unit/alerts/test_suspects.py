"""Suspect changes: the version that caused a regression comes first."""

from __future__ import annotations

import numpy as np
import pytest

from services.alerts.explain.suspects import suspect_changes
from services.rates.intervals import Counts

BASE, RHO = 0.08, 0.1


def window(rng, answers: int, shares: dict[str, dict[str, float]], rate_of) -> dict[tuple[str, str], Counts]:
    """Simulate one window of a route; return rate_minute-like aggregates per (dim, value), with dim ''."""
    picked = {key: rng.choice(list(values), size=answers, p=list(values.values())) for key, values in shares.items()}
    n = rng.integers(1, 9, answers)
    rate = np.array([rate_of({k: picked[k][i] for k in picked}) for i in range(answers)])
    scale = 1 / RHO - 1
    f = rng.binomial(n, rng.beta(rate * scale, (1 - rate) * scale))

    def counts(mask) -> Counts:
        return Counts(
            events=int(mask.sum()),
            claims=int(n[mask].sum()),
            failed=int(f[mask].sum()),
            claims_sq=int((n[mask] ** 2).sum()),
            failed_sq=int((f[mask] ** 2).sum()),
            failed_claims=int((f[mask] * n[mask]).sum()),
        )

    out = {("", ""): counts(np.ones(answers, bool))}
    for key, values in picked.items():
        for value in np.unique(values):
            out[(f"version.{key}", str(value))] = counts(values == value)
    return out


STABLE = {"retriever": {"hybrid-v3": 1.0}, "verifier": {"nli-judge@2.1": 1.0}}


def test_new_model_version_causing_the_regression_is_the_first_suspect():
    rng = np.random.default_rng(1)
    before = window(
        rng,
        3000,
        {"model": {"gen-10": 1.0}, "prompt": {"faq-v14": 1.0}, "corpus": {"pol@11-01": 1.0}, **STABLE},
        lambda v: BASE,
    )
    # at onset: the new model goes to 40% of traffic and is worse; an unrelated prompt rollout to 50% does nothing
    after = window(
        rng,
        3000,
        {
            "model": {"gen-10": 0.6, "gen-11": 0.4},
            "prompt": {"faq-v14": 0.5, "faq-v15": 0.5},
            "corpus": {"pol@11-01": 1.0},
            **STABLE,
        },
        lambda v: 0.2 if v["model"] == "gen-11" else BASE,
    )
    suspects = suspect_changes(before, after)
    top = suspects[0]
    assert (top.dim, top.key, top.value, top.kind) == ("version.model", "model", "gen-11", "system")
    assert top.share_before == 0.0 and top.share_after == pytest.approx(0.4, abs=0.03)
    assert top.rate_before is None and top.rate_before_interval is None
    assert top.rate_after_interval.lo < 0.2 < top.rate_after_interval.hi
    assert top.explained == pytest.approx(0.4 * 0.12, abs=0.015)
    assert {s.value for s in suspects} >= {"gen-11", "faq-v15"}
    assert all(s.value not in ("hybrid-v3", "nli-judge@2.1", "pol@11-01") for s in suspects)  # share did not move


def test_new_model_wins_even_when_the_corpus_switched_over_at_the_same_time():
    rng = np.random.default_rng(2)
    before = window(rng, 3000, {"model": {"gen-10": 1.0}, "corpus": {"pol@11-01": 1.0}, **STABLE}, lambda v: BASE)
    after = window(
        rng,
        3000,
        {"model": {"gen-10": 0.7, "gen-11": 0.3}, "corpus": {"pol@11-21": 1.0}, **STABLE},
        lambda v: 0.2 if v["model"] == "gen-11" else BASE,
    )
    suspects = suspect_changes(before, after)
    assert suspects[0].value == "gen-11"
    corpus = next(s for s in suspects if s.value == "pol@11-21")
    assert corpus.kind == "evidence" and corpus.explained < suspects[0].explained / 2


def test_a_switchover_that_explains_nothing_names_the_new_version_before_the_old():
    """The first minutes after a page: the window's rise is not yet above what another dim's mix accounts for, so
    the model's full switchover explains nothing; the version that took the traffic still comes first."""
    rng = np.random.default_rng(3)
    before = window(
        rng,
        3000,
        {"model": {"gen-10": 1.0}, "prompt": {"v1": 1.0}, **STABLE},
        lambda v: 0.2 if v["prompt"] == "v2" else BASE,
    )
    after = window(
        rng,
        3000,
        {"model": {"gen-11": 1.0}, "prompt": {"v1": 0.5, "v2": 0.5}, **STABLE},
        lambda v: 0.3 if v["prompt"] == "v2" else 0.02,
    )
    models = [s for s in suspect_changes(before, after) if s.key == "model"]
    assert [s.explained for s in models] == [0.0, 0.0]  # the tie the order must break
    assert [s.value for s in models] == ["gen-11", "gen-10"]


def test_a_corpus_switchover_that_caused_the_rise_is_the_evidence_suspect():
    rng = np.random.default_rng(3)
    before = window(rng, 3000, {"model": {"gen-10": 1.0}, "corpus": {"pol@11-01": 1.0}, **STABLE}, lambda v: BASE)
    after = window(
        rng, 3000, {"model": {"gen-10": 0.9, "gen-11": 0.1}, "corpus": {"pol@11-21": 1.0}, **STABLE}, lambda v: 0.13
    )
    suspects = suspect_changes(before, after)
    assert (suspects[0].value, suspects[0].kind) == ("pol@11-21", "evidence")
    assert suspects[0].explained == pytest.approx(0.05, abs=0.015)
    gone = next(s for s in suspects if s.value == "pol@11-01")
    assert gone.share_after == 0.0 and gone.explained == 0.0


def test_accepts_rows_as_triples_and_without_the_route_row():
    rng = np.random.default_rng(4)
    before = window(rng, 2000, {"model": {"gen-10": 1.0}}, lambda v: BASE)
    after = window(
        rng, 2000, {"model": {"gen-10": 0.5, "gen-11": 0.5}}, lambda v: 0.2 if v["model"] == "gen-11" else BASE
    )
    triples = lambda agg: [(d, v, c) for (d, v), c in agg.items() if d]  # noqa: E731
    assert [s.value for s in suspect_changes(triples(before), triples(after))] == [
        s.value for s in suspect_changes(before, after)
    ]


def test_nothing_moved_means_no_suspects_and_records_are_json_ready():
    rng = np.random.default_rng(5)
    shares = {"model": {"gen-10": 0.5, "gen-11": 0.5}}
    assert suspect_changes(window(rng, 2000, shares, lambda v: BASE), window(rng, 2000, shares, lambda v: BASE)) == []
    before = window(rng, 1000, {"model": {"gen-10": 1.0}}, lambda v: BASE)
    after = window(rng, 1000, {"model": {"gen-11": 1.0}}, lambda v: 0.12)
    record = suspect_changes(before, after)[0].as_dict()
    assert record["value"] == "gen-11" and isinstance(record["rate_after_interval"], list)
    assert set(record) >= {"dim", "value", "kind", "share_before", "share_after", "rate_before", "rate_after"}


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="min_share_change"):
        suspect_changes({}, {}, min_share_change=1.5)
    with pytest.raises(TypeError, match="version.model=x must be a Counts"):
        suspect_changes([("version.model", "x", {"claims": 3})], [])
