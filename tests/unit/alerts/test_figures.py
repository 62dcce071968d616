"""An alert's figures in words, by unit: one table for every surface (CLI, pages, Alertmanager, runbooks)."""

from __future__ import annotations

import pytest

from services.alerts.explain.figures import counted, dlq_command, figure, hallucination_sentence, served_sentence


@pytest.mark.parametrize(
    "name, value, unit, change, expected",
    [
        ("share", 0.125, "share", False, "12.5%"),
        ("share rise", 0.02, "share", True, "+2.0 pts"),
        ("share fall", -0.003, "share", True, "-0.3 pts"),
        ("no unit: stored before units, a share", 0.091, None, False, "9.1%"),
        ("events a minute", 41.0, "per_minute", False, "41.0/min"),
        ("events a minute, fall", -38.2, "per_minute", True, "-38.2/min"),
        ("events a minute, rise", 3.0, "per_minute", True, "+3.0/min"),
        ("thousands", 1234.56, "per_minute", False, "1,234.6/min"),
        ("zero share", 0.0, "share", True, "+0.0 pts"),
        ("missing", None, "per_minute", True, "—"),
    ],
)
def test_figures_by_unit(name, value, unit, change, expected):
    assert figure(value, unit, change) == expected


def test_an_unknown_unit_is_an_error_naming_the_units():
    with pytest.raises(ValueError, match="'per_hour'.*share, per_minute"):
        figure(1.0, "per_hour")
    assert figure(None, "share", missing="n/a") == "n/a"


def test_what_each_kind_counts():
    assert [
        counted(k)
        for k in (
            "hallucination_rate_rise",
            "mix_shift",
            "route_silent",
            "events_rejected",
            "abstention_rise",
            "verifier_agreement",
        )
    ] == ["claims", "claims", "events", "events", "answers", "labels"]


def test_the_gaming_case_is_said_plainly_only_when_the_rate_fell():
    fell = {"hallucination_rate": 0.071, "hallucination_rate_before": 0.078, "hallucination_fell": True}
    assert hallucination_sentence(fell) == (
        "the hallucination rate fell from 7.8% to 7.1% at the same time: "
        "abstaining may be hiding failures (the gaming case)"
    )
    rose = {"hallucination_rate": 0.09, "hallucination_rate_before": 0.078, "hallucination_fell": False}
    assert hallucination_sentence(rose) == "the hallucination rate did not fall (7.8% before, 9.0% now)"
    assert hallucination_sentence({}) == "" and served_sentence({}) == ""
    assert served_sentence({"served_share": 0.62, "served_share_before": 0.81}) == "62.0% of answers (81.0% before)"


def test_the_dlq_command_keeps_the_route_one_shell_word():
    assert dlq_command("billing-faq") == "claimwatch dlq --route billing-faq"
    assert dlq_command("x' OR '1'='1") == "claimwatch dlq --route 'x'\"'\"' OR '\"'\"'1'\"'\"'='\"'\"'1'"
