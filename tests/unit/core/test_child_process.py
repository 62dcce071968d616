"""Work that must not hold up a shutdown runs in a child process that `close` stops; children die with their parent.
Threads the worker starts carry names the OS shows."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from services.core.threads import Cancelled, ChildFailed, ChildProcess, named_executor


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_child_returns_its_result_and_reports_its_error():
    child = ChildProcess(nice=0)
    assert child.call(math.factorial, 12) == math.factorial(12)
    with pytest.raises(ChildFailed, match="ValueError"):
        child.call(math.sqrt, -1.0)


def test_close_stops_a_running_child_at_once_and_refuses_more_work():
    child = ChildProcess()
    outcome: list = []

    def work() -> None:
        try:
            outcome.append(child.call(time.sleep, 120))
        except Cancelled as exc:
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    deadline = time.monotonic() + 30
    while child.pid is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = child.pid
    assert pid is not None and alive(pid)
    started = time.monotonic()
    child.close()
    thread.join(10)
    assert not thread.is_alive() and time.monotonic() - started < 5
    assert isinstance(outcome[0], Cancelled)
    assert not alive(pid)
    with pytest.raises(Cancelled):
        child.call(math.factorial, 3)


MIDDLE = """
import subprocess, sys, time
from services.core.threads import die_with_parent
grandchild = subprocess.Popen(["sleep", "120"], preexec_fn=die_with_parent())
print(grandchild.pid, flush=True)
time.sleep(120)
"""


def test_a_child_started_with_die_with_parent_goes_when_its_parent_is_killed():
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))),
    )
    grandchild = int(middle.stdout.readline())
    assert alive(grandchild)
    middle.send_signal(signal.SIGKILL)
    middle.wait()
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the grandchild outlived its killed parent"


def test_a_named_executor_names_its_thread_for_the_os_too():
    """top -H and the ingest bench's CPU-by-thread table tell the worker's threads apart by these names."""
    executor = named_executor("store")
    try:
        python_name, os_name = executor.submit(
            lambda: (
                threading.current_thread().name,
                Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip(),
            )
        ).result()
    finally:
        executor.shutdown()
    assert python_name.startswith("store")
    assert os_name == "cw-store"
    assert Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip() != "cw-store"
