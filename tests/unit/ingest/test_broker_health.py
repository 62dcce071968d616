"""BrokerHealth (services/ingest/ingestor.py): what a worker's /readyz says of its broker, from the outcomes of
the consumer-lag reads, with the monotonic clock passed in."""
from __future__ import annotations

from services.ingest.ingestor import BROKER_SILENCE_SECONDS, BrokerHealth


def test_the_broker_is_unreachable_once_no_read_has_answered_for_the_bound_whether_reads_fail_or_hang():
    assert BROKER_SILENCE_SECONDS == 15
    health = BrokerHealth(last_answer=100.0)  # the worker's start-up, which has just created its topics
    assert health.unreachable(115.0) is None
    health.failed("KafkaConnectionError: Connection refused")
    assert health.unreachable(110.0) is None  # one failed read is not an outage
    assert health.unreachable(116.4) == "no answer for 16 s (last error: KafkaConnectionError: Connection refused)"
    health.answered(117.0)
    assert health.unreachable(117.0) is None and health.error == ""
    # A frozen broker fails no read (each hangs): the silence alone says so.
    assert health.unreachable(132.0) is None
    assert health.unreachable(140.0) == "no answer for 23 s"
