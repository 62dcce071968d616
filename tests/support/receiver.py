"""A real HTTP server that keeps every POST (path, headers, body): what a webhook or a receiver would get."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """Answers 503 to the first ``failures`` posts, then 200; with ``hold``, answers nothing until ``release``
    (a receiver that hangs). ``url``: its base URL; ``accepted``: the posts it answered 200."""

    def __init__(self, failures: int = 0, hold: bool = False):
        self.failures, self.posts, self.accepted, self.changed = failures, [], [], threading.Condition()
        self.released = threading.Event()
        if not hold:
            self.released.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.changed:
                    receiver.posts.append((self.path, dict(self.headers), body))
                    ok = len(receiver.posts) > receiver.failures
                    if ok:
                        receiver.accepted.append((self.path, dict(self.headers), body))
                    receiver.changed.notify_all()
                receiver.released.wait()
                self.send_response(200 if ok else 503)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_until(self, done, timeout: float = 60) -> list[tuple[str, dict, bytes]]:
        """Every post so far, once ``done(posts)`` holds (an assertion error after ``timeout`` seconds)."""
        with self.changed:
            assert self.changed.wait_for(lambda: done(self.posts), timeout), self.posts
            return list(self.posts)

    def release(self) -> None:
        """Answer the held posts, and every post from now on at once."""
        self.released.set()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()
