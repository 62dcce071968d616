"""No link a page emits answers 404 (or 5xx): crawl the dashboard from `/`, signed in, over the API test's store
(routes, alerts, issues with members, traces, hostile names), following every same-origin `<a href>`, GET form,
chart source (`data-src`), stylesheet and script, and fetching each once."""

from __future__ import annotations

from collections import deque
from html.parser import HTMLParser
from urllib.parse import urldefrag, urlencode, urljoin, urlsplit

import pytest

from tests.unit.api.test_api import TOKEN, client_for, world  # noqa: F401  (world is a fixture)

# its fixtures take tens of seconds: `make test-fast` leaves it out
pytestmark = pytest.mark.slow

ORIGIN = "http://testserver"
MAX_FETCHES = 500  # the alert filters, chart ranges and trace search each add a few dozen GET links


class Links(HTMLParser):
    """Every URL a page makes a browser fetch or lets a reader follow (without JavaScript)."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self._form: dict | None = None
        self._options: int | None = None  # options seen in the current select

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.urls.append(a["href"])
        elif tag in ("link", "script", "img") and (a.get("href") or a.get("src")):
            self.urls.append(a.get("href") or a["src"])
        if a.get("data-src"):
            self.urls.append(a["data-src"])
        if tag == "form" and (a.get("method") or "").lower() == "get":
            self._form = {"action": a.get("action") or "", "fields": []}
        elif self._form is not None and tag in ("input", "select") and a.get("name"):
            if tag == "select" or a.get("type") not in ("checkbox", "radio", "submit"):
                # [name, the value submitted as the page stands, every value a reader can choose]
                self._form["fields"].append([a["name"], a.get("value") or "", []])
                self._options = 0 if tag == "select" else None
        elif self._form is not None and tag == "option" and self._options is not None:
            field = self._form["fields"][-1]
            if self._options == 0 or "selected" in a:  # a select submits its selected option, or its first
                field[1] = a.get("value", "")
            field[2].append(a.get("value", ""))
            self._options += 1

    def handle_endtag(self, tag):
        if tag == "select":
            self._options = None
        if tag == "form" and self._form is not None:
            # The form as it stands, and once per choice of each select (the others as they stand).
            fields, action = self._form["fields"], self._form["action"]
            variants = [{}] + [{i: v} for i, f in enumerate(fields) for v in f[2]]
            for change in variants:
                query = urlencode([(f[0], change.get(i, f[1])) for i, f in enumerate(fields)])
                self.urls.append(action + "?" + query)
            self._form = None


def same_origin(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("http", "") and parts.netloc in ("testserver", "")


@pytest.fixture(scope="module")
def crawl(world):  # noqa: F811
    """(fetched: {url: status}, referrers: {url: first page that linked it}) from a signed-in crawl of `/`."""
    client = client_for(world[0], protect_reads=True)
    signed = client.post("/signin", data={"token": TOKEN, "next": "/"}, follow_redirects=False)
    assert signed.status_code == 303 and "claimwatch_read" in signed.cookies
    queue, seen, fetched, referrers = deque([ORIGIN + "/"]), {ORIGIN + "/"}, {}, {}
    while queue and len(fetched) < MAX_FETCHES:
        url = queue.popleft()
        response = client.get(url, follow_redirects=False)
        fetched[url] = response.status_code
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith("text/html"):
            continue
        parser = Links()
        parser.feed(response.text)
        for href in parser.urls:
            if href.startswith(("#", "mailto:", "javascript:")):
                continue
            target = urldefrag(urljoin(url, href)).url
            if not same_origin(target) or target in seen:
                continue
            seen.add(target)
            referrers[target] = url
            queue.append(target)
    return fetched, referrers


def test_no_link_any_page_emits_answers_404_or_5xx(crawl):
    fetched, referrers = crawl
    broken = {url: (status, referrers.get(url)) for url, status in fetched.items() if status == 404 or status >= 500}
    assert not broken, "\n".join(f"{status} {url} (linked from {ref})" for url, (status, ref) in broken.items())


def test_the_crawl_reached_every_kind_of_page(crawl):
    fetched, _ = crawl
    paths = {urlsplit(u).path for u, status in fetched.items() if status == 200}
    for prefix in ("/routes/", "/issues/", "/traces/", "/api/traces/", "/api/issues/", "/static/"):
        assert any(p.startswith(prefix) for p in paths), f"no page under {prefix} was reached"
    assert {"/", "/alerts", "/issues", "/eval"} <= paths


def test_every_trace_page_reached_answers_200(crawl):
    fetched, _ = crawl
    traces = {u: s for u, s in fetched.items() if urlsplit(u).path.startswith("/traces/")}
    assert traces and set(traces.values()) == {200}
