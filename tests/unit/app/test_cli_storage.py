"""`claimwatch storage` at 80 columns and as JSON, through the API (GET /api/storage) and on the store files."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from services.api.app import create_api
from services.api.security import ApiPolicy
from services.app.cli import main
from services.app.cli.storage import STORAGE_COLUMNS, main_codec, size
from services.app.compose import build
from services.app.settings import Settings
from services.store.retention import Retention, RetentionKeeper
from services.store.writer import EventWriter
from tests.support.cli import answer_http_with
from tests.unit.store.test_store_backends import mixed_events

WIDTH = 80


@pytest.fixture
def client(store):
    EventWriter(store).write(mixed_events(40))
    RetentionKeeper(store).apply(Retention(30, 400))
    return TestClient(create_api(build(Settings(), store), ApiPolicy()))


@pytest.fixture
def cli(client, monkeypatch):
    api = answer_http_with(client, monkeypatch, "unused")

    def run(*args: str, columns: int = WIDTH) -> str:
        result = CliRunner(env={"COLUMNS": str(columns)}).invoke(
            main, ["storage", *args, "--api", "http://testserver"], obj=api
        )
        assert result.exit_code == 0, result.output
        return result.output

    return run


def test_the_api_reports_every_table_with_its_ttl(client):
    response = client.get("/api/storage")
    assert response.status_code == 200, response.text
    report = response.json()
    tables = {t["table"]: t for t in report["tables"]}
    assert report["claims"] == tables["claims"]["rows"] == sum(len(e.claims) for e in mixed_events(40))
    assert tables["events"]["rows"] == 40 and tables["events"]["ttl_days"] == 30
    assert tables["rate_minute"]["ttl_days"] == 400 and tables["alerts"]["ttl"] is None
    assert "/api/storage" in client.get("/openapi.json").json()["paths"]


def test_the_table_fits_80_columns_and_names_every_table_whole(cli, client):
    report = client.get("/api/storage").json()
    lines = cli().splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    assert lines[0] == f"Storage: {report['claims']:,} claims stored"
    header = lines[1].split()
    assert header[:5] == ["TABLE", "ROWS", "COMPRESSED", "B/CLAIM", "KEPT"]
    by_table = {line.split()[0]: line for line in lines[2:]}
    assert set(by_table) == {t["table"] for t in report["tables"]} | {"total"}
    events = next(t for t in report["tables"] if t["table"] == "events")
    assert f"{events['rows']:,}" in by_table["events"] and size(events["compressed_bytes"]) in by_table["events"]
    assert "30 d" in by_table["events"] and "400 d" in by_table["rate_minute"] and "forever" in by_table["alerts"]


def test_json_is_the_apis_and_wide_shows_every_column(cli, client):
    expected = client.get("/api/storage").json()
    assert orjson.loads(cli("-o", "json")) == expected
    assert orjson.loads(cli("--json")) == expected
    wide = cli("-o", "wide", columns=60).splitlines()[1]
    assert all(c.header in wide for c in STORAGE_COLUMNS), wide
    narrow = cli(columns=40).splitlines()[1]
    assert "TABLE" in narrow and "ON DISK" not in narrow


def test_without_an_api_it_reads_the_store_files(tmp_path):
    result = CliRunner(env={"COLUMNS": str(WIDTH)}).invoke(
        main,
        ["storage", "-o", "json", "--clickhouse", f"chdb:{tmp_path / 'clickhouse'}", "--api", "http://127.0.0.1:9"],
    )
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)  # (stderr says it read the store)
    assert report["claims"] == 0 and {t["table"]: t["ttl_days"] for t in report["tables"]}["events"] == 30


@pytest.mark.parametrize("n, text", [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 * 2**20, "5.0 MiB")])
def test_sizes_read_in_binary_units(n, text):
    assert size(n) == text


def test_the_codec_column_names_the_codec_of_most_bytes(cli, client):
    wide = {line.split()[0]: line for line in cli("-o", "wide", columns=200).splitlines()[2:]}
    events = next(t for t in client.get("/api/storage").json()["tables"] if t["table"] == "events")
    assert events["codecs"] and sum(events["codecs"].values()) == events["compressed_bytes"]
    assert wide["events"].rstrip().endswith(main_codec(events["codecs"])) and wide["alerts"].rstrip().endswith("—")
    assert main_codec({"ZSTD(3)": 300, "LZ4": 100}) == "ZSTD(3) 75%" and main_codec({}) == "—"
    assert main_codec({"ZSTD(1)": 999, "LZ4": 1}) == "ZSTD(1) 99%" and main_codec({"LZ4": 5}) == "LZ4"


def test_the_storage_and_dead_letter_answers_are_exactly_their_read_models(client):
    """One shape each, defined once (services/store/readmodel.py); OpenAPI describes them closed."""
    from services.store.readmodel import DlqReasonRead, StorageReportRead, StorageTableRead

    report = client.get("/api/storage").json()
    assert set(report) == set(StorageReportRead.model_fields)
    assert all(set(t) == set(StorageTableRead.model_fields) for t in report["tables"])
    assert client.get("/api/dlq").status_code == 200
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["StorageReportRead"]["additionalProperties"] is False
    assert schemas["DlqReasonRead"]["additionalProperties"] is False
    assert set(schemas["DlqReasonRead"]["properties"]) == set(DlqReasonRead.model_fields)
    assert "StorageReport" not in schemas and "DlqReason" not in schemas
