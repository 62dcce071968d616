"""Reading processes from Linux's /proc, for tests and benches that watch `claimwatch up` and its children."""

from __future__ import annotations

import os

TICK = os.sysconf("SC_CLK_TCK")


def stat(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name (state, ppid, ...), or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def alive(pid: int) -> bool:
    fields = stat(pid)
    return fields is not None and fields[0] != "Z"


def descendants(root: int) -> list[int]:
    """Every live process below ``root``."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat(int(entry))) is not None and fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, parent in parents.items() if parent == pid]
        found.extend(kids)
        frontier.extend(kids)
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def recluster_child(root: int) -> int | None:
    """The process fitting a re-cluster (a multiprocessing spawn child of `up`), if one runs."""
    return next((p for p in descendants(root) if "spawn_main" in cmdline(p)), None)


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root``, its live descendants, and the children they already reaped."""
    total = 0
    for pid in [root, *descendants(root)]:
        fields = stat(pid)
        if fields is not None:  # fields[11:15]: utime stime cutime cstime
            total += sum(int(x) for x in fields[11:15])
    return total / TICK
