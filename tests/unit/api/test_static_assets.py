"""Static assets: pages link them under content-versioned URLs, which may be cached for a year; any other URL is
cached briefly and revalidated; large answers (the 4.8 MB Plotly bundle) are gzipped. Through the real app over the
API test's store, and the asset server alone over a directory whose file changes."""

from __future__ import annotations

import gzip
import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.api.assets import IMMUTABLE, REVALIDATE, Assets
from services.api.plotly_assets import BUNDLE
from tests.unit.api.test_api import client_for, world  # noqa: F401  (world is a fixture)


@pytest.fixture(scope="module")
def client(world):  # noqa: F811
    return client_for(world[0])


def linked_assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/static/[^"]+)"', html)


def test_pages_link_every_asset_versioned_and_those_urls_are_immutable(client):
    urls = linked_assets(client.get("/routes/billing-faq").text)
    names = {u.split("?")[0].rsplit("/", 1)[1] for u in urls}
    assert {"app.css", "app.js", "favicon.svg", "plotly.min.js", "plotly-base.css", "charts.js"} <= names
    for url in urls:
        assert re.fullmatch(r"/static/[\w.-]+\?v=[0-9a-f]{16}", url), url
        response = client.get(url)
        assert response.status_code == 200 and response.headers["cache-control"] == IMMUTABLE, url


def test_an_unversioned_or_stale_url_is_revalidated(client):
    for url in (
        "/static/app.css",
        "/static/app.css?v=0000000000000000",
        "/static/plotly.min.js",
        "/static/plotly-base.css",
    ):
        assert client.get(url).headers["cache-control"] == REVALIDATE, url
    first = client.get("/static/app.js")
    assert first.headers["etag"] and first.headers["last-modified"]
    again = client.get("/static/app.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.headers["cache-control"] == REVALIDATE


def test_the_plotly_bundle_is_gzipped(client):
    with client.stream("GET", "/static/plotly.min.js", headers={"Accept-Encoding": "gzip"}) as response:
        sent = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert gzip.decompress(sent) == BUNDLE.read_bytes()
    assert len(sent) < BUNDLE.stat().st_size / 2
    small = client.get("/healthz", headers={"Accept-Encoding": "gzip"})  # under the 1 KB minimum: sent as is
    assert "content-encoding" not in small.headers


def test_the_versioned_url_follows_the_content(tmp_path):
    (tmp_path / "app.css").write_text("body { color: black }")
    assets = Assets(tmp_path)
    api = FastAPI()
    api.mount("/static", assets)
    client = TestClient(api)
    before = assets.url("app.css")
    (tmp_path / "app.css").write_text("body { color: navy }")
    after = assets.url("app.css")
    assert before != after
    assert client.get(after).headers["cache-control"] == IMMUTABLE
    stale = client.get(before)
    assert stale.text == "body { color: navy }" and stale.headers["cache-control"] == REVALIDATE
