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

from services.app.broker import free_port

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
    env = {**os.environ, MARK: mark, "PYTHONUNBUFFERED": "1", "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "CLAIMWATCH_API__PORT": str(api_port), "CLAIMWATCH_API__URL": f"http://127.0.0.1:{api_port}",
           "CLAIMWATCH_EMBEDDED_BROKER": f"127.0.0.1:{broker_port}"}
    log = open(tmp_path / "demo.log", "ab")
    demo = subprocess.Popen([sys.executable, "-m", "services.app.cli", "demo"], cwd=tmp_path, env=env,
                            stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while not any(" simulate " in cmd for cmd in marked(mark).values()):  # the stack is up, traffic flows
            assert demo.poll() is None, f"the demo exited with {demo.returncode}; see {tmp_path}"
            assert time.monotonic() < deadline, f"the demo never reached its traffic; see {tmp_path}"
            time.sleep(0.5)
        time.sleep(3)
        before = marked(mark)
        assert any(" up" in cmd for cmd in before.values()) and len(before) >= 3, before
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
