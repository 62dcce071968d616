"""Running blocking work off the event loop: on a dedicated thread, or in a child process that can be stopped.

A thread cannot be interrupted: work that may run for a minute (UMAP, HDBSCAN) and must not
hold up a shutdown runs in a ``ChildProcess`` instead, which ``close`` terminates.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import threading
import traceback
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any

Run = Callable[..., Awaitable[Any]]  # ``await run(fn, *args)``: fn(*args) on some thread


def in_thread(executor: Executor) -> Run:
    """A ``Run`` on ``executor`` (the store's thread, the decode thread, the clustering thread)."""

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    return run


# ---- processes -------------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):  # not Linux: no parent-death signal
        return None


_prctl = _load_prctl()  # resolved here, not in a forked child (no dlopen between fork and exec)


PR_SET_NAME = 15  # <linux/prctl.h>


def name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` (at most 15 bytes) where the OS shows it: top -H, /proc/<pid>/task/*/comm,
    perf. Python names its threads for itself only, so every thread of a worker otherwise shows as "python"."""
    if _prctl is not None:
        _prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def named_executor(name: str) -> ThreadPoolExecutor:
    """A one-thread executor whose thread carries ``name`` for Python and for the OS."""
    return ThreadPoolExecutor(1, thread_name_prefix=name, initializer=name_os_thread, initargs=(f"cw-{name}",))


def set_parent_death_signal(sig: int, parent: int) -> None:
    """Linux: deliver ``sig`` to this process when its parent exits. If ``parent`` (its pid) is already
    gone, exit at once: the parent died before the request took effect."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets ``sig`` when this process dies, even by SIGKILL.

    Linux ties the signal to the thread that starts the child: start children from a thread that
    lives as long as they should (the main thread, or a long-lived executor thread).
    """
    parent = os.getpid()
    return lambda: set_parent_death_signal(sig, parent)


class Cancelled(Exception):
    """The work was abandoned because its runner was closed (shutdown); nothing it would have done happened."""


class ChildFailed(RuntimeError):
    """The child process raised (the message carries its traceback) or died without answering."""


def _child_main(answer: Connection, fn: Callable[..., Any], args: tuple[Any, ...], nice: int, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent decides
    set_parent_death_signal(signal.SIGKILL, parent)  # an orphan must not keep computing
    if nice:
        os.nice(nice)  # ingest, assignment and the API come first
    try:
        result = (True, fn(*args))
    except BaseException as exc:  # reported to the parent, which raises ChildFailed
        result = (False, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    answer.send(result)
    answer.close()


class ChildProcess:
    """``call(fn, *args)`` runs ``fn(*args)`` in a fresh process and returns its result; ``close()`` stops it.

    The process is spawned (not forked: the parent has threads and open engines), so ``fn``, its
    arguments and its result must pickle. One call at a time per instance; calls block their thread.
    """

    def __init__(self, nice: int = 10, grace_seconds: float = 2.0, name: str = "claimwatch-child"):
        self.nice, self.grace_seconds, self.name = nice, grace_seconds, name
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._process: SpawnProcess | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        receive, send = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_child_main, args=(send, fn, args, self.nice, os.getpid()), name=self.name, daemon=True
        )
        with self._lock:
            if self._closed:
                raise Cancelled("shutting down: not started")
            self._process = process
        try:
            process.start()
            send.close()
            if self._closed:  # closed while it started
                self._stop(process)
            try:
                ok, value = receive.recv()
            except (EOFError, OSError):
                process.join(self.grace_seconds)
                if self._closed:
                    raise Cancelled("shutting down: the child process was stopped") from None
                raise ChildFailed(f"the child process died without an answer (exit code {process.exitcode})") from None
        finally:
            receive.close()
            with self._lock:
                self._process = None
        process.join(self.grace_seconds)
        if not ok:
            raise ChildFailed(value)
        return value

    def _stop(self, process: SpawnProcess) -> None:
        if process.pid is None or process.exitcode is not None:
            return
        process.terminate()
        process.join(self.grace_seconds)
        if process.exitcode is None:
            process.kill()
            process.join(self.grace_seconds)

    def close(self) -> None:
        """Stop the running child (its work is lost) and refuse further calls. Returns once it is gone."""
        with self._lock:
            self._closed = True
            process = self._process
        if process is not None:
            self._stop(process)
