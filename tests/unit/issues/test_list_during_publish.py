"""The issue list read while a re-cluster publishes: every issue it shows is counted with its members.

A re-cluster saves its members, then its issues (services/issues/jobs.py). A list that read the counts before
the records showed the run's new issues with 0 claims beside the runbook's hundreds (seen in `make demo`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from clustering.issue import IssueRecord
from services.issues.service import IssuesService

NOW = datetime(2026, 11, 28, 4, 0, tzinfo=UTC)


def record(issue_id: str) -> IssueRecord:
    return IssueRecord(
        issue_id, issue_id, ("fee",), "default", NOW - timedelta(hours=1), NOW, routes={"billing-faq": 9}
    )


class Publishing:
    """Issue records and members, with a re-cluster publishing (members, then issues) during the list's reads."""

    def __init__(self):
        self.records, self.members = [record("iss-old")], {"iss-old": 5}
        self.reads = 0

    def _read(self):
        self.reads += 1
        if self.reads == 2:  # between the list's two reads: the run's members, then its issue
            self.members["iss-new"] = 920
            self.records.append(record("iss-new"))

    def load(self):
        self._read()
        return list(self.records)

    def member_counts(self):
        self._read()
        return {k: {"count": n, "hourly": {}, "first": NOW, "last": NOW} for k, n in self.members.items()}

    def member_hours(self, since, until):
        return {}


class NoAlerts:
    def open_alerts(self):
        return []


def test_an_issue_published_during_the_list_is_not_shown_without_its_members():
    listed = IssuesService(Publishing(), rates=None, alerts=NoAlerts(), clock=lambda: NOW).list()
    assert [v["count"] for v in listed if v["count"] == 0] == [], listed
    assert {v["issue_id"] for v in listed} == {"iss-old"}  # the new one shows at the next read, counted
