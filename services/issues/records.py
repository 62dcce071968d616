"""The issue repository bound to this stage's domain types (the store does not import clustering)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from clustering.issue import IssueRecord
from clustering.records import FailingClaim
from services.core.clock import utcnow
from services.store.backends import Store
from services.store.issues import IssueRepository

IssueRecords = IssueRepository[IssueRecord, FailingClaim]


def issue_repository(store: Store, clock: Callable[[], datetime] = utcnow) -> IssueRecords:
    """Issues, their members and the failing claims to cluster, read back as ``IssueRecord`` and ``FailingClaim``."""
    return IssueRepository(store, IssueRecord.from_row, FailingClaim.from_claims_row, clock)


def surviving(issues: IssueRecords, record: IssueRecord) -> IssueRecord:
    """Where ``record``'s merges lead (itself if it was never merged); a stored cycle stops where it closes."""
    seen = {record.issue_id}
    while record.merged_into and record.merged_into not in seen and len(seen) < 100:
        seen.add(record.merged_into)
        record = issues.get(record.merged_into)
    return record
