"""Sampled verification is honoured (issue 24): each answer weighs 1 / its sampling.rate, so rates and their
intervals estimate the whole traffic, through the store's own minute sums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import orjson
import pytest

from bench.sampling_world import draw
from services.contract.decode import Decoder
from services.rates.intervals import Counts, ratio_interval
from services.rates.report import rate_entry
from services.store.backends import open_store
from services.store.migrate import migrate
from services.store.rates import RateRepository
from services.store.writer import EventWriter

START = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)


def event(i: int, route: str, verdicts: list[str], rate: float | None):
    return Decoder().decode(
        orjson.dumps(
            {
                "schema": "claimwatch.verdict/v1",
                "event_id": f"{route}-{i}",
                "trace_id": f"t-{route}-{i}",
                "observed_at": (START + timedelta(seconds=i)).isoformat(),
                "route": route,
                "claims": [{"verdict": v} for v in verdicts],
                **({"sampling": {"rate": rate}} if rate else {}),
            }
        )
    )


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    return f"chdb:{tmp_path_factory.mktemp('weights') / 'ch'}"


@pytest.fixture(scope="module")
def rates(store_url):
    store = open_store(store_url)
    migrate(store)
    events = [event(i, "mixed", ["supported"], None) for i in range(30)]  # short, all verified
    events += [
        event(100 + i, "mixed", ["unsupported", "unsupported", "supported", "supported"], 0.1) for i in range(3)
    ]  # long, 1 in 10
    events += [event(200 + i, "plain", ["supported", "contradicted"], None) for i in range(10)]
    EventWriter(store).write(events)
    yield RateRepository(store, clock=lambda: START + timedelta(hours=1))
    store.close()


def by_route(rates: RateRepository) -> dict[str, dict]:
    return {r["route"]: rate_entry(r) for r in rates.totals("", None)}


def test_a_sampled_answer_counts_for_the_answers_it_stands_for(rates):
    mixed = by_route(rates)["mixed"]
    assert (mixed["events"], mixed["claims"], mixed["failed"]) == (33, 42, 6)  # the stored counts stay counts
    assert mixed["weighted"] == {"events": 60.0, "claims": 150.0, "failed": 60.0}
    assert mixed["rate"] == pytest.approx(60 / 150)  # unweighted it would read 6 / 42
    assert (mixed["sampling"], mixed["sampled_events"]) == ("mixed", 3)
    assert mixed["effective_claims"] == pytest.approx(150**2 / (30 + 300 * 4), abs=0.05)
    assert mixed["interval"][0] < 0.4 < mixed["interval"][1]


def test_verdict_shares_are_of_the_whole_traffic_like_the_rate(rates):
    mixed = by_route(rates)["mixed"]
    assert mixed["verdicts"]["unsupported"] == 6  # stored claims; unweighted they would be 6 / 42 of checked
    assert mixed["verdict_shares"] == pytest.approx(
        {"supported": 0.6, "unsupported": 0.4, "contradicted": 0.0, "overreach": 0.0, "stale": 0.0, "no_source": 0.0}
    )
    assert sum(v for k, v in mixed["verdict_shares"].items() if k != "supported") == pytest.approx(mixed["rate"])
    assert by_route(rates)["plain"]["verdict_shares"]["contradicted"] == 0.5


def test_without_sampling_every_figure_is_the_unweighted_one(rates):
    plain = by_route(rates)["plain"]
    assert plain["rate"] == 0.5 and plain["sampling"] == "none" and plain["effective_claims"] == 20
    unweighted = Counts(events=10, claims=20, failed=10, claims_sq=40, failed_sq=10, failed_claims=20)
    assert plain["interval"] == ratio_interval(unweighted).as_list()


def test_slices_and_minutes_carry_the_weights(rates):
    minute = rates.minutes("mixed", START, START + timedelta(minutes=5))
    assert sum(r["w_claims"] for r in minute) == 150.0
    slices = {r["value"]: rate_entry(r) for r in rates.totals("query_type", None) if r["route"] == "mixed"}
    assert slices[""]["rate"] == pytest.approx(0.4)


def test_weighted_intervals_cover_the_population_rate_and_unweighted_ones_do_not():
    """Long answers verified 1 in 10 and failing more: 300 draws of bench/sampling.py's world."""
    rng = np.random.default_rng(24)
    weighted_hits = unweighted_hits = 0
    reps = 300
    for _ in range(reps):
        truth, weighted, unweighted = draw(rng)
        weighted_hits += truth in ratio_interval(weighted)
        unweighted_hits += truth in ratio_interval(unweighted)
    assert 0.92 <= weighted_hits / reps <= 0.98
    assert unweighted_hits / reps < 0.5


def test_the_drift_detector_sees_a_sampled_minute_as_the_sample_it_is():
    rng = np.random.default_rng(5)
    _, weighted, _ = draw(rng)
    effective = weighted.effective()
    assert effective.claims == pytest.approx(weighted.effective_claims)
    assert effective.failed / effective.claims == pytest.approx(weighted.rate)
    failed_shares = (
        sum(getattr(effective, v) for v in ("unsupported", "contradicted", "overreach", "stale", "no_source"))
        / effective.claims
    )
    assert failed_shares == pytest.approx(weighted.rate)  # the driving verdict compares weighted shares
    plain = Counts(**{**effective.as_dict(), "sampled": 0, "w_events": 0.0})  # the same sums, unweighted
    assert ratio_interval(plain).as_list() == pytest.approx(ratio_interval(weighted).as_list())
    unsampled = Counts(
        events=3,
        claims=7,
        failed=2,
        claims_sq=19,
        failed_sq=2,
        failed_claims=6,
        w_events=3.0,
        w_claims=7.0,
        w_failed=2.0,
        w2_claims=7.0,
        w2_claims_sq=19.0,
        w2_failed_sq=2.0,
        w2_failed_claims=6.0,
        w2_events=3.0,
    )
    assert unsampled.effective() is unsampled and list(unsampled.as_array()[:6]) == [3, 7, 2, 19, 2, 6]


def test_the_overview_and_the_cli_say_which_routes_were_sampled(rates, store_url):
    from fastapi.testclient import TestClient

    from services.api.app import create_api
    from services.app.cli.data import sampling_notes
    from services.app.compose import open_components
    from services.app.settings import Settings

    entries = list(by_route(rates).values())
    assert sampling_notes(entries) == [
        "mixed: 3 of 33 answers verified on a sample (mixed with fully verified ones); "
        "RATE weighs each by 1 / its sampling.rate and stands for 60 answers"
    ]
    components = open_components(Settings(clickhouse=store_url))
    try:  # chDB serves one data directory per process: every handle on it must close before another opens
        client = TestClient(create_api(components))
        page = client.get("/", params={"window": "all"}).text
        route_page = client.get("/routes/mixed", params={"window": "all"}).text
    finally:
        components.close()
    mixed_row = page.split('href="/routes/mixed"')[1].split("</tr>")[0]
    assert "mixed sampling" in mixed_row and "40.0%" in mixed_row
    assert "sampling" not in page.split('href="/routes/plain"')[1].split("</tr>")[0]
    unsupported_row = route_page.split('<th scope="row">unsupported</th>')[1].split("</tr>")[0]
    assert ">6<" in unsupported_row and "40.0%" in unsupported_row  # 6 claims verified, 40% of the traffic's
    assert 'id="sampling-note"' in route_page


def test_unsafe_serve_and_the_abstention_pair_are_weighted_too(rates):
    mixed = by_route(rates)["mixed"]
    # events carry no action or answerability here: every share has no answers behind it
    assert mixed["unsafe_serve"]["rate"] is None and mixed["abstention"]["rate"] == 0.0
    served = Counts(
        events=4,
        served=4,
        served_unsafe=1,
        sampled=1,
        w_events=13.0,
        w2_events=103.0,
        w_served=13.0,
        w_served_unsafe=10.0,
        claims=4,
        w_claims=13.0,
        w2_claims=103.0,
    )
    unsafe = rate_entry({"route": "r", **served.as_dict()})["unsafe_serve"]
    assert unsafe["rate"] == pytest.approx(10 / 13) and (unsafe["count"], unsafe["of"]) == (1, 4)
    assert unsafe["lo"] < 10 / 13 < unsafe["hi"] and unsafe["hi"] - unsafe["lo"] > 0.5  # worth ~1.6 answers


def test_the_calibrated_rates_traffic_is_weighted_like_the_rate(rates):
    """The calibration corrects the whole traffic's raw rate, not the verified sample's (which reads 6 / 42)."""
    from services.review.traffic import Traffic
    from services.store.review import ReviewRepository

    profiles = ReviewRepository(rates.store).answer_profile(START - timedelta(hours=1), START + timedelta(hours=1))
    traffic = {row["route"]: Traffic.from_row(row) for row in profiles}
    assert traffic["mixed"].raw == pytest.approx(by_route(rates)["mixed"]["rate"]) == pytest.approx(0.4)
    assert traffic["plain"].raw == 0.5
    # Each long answer stands for ten: its variance term counts a hundred-fold, not ten (one answer was seen).
    unweighted = Traffic("mixed", "", traffic["mixed"].failed, traffic["mixed"].claims, traffic["mixed"].weights)
    assert traffic["mixed"].raw_variance > 5 * unweighted.raw_variance
