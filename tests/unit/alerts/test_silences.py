"""Silences: Alertmanager-style matchers, durations, and when a silence applies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.alerts.lifecycle.silences import Matcher, Silence, parse_duration, parse_matcher

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
LABELS = {"route": "billing-faq", "kind": "hallucination_rate_rise", "severity": "warning", "tenant": "acme"}


@pytest.mark.parametrize(
    "text,name,op,value,matches",
    [
        ("route=billing-faq", "route", "=", "billing-faq", True),
        ("route!=billing-faq", "route", "!=", "billing-faq", False),
        ("route=~billing-.*", "route", "=~", "billing-.*", True),
        ("route=~billing", "route", "=~", "billing", False),  # anchored, as in Alertmanager
        ("route!~parcel-.*", "route", "!~", "parcel-.*", True),
        ('tenant="acme"', "tenant", "=", "acme", True),
        (" severity = warning ", "severity", "=", "warning", True),
        ("region=", "region", "=", "", True),  # a missing label is the empty string
        ("route=a=b", "route", "=", "a=b", False),
    ],
)
def test_parse_matcher(text, name, op, value, matches):
    matcher = parse_matcher(text)
    assert (matcher.name, matcher.op, matcher.value) == (name, op, value)
    assert matcher.matches(LABELS) is matches


@pytest.mark.parametrize(
    "text,message",
    [
        ("route=~(", "matcher 'route=~(': invalid regex"),
        ("route", "matcher 'route': use label=value, label!=value, label=~regex or label!~regex"),
        ("=billing", "matcher '=billing': use label=value"),
        ("1route=x", "label name '1route' must match"),
        ("", "matcher '': use label=value"),
    ],
)
def test_bad_matchers_name_the_matcher(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("|", r"\|")):
        parse_matcher(text)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5h", timedelta(minutes=90)),
        (" 2H ", timedelta(hours=2)),
    ],
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text,message",
    [
        ("5x", "duration '5x': use a number followed by s, m, h or d"),
        ("m", "duration 'm': use a number"),
        ("30", "duration '30': use a number"),
        ("0m", "duration '0m': must be longer than zero"),
        ("-5m", "duration '-5m': use a number"),
    ],
)
def test_bad_durations_say_what_to_write(text, message):
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_duration_errors_can_name_the_caller_field():
    with pytest.raises(ValueError, match="--for '5x'"):
        parse_duration("5x", field="--for")


def test_silence_applies_only_while_active_and_matching():
    silence = Silence.create(["route=billing-faq"], NOW, duration="2h", created_by="ana", comment="known: reindex")
    assert silence.ends_at == NOW + timedelta(hours=2)
    assert not silence.matches(LABELS, NOW - timedelta(seconds=1))
    assert silence.matches(LABELS, NOW)
    assert silence.matches(LABELS, NOW + timedelta(minutes=119))
    assert not silence.matches(LABELS, NOW + timedelta(hours=2))
    assert not silence.matches({**LABELS, "route": "parcel-status"}, NOW)


def test_every_matcher_must_match():
    silence = Silence.create(
        ["route=~billing.*", "severity!=critical"], NOW, duration="1h", created_by="ana", comment="c"
    )
    assert silence.matches(LABELS, NOW)
    assert not silence.matches({**LABELS, "severity": "critical"}, NOW)


def test_expire_ends_a_silence_early_and_keeps_it():
    silence = Silence.create(["route=billing-faq"], NOW, duration="2h", created_by="ana", comment="c")
    ended = silence.expire(NOW + timedelta(minutes=10))
    assert ended.silence_id == silence.silence_id
    assert ended.matches(LABELS, NOW + timedelta(minutes=5)) and not ended.matches(LABELS, NOW + timedelta(minutes=10))
    assert ended.expire(NOW + timedelta(hours=5)).ends_at == ended.ends_at


def test_silence_round_trips_through_a_record():
    silence = Silence.create(
        ["route=billing-faq", 'tenant=~"ac.*"'], NOW, duration="30m", created_by="ana", comment="c"
    )
    assert Silence.from_dict(silence.as_dict()) == silence


def test_silence_id_is_derived_from_its_content():
    a = Silence.create(["route=billing-faq"], NOW, duration="1h", created_by="ana", comment="c")
    b = Silence.create(["route=billing-faq"], NOW, duration="1h", created_by="ana", comment="other words")
    c = Silence.create(["route=parcel-status"], NOW, duration="1h", created_by="ana", comment="c")
    assert a.silence_id == b.silence_id != c.silence_id


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(matchers=["route=~.*"]), "match an empty label set"),
        (dict(matchers=[]), "at least one"),
        (dict(created_by=" "), "created_by"),
        (dict(comment=""), "comment"),
        (dict(duration="5x"), "duration '5x'"),
        (dict(duration=None), "either ends_at or duration"),
        (dict(ends_at=NOW - timedelta(hours=1), duration=None), "before starts_at"),
        (dict(starts_at=datetime(2026, 11, 21)), "timezone-aware"),
    ],
)
def test_bad_silences_are_refused_naming_the_field(kwargs, message):
    args = dict(matchers=["route=billing-faq"], starts_at=NOW, duration="1h", created_by="ana", comment="c")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        Silence.create(**args)


def test_matcher_built_directly_is_validated():
    with pytest.raises(ValueError, match="invalid regex"):
        Matcher("route", "=~", "(")
    with pytest.raises(ValueError, match="operator"):
        Matcher("route", "==", "x")


def test_a_duration_past_the_limit_is_a_value_error_naming_it_not_an_overflow():
    with pytest.raises(ValueError, match="duration '99999999999d' is longer than the limit of 366 days"):
        parse_duration("99999999999d")
    assert parse_duration("366d") == timedelta(days=366)


def test_unsilencing_records_who_and_keeps_it_through_a_record():
    silence = Silence.create(["route=billing-faq"], NOW, duration="2h", created_by="ana", comment="c")
    ended = silence.expire(NOW + timedelta(minutes=10), by="bo")
    assert ended.ended_by == "bo" and Silence.from_dict(ended.as_dict()) == ended
    assert ended.expire(NOW + timedelta(minutes=20), by="cy").ended_by == "bo"  # already over: unchanged
    older_record = {k: v for k, v in silence.as_dict().items() if k != "ended_by"}
    assert Silence.from_dict(older_record).ended_by == ""


def test_regex_matchers_use_re2_anchored():
    matcher = parse_matcher("route=~(a|a)*b")
    assert not matcher.matches({"route": "a" * 128}) and matcher.matches({"route": "aab"})
    assert parse_matcher("route=~a{1,3}").matches({"route": "aaa"})
    with pytest.raises(ValueError, match=r"matcher 'route=~\(\?=a\)': invalid regex .*invalid perl operator"):
        parse_matcher("route=~(?=a)")
