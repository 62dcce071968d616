from datetime import datetime, timedelta

import orjson
import pytest

from services.contract.decode import Decoder
from services.rates.report import route_rates, slice_rates
from services.rates.window import WindowError, parse_window
from services.store.rates import RateRepository
from services.store.writer import EventWriter


def event(i, route, minute, verdicts, action="served", answerable=True, qt="lookup"):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"{route}-{i}",
                "trace_id": "t",
                "route": route,
                "observed_at": f"2026-11-21T10:{minute:02d}:30Z",
                "answer": {"action": action},
                "query": {"answerable": answerable, "query_type": qt},
                "versions": {"model": "m"},
                "claims": [{"verdict": v} for v in verdicts],
            }
        )
    )


@pytest.mark.parametrize(
    "text, minutes", [("5m", 5), ("30m", 30), ("90m", 90), ("24h", 1440), ("2d", 2880), ("45s", 0.75)]
)
def test_parse_window(text, minutes):
    assert parse_window(text) == timedelta(minutes=minutes)


@pytest.mark.parametrize("bad", ["", "0m", "30", "m30", "5 weeks", "-5m"])
def test_bad_window_names_the_fix(bad):
    with pytest.raises(WindowError, match="positive number followed by s, m, h or d"):
        parse_window(bad)


@pytest.mark.parametrize("huge", ["99999999999d", "367d", "8785h", "999999999999999999999999s"])
def test_a_window_beyond_the_maximum_is_refused_not_overflowed(huge):
    with pytest.raises(WindowError, match="longer than 366 days"):
        parse_window(huge)
    assert parse_window("366d") == timedelta(days=366)


def test_rates_worst_first_with_breakdown_and_window(store):
    evs = [event(i, "calm", 0, ["supported"] * 4) for i in range(10)]
    evs += [event(i, "bad", 0, ["contradicted", "unsupported", "supported", "trivial"]) for i in range(10)]
    evs += [event(100 + i, "bad", 59, ["supported", "supported"]) for i in range(10)]
    evs += [
        event(200, "calm", 59, [], action="abstained", answerable=False),
        event(201, "calm", 59, [], action="abstained", answerable=True),
    ]
    EventWriter(store).write(evs)
    q = RateRepository(store)
    everything = route_rates(q.totals("", None))
    assert [r["route"] for r in everything] == ["bad", "calm"]
    bad = everything[0]
    assert (bad["events"], bad["claims"], bad["failed"]) == (20, 50, 20)
    assert bad["rate"] == pytest.approx(0.4)
    assert bad["verdicts"]["contradicted"] == 10 and bad["verdicts"]["trivial"] == 10
    lo, hi = bad["interval"]
    assert lo < 0.4 < hi
    calm = everything[1]
    assert calm["abstention_pair"]["correct_abstention"]["rate"] == 1.0
    assert calm["abstention_pair"]["over_refusal"]["rate"] == pytest.approx(1 / 11)
    assert bad["unsafe_serve"]["rate"] == pytest.approx(0.5)
    # The 5-minute window ends at the newest bucket (10:59) and excludes 10:00.
    recent = {r["route"]: r for r in route_rates(q.totals("", parse_window("5m")))}
    assert recent["bad"]["failed"] == 0 and recent["bad"]["claims"] == 20
    assert recent["calm"]["events"] == 2


def test_slices_by_query_type(store):
    EventWriter(store).write(
        [event(1, "r", 1, ["contradicted"], qt="multi_hop"), event(2, "r", 1, ["supported"], qt="lookup")]
    )
    rows = slice_rates(RateRepository(store).totals("query_type", None), "query_type")
    assert [(e["value"], e["rate"]) for e in rows] == [("multi_hop", 1.0), ("lookup", 0.0)]
    assert sorted(RateRepository(store).dims(10)) == ["mix", "query_type", "stakes", "version.model"]


def at(hh_mm: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-21T{hh_mm}:00+00:00")


def test_windows_end_at_the_newest_minute_up_to_the_wall_clock(store):
    ahead = Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": "ahead-1",
                "trace_id": "t",
                "route": "ahead",
                "observed_at": "2026-12-21T10:00:30Z",
                "answer": {"action": "served"},
                "claims": [{"verdict": "contradicted"}],
            }
        )
    )
    EventWriter(store).write([event(1, "calm", 0, ["supported"]), event(2, "bad", 59, ["contradicted"]), ahead])
    rates = RateRepository(store, clock=lambda: at("11:20") + timedelta(seconds=7))
    # A month ahead moves no window: the other routes stay in it, and "ahead" waits for the clock.
    assert rates.window_end() == at("10:59") and rates.window_bounds(timedelta(minutes=30))[1] == at("10:59")
    assert {r["route"] for r in route_rates(rates.totals("", parse_window("24h")))} == {"calm", "bad"}
    assert "ahead" in {r["route"] for r in route_rates(rates.totals("", None))}  # stored, and in "all"
    # A route's own end; a route stored only ahead of the clock ends at the clock's minute.
    assert rates.window_end("calm") == at("10:00") and rates.window_end("ahead") == at("11:20")
    # Never after the clock: with the clock at 10:30, only 10:00 has happened.
    earlier = RateRepository(store, clock=lambda: at("10:30"))
    assert earlier.window_end() == at("10:00")
    assert [r["route"] for r in route_rates(earlier.totals("", parse_window("30m")))] == ["calm"]
    assert RateRepository(store, clock=lambda: at("09:00")).window_end() == at("09:00")


def test_empty_store_has_no_rates(store):
    assert RateRepository(store).totals("", parse_window("30m")) == []
    assert RateRepository(store).latest_minute() is None
    assert RateRepository(store).window_end() is None
