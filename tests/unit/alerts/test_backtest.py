"""`claimwatch backtest`: the live rate and detector code over a file, in event time.

One simulated file (five routes at a fifth of the demo's volume, four hours, a new model on
billing-faq from minute 150 and a corpus update on parcel-status from minute 190, bad input and
duplicate deliveries) is replayed three ways: by the backtest, through the live writer with
the evaluator stepping one minute at a time, and against a recorded transition list.
"""

from __future__ import annotations

import gc
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from services.alerts.evaluation.backtest import BucketLoader, read_chunks
from services.alerts.evaluation.evaluator import MINUTE
from services.alerts.lifecycle.records import alert_repository
from services.app.compose import evaluator_for, run_backtest
from services.app.settings import Settings
from services.client.simulate import Scenario, generate, write_jsonl
from services.contract.decode import Decoder, Rejection
from services.core.gcpolicy import bulk_allocation
from services.store.backends import ChdbStore
from services.store.convert import parse_ch_time
from services.store.dlq import DeadLetterRepository
from services.store.migrate import migrate
from services.store.rates import COUNT_FIELDS, SUM_FIELDS, RateRepository
from services.store.retention import KEEP_EVERYTHING, RetentionKeeper
from services.store.scratch import private_store
from services.store.writer import EventWriter

START = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
MINUTES, MODEL_AT, CORPUS_AT = 240, 150, 190
# A two-hour baseline that warms up after 3,000 claims, so four hours of a fifth of the demo's volume suffice.
# The CUSUM's h and design are pinned so that the recorded list below does not move with the detector's defaults.
SETTINGS = Settings(
    drift={"baseline_minutes": 120, "detector": {"min_baseline_claims": 3000, "h": 10.5, "design_shift": 0.02}}
)

# Recorded when a baseline under a day old learned with a local level and the margin its finished hours earn
# (issues 21 and 55; four hours are less than a day, so the margin applies, mix-adjusted); the same rate and
# detector code must keep giving these.
# Re-record only when the detector's defaults change.
RECORDED = [
    ("billing-faq", "pending", "2026-11-21T08:48:00+00:00", 0.131617, 0.067346),
    ("billing-faq", "firing", "2026-11-21T08:58:00+00:00", 0.140965, 0.067346),
    ("parcel-status", "pending", "2026-11-21T09:25:00+00:00", 0.07961, 0.049271),
    ("parcel-status", "firing", "2026-11-21T09:39:00+00:00", 0.081849, 0.049271),
]


@pytest.fixture(scope="module")
def events_file(tmp_path_factory) -> tuple[Path, list]:
    scenario = Scenario.demo(regression_at=MODEL_AT, corpus_change_at=CORPUS_AT).scaled(0.2)
    sims = list(generate(scenario, START, MINUTES, seed=3))
    path = tmp_path_factory.mktemp("backtest") / "events.jsonl"
    write_jsonl(sims, path)
    return path, sims


@pytest.fixture(scope="module")
def backtest(events_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("alerts") / "alerts.jsonl"
    summary = run_backtest(events_file[0], out, SETTINGS, chunk=4000)  # several chunks, so inserts overlap decoding
    return summary, [orjson.loads(line) for line in out.read_bytes().splitlines()]


@pytest.mark.slow
def test_every_line_is_counted_once(events_file, backtest):
    _, sims = events_file
    summary, _ = backtest
    assert summary.rejected == sum(sim.bad_rule is not None for sim in sims) > 0  # labelled by the simulator
    assert summary.duplicates == sum(sim.duplicate for sim in sims) > 0
    assert summary.events + summary.rejected + summary.duplicates == len(sims)
    assert summary.minutes == MINUTES


def test_model_regression_fires_on_its_route_naming_the_new_model(backtest):
    _, records = backtest
    firing = [r for r in records if r["state"] == "firing"]
    by_route = {r["route"]: r for r in firing}
    assert set(by_route) == {"billing-faq", "parcel-status"}  # the two injected changes, nothing else
    model = by_route["billing-faq"]
    delay = datetime.fromisoformat(model["at"]) - (START + timedelta(minutes=MODEL_AT))
    assert timedelta(0) < delay <= timedelta(minutes=30)  # 12 answers a minute at this scale
    assert model["delta"] >= 0.02
    assert (model["suspect_changes"][0]["key"], model["suspect_changes"][0]["value"]) == ("model", "gen-2026-11")
    corpus = by_route["parcel-status"]["suspect_changes"][0]
    assert (corpus["key"], corpus["kind"]) == ("corpus", "evidence")


def test_transitions_equal_the_recorded_list(backtest):
    _, records = backtest
    got = [(r["route"], r["state"], r["at"], round(r["rate"], 6), round(r["baseline"], 6)) for r in records]
    assert got == RECORDED


@pytest.mark.slow
def test_same_buckets_and_transitions_as_the_live_writer_and_evaluator(events_file, backtest, tmp_path):
    """The backtest's shortcuts (rate columns only, no per-claim view, in-memory dedup) change nothing:
    the live writer fills the same minute buckets, and the live evaluator stepping one minute at a
    time (as its timer does) emits the same transitions."""
    path, _ = events_file
    sums = ", ".join(f"sum({c}) AS {c}" for c in COUNT_FIELDS)
    buckets = (
        f"SELECT dim, value, route, minute, {sums} FROM rate_minute "
        "GROUP BY dim, value, route, minute ORDER BY dim, value, route, minute"
    )
    quick = private_store(tmp_path / "quick")  # chDB holds one embedded store per process at a time
    BucketLoader(quick, Decoder()).load(read_chunks(path, 3000))
    quick_buckets = quick.query(buckets)
    quick.close()
    live = ChdbStore(tmp_path / "live")
    migrate(live)
    RetentionKeeper(live).apply(KEEP_EVERYTHING)  # as the private store: fixed event times never expire
    writer, decoder = EventWriter(live), Decoder()
    for chunk in read_chunks(path, 5000):
        writer.write([e for e in map(decoder.decode, chunk) if not isinstance(e, Rejection)])
    live_buckets = live.query(buckets)
    assert len(live_buckets) > MINUTES * 5 and quick_buckets == live_buckets

    settings = SETTINGS.model_copy(update={"drift": SETTINGS.drift.model_copy(update={"watermark_seconds": 0})})
    rates = RateRepository(live)
    evaluator = evaluator_for(settings, rates, DeadLetterRepository(live), alert_repository(live))
    first = parse_ch_time(live.query("SELECT min(minute) AS m FROM rate_minute WHERE dim = ''")[0]["m"])
    evaluator.last_minute = first - MINUTE
    transitions, minute, latest, step = [], first, rates.latest_minute(), 0
    while minute <= latest:  # the live timer's clock advances 1 to 4 minutes between evaluations
        transitions += evaluator.evaluate(minute + timedelta(seconds=30))
        step = step % 4 + 1
        minute += step * MINUTE
    transitions += evaluator.evaluate(latest + MINUTE)
    live.close()
    _, records = backtest
    assert [{"alert_id": a.alert_id, **a.transition_record()} for a in transitions] == records


@pytest.mark.slow
def test_a_sampled_stream_gives_the_backtest_and_the_live_writer_the_same_weighted_buckets(events_file, tmp_path):
    """Issue 24: long answers verified 1 in 10 (sampling.rate 0.1), the rest all verified."""
    path, _ = events_file
    sampled, rng = tmp_path / "sampled.jsonl", random.Random(7)
    with open(path, "rb") as source, open(sampled, "wb") as out:
        for line in source:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                event = None
            if isinstance(event, dict) and len(event.get("claims") or ()) >= 4:
                if rng.random() >= 0.1:
                    continue
                event["sampling"] = {"rate": 0.1}
                line = orjson.dumps(event) + b"\n"
            out.write(line)
    sums = ", ".join(f"round(sum({c}), 6) AS {c}" for c in SUM_FIELDS)
    buckets = (
        f"SELECT dim, value, route, minute, {sums} FROM rate_minute "
        "GROUP BY dim, value, route, minute ORDER BY dim, value, route, minute"
    )
    quick = private_store(tmp_path / "quick")
    BucketLoader(quick, Decoder()).load(read_chunks(sampled, 3000))
    quick_buckets = quick.query(buckets)
    quick.close()
    live = ChdbStore(tmp_path / "live")
    migrate(live)
    RetentionKeeper(live).apply(KEEP_EVERYTHING)
    writer, decoder = EventWriter(live), Decoder()
    for chunk in read_chunks(sampled, 5000):
        writer.write([e for e in map(decoder.decode, chunk) if not isinstance(e, Rejection)])
    live_buckets = live.query(buckets)
    live.close()
    assert quick_buckets == live_buckets
    whole = [b for b in live_buckets if b["dim"] == ""]
    assert sum(b["sampled"] for b in whole) > 100 and sum(b["w_claims"] for b in whole) > sum(
        b["claims"] for b in whole
    )


def test_bulk_allocation_restores_the_collector():
    before = gc.get_threshold()
    with bulk_allocation(threshold=12_345):
        assert gc.get_threshold()[0] == 12_345
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_blank_lines_are_skipped_and_chunks_keep_order(tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"a\n\n  \nb\r\nc")
    assert list(read_chunks(path, 2)) == [[b"a", b"b\r"], [b"c"]]
