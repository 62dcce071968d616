import tempfile, threading, time, sys
from datetime import datetime, timezone
import uvicorn
from services.runtime import Services
from services.settings import Settings
from services.simulate import Scenario, generate
from services.contract.decode import Decoder
from services.contract.model import VerdictEvent
from services.store.writer import EventWriter
from services.api.app import create_api
from tests.unit.test_api import write_issues, hostile_event, START, MINUTES
from playwright.sync_api import sync_playwright
tmp = tempfile.mkdtemp()
svc = Services.open(Settings(clickhouse=f"chdb:{tmp}/ch"))
dec = Decoder()
evs = [e for e in (dec.decode(x.raw) for x in generate(Scenario.demo(regression_at=20).scaled(0.1), START, MINUTES, seed=1)) if isinstance(e, VerdictEvent)]
evs += [hostile_event(i) for i in range(3)]
EventWriter(svc.store).write(evs)
write_issues(svc.store, evs)
server = uvicorn.Server(uvicorn.Config(create_api(svc), host="127.0.0.1", port=18556, log_level="warning"))
threading.Thread(target=server.run, daemon=True).start()
time.sleep(2)
w = int(sys.argv[1]) if len(sys.argv)>1 else 1200
with sync_playwright() as p:
    ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(), executable_path="/usr/bin/chromium", headless=True,
        args=["--no-sandbox","--disable-gpu","--disable-background-networking","--disable-component-update","--disable-sync","--no-first-run"],
        viewport={"width": w, "height": 900})
    page = ctx.new_page()
    msgs = []
    page.on("console", lambda m: msgs.append((m.type, m.text)))
    page.on("pageerror", lambda e: msgs.append(("pageerror", str(e))))
    for path, name in [("/issues", "issues"), ("/issues/iss-numbers", "issue"), ("/issues/iss-evil", "issue-evil"), ("/", "overview"), ("/routes/billing-faq", "route"), ("/alerts", "alerts"), ("/eval", "eval")]:
        page.goto("http://127.0.0.1:18556" + path)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=f"/tmp/shot{w}-{name}.png", full_page=True)
    print(msgs)
    ctx.close()
server.should_exit = True
