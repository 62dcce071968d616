"""What the command line reads from an API, whichever client answered: the running API's through httpx, or the
in-process app's through starlette's TestClient, which is an httpx2 client with httpx2 responses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Reply(Protocol):
    """An API's answer: an httpx or an httpx2 response."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def text(self) -> str: ...
    @property
    def content(self) -> bytes: ...
    def json(self, **kwargs: Any) -> Any: ...


class Client(Protocol):
    """httpx.Client, or the in-process app's TestClient."""

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Reply: ...
    def close(self) -> None: ...
