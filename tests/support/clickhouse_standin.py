"""A stand-in for a ClickHouse server process: ClickHouse's HTTP interface, every statement run on chDB.

No modern ClickHouse server can be installed here, so the server back end (``HttpStore`` through
clickhouse-connect) is tested against this. The client and the engine are both real; only the server
process is stood in for, and only the part of its HTTP handler that clients use. The reference is
ClickHouse's ``src/Server/HTTPHandler.cpp`` and ``exceptionCodeToHTTPStatus.cpp``.

Implemented:
- GET and POST on any path; ``/ping`` and a bare ``GET /`` answer ``Ok.``.
- The statement is the ``query`` URL parameter, a newline, then the request body (so INSERT data follows
  its statement); a ``multipart/form-data`` body instead carries ``query`` and ``param_*`` as fields.
- Bodies sized by Content-Length or sent chunked, decoded per Content-Encoding (lz4, zstd, gzip, deflate).
- ``param_<name>``: chDB query parameters, passed verbatim (both take ClickHouse's escaped text form).
- ``database`` / X-ClickHouse-Database, ``default_format`` / X-ClickHouse-Format, ``query_id``.
- Every other parameter is a setting for this request only (``SET`` before, reset after), which is how
  ``insert_deduplication_token`` and ``deduplicate_blocks_in_dependent_materialized_views`` take effect.
- One user, by Basic auth, X-ClickHouse-User/Key headers or ``user``/``password`` parameters.
- GET runs read-only statements only, as ClickHouse's implied ``readonly=2`` for GET does.
- Replies carry X-ClickHouse-Query-Id, -Format (result-producing statements), -Timezone, -Summary and
  -Server-Display-Name. Errors carry ClickHouse's HTTP status for the error code, the
  X-ClickHouse-Exception-Code header and a ``Code: N. DB::Exception: ... (NAME) (version V)`` body.

Not implemented, on purpose (none changes what a statement does):
- Sessions (session_id, session_timeout, session_check, close_session): every request starts from the same
  clean state, as a sessionless request does on a server.
- client_protocol_version: Native output stays at revision 0; clickhouse-connect's probe sees that and uses 0.
- Response compression (enable_http_compression, Accept-Encoding), progress headers
  (send_progress_in_http_headers, http_headers_progress_interval_ms), wait_end_of_query, buffer_size and
  cancel_http_readonly_queries_on_client_close: each reply is built whole, then sent uncompressed.
- quota_key, stacktrace, role. ClickHouse's own block compression (compress/decompress) and external
  data tables are refused with an error rather than misread.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
import socket
import threading
import time
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import python_multipart

RESERVED_PARAMS = frozenset(
    {
        "query",
        "database",
        "default_format",
        "compress",
        "decompress",
        "user",
        "password",
        "quota_key",
        "query_id",
        "stacktrace",
        "buffer_size",
        "wait_end_of_query",
        "session_id",
        "session_timeout",
        "session_check",
        "client_protocol_version",
        "close_session",
        "role",
    }
)
TRANSPORT_SETTINGS = frozenset(
    {
        "enable_http_compression",
        "http_zlib_compression_level",
        "send_progress_in_http_headers",
        "http_headers_progress_interval_ms",
        "cancel_http_readonly_queries_on_client_close",
        "http_wait_end_of_query",
        "http_response_buffer_size",
    }
)
# Error codes the stand-in raises itself (checked against chDB's errorCodeToName in the tests).
OWN_ERROR_CODES = {
    "NOT_IMPLEMENTED": 48,
    "NOT_ENOUGH_SPACE": 243,
    "UNKNOWN_SETTING": 115,
    "READONLY": 164,
    "AUTHENTICATION_FAILED": 516,
    "STD_EXCEPTION": 1001,
}
# ClickHouse's exceptionCodeToHTTPStatus, by error name; every other error is 500.
HTTP_STATUS = {
    name: status
    for status, names in {
        401: "REQUIRED_PASSWORD",
        403: "UNKNOWN_USER WRONG_PASSWORD AUTHENTICATION_FAILED SET_NON_GRANTED_ROLE ACCESS_DENIED",
        400: "BAD_ARGUMENTS CANNOT_COMPILE_REGEXP CANNOT_PARSE_TEXT CANNOT_PARSE_ESCAPE_SEQUENCE "
        "CANNOT_PARSE_QUOTED_STRING CANNOT_PARSE_DATE CANNOT_PARSE_DATETIME CANNOT_PARSE_NUMBER "
        "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING CANNOT_PARSE_IPV4 CANNOT_PARSE_IPV6 CANNOT_PARSE_INPUT_ASSERTION_FAILED "
        "CANNOT_PARSE_UUID DUPLICATE_COLUMN "
        "ILLEGAL_COLUMN UNKNOWN_ELEMENT_IN_AST UNKNOWN_TYPE_OF_AST_NODE THERE_IS_NO_COLUMN TOO_DEEP_AST TOO_BIG_AST "
        "UNEXPECTED_AST_STRUCTURE SYNTAX_ERROR INCORRECT_DATA TYPE_MISMATCH VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
        404: "UNKNOWN_TABLE UNKNOWN_FUNCTION UNKNOWN_IDENTIFIER UNKNOWN_TYPE UNKNOWN_STORAGE UNKNOWN_DATABASE "
        "UNKNOWN_SETTING UNKNOWN_DIRECTION_OF_SORTING UNKNOWN_AGGREGATE_FUNCTION UNKNOWN_FORMAT "
        "UNKNOWN_DATABASE_ENGINE UNKNOWN_TYPE_OF_QUERY UNKNOWN_ROLE",
        408: "TIMEOUT_EXCEEDED",
        411: "HTTP_LENGTH_REQUIRED",
        413: "QUERY_IS_TOO_LARGE",
        415: "UNSUPPORTED_MEDIA_TYPE",
        501: "NOT_IMPLEMENTED",
        503: "SOCKET_TIMEOUT CANNOT_OPEN_FILE CANNOT_SCHEDULE_TASK",
    }.items()
    for name in names.split()
}
_LEADING_KEYWORD = re.compile(rb"(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/|\()*([A-Za-z]+)", re.S)
_RESULT_KEYWORDS = {b"SELECT", b"WITH", b"SHOW", b"DESC", b"DESCRIBE", b"EXISTS", b"EXPLAIN", b"CHECK"}
_FORMAT_CLAUSE = re.compile(rb"\bFORMAT\s+(\w+)\s*;?\s*\Z", re.I)
_ERROR_NAME = re.compile(r"\(([A-Z][A-Z0-9_]*)\)\s*\Z")
_SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BINARY_INSERT_FORMATS = {"arrow", "arrowstream", "native", "rowbinary", "rowbinarywithnamesandtypes", "parquet"}
_CONTENT_TYPES = {
    "json": "application/json; charset=UTF-8",
    "tabseparated": "text/tab-separated-values; charset=UTF-8",
    "tsv": "text/tab-separated-values; charset=UTF-8",
    "native": "application/octet-stream",
    "rowbinary": "application/octet-stream",
    "parquet": "application/octet-stream",
}


class ServerError(Exception):
    """An error answered the way ClickHouse answers it: code, ``Code: N. DB::Exception: ...`` text, status."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message
        name = _ERROR_NAME.search(message)
        self.status = HTTP_STATUS.get(name[1] if name else "", 500)

    @classmethod
    def own(cls, name: str, text: str) -> ServerError:
        return cls(OWN_ERROR_CODES[name], f"Code: {OWN_ERROR_CODES[name]}. DB::Exception: {text}. ({name})")

    @classmethod
    def from_engine(cls, exc: Exception) -> ServerError:
        message = str(exc).strip()
        code = re.match(r"Code: (\d+)\.", message)
        return cls(int(code[1]), message) if code else cls.own("STD_EXCEPTION", message)


@dataclass
class Request:
    sql: bytes
    database: str = "default"
    default_format: str = "TabSeparated"
    settings: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    query_id: str = ""
    user: str = "default"
    password: str = ""
    read_only: bool = False
    data: bytes = b""  # binary INSERT data (Arrow, Native, ...), kept apart from the statement ``sql``


def decode_body(body: bytes, encoding: str | None) -> bytes:
    """A request body per its Content-Encoding; clickhouse-connect sends one lz4/zstd frame per block."""
    encoding = (encoding or "").strip().lower()
    if not body or encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding == "zstd":
        try:
            from compression import zstd  # Python 3.14+
        except ImportError:
            from backports import zstd
        return zstd.decompress(body)  # decodes concatenated frames
    if encoding == "lz4":
        import lz4.frame

        frames = []
        while body:
            decompressor = lz4.frame.LZ4FrameDecompressor()
            frames.append(decompressor.decompress(body))
            body = decompressor.unused_data
        return b"".join(frames)
    raise ServerError.own("NOT_IMPLEMENTED", f"Content-Encoding {encoding!r} is not supported by the stand-in")


def _form_fields(content_type: str, body: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    files: list[Any] = []
    python_multipart.parse_form(
        {"Content-Type": content_type.encode(), "Content-Length": str(len(body)).encode()},
        io.BytesIO(body),
        lambda f: fields.__setitem__(f.field_name.decode(), (f.value or b"").decode()),
        files.append,
    )
    if files:
        raise ServerError.own("NOT_IMPLEMENTED", "external data tables are not supported by the stand-in")
    return fields


def _credentials(headers: Mapping[str, str], fields: Mapping[str, str]) -> tuple[str, str]:
    if "x-clickhouse-user" in headers or "x-clickhouse-key" in headers:
        return headers.get("x-clickhouse-user") or "default", headers.get("x-clickhouse-key", "")
    auth = headers.get("authorization", "")
    if auth[:6].lower() == "basic ":
        user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        return user, password
    return fields.get("user", "default"), fields.get("password", "")


def parse_request(method: str, target: str, headers: Mapping[str, str], body: bytes) -> Request:
    """One HTTP request as ClickHouse's HTTP handler reads it (pure: no I/O, no engine)."""
    headers = {k.lower(): v for k, v in headers.items()}
    fields = dict(parse_qsl(urlsplit(target).query, keep_blank_values=True))
    content_type = headers.get("content-type", "")
    body = decode_body(body, headers.get("content-encoding"))
    data = b""
    multipart = content_type.startswith("multipart/form-data")
    if multipart:
        fields.update(_form_fields(content_type, body))
        sql = fields.get("query", "").encode()
    else:
        query = fields.get("query", "")
        sql = query.encode() + b"\n" + body if query else body
        if query and body and output_format(query.encode(), "").lower() in _BINARY_INSERT_FORMATS:
            sql, data = query.encode(), body  # chDB takes binary data through a streaming insert, not in the SQL text
    for flag in ("compress", "decompress"):
        if fields.get(flag, "0") not in ("", "0", "false"):
            raise ServerError.own(
                "NOT_IMPLEMENTED", f"'{flag}' (ClickHouse block compression) is not supported by the stand-in"
            )
    settings = {}
    for key, value in fields.items():
        if not key or key in RESERVED_PARAMS or key in TRANSPORT_SETTINGS or key.startswith("param_"):
            continue
        if multipart and key.endswith(("_format", "_types", "_structure")):
            continue  # ClickHouse reserves these suffixes for external data when the body is a form
        if not _SETTING_NAME.fullmatch(key):
            raise ServerError.own("UNKNOWN_SETTING", f"Unknown setting '{key}'")
        settings[key] = value
    user, password = _credentials(headers, fields)
    return Request(
        sql=sql,
        database=headers.get("x-clickhouse-database") or fields.get("database") or "default",
        default_format=headers.get("x-clickhouse-format") or fields.get("default_format") or "TabSeparated",
        settings=settings,
        params={k[len("param_") :]: v for k, v in fields.items() if k.startswith("param_")},
        query_id=fields.get("query_id") or headers.get("x-clickhouse-query-id") or str(uuid.uuid4()),
        user=user,
        password=password,
        read_only=method == "GET",
        data=data if not multipart else b"",
    )


def leading_keyword(sql: bytes) -> bytes:
    match = _LEADING_KEYWORD.match(sql)
    return match[1].upper() if match else b""


def output_format(sql: bytes, default_format: str) -> str:
    clause = _FORMAT_CLAUSE.search(sql[-512:])
    return clause[1].decode() if clause else default_format


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass
class Reply:
    body: bytes
    summary: dict[str, str]


class ChdbEngine:
    """One chDB session for the whole server (chDB allows one per process), one statement at a time."""

    def __init__(self, path: str | Path):
        import chdb.session

        Path(path).mkdir(parents=True, exist_ok=True)
        self._session = chdb.session.Session(str(path))
        self._lock = threading.Lock()
        self.version, self.timezone = (
            self._session.query("SELECT version(), timezone()", "TabSeparated").bytes().decode().split()
        )
        self._baseline = self._changed_settings()

    def _changed_settings(self) -> dict[str, str]:
        rows = self._session.query("SELECT name, value FROM system.settings WHERE changed", "JSONEachRow").bytes()
        return {r["name"]: r["value"] for r in map(json.loads, rows.splitlines())}

    def _forget_settings(self, request: Request) -> None:
        # A server request's settings die with the request; the shared session must forget them too.
        stale = set(request.settings)
        if leading_keyword(request.sql) == b"SET":  # only a SET statement changes the session's own settings
            changed = self._changed_settings()
            stale |= {n for n in changed.keys() | self._baseline.keys() if changed.get(n) != self._baseline.get(n)}
        stale.discard("database")  # USE sets it on every request
        if stale:
            self._session.query(
                "SET "
                + ", ".join(
                    f"{n} = {_literal(self._baseline[n]) if n in self._baseline else 'DEFAULT'}" for n in sorted(stale)
                )
            )

    def execute(self, request: Request) -> Reply:
        with self._lock:
            if self._session is None:
                raise ServerError.own("STD_EXCEPTION", "the stand-in is stopped")
            started = time.perf_counter_ns()
            try:
                self._session.query("USE `" + request.database.replace("\\", "\\\\").replace("`", "\\`") + "`")
                if request.settings:
                    self._session.query("SET " + ", ".join(f"{k} = {_literal(v)}" for k, v in request.settings.items()))
                if request.data:
                    return self._insert(request, started)
                result = self._session.query(request.sql, request.default_format, params=request.params or None)
            except Exception as exc:
                raise ServerError.from_engine(exc) from exc
            finally:
                self._forget_settings(request)
        body = result.bytes() if result is not None else b""
        counts = (
            (
                result.storage_rows_read(),
                result.storage_bytes_read(),
                result.rows_written(),
                result.bytes_written(),
                result.rows_read(),
            )
            if result is not None
            else (0,) * 5
        )
        summary = dict(
            zip(("read_rows", "read_bytes", "written_rows", "written_bytes", "result_rows"), map(str, counts))
        )
        summary.update(
            total_rows_to_read="0", result_bytes=str(len(body)), elapsed_ns=str(time.perf_counter_ns() - started)
        )
        return Reply(body, summary)

    def _insert(self, request: Request, started: int) -> Reply:
        """A binary INSERT: the statement without its FORMAT clause, and the data streamed in that format."""
        fmt = output_format(request.sql, "")
        statement = _FORMAT_CLAUSE.sub(b"", request.sql).decode()
        inserter = self._session.send_insert(statement, fmt)
        inserter.append(request.data)
        result = inserter.finish()
        summary = {
            "read_rows": "0",
            "read_bytes": "0",
            "written_rows": str(result.rows_written),
            "written_bytes": str(result.bytes_written),
            "result_rows": "0",
            "total_rows_to_read": "0",
            "result_bytes": "0",
            "elapsed_ns": str(time.perf_counter_ns() - started),
        }
        return Reply(b"", summary)

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clickhouse-connect's connection pool expects
    disable_nagle_algorithm = True  # headers and body go out in two writes; Nagle would hold the body ~40 ms
    timeout = 30  # idle keep-alive connections close after this, like ClickHouse's keep_alive_timeout
    server: _Server

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self, method: str) -> None:
        standin = self.server.standin
        body = self._read_body()
        target = urlsplit(self.path)
        if target.path.rstrip("/") == "/ping" or (method == "GET" and not target.query):
            return self._send(200, b"Ok.\n", {"Content-Type": "text/html; charset=UTF-8"})
        try:
            request = parse_request(method, self.path, dict(self.headers.items()), body)
            standin.authenticate(request)
            keyword = leading_keyword(request.sql)
            standin.inject_faults(keyword)
            if request.read_only and keyword not in _RESULT_KEYWORDS | {b"SET", b"USE"}:
                raise ServerError.own(
                    "READONLY",
                    "Cannot execute query in readonly mode. For queries over HTTP, "
                    "method GET implies readonly. You should use method POST for modifying queries",
                )
            reply = standin.engine.execute(request)
        except Exception as exc:  # a stand-in bug must still reach the client as a ClickHouse error
            err = exc if isinstance(exc, ServerError) else ServerError.own("STD_EXCEPTION", repr(exc))
            body = f"{err.message} (version {standin.engine.version} (claimwatch stand-in))\n".encode()
            return self._send(
                err.status,
                body,
                {"X-ClickHouse-Exception-Code": str(err.code), "Content-Type": "text/plain; charset=UTF-8"},
            )
        headers = {
            "X-ClickHouse-Query-Id": request.query_id,
            "X-ClickHouse-Summary": json.dumps(reply.summary),
            "X-ClickHouse-Timezone": request.settings.get("session_timezone") or standin.engine.timezone,
            "Content-Type": "text/plain; charset=UTF-8",
        }
        if keyword in _RESULT_KEYWORDS:
            fmt = headers["X-ClickHouse-Format"] = output_format(request.sql, request.default_format)
            family = next((f for f in _CONTENT_TYPES if fmt.lower().startswith(f)), None)
            headers["Content-Type"] = _CONTENT_TYPES.get(family, headers["Content-Type"])
        self._send(200, reply.body, headers)

    def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("X-ClickHouse-Server-Display-Name", self.server.standin.display_name)
        self.send_header("Keep-Alive", f"timeout={self.timeout}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, standin: ClickHouseStandin):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.standin = standin
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._open_lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class ClickHouseStandin:
    """``with ClickHouseStandin(path) as server: HttpStore(server.url)`` — a ClickHouse HTTP endpoint on loopback."""

    def __init__(
        self,
        chdb_path: str | Path,
        *,
        user: str = "default",
        password: str = "",
        display_name: str = "claimwatch-standin",
    ):
        self.chdb_path = Path(chdb_path)
        self.user, self.password, self.display_name = user, password, display_name
        self.engine: ChdbEngine | None = None
        # Fault injection for reliability tests: INSERTs fail (like a full disk) or stall.
        self.fail_inserts = False
        self.insert_delay = 0.0
        self.failed_inserts = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stand-in is not running: call start() or use it as a context manager")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{quote(self.user, safe='')}:{quote(self.password, safe='')}@127.0.0.1:{self.port}/default"

    def inject_faults(self, keyword: bytes) -> None:
        if keyword != b"INSERT":
            return
        if self.insert_delay:
            time.sleep(self.insert_delay)
        if self.fail_inserts:
            self.failed_inserts += 1
            raise ServerError.own("NOT_ENOUGH_SPACE", "Cannot reserve 1.00 MiB, not enough space (injected fault)")

    def authenticate(self, request: Request) -> None:
        if (request.user, request.password) != (self.user, self.password):
            raise ServerError.own(
                "AUTHENTICATION_FAILED",
                f"{request.user}: Authentication failed: password is incorrect, or there is no user with such name",
            )

    def start(self) -> ClickHouseStandin:
        self.engine = ChdbEngine(self.chdb_path)
        try:
            self._server = _Server(self)
        except OSError:
            self.engine.close()
            raise
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"clickhouse-standin:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.drop_connections()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = self._thread = None
        if self.engine is not None:
            self.engine.close()  # waits for a statement in flight, then frees chDB's one session

    def __enter__(self) -> ClickHouseStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
