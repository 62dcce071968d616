"""SIGTERM or SIGINT stops `claimwatch up`, `worker` and `api` within 15 s: idle, mid re-cluster and mid ingest; a
restart loses and doubles nothing. (A worker whose store refuses every write: tests/integration/test_store_faults.py.)

Real components: the Tansu broker (the session fixture, so the log outlives `up`), chDB, the
bundled embedding model, UMAP and HDBSCAN. The re-cluster is caught in its fit, which runs in a
child process of `up`; the test signals only `up` itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import WorkerProcess, get_json, send_all
from bench.procfs import alive, recluster_child
from services.app.broker import create_topics, free_port
from services.client.simulate import Scenario, expected_counts, generate
from tests.support.upstack import STOP_WITHIN, Up, stop_within


@pytest.fixture
def ups():
    started: list[Up] = []
    yield started
    for up in started:
        up.kill()


def send_backlog(broker, topic_prefix: str, minutes: int, seed: int):
    """The demo's traffic of the last ``minutes``, on topics of four partitions, before `up` starts; what it holds."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    sims = list(generate(Scenario.demo(), now - timedelta(minutes=minutes), minutes, seed=seed))
    topic = f"{topic_prefix}.verdicts"
    create_topics(broker.bootstrap, [topic, f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 4)
    send_all(broker.bootstrap, topic, sims)
    return expected_counts(sims)


def totals(up: Up):
    rates, dlq = up.get("/api/rates", window="all"), up.get("/api/dlq")
    if rates is None or dlq is None:
        return None
    return sum(r["events"] for r in rates), sum(d["count"] for d in dlq)


def finished(up: Up, topic: str, partitions: int = 4) -> bool:
    """`up`'s worker has finished every message of every partition of ``topic`` up to its log end (its
    claimwatch_consumer_lag gauge): nothing it read is still on its way to the store."""
    response = httpx.get(up.url + "/metrics", timeout=30)
    if response.status_code != 200:
        return False
    lags = {
        s.labels["partition"]: s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
        if s.name == "claimwatch_consumer_lag" and s.labels["topic"] == topic
    }
    return len(lags) == partitions and set(lags.values()) == {0}


def test_sigterm_during_a_recluster_stops_up_within_15s_and_a_restart_stores_every_event_once(
    broker, topic_prefix, tmp_path, ups
):
    expected = send_backlog(broker, topic_prefix, minutes=40, seed=5)
    env = {"CLAIMWATCH_CLUSTERING__INTERVAL_MINUTES": "0.05", "CLAIMWATCH_CLUSTERING__RECLUSTER_MIN_NEW_CLAIMS": "1"}

    up = Up(tmp_path / "up", broker.bootstrap, topic_prefix, env)
    ups.append(up)
    up.start()
    child = up.wait_for(lambda: recluster_child(up.proc.pid), 120, "a re-cluster's child process")
    took = up.terminate()
    assert took < STOP_WITHIN
    assert not alive(child), "the re-cluster's process outlived `claimwatch up`"
    log = up.log()
    assert "re-clustering abandoned" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert up.get("/api/issues") is None  # gone, port released

    again = Up(tmp_path / "up", broker.bootstrap, topic_prefix, env)  # same store, same consumer group
    ups.append(again)
    again.start()
    want = (expected.valid_events, expected.bad_total)
    again.wait_for(lambda: totals(again) == want, 180, f"{want} after the restart")
    assert {r["route"]: r["verdicts"] for r in again.get("/api/rates", window="all")} == expected.verdicts
    again.wait_for(lambda: finished(again, f"{topic_prefix}.verdicts"), 60, "every message finished")
    assert totals(again) == want  # nothing arrives twice late
    assert again.terminate() < STOP_WITHIN


def test_ctrl_c_mid_ingest_and_sigterm_when_idle_stop_up_within_15s_and_nothing_is_lost_or_doubled(
    broker, topic_prefix, tmp_path, ups
):
    """A backlog of four hours of demo traffic (~49,000 answers): Ctrl-C while it is half stored, then a restart
    stores the rest exactly once, and SIGTERM stops the caught-up, idle stack."""
    expected = send_backlog(broker, topic_prefix, minutes=240, seed=8)
    want = (expected.valid_events, expected.bad_total)

    up = Up(tmp_path / "up", broker.bootstrap, topic_prefix, {})
    ups.append(up)
    up.start()
    stored = up.wait_for(lambda: (t := totals(up)) and 0 < t[0] < want[0] and t, 120, "part of the backlog stored")
    assert up.terminate(signal.SIGINT) < STOP_WITHIN
    assert "Traceback" not in up.log(), up.log()[-3000:]

    again = Up(tmp_path / "up", broker.bootstrap, topic_prefix, {})
    ups.append(again)
    again.start()
    assert totals(again)[0] >= stored[0]
    again.wait_for(lambda: totals(again) == want, 240, f"{want} after the restart")
    assert {r["route"]: r["verdicts"] for r in again.get("/api/rates", window="all")} == expected.verdicts
    assert again.terminate(signal.SIGTERM) < STOP_WITHIN


def test_the_worker_and_the_api_alone_stop_within_15s_on_sigterm_and_sigint(broker, topic_prefix, tmp_path):
    """`claimwatch worker` and `claimwatch api`, idle, each on the signal a service manager and a terminal send."""
    create_topics(
        broker.bootstrap, [f"{topic_prefix}.verdicts", f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        worker = WorkerProcess(
            broker.bootstrap,
            f"chdb:{tmp_path / sig.name / 'worker'}",
            topic_prefix,
            tmp_path / f"worker-{sig.name}.log",
        ).start()
        worker.wait_for(lambda worker=worker: worker.get("/readyz") is not None, 60, "the worker to be ready")
        assert stop_within(worker.proc, sig, worker.log_path) < STOP_WITHIN

        port = free_port()
        log = tmp_path / f"api-{sig.name}.log"
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "CLAIMWATCH_API__PORT": str(port),
            "CLAIMWATCH_API__URL": f"http://127.0.0.1:{port}",
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
        }
        with open(log, "ab") as out:
            api = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "services.app.cli",
                    "api",
                    "--kafka",
                    broker.bootstrap,
                    "--clickhouse",
                    f"chdb:{tmp_path / sig.name / 'api'}",
                    "--topic-prefix",
                    topic_prefix,
                ],
                env=env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        try:
            deadline = time.monotonic() + 60
            while get_json(f"http://127.0.0.1:{port}", "/healthz") is None:
                assert api.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
                time.sleep(0.2)
            assert stop_within(api, sig, log) < STOP_WITHIN
        finally:
            if api.poll() is None:
                os.killpg(api.pid, signal.SIGKILL)
