"""What is to be sent survives a kill (issue 49, finding 7): an alert fires, its webhook refuses it, the worker is
killed with SIGKILL before it is delivered; the restarted worker delivers it, once. A restart with nothing pending
delivers nothing twice. Broker, worker processes, chDB and the webhook (a real HTTP server) are all real."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.processes import WorkerProcess, send_all
from services.app.broker import create_topics
from services.client.simulate import generate
from tests.integration.test_alerting import CONFIG as ALERTING_CONFIG
from tests.integration.test_alerting import scenario
from tests.support.receiver import Receiver

# Attempts seconds apart: the notification is still being retried when the worker is killed.
CONFIG = ALERTING_CONFIG.replace("[notify]\n", "[notify]\nretry_initial_seconds = 5.0\nretry_max_seconds = 30.0\n")


def traffic(now: datetime) -> list:
    """Two routes that regress (tests/integration/test_alerting.py): each fires within minutes."""
    start = now - timedelta(minutes=240)
    return list(generate(scenario(False), start, 120, seed=5)) + list(
        generate(scenario(True), start + timedelta(minutes=120), 45, seed=6)
    )


def told(posts) -> Counter:
    """(alert id, reason: new firing, resolved) of each webhook post."""
    return Counter((body["alert"]["alert_id"], body["reason"]) for body in (orjson.loads(p[2]) for p in posts))


def sample(worker: WorkerProcess, name: str, labels: dict | None = None) -> float | None:
    for family in text_string_to_metric_families(worker.get_text("/metrics")):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
                return s.value
    return None


def settled(worker: WorkerProcess) -> bool:
    """The leader has evaluated a few times since it started (so it has reloaded the log and re-planned what the
    log lacked) and nothing waits for the webhook."""
    return (sample(worker, "claimwatch_evaluation_seconds_count") or 0) >= 3 and sample(
        worker, "claimwatch_notification_queue_depth", {"receiver": "webhook"}
    ) == 0


def test_an_alert_killed_before_delivery_is_delivered_once_after_the_restart(broker, topic_prefix, tmp_path):
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    create_topics(
        broker.bootstrap, [f"{topic_prefix}.verdicts", f"{topic_prefix}.verdicts.dlq", f"{topic_prefix}.alerts"], 2
    )
    config = tmp_path / "claimwatch.toml"
    config.write_text(CONFIG)

    with Receiver(failures=10**9) as hook:  # refuses everything until told otherwise

        def worker() -> WorkerProcess:
            return WorkerProcess(
                broker.bootstrap,
                f"chdb:{tmp_path / 'ch'}",
                topic_prefix,
                tmp_path / "worker.log",
                env={"CLAIMWATCH_NOTIFY__WEBHOOK_URL": hook.url},
                args=["--config", str(config)],
            )

        first = worker().start()
        send_all(broker.bootstrap, f"{topic_prefix}.verdicts", traffic(now))
        refused = first.wait_for(lambda: told(hook.posts), 300, "an alert's notification, refused by the webhook")
        first.kill()  # SIGKILL, mid-retry
        assert hook.accepted == []
        hook.failures = 0  # the webhook is back

        second = worker().start()
        second.wait_for(lambda: told(hook.accepted).keys() >= refused.keys(), 120, "the refused alert delivered")
        second.wait_for(lambda: settled(second), 60, "the restarted leader to settle")
        delivered = told(hook.accepted)
        assert all(delivered[k] == 1 for k in refused), delivered  # once each
        assert all(n == 1 for n in delivered.values()), delivered  # nothing told twice
        assert sample(second, "claimwatch_notifications_sent_total", {"receiver": "webhook"}) == len(delivered)
        second.kill()

        logged = (tmp_path / "worker.log").stat().st_size
        third = worker().start()  # nothing pending: nothing is sent again
        third.wait_for(lambda: settled(third), 60, "the third leader to settle")
        again = told(hook.accepted)
        assert all(n == 1 for n in again.values()), again
        with open(tmp_path / "worker.log", encoding="utf-8", errors="replace") as log:
            log.seek(logged)
            assert "notification log: 0 undelivered notifications reloaded" in log.read()
        third.stop()
