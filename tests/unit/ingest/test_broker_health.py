"""BrokerHealth (services/ingest/ingestor.py): what a worker's /readyz says of its broker, from the outcomes of
its pings, with the monotonic clock passed in."""

from __future__ import annotations

from services.ingest.ingestor import BROKER_SILENCE_SECONDS, BrokerHealth


def test_the_broker_is_unreachable_once_a_ping_has_gone_unanswered_for_the_bound_whether_pings_fail_or_hang():
    assert BROKER_SILENCE_SECONDS == 15
    health = BrokerHealth()
    assert health.unreachable(1000.0) is None  # no ping yet (a slow start): nothing is waited for
    health.asking(100.0)
    health.failed("KafkaConnectionError: Connection refused")
    assert health.unreachable(110.0) is None  # one failed ping is not an outage
    health.asking(105.0)  # the next ping: the wait is counted from the first one unanswered
    assert health.unreachable(116.4) == "no answer for 16 s (last error: KafkaConnectionError: Connection refused)"
    health.answered(117.0)
    assert health.unreachable(140.0) is None and health.error == ""
    # A frozen broker fails no ping (each hangs): the wait alone says so.
    health.asking(141.0)
    assert health.unreachable(156.0) is None
    assert health.unreachable(164.0) == "no answer for 23 s"
