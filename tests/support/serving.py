"""An ASGI app served by uvicorn on a free loopback port, in a thread: a real HTTP API for browsers and the CLI."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import uvicorn

from services.app.broker import free_port
from services.app.processes import server_config


@contextlib.contextmanager
def serving(app, start_within: float = 20.0) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1 at a free port until the block ends; yields the port once it accepts."""
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port))  # as claimwatch serves it
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_within
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
