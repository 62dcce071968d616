"""The ClickHouse stand-in speaks enough of ClickHouse's HTTP interface for an unmodified client.

Request parsing is tested without I/O; the rest runs the real clickhouse-connect client and raw urllib3
against one stand-in (one chDB session for the whole module: chDB allows one per process).
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import zlib
from collections.abc import Iterator
from urllib.parse import urlencode

import clickhouse_connect
import pytest
import urllib3
from clickhouse_connect.driver.compression import get_compressor
from clickhouse_connect.driver.exceptions import DatabaseError

from services.store.backends import HttpStore
from tests.support.clickhouse_standin import (
    OWN_ERROR_CODES,
    ClickHouseStandin,
    ServerError,
    decode_body,
    leading_keyword,
    output_format,
    parse_request,
)


def test_parse_request_reads_the_query_like_clickhouse() -> None:
    target = (
        "/?query=INSERT+INTO+t+FORMAT+JSONEachRow&database=db&default_format=JSONEachRow&query_id=q-1"
        "&param_x=it%5C%27s&insert_deduplication_token=tok&max_threads=1&session_id=s&wait_end_of_query=1"
        "&enable_http_compression=1&send_progress_in_http_headers=1&client_protocol_version=54405"
    )
    request = parse_request(
        "POST", target, {"Authorization": "Basic " + base64.b64encode(b"ann:p:w").decode()}, b'{"a":1}'
    )
    assert request.sql == b'INSERT INTO t FORMAT JSONEachRow\n{"a":1}'
    assert (request.database, request.default_format, request.query_id) == ("db", "JSONEachRow", "q-1")
    assert request.params == {"x": "it\\'s"}
    assert request.settings == {"insert_deduplication_token": "tok", "max_threads": "1"}
    assert (request.user, request.password, request.read_only) == ("ann", "p:w", False)


def test_parse_request_prefers_clickhouse_headers_and_defaults_like_a_server() -> None:
    request = parse_request(
        "GET",
        "/?query=SELECT+1&database=db&user=u&password=pw",
        {"X-ClickHouse-Database": "hdr", "X-ClickHouse-Format": "CSV"},
        b"",
    )
    assert (request.sql, request.database, request.default_format) == (b"SELECT 1\n", "hdr", "CSV")
    assert (request.user, request.password, request.read_only) == ("u", "pw", True)
    bare = parse_request("POST", "/", {"X-ClickHouse-User": "k", "X-ClickHouse-Key": "s"}, b"SELECT 2")
    assert (bare.sql, bare.database, bare.default_format, bare.user, bare.password) == (
        b"SELECT 2",
        "default",
        "TabSeparated",
        "k",
        "s",
    )
    assert bare.query_id  # generated when the client sends none


def test_parse_request_reads_a_form_body_and_skips_external_data_suffixes() -> None:
    body, content_type = urllib3.encode_multipart_formdata(
        {"query": "SELECT {v:String}\n FORMAT JSONEachRow", "param_v": "a\\tb", "max_threads": "2"}
    )
    request = parse_request(
        "POST", "/?date_time_input_format=best_effort&database=db", {"Content-Type": content_type}, body
    )
    assert request.sql == b"SELECT {v:String}\n FORMAT JSONEachRow"
    assert request.params == {"v": "a\\tb"}
    assert request.settings == {"max_threads": "2"}  # ClickHouse drops *_format params when the body is a form
    files, files_type = urllib3.encode_multipart_formdata({"query": "SELECT 1", "ext": ("ext.tsv", b"1\n")})
    with pytest.raises(ServerError, match="external data"):
        parse_request("POST", "/", {"Content-Type": files_type}, files)


@pytest.mark.parametrize(
    ("target", "name", "status"),
    [
        ("/?query=SELECT+1&compress=1", "NOT_IMPLEMENTED", 501),
        ("/?query=SELECT+1&decompress=1", "NOT_IMPLEMENTED", 501),
        ("/?query=SELECT+1&bad-name=1", "UNKNOWN_SETTING", 404),
    ],
)
def test_parse_request_refuses_what_it_cannot_honour(target: str, name: str, status: int) -> None:
    with pytest.raises(ServerError) as raised:
        parse_request("POST", target, {}, b"")
    assert (raised.value.code, raised.value.status) == (OWN_ERROR_CODES[name], status)
    assert raised.value.message.startswith(f"Code: {OWN_ERROR_CODES[name]}. DB::Exception: ")


def test_decode_body_reads_every_encoding_the_client_can_send() -> None:
    blocks = [b"first block \x00\xff" * 50, b"second block" * 70]
    for encoding in ("lz4", "zstd", "gzip"):
        compressor = get_compressor(encoding)  # the client's own compressor, one frame per block
        sent = b"".join(compressor.compress_block(b) for b in blocks) + (compressor.flush() or b"")
        assert decode_body(sent, encoding) == b"".join(blocks), encoding
    assert decode_body(zlib.compress(b"deflated"), "deflate") == b"deflated"
    assert decode_body(gzip.compress(b"x"), "GZIP ") == b"x"
    assert decode_body(b"plain", None) == b"plain"
    with pytest.raises(ServerError, match="Content-Encoding 'br'"):
        decode_body(b"...", "br")


@pytest.mark.parametrize(
    ("sql", "keyword", "fmt"),
    [
        (b"SELECT 1", b"SELECT", "TabSeparated"),
        (b"  -- note\n/* c */ (select 1)\n FORMAT JSONEachRow;", b"SELECT", "JSONEachRow"),
        (b"with x as (select 1) select * from x FORMAT Native", b"WITH", "Native"),
        (b"INSERT INTO t FORMAT JSONEachRow\n{}", b"INSERT", "TabSeparated"),
        (b"SYSTEM STOP MERGES", b"SYSTEM", "TabSeparated"),
    ],
)
def test_statement_kind_and_output_format(sql: bytes, keyword: bytes, fmt: str) -> None:
    assert leading_keyword(sql) == keyword
    if keyword in (b"SELECT", b"WITH"):
        assert output_format(sql, "TabSeparated") == fmt


def test_engine_errors_keep_clickhouse_code_text_and_status() -> None:
    unknown = ServerError.from_engine(
        RuntimeError("Code: 60. DB::Exception: Table default.x does not exist. (UNKNOWN_TABLE)")
    )
    assert (unknown.code, unknown.status) == (60, 404)
    other = ServerError.from_engine(
        RuntimeError("Code: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)")
    )
    assert (other.code, other.status) == (241, 500)
    bare = ServerError.from_engine(RuntimeError("boom"))
    assert (bare.code, bare.message) == (1001, "Code: 1001. DB::Exception: boom. (STD_EXCEPTION)")


# --- one live stand-in for the rest of the module ------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClickHouseStandin]:
    with ClickHouseStandin(tmp_path_factory.mktemp("standin") / "chdb", password="s3cret: 'x'") as running:
        yield running


@pytest.fixture(scope="module")
def http() -> Iterator[urllib3.PoolManager]:
    with urllib3.PoolManager() as pool:
        yield pool


def auth(server: ClickHouseStandin) -> dict[str, str]:
    return urllib3.make_headers(basic_auth=f"{server.user}:{server.password}")


def post(
    server: ClickHouseStandin, http: urllib3.PoolManager, sql: str | bytes, **params: str
) -> urllib3.BaseHTTPResponse:
    query = "?" + urlencode(params) if params else ""
    return http.request("POST", f"http://127.0.0.1:{server.port}/{query}", body=sql, headers=auth(server))


def connect(server: ClickHouseStandin, **options: object) -> clickhouse_connect.driver.Client:
    return clickhouse_connect.get_client(
        host="127.0.0.1", port=server.port, username=server.user, password=server.password, **options
    )


def test_clickhouse_connect_connects_and_round_trips_native_inserts(server: ClickHouseStandin) -> None:
    rows = [
        [1, "it's \\ \t \n", "lc", dt.datetime(2026, 11, 21, 9, 14, 3, 512000), {"k": "v"}, [0.5, None]],
        [2, "ünï ✓", "lc", dt.datetime(2026, 1, 1), {}, []],
    ]
    with connect(server) as client:
        assert (client.server_version, str(client.server_tz)) == (server.engine.version, "UTC")
        assert client.ping()
        client.command(
            "CREATE TABLE native (id Int32, s String, c LowCardinality(String), t DateTime64(3, 'UTC'), "
            "m Map(String, String), f Array(Nullable(Float32))) ENGINE = MergeTree ORDER BY id"
        )
    for compress in ("lz4", "zstd", "gzip", False):
        with connect(server, compress=compress) as client:
            client.command("TRUNCATE TABLE native")
            summary = client.insert("native", rows)
            assert summary.written_rows == 2, compress
            assert client.query("SELECT * FROM native ORDER BY id").result_rows == [tuple(r) for r in rows], compress


def test_clickhouse_connect_binds_parameters_in_the_url_and_in_a_form(server: ClickHouseStandin) -> None:
    hostile = "'; DROP TABLE native; -- {x:String} \\ \t \n ünï"
    with connect(server) as client:
        assert client.query("SELECT {v:String} AS v", parameters={"v": hostile}).result_rows == [(hostile,)]
        many = [f"{hostile}{i}" for i in range(500)]  # far past the URL limit: sent as multipart/form-data
        result = client.query(
            "SELECT length({a:Array(String)}) AS n, {a:Array(String)}[500] AS last", parameters={"a": many}
        )
        assert result.result_rows == [(500, many[-1])]


def test_errors_reach_the_client_as_clickhouse_sends_them(server: ClickHouseStandin, http: urllib3.PoolManager) -> None:
    syntax = post(server, http, "SELEC 1")
    assert (syntax.status, syntax.headers["X-ClickHouse-Exception-Code"]) == (400, "62")
    assert (
        syntax.data.startswith(b"Code: 62. DB::Exception: Syntax error") and b"(SYNTAX_ERROR) (version " in syntax.data
    )
    assert post(server, http, "SELECT * FROM no_such_table").status == 404
    with connect(server) as client, pytest.raises(DatabaseError) as raised:
        client.command("SELECT * FROM no_such_table")
    assert raised.value.code == 60 and "UNKNOWN_TABLE" in str(raised.value)
    with pytest.raises(DatabaseError) as refused:
        clickhouse_connect.get_client(host="127.0.0.1", port=server.port, username="default", password="wrong")
    assert refused.value.code == OWN_ERROR_CODES["AUTHENTICATION_FAILED"]


def test_own_error_codes_are_clickhouse_codes(server: ClickHouseStandin) -> None:
    with connect(server) as client:
        names = client.query(
            "SELECT arrayMap(c -> errorCodeToName(c), {codes:Array(UInt32)})",
            parameters={"codes": list(OWN_ERROR_CODES.values())},
        ).result_rows[0][0]
    assert names == list(OWN_ERROR_CODES)


def test_get_is_read_only_and_ping_answers(server: ClickHouseStandin, http: urllib3.PoolManager) -> None:
    base = f"http://127.0.0.1:{server.port}"
    assert http.request("GET", f"{base}/ping").data == b"Ok.\n"
    select = http.request("GET", f"{base}/?query=SELECT%201", headers=auth(server))
    assert (select.status, select.data, select.headers["X-ClickHouse-Format"]) == (200, b"1\n", "TabSeparated")
    create = http.request("GET", f"{base}/?query=CREATE%20TABLE%20g%20(a%20Int8)%20ENGINE%3DLog", headers=auth(server))
    assert create.headers["X-ClickHouse-Exception-Code"] == str(OWN_ERROR_CODES["READONLY"])
    assert b"readonly" in create.data


def test_settings_database_and_set_statements_last_one_request(
    server: ClickHouseStandin, http: urllib3.PoolManager
) -> None:
    setting = "SELECT getSetting('max_threads') FORMAT JSONEachRow"
    default = post(server, http, setting).data
    assert post(server, http, setting, max_threads="1").data == b"{\"getSetting('max_threads')\":1}\n"
    assert post(server, http, "SET max_threads = 1").status == 200
    assert post(server, http, setting).data == default
    assert post(server, http, "CREATE DATABASE IF NOT EXISTS other").status == 200
    assert post(server, http, "SELECT currentDatabase()", database="other").data == b"other\n"
    assert post(server, http, "SELECT currentDatabase()").data == b"default\n"


def test_replies_carry_the_headers_clients_read(server: ClickHouseStandin, http: urllib3.PoolManager) -> None:
    assert post(server, http, "CREATE TABLE IF NOT EXISTS h (a Int8) ENGINE = MergeTree ORDER BY a").status == 200
    insert = post(server, http, b"INSERT INTO h FORMAT JSONEachRow\n" + b"\n".join([b'{"a":1}'] * 3), query_id="ins-1")
    assert insert.status == 200 and "X-ClickHouse-Format" not in insert.headers
    assert insert.headers["X-ClickHouse-Query-Id"] == "ins-1"
    assert json.loads(insert.headers["X-ClickHouse-Summary"])["written_rows"] == "3"
    select = post(server, http, "SELECT now() AS t FORMAT JSONEachRow", session_timezone="Asia/Tokyo")
    assert select.headers["X-ClickHouse-Format"] == "JSONEachRow"
    assert select.headers["X-ClickHouse-Timezone"] == "Asia/Tokyo"
    assert select.headers["X-ClickHouse-Server-Display-Name"] == server.display_name
    chunked = http.request(
        "POST",
        f"http://127.0.0.1:{server.port}/?query=INSERT%20INTO%20h%20FORMAT%20CSV",
        body=iter([b"4\n", b"5\n"]),
        chunked=True,
        headers=auth(server),
    )
    assert chunked.status == 200
    assert post(server, http, "SELECT sum(a) FROM h").data == b"12\n"


def test_url_carries_credentials_that_http_store_can_use(server: ClickHouseStandin) -> None:
    assert server.url == f"http://default:s3cret%3A%20%27x%27@127.0.0.1:{server.port}/default"
    store = HttpStore(server.url)
    try:
        assert store.query("SELECT currentDatabase() AS db") == [{"db": "default"}]
    finally:
        store.close()
