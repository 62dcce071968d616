"""A killed `claimwatch demo` leaves nothing behind: no claimwatch process, no broker, the ports free.

The demo starts `claimwatch up` (which starts the Tansu broker) and then `claimwatch simulate`.
Every process of this test carries a marker in its environment, so the check finds exactly
this test's processes, whoever their parent is now.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

from bench.processes import get_json
from services.app.broker import free_port
from tests.support.waiting import wait_until

MARK = "CW_TEST_DEMO_MARK"  # not CLAIMWATCH_*: those are settings


def marked(value: str) -> dict[int, str]:
    """pid -> command line of every live process whose environment carries MARK=value."""
    needle = f"{MARK}={value}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_sigkill_of_the_demo_leaves_no_claimwatch_process_and_frees_the_ports(tmp_path):
    api_port, broker_port, mark = free_port(), free_port(), uuid.uuid4().hex
    api = f"http://127.0.0.1:{api_port}"
    env = {
        **os.environ,
        MARK: mark,
        "PYTHONUNBUFFERED": "1",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "CLAIMWATCH_API__PORT": str(api_port),
        "CLAIMWATCH_API__URL": api,
        "CLAIMWATCH_EMBEDDED_BROKER": f"127.0.0.1:{broker_port}",
        "CLAIMWATCH_API__ANONYMOUS_READS_PER_MINUTE": "100000",
    }  # the test polls beside the demo's own reads
    log = open(tmp_path / "demo.log", "ab")
    demo = subprocess.Popen(
        [sys.executable, "-m", "services.app.cli", "demo"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )

    def flowing() -> dict[int, str] | None:
        """The stack is up (`up` and its broker beside the demo) and the demo's traffic is being stored."""
        assert demo.poll() is None, f"the demo exited with {demo.returncode}; see {tmp_path}"
        running = marked(mark)
        stored = sum(r["events"] for r in get_json(api, "/api/rates", window="all") or [])
        return running if stored and any(" up" in cmd for cmd in running.values()) and len(running) >= 3 else None

    try:
        wait_until(flowing, 150, f"the demo's traffic to be stored; see {tmp_path}", interval=0.5)
        demo.send_signal(signal.SIGKILL)
        demo.wait()
        deadline = time.monotonic() + 30
        while (left := marked(mark)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, f"left running after the demo was killed: {left}"
        assert port_free(api_port) and port_free(broker_port)
    finally:
        for pid in marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
