"""The issue webhook: signed JSON events a team's bridge opens, updates and reopens tickets from.

Events are the issue's activity entries of the kinds in ``EVENTS``; each is rendered (pure) into one
``Outgoing`` that the alert notifier's queue sends with its retries (services/alerts/notify/dispatch.py).
The body is signed with the shared secret: ``X-Claimwatch-Signature: sha256=<hex HMAC-SHA256(secret, body)>``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

import orjson

from services.alerts.notify.receivers import ISSUE_WEBHOOK, Outgoing

EVENTS = ("created", "regressed", "escalating", "assigned", "resolved")
SIGNATURE_HEADER = "X-Claimwatch-Signature"
TARGET = ISSUE_WEBHOOK  # its receiver (its own queue; the metrics' label)


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does: recompute the signature and compare in constant time."""
    return hmac.compare_digest(signature(secret, body), header)


def event_text(event: str, issue: Mapping, entry: Mapping) -> str:
    text = f"[{event.upper()}] {issue['name']} ({issue['issue_id']}), owner {issue['owner']}"
    if event == "assigned":
        text += f": assigned to {entry.get('assignee')} by {entry.get('by')}"
    if event == "regressed" and issue.get("ticket_url"):
        text += f"; its ticket {issue['ticket_url']} was closed with it: reopen it"
    return text


def event_body(entry: Mapping, issue: Mapping) -> dict:
    """One event: ``entry`` (an activity entry) on ``issue`` (the issue's view: id, name, team, owner, link,
    runbook)."""
    event = entry["event"]
    linked = bool(issue.get("ticket_url"))
    return {
        "event": event,
        "at": entry["at"],
        "by": entry.get("by") or "claimwatch",
        "text": event_text(event, issue, entry),
        "issue": {k: issue.get(k) for k in ("issue_id", "name", "state", "routes", "count", "assignee")},
        "team": issue["team"],
        "owner": issue["owner"],
        "ticket_url": issue.get("ticket_url") or None,
        "runbook_url": issue["runbook_url"],
        "reopen_ticket": event == "regressed" and linked,
        "delivery": hashlib.sha256(f"{issue['issue_id']}|{event}|{entry['at']}".encode()).hexdigest()[:24],
    }


class IssueWebhook:
    """Renders events for one target; ``secret`` signs them."""

    def __init__(self, url: str, secret: str | None):
        self.url, self.secret = url, secret

    def outgoing(self, entry: Mapping, issue: Mapping) -> Outgoing:
        event = event_body(entry, issue)
        body = orjson.dumps(event)
        headers = {"Content-Type": "application/json", "X-Claimwatch-Event": entry["event"]}
        if self.secret:
            headers[SIGNATURE_HEADER] = signature(self.secret, body)
        return Outgoing(TARGET, self.url, body, headers=headers, key=f"issue/{event['delivery']}")
