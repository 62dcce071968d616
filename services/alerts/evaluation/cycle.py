"""One leader-only alerting tick as a plain object: evaluate, count, plan notifications, hand back records.

streams/timers.py calls ``evaluate`` and publishes what it returns to the alerts topic, and
calls ``resend`` on Alertmanager's schedule; the store work runs through ``run`` (the store's
thread), the notification queue stays on the event loop.

A resend must not wait for a busy or failing store: Alertmanager resolves an alert that is not re-sent
within its endsAt (four resends), so a stalled store would resolve every page. Past one resend interval
it goes out with the silences and explanations last read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

import orjson

from services.alerts.evaluation.evaluator import MINUTE, AlertEvaluator
from services.alerts.explain.explainer import AlertExplainer, explainable
from services.alerts.explain.shares import AlertExplanation
from services.alerts.lifecycle.alert import Alert
from services.alerts.lifecycle.kinds import KINDS
from services.alerts.lifecycle.records import AlertRecords
from services.alerts.lifecycle.silences import Silence
from services.alerts.notify.dispatch import Dispatcher
from services.alerts.notify.plan import alert_key
from services.core.metrics import Metrics
from services.core.threads import Run

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes]  # (key, value) for the alerts topic
RECONCILE_WITHIN = timedelta(hours=6)  # how far back a start looks for transitions that were never notified


class AlertHook(Protocol):  # services.review.agreement_alerts.InstrumentAlerts, services.alerts.evaluation.cardinality
    open: dict[str, Alert]

    def evaluate(self, now: datetime) -> list[Alert]: ...


class AlertCycle:
    def __init__(
        self,
        evaluator: AlertEvaluator,
        alerts: AlertRecords,
        dispatcher: Dispatcher,
        metrics: Metrics,
        run: Run,
        explainer: AlertExplainer | None = None,
        hooks: Sequence[AlertHook] = (),
    ):
        self.explainer = explainer  # names the issues behind each notified alert's excess
        # alerts beside the rate alerts: verifier-vs-human agreement (services/review/agreement_alerts.py), the
        # route bound (services/alerts/evaluation/cardinality.py)
        self.hooks = tuple(hooks)
        self.evaluator = evaluator
        self.alerts = alerts
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.run = run  # run(fn, *args) on the store's thread
        self.silences: list[Silence] | None = None  # as last read: what a resend uses when the store does not answer
        self.explained: dict[str, AlertExplanation] = {}  # by alert id, as last computed
        # Alerts whose transitions an evaluation has queued. The evaluator's open alerts change on the store's
        # thread before their notification (and its explanation) is queued; a resend in between would page
        # Alertmanager first with an alert that has no explanation yet.
        self.announced: set[str] = set()
        self.reconciled = dispatcher.nflog is None  # the first evaluation re-plans transitions the log lacks

    async def evaluate(self, now: datetime) -> list[Record]:
        """Advance the evaluator to ``now``; returns one transition record per changed alert (route -> JSON).

        A store hiccup is logged and yields no records: the evaluator resumes at the next tick. Either way the tick
        reports how far the evaluated minutes are behind ``now`` (claimwatch_evaluator_lag_seconds).
        """
        started = time.perf_counter()
        try:
            missed = [] if self.reconciled else await self._unannounced(now)
            transitions = await self.run(self.evaluator.evaluate, now)
            for hook in self.hooks:
                transitions += await self.run(hook.evaluate, now)
            silences = self.silences = await self.run(self.alerts.silences, now)
        except Exception:
            log.exception("alert evaluation failed; retrying at the next tick")
            return []
        finally:
            if self.evaluator.last_minute is not None:  # None until a minute is evaluated (or a checkpoint read)
                self.metrics.evaluator_lag.set((now - self.evaluator.last_minute - MINUTE).total_seconds())
        self.reconciled = True
        self.metrics.eval_seconds.observe(time.perf_counter() - started)
        explanations = await self._explanations(
            [a for a in transitions + missed if a.recorded_state != "pending" and a.kind in KINDS], now
        )  # agreement alerts have no excess
        self.explained.update(explanations)
        records, outgoing = [], []
        for alert in transitions:
            self.metrics.alert_transitions.labels(alert.recorded_state).inc()
            records.append(
                (alert.route.encode(), orjson.dumps({"alert_id": alert.alert_id, **alert.transition_record()}))
            )
        # inhibition (services/alerts/lifecycle/inhibition.py) over the alerts open after this evaluation
        open_now = self._open()
        inhibition = self.dispatcher.inhibition(open_now, now)
        resolved = [a for a in transitions + missed if a.recorded_state == "resolved"]
        told = await self._told([a for a in resolved if inhibition.sources(a)])
        for alert in missed:
            outgoing += self.dispatcher.plan(
                None, alert, silences, now, explanations.get(alert.alert_id), inhibition, alert.alert_id in told
            )
        if outgoing:
            log.warning(
                "sending %d notifications of alert transitions recorded before a restart and never logged "
                "for sending: %s",
                len(outgoing),
                ", ".join(sorted({o.key for o in outgoing if o.key is not None})),
            )
        for alert in transitions:
            outgoing += self.dispatcher.plan(
                None, alert, silences, now, explanations.get(alert.alert_id), inhibition, alert.alert_id in told
            )
        outgoing += self.dispatcher.released(resolved, open_now, silences, now, self.explained)
        await self.dispatcher.enqueue(outgoing)
        self.announced = {a.alert_id for a in self._open()}
        states = Counter(a.recorded_state for a in self._open())
        for state in ("pending", "firing"):
            self.metrics.alerts.labels(state).set(states.get(state, 0))
        return records

    async def _unannounced(self, now: datetime) -> list[Alert]:
        """Alerts whose last transition (firing or resolved, within RECONCILE_WITHIN) the notification log lacks:
        the process died after the evaluator's checkpoint and before their notification was logged. Planned again
        at the first evaluation; the log takes each key once, so one the evaluation re-derives is not sent twice."""
        recent = await self.run(self.alerts.recent_transitions, now - RECONCILE_WITHIN)
        unlogged = await self.dispatcher.unlogged([alert_key(*transition) for transition in recent])
        found = []
        for alert_id, state in recent:
            if alert_key(alert_id, state) in unlogged:
                alert = await self.run(self.alerts.get, alert_id)
                if alert.recorded_state == state:  # its newest transition: an older one is not worth telling now
                    found.append(alert)
        return found

    async def _told(self, alerts: list[Alert]) -> set[str]:
        """The ids among ``alerts`` (inhibited, just resolved) whose firing was sent before their inhibition: the
        notification log holds it. Without a log, or when it does not answer, none: an inhibited alert stays
        quiet."""
        if not alerts or self.dispatcher.nflog is None:
            return set()
        keys = {a.alert_id: alert_key(a.alert_id, "firing") for a in alerts}
        try:
            unlogged = await self.dispatcher.unlogged(keys.values())
        except Exception as exc:
            log.warning("could not read the notification log (%s); inhibited resolutions stay unsent", exc)
            return set()
        return {alert_id for alert_id, key in keys.items() if key not in unlogged}

    async def resend(self, now: datetime) -> None:
        """Re-send firing alerts neither silenced nor inhibited (Alertmanager resolves alerts that stop arriving);
        with the last silences and explanations read when the store does not answer within one resend interval."""
        firing = [
            a for a in self.evaluator.open.values() if a.recorded_state == "firing" and a.alert_id in self.announced
        ]
        try:
            await asyncio.wait_for(self._read(firing, now), self.dispatcher.resend_every.total_seconds())
        except Exception as exc:
            if self.silences is None:
                log.exception("could not read silences and none were read before; skipping this resend")
                return
            log.warning(
                "the store did not answer the resend (%s); re-sending with the silences and explanations last read",
                type(exc).__name__,
            )
        # The alerts announced now, not those firing when the read began: one that fired during the read was
        # explained by its evaluation, and the resend must carry that explanation, not drop it.
        announced = [a for a in self._open() if a.alert_id in self.announced]
        self.explained = {k: v for k, v in self.explained.items() if k in self.announced}
        assert self.silences is not None  # read now, or before: a failed read without any returned above
        await self.dispatcher.enqueue(self.dispatcher.resend(announced, self.silences, now, self.explained))

    def _open(self) -> list[Alert]:
        return [*self.evaluator.open.values(), *(a for hook in self.hooks for a in hook.open.values())]

    async def _read(self, firing: list[Alert], now: datetime) -> None:
        self.silences = await self.run(self.alerts.silences, now)
        self.explained.update(await self._explanations(firing, now))

    def explain_all(self, alerts: list[Alert], now: datetime) -> dict[str, AlertExplanation]:
        """Explanations by alert id (on the store's thread); an alert that cannot be explained goes without."""
        out: dict[str, AlertExplanation] = {}
        explainer = self.explainer
        if explainer is None:  # nothing explains them
            return out
        for alert in filter(explainable, alerts):
            try:
                out[alert.alert_id] = explainer.explain(alert, now)
            except Exception:
                log.exception("could not explain alert %s; notifying without its issues", alert.alert_id)
        return out

    async def _explanations(self, alerts: list[Alert], now: datetime) -> dict[str, AlertExplanation]:
        if self.explainer is None or not alerts:
            return {}
        explanations: dict[str, AlertExplanation] = await self.run(self.explain_all, alerts, now)
        return explanations
