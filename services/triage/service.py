"""What people do to triage an issue (assign, archive, note, link, resolve) and what the leader does by itself
(wake archived issues, record escalations, send the webhook's events). API and CLI share it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from urllib.parse import urlparse

from clustering.issue import RESOLVED, IssueRecord
from services.alerts.notify.receivers import Outgoing
from services.core.clock import utcnow
from services.core.errors import Conflict
from services.issues.activity import SYSTEM, dominant_route, entries_between, entry
from services.issues.archive import CLAIMS, Archive
from services.issues.owners import VERSION_KEYS
from services.issues.priority import ESCALATION_HISTORY_HOURS, RECENT_HOURS, is_escalating
from services.issues.records import IssueRecords, surviving
from services.triage.webhook import EVENTS, IssueWebhook

MAX_NOTE_CHARS = 4000
# How long after its time an entry may be saved and still be sent: a re-cluster's entries carry the time it began.
LATE = timedelta(hours=6)


def _said(value: str, what: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"{what} must not be blank")
    return value.strip()


def _recorded(record: IssueRecord, added: list[dict], woke: bool) -> IssueRecord:
    return replace(record, archive=None if woke else record.archive, history=(*record.history, *added))


class TriageService:
    """``view(issue_id)``: the issue as the API shows it (IssuesService.summary): each change returns it, and the
    webhook's events carry it."""

    def __init__(
        self,
        issues: IssueRecords,
        view: Callable[[str], dict],
        webhook: IssueWebhook | None = None,
        clock: Callable[[], datetime] = utcnow,
        resume_from: Callable[[], datetime | None] | None = None,
    ):
        """``resume_from``: since when the notification log has held the webhook's events (None: it holds none);
        the first tick sends what an earlier process left unsent since then, and the log sends each event once."""
        self.issues, self.view, self.webhook, self.clock = issues, view, webhook, clock
        self.started = clock()  # the webhook sends entries made after it, each once
        self.resume_from = resume_from
        self.sent: set[tuple[str, str, str]] = set()  # (issue, event, at) of the entries sent in the last LATE

    def _change(self, record: IssueRecord, event: str, by: str, fields: dict, **details) -> dict:
        """Save the record with ``fields`` changed and the activity entry ``event`` with ``details``; its view."""
        done = entry(self.clock(), event, _said(by, "by: who does this"), **details)
        self.issues.save([replace(record, **fields, history=(*record.history, done))])
        return self.view(record.issue_id)

    def _live(self, issue_id: str) -> IssueRecord:
        """The issue, or the one it was merged into (as Sentry leads a merged issue's link to the one that took
        it): a re-cluster may merge the issue a page named minutes after the page printed its id."""
        record = surviving(self.issues, self.issues.get(issue_id))
        if record.merged_into:
            raise Conflict(f"the merges of issue {issue_id} lead in a loop back to {record.issue_id}")
        return record

    def assign(self, issue_id: str, assignee: str, by: str) -> dict:
        who = _said(assignee, "assignee")
        return self._change(self._live(issue_id), "assigned", by, {"assignee": who, "triaged": True}, assignee=who)

    def unassign(self, issue_id: str, by: str) -> dict:
        record = self._live(issue_id)
        if not record.assignee:
            raise Conflict(f"issue {issue_id} is not assigned")
        return self._change(record, "unassigned", by, {"assignee": ""}, was=record.assignee)

    def archive(self, issue_id: str, by: str, duration: timedelta | None = None, claims: int | None = None) -> dict:
        record = self._live(issue_id)
        if record.state == RESOLVED:
            raise Conflict(f"issue {issue_id} is resolved; an archive is for issues still failing")
        archive = Archive.start(self.clock(), duration, claims)
        return self._change(
            record, "archived", by, {"archive": archive.as_dict(), "triaged": True}, until=archive.describe()
        )

    def unarchive(self, issue_id: str, by: str) -> dict:
        record = self._live(issue_id)
        if not record.archive:
            raise Conflict(f"issue {issue_id} is not archived")
        return self._change(record, "unarchived", by, {"archive": None})

    def note(self, issue_id: str, text: str, by: str) -> dict:
        text = _said(text, "the note")
        if len(text) > MAX_NOTE_CHARS:
            raise ValueError(f"the note is {len(text)} characters; keep it under {MAX_NOTE_CHARS}")
        return self._change(self.issues.get(issue_id), "note", by, {}, text=text)

    def link(self, issue_id: str, url: str, by: str) -> dict:
        parsed = urlparse(url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"the ticket link must be an http(s) URL, got {url[:200]!r}")
        return self._change(self._live(issue_id), "linked", by, {"ticket_url": url.strip()}, url=url.strip())

    def resolve(self, issue_id: str, by: str, in_next_version: bool = False) -> dict:
        """Resolved outright, it regresses when it recurs; in the next version, only when it recurs on a version
        other than those current on its dominant route now."""
        record = self._live(issue_id)
        if record.state == RESOLVED:
            raise Conflict(f"issue {issue_id} is already resolved")
        versions = self._current_versions(record) if in_next_version else {}
        details = {"in_next_version": versions} if in_next_version else {}
        fields = {"state": RESOLVED, "triaged": True, "archive": None, "resolved_in": versions}
        return self._change(record, "resolved", by, fields, **details)

    def _current_versions(self, record: IssueRecord) -> dict[str, str]:
        route = dominant_route(record)
        current = self.issues.latest_versions(route) if route else {}
        versions = {k: v for k, v in current.items() if k in VERSION_KEYS}
        if not versions:
            raise ValueError(
                f"no {', '.join(VERSION_KEYS)} version is stored on route {route!r}, so there is no next "
                "version to wait for; resolve without in-next-version"
            )
        return versions

    # -- the leader's tick -----------------------------------------------------
    def tick(self, now: datetime) -> list[Outgoing]:
        """Wake archived issues whose condition is met, record new escalations, and render the webhook's events
        for every entry not sent yet (one saved late, as a long re-cluster's are, too)."""
        records = [r for r in self.issues.load() if r.merged_into is None]
        hours = self.issues.member_hours(now - timedelta(hours=RECENT_HOURS), now)
        news = {r.issue_id: found for r in records if (found := self._news(r, hours.get(r.issue_id, {}), now))[0]}
        # onto the rows as they are now: a change saved since the load above (an assignment) is kept
        changed = [_recorded(r, *news[r.issue_id]) for r in (self.issues.load(list(news)) if news else [])]
        if changed:
            self.issues.save(changed)
        records = [{c.issue_id: c for c in changed}.get(r.issue_id, r) for r in records]
        if self.webhook is None:
            return []
        if self.resume_from is not None:  # once: entries made before this process started and never sent
            logged_since, self.resume_from = self.resume_from(), None
            self.started = min(self.started, logged_since or self.started)
        since = max(self.started, now - LATE)
        due = [
            (r.issue_id, e)
            for r in records
            for e in entries_between(r, since, now, EVENTS)
            if (r.issue_id, e["event"], e["at"]) not in self.sent
        ]
        self.sent = {k for k in self.sent if datetime.fromisoformat(k[2]) > since}
        self.sent |= {(issue_id, e["event"], e["at"]) for issue_id, e in due}
        views = {issue_id: self.view(issue_id) for issue_id in dict(due)}  # one view per issue, however many events
        return [self.webhook.outgoing(e, views[issue_id]) for issue_id, e in due]

    def _news(self, record: IssueRecord, hours_ago: dict[int, int], now: datetime) -> tuple[list[dict], bool]:
        """The entries to record now (a wake-up, a new escalation), and whether the issue wakes up."""
        added, woke = [], False
        if record.archive:
            parsed = Archive.from_dict(record.archive)
            claims = self.issues.members_after(record.issue_id, parsed.since) if parsed.until == CLAIMS else 0
            reason = parsed.wake_reason(now, claims, hours_ago)
            if reason:
                added.append(entry(now, "unarchived", SYSTEM, why=reason))
                woke = True
        if record.state != RESOLVED and is_escalating(hours_ago) and not self._escalated_lately(record, now):
            added.append(entry(now, "escalating", SYSTEM, claims_last_hour=hours_ago.get(0, 0)))
        return added, woke

    @staticmethod
    def _escalated_lately(record: IssueRecord, now: datetime) -> bool:
        """One escalation entry per episode: none again within the hours the test compares against."""
        return bool(entries_between(record, now - timedelta(hours=ESCALATION_HISTORY_HOURS), now, ("escalating",)))
