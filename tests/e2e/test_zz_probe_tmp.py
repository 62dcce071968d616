import time
from tests.e2e.test_browser import CHROMIUM_ARGS, Session, browser, send, session, traffic, worker  # noqa


def test_zz_liveness(worker):
    t0 = time.time()
    for i in range(100):
        rc = worker.proc.poll()
        if rc is not None:
            print("DIED", rc, time.time() - t0)
            break
        print("ALIVE", i, round(time.time() - t0, 1), bool(worker.get("/api/issues")), flush=True)
        time.sleep(1)
