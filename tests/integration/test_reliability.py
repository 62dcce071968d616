"""Nothing lost, nothing doubled: worker kills and a frozen broker, on real components (store faults:
tests/integration/test_store_faults.py)."""

from __future__ import annotations

import dataclasses
import random
import time
from datetime import UTC, datetime, timedelta

from bench.processes import WorkerProcess
from services.client.simulate import Regression, Scenario, expected_counts, generate
from tests.support.streaming import BATCHING, StreamingProducer, setup_topics, stream_through_kills, totals

CONFIG = """
[drift]
eval_interval_seconds = 1.0
watermark_seconds = 0
[drift.detector]
min_baseline_claims = 8000
"""


def test_sigkill_five_times_while_streaming_100k_events_in_envelopes(broker, topic_prefix, tmp_path):
    """Envelopes of up to 100 events per route, as batching producers send them; each chunk's bad input
    (not JSON, broken envelopes' events) is dead-lettered alone or with its index, exactly once."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    # Flat volume: under the diurnal curve a night-time run produced fewer than 100k events.
    scenario = dataclasses.replace(
        Scenario.demo(corpus_change_at=None),
        diurnal_amplitude=0.0,
        regressions=(Regression("billing-faq", 240, {"model": "gen-2026-11"}, 0.08),),
    )
    sims = list(generate(scenario, now - timedelta(minutes=330), 330, seed=17))
    expected = expected_counts(sims)
    assert len(sims) >= 100_000
    topic = setup_topics(broker, topic_prefix)
    config = tmp_path / "claimwatch.toml"
    config.write_text(CONFIG)
    worker = WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        args=["--config", str(config)],
        env={"CLAIMWATCH_INGEST__BATCH_SIZE": "1000", "CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    )
    producer = StreamingProducer(broker.bootstrap, topic, sims, chunk=4000, pause=1.0, batched=True)
    rng = random.Random(3)
    worker.start()
    producer.start()
    kills = 0
    seen = 0
    while kills < 5:
        # Kill only once this run has written something new, at a random point after that.
        seen = worker.wait_for(
            lambda seen=seen: (n := (totals(worker) or (0, 0))[0]) > seen + 500 and n, 240, "ingest resumed"
        )
        time.sleep(rng.uniform(0.2, 3.0))
        worker.kill()
        kills += 1
        worker.start()
    producer.join(300)
    assert producer.error is None and not producer.is_alive()
    want = (expected.valid_events, expected.bad_total)
    worker.wait_for(lambda: totals(worker) == want, 600, f"{want} after {kills} kills")
    rates = worker.get("/api/rates", window="all")
    assert {r["route"]: r["verdicts"] for r in rates} == expected.verdicts
    assert {d["reason"]: d["count"] for d in worker.get("/api/dlq")} == expected.bad
    # The evaluator survived the kills too: one alert for the regression, each transition once.
    alerts = worker.wait_for(
        lambda: [a for a in worker.get("/api/alerts", route="billing-faq") or [] if a["state"] == "firing"],
        120,
        "the regression's alert",
    )
    assert len(worker.get("/api/alerts", route="billing-faq")) == 1
    states = [t["state"] for t in worker.get(f"/api/alerts/{alerts[0]['alert_id']}")["transitions"]]
    assert states == ["pending", "firing"]
    worker.stop()


def test_sigkill_while_streaming_envelopes(broker, topic_prefix, tmp_path):
    """The kill test's exactness with batch envelopes: a kill lands between and inside envelope batches.
    With a batch of 5 messages, kills land inside a batch of envelopes too."""
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 6, 0, tzinfo=UTC), 40, seed=31))
    expected = expected_counts(sims)
    topic = setup_topics(broker, topic_prefix)
    worker = WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_INGEST__BATCH_SIZE": "5", "CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    )
    producer = StreamingProducer(broker.bootstrap, topic, sims, chunk=2000, pause=0.5, batched=True)
    rng = random.Random(5)
    stream_through_kills(worker, producer, (expected.valid_events, expected.bad_total), rng, (0.2, 1.5))
    assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
    assert {d["reason"]: d["count"] for d in worker.get("/api/dlq")} == expected.bad
    worker.stop()


@BATCHING
def test_broker_frozen_for_30_seconds_loses_nothing(broker, topic_prefix, tmp_path, batched):
    sims = list(generate(Scenario.demo(), datetime(2026, 11, 21, 7, 0, tzinfo=UTC), 40, seed=23))
    expected = expected_counts(sims)
    topic = setup_topics(broker, topic_prefix)
    with WorkerProcess(
        broker.bootstrap,
        f"chdb:{tmp_path / 'ch'}",
        topic_prefix,
        tmp_path / "worker.log",
        env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
    ) as worker:
        producer = StreamingProducer(broker.bootstrap, topic, sims, chunk=2000, pause=0.5, batched=batched)
        producer.start()
        worker.wait_for(lambda: (totals(worker) or (0, 0))[0] > 2000, 120, "ingest under way")
        broker.freeze()
        try:
            time.sleep(30)
        finally:
            broker.thaw()
        producer.join(300)
        assert producer.error is None
        want = (expected.valid_events, expected.bad_total)
        worker.wait_for(lambda: totals(worker) == want, 300, f"{want} after the freeze")
        assert {r["route"]: r["verdicts"] for r in worker.get("/api/rates", window="all")} == expected.verdicts
