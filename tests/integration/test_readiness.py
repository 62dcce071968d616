"""A worker's readiness follows its broker: /readyz answers 503 naming the broker while the broker is frozen
(SIGSTOP: it keeps its sockets and answers nothing) or stopped, and ready again once it answers; the
claimwatch_broker_up gauge says the same to Prometheus."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import WorkerProcess
from services.app.broker import EmbeddedBroker, create_topics
from services.ingest.offsets import BrokerOffsets


def readiness(worker: WorkerProcess) -> tuple[int, dict] | None:
    try:
        response = httpx.get(worker.url + "/readyz", timeout=10)
    except httpx.TransportError:
        return None
    return response.status_code, response.json()


def broker_up(worker: WorkerProcess) -> float:
    (value,) = [
        s.value
        for family in text_string_to_metric_families(worker.get_text("/metrics"))
        for s in family.samples
        if s.name == "claimwatch_broker_up"
    ]
    return value


def wait_ready(worker: WorkerProcess, timeout: float, what: str) -> None:
    worker.wait_for(lambda: (readiness(worker) or (0,))[0] == 200, timeout, what)
    assert broker_up(worker) == 1


def wait_not_ready(worker: WorkerProcess, timeout: float, what: str) -> str:
    status, body = worker.wait_for(lambda: (r := readiness(worker)) and r[0] == 503 and r, timeout, what)
    assert body["ready"] is False
    assert broker_up(worker) == 0
    return body["reason"]


@pytest.mark.timeout(360)
def test_readiness_is_false_while_the_broker_is_frozen_or_stopped_and_true_again_after(topic_prefix, tmp_path):
    topics = [f"{topic_prefix}.verdicts", f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"]
    # A broker of its own: this test stops it, and the in-memory broker forgets its topics when it does.
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as broker:
        create_topics(broker.bootstrap, topics, 2)
        with WorkerProcess(
            broker.bootstrap,
            f"chdb:{tmp_path / 'ch'}",
            topic_prefix,
            tmp_path / "worker.log",
            env={"CLAIMWATCH_CLUSTERING__IN_WORKER": "false"},
        ) as worker:
            wait_ready(worker, 60, "the worker to be ready")

            broker.freeze()
            try:
                reason = wait_not_ready(worker, 60, "readiness to report the frozen broker")
            finally:
                broker.thaw()
            assert reason.startswith("broker unreachable: no answer for "), reason
            wait_ready(worker, 90, "the worker to be ready again after the thaw")

            broker.stop()
            reason = wait_not_ready(worker, 60, "readiness to report the stopped broker")
            assert reason.startswith("broker unreachable: no answer for ") and "last error:" in reason, reason
            broker.start()
            create_topics(broker.bootstrap, topics, 2)  # what a broker that keeps its log still has
            wait_ready(worker, 120, "the worker to be ready again after the broker's restart")


def test_a_worker_with_no_partition_still_asks_the_broker():
    """With nothing assigned (more workers than partitions) the lag read has no offsets to read; its ping is a
    round trip all the same, so such a worker's readiness follows the broker too."""

    async def ping(offsets: BrokerOffsets) -> bool:
        try:
            await asyncio.wait_for(offsets.ping(), 5)
            return True
        except Exception:
            return False

    async def probe(broker: EmbeddedBroker) -> list[bool]:
        offsets = BrokerOffsets(broker.bootstrap, "no-partitions")
        try:
            answers = [await ping(offsets)]
            broker.freeze()
            try:
                answers.append(await ping(offsets))
            finally:
                broker.thaw()
            broker.stop()
            answers.append(await ping(offsets))
            return answers
        finally:
            await offsets.close()

    with EmbeddedBroker() as broker:
        assert asyncio.run(probe(broker)) == [True, False, False]
