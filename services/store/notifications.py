"""The notification log, as Alertmanager keeps its nflog: what is to be sent, and what was sent to
whom, so that it survives a restart.

A notification is logged once per (receiver, key) before its first attempt, as ``pending`` with its body; its
outcome (``delivered``, ``failed``: given up, ``dropped``: shed from a full queue) is a newer row of the same
(receiver, key) without the body, so a merge keeps only the outcome. Rows expire 7 days after they were logged.
The store does not import the alerts stage: an entry is anything with the fields of ``Notification``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import orjson

from services.store.convert import ch_time, parse_ch_time

if TYPE_CHECKING:
    from services.store.backends import Store

PENDING, DELIVERED, FAILED, DROPPED = "pending", "delivered", "failed", "dropped"


class Notification(Protocol):
    """What the log reads from a notification (services.alerts.notify.receivers.Outgoing)."""

    target: str  # the receiver
    url: str
    key: str | None
    headers: Mapping[str, str]
    body: object  # bytes are stored as they are; anything else as its JSON


def _bytes(body: object) -> bytes:
    return body if isinstance(body, bytes) else orjson.dumps(body)


class NotificationLog:
    def __init__(self, store: Store):
        self.store = store

    @staticmethod
    def _version(now: datetime) -> str:
        return now.strftime("%Y-%m-%d %H:%M:%S.%f")

    def record(self, items: Iterable[Notification], now: datetime) -> list[Notification]:
        """Log each item as pending, once per (receiver, key): returns those not logged before (in order)."""
        items = [i for i in items if i.key]
        if not items:
            return []
        seen = {
            (r["receiver"], r["key"])
            for r in self.store.query(
                "SELECT DISTINCT receiver, key FROM notification_log WHERE key IN {keys:Array(String)}",
                {"keys": sorted({i.key for i in items})},
            )
        }
        new = []
        for item in items:
            if (item.target, item.key) not in seen:
                seen.add((item.target, item.key))
                new.append(item)
        if new:
            self.store.insert(
                "notification_log",
                [
                    {
                        "receiver": i.target,
                        "key": i.key,
                        "state": PENDING,
                        "url": i.url,
                        "body": _bytes(i.body).decode(),
                        "headers": dict(i.headers),
                        "attempts": 0,
                        "error": "",
                        "created_at": ch_time(now),
                        "updated_at": self._version(now),
                    }
                    for i in new
                ],
            )
        return new

    def settle(self, item: Notification, state: str, attempts: int, error: str, now: datetime) -> None:
        """The item's outcome: ``delivered``, ``failed`` or ``dropped``; it is not reloaded after this."""
        self.store.insert(
            "notification_log",
            [
                {
                    "receiver": item.target,
                    "key": item.key,
                    "state": state,
                    "url": item.url,
                    "body": "",
                    "headers": {},
                    "attempts": attempts,
                    "error": error[:1000],
                    "created_at": ch_time(now),
                    "updated_at": self._version(now),
                }
            ],
        )

    _WAITING = (
        "FROM notification_log WHERE state = 'pending' AND created_at >= {since:DateTime64(3)} AND (receiver, key) "
        "NOT IN (SELECT receiver, key FROM notification_log WHERE state != 'pending')"
    )

    def pending(self, since: datetime) -> list[dict]:
        """Entries logged since ``since`` with no outcome yet, oldest first: receiver, key, url, body (bytes),
        headers, created_at."""
        rows = self.store.query(
            f"SELECT receiver, key, url, body, headers, toString(created_at) AS logged_at "
            f"{self._WAITING} ORDER BY created_at, receiver, key",
            {"since": ch_time(since)},
        )
        return [
            {
                "receiver": r["receiver"],
                "key": r["key"],
                "url": r["url"],
                "body": r["body"].encode(),
                "headers": r["headers"],
                "created_at": parse_ch_time(r.pop("logged_at")),
            }
            for r in rows
        ]

    def logged(self, keys: Iterable[str]) -> set[str]:
        """The keys among ``keys`` that the log holds, for any receiver and in any state."""
        keys = sorted(set(keys))
        if not keys:
            return set()
        return {
            r["key"]
            for r in self.store.query(
                "SELECT DISTINCT key FROM notification_log WHERE key IN {keys:Array(String)}", {"keys": keys}
            )
        }

    def first_logged(self, receiver: str) -> datetime | None:
        """When the log's oldest entry for ``receiver`` was logged: it has held what was sent to it since."""
        rows = self.store.query(
            "SELECT toString(min(created_at)) AS first, count() AS n FROM notification_log "
            "WHERE receiver = {receiver:String}",
            {"receiver": receiver},
        )
        return parse_ch_time(rows[0]["first"]) if rows and int(rows[0]["n"]) else None

    def entries(self, receiver: str) -> list[dict]:
        """Every logged entry of ``receiver`` as it stands now: key, state, attempts, error, created_at, updated_at."""
        rows = self.store.query(  # the outcome, else the pending row, however the clocks that wrote them went
            "SELECT key, argMax((state, attempts, error), (state != 'pending', updated_at)) AS last, "
            "toString(min(created_at)) AS logged, toString(max(updated_at)) AS settled FROM notification_log "
            "WHERE receiver = {receiver:String} GROUP BY key ORDER BY logged, key",
            {"receiver": receiver},
        )
        return [
            {
                "key": r["key"],
                "state": r["last"][0],
                "attempts": int(r["last"][1]),
                "error": r["last"][2],
                "created_at": parse_ch_time(r["logged"]),
                "updated_at": parse_ch_time(r["settled"]),
            }
            for r in rows
        ]

    # -- receivers' health ------------------------------------------------------
    def set_failing(self, receiver: str, since: datetime | None, error: str, now: datetime) -> None:
        """The start of ``receiver``'s current run of failed attempts (None: its last attempt succeeded)."""
        self.store.insert(
            "notification_receivers",
            [
                {
                    "receiver": receiver,
                    "failing_since": None if since is None else ch_time(since),
                    "last_error": error[:1000],
                    "updated_at": self._version(now),
                }
            ],
        )

    def receivers(self, since: datetime) -> dict[str, dict]:
        """Per receiver: ``waiting`` (entries logged since ``since`` with no outcome), ``oldest`` (when the oldest
        of them was logged), ``failing_since`` and ``last_error``."""
        out: dict[str, dict] = {}
        for r in self.store.query(
            f"SELECT receiver, count() AS waiting, toString(min(created_at)) AS oldest "
            f"{self._WAITING} GROUP BY receiver",
            {"since": ch_time(since)},
        ):
            out[r["receiver"]] = {"waiting": int(r["waiting"]), "oldest": parse_ch_time(r["oldest"])}
        # argMax skips NULLs: the tuple keeps a newer "not failing" (NULL) from losing to an older failure
        for r in self.store.query(
            "SELECT receiver, toString(argMax(tuple(failing_since), updated_at).1) AS since, "
            "argMax(last_error, updated_at) AS error FROM notification_receivers GROUP BY receiver"
        ):
            failing = r["since"] not in (None, "", "\\N", "NULL")
            out.setdefault(r["receiver"], {"waiting": 0, "oldest": None}).update(
                failing_since=parse_ch_time(r["since"]) if failing else None, last_error=r["error"] if failing else ""
            )
        for found in out.values():
            found.setdefault("failing_since", None)
            found.setdefault("last_error", "")
        return out
