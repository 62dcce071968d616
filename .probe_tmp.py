import tempfile, time
from datetime import datetime, timezone, timedelta
from services.runtime import Services
from services.settings import load_settings
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.store.writer import EventWriter
from services.issues.jobs import IssueJobs
from services.issues.store import IssueStore
from services.issues.service import IssuesService
from tests.e2e.test_browser import traffic
s = load_settings(None, {}, {"clickhouse": f"chdb:{tempfile.mkdtemp()}/ch", "clustering": {"lookback_hours": 0.5}})
svc = Services.open(s)
now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
d = Decoder()
evs = [e for e in (d.decode(x.raw) for x in traffic(now, 0, True) + traffic(now, 2, False)) if isinstance(e, VerdictEvent)]
EventWriter(svc.store).write(evs)
issues = IssueStore(svc.store)
jobs = IssueJobs.from_settings(s, issues)
r = jobs.recluster(now)
print(r.claims, r.issues)
svc_i = IssuesService(svc.store)
lst = svc_i.list(sort="count")
top = lst[0]
print(top["issue_id"], top["count"])
print(svc.store.query("SELECT issue_id, count() n, any(claim_key) k, any(source) s FROM issue_members FINAL GROUP BY issue_id ORDER BY n DESC LIMIT 3"))
m = issues.members(top["issue_id"], 5)
print("members", len(m), m[:1])
print(svc.store.query("SELECT count() n FROM issue_members FINAL WHERE issue_id = {id:String}", {"id": top["issue_id"]}))
svc.close()
