import time, tempfile, pathlib
from datetime import datetime, timezone
from streams.broker import EmbeddedBroker, create_topics
from tests.support.processes import WorkerProcess
from tests.e2e.test_browser import CONFIG, traffic, send
tmp = pathlib.Path(tempfile.mkdtemp())
b = EmbeddedBroker(log_path=tmp / "tansu.log").start()
prefix = "probe1"
topic = f"{prefix}.verdicts"
create_topics(b.bootstrap, [topic, f"{prefix}.verdicts.dlq", f"{prefix}.alerts"], 2)
(tmp / "c.toml").write_text(CONFIG)
w = WorkerProcess(b.bootstrap, f"chdb:{tmp / 'ch'}", prefix, tmp / "worker.log", args=["--config", str(tmp / "c.toml")]).start()
t0 = time.time()
now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
send(b.bootstrap, topic, traffic(now, 0, True))
for i in range(120):
    rc = w.proc.poll()
    if rc is not None:
        print("died", rc, time.time() - t0); break
    if i % 10 == 0:
        print(round(time.time() - t0), (w.get("/api/issues") or [])[:1] and "issues!", flush=True)
    time.sleep(1)
print("log", tmp / "worker.log")
w.kill(); b.stop()
