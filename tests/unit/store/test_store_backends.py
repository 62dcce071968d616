"""The store contract, run over both back ends: embedded chDB and a ClickHouse server over HTTP.

The server is the stand-in from tests/support (ClickHouse's HTTP interface in front of chDB), reached
through the real clickhouse-connect client. chDB allows one session per process, so every test opens
one back end at a time and closes it before the next one opens.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import msgspec
import pytest

from services.contract.decode import validate_event
from services.contract.model import FAILED_VERDICTS, Answer, Claim, Query, Sampling, VerdictEvent
from services.core.errors import StoreError
from services.ingest.records import INTAKE_FORMAT, intake_line
from services.store.backends import CHDB_ALLOCATOR, AllocatorPurge, ChdbStore, HttpStore, Store
from services.store.convert import INTAKE_SETTINGS, INTAKE_TABLE, event_to_row
from services.store.migrate import migrate
from services.store.retention import KEEP_EVERYTHING
from services.store.writer import INSERT_SETTINGS, EventWriter
from tests.support.clickhouse_standin import ClickHouseStandin
from tests.support.stores import StoreTemplates

BACKENDS = ("chdb", "http")
ROOT = Path(__file__).resolve().parents[3]
MIGRATIONS = resources.files("services.store").joinpath("migrations")
RATE_SUMS = (
    "events",
    "claims",
    "failed",
    "claims_sq",
    "failed_sq",
    "failed_claims",
    "supported",
    "unsupported",
    "contradicted",
    "overreach",
    "stale",
    "no_source",
    "trivial",
    "served",
    "served_unsafe",
    "abstained",
    "answerable",
    "answerable_abstained",
    "unanswerable",
    "unanswerable_abstained",
)
HOSTILE = (
    "it's",
    'say "hi"',
    "back\\slash",
    "ends with \\",
    "\\'",
    "\\N",
    "NULL",
    "tab\there",
    "new\nline",
    "cr\r\nlf",
    "'; DROP TABLE events; --",
    "{x:String}",
    "{event_id:String}",
    "%s %(x)s $1 ?",
    "ünïcødé ✓ 日本語 🙂 \u202e",
    "<script>alert('x')</script>&amp;",
    "nul\x00byte",
    "x" * 5000 + "'\\\t\n",  # the long one forces form encoding
)


def data_dir(kind: str, root: Path) -> Path:
    """Where a back end under ``root`` keeps its chDB data: the embedded store's, or the stand-in server's."""
    return root / ("chdb" if kind == "chdb" else "server")


@contextmanager
def open_backend(kind: str, root: Path) -> Iterator[Store]:
    """One back end, closed on exit: chDB allows a single open session per process."""
    if kind == "chdb":
        store: Store = ChdbStore(data_dir(kind, root))
        try:
            yield store
        finally:
            store.close()
        return
    with ClickHouseStandin(data_dir(kind, root)) as server:
        store = HttpStore(server.url)
        try:
            yield store
        finally:
            store.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, store_templates: StoreTemplates) -> Iterator[Store]:
    # a migrated copy; fixed event times must not age past a TTL
    store_templates.copy(data_dir(request.param, tmp_path), KEEP_EVERYTHING)
    with open_backend(request.param, tmp_path) as opened:
        yield opened


def make_event(
    n: int,
    route: str = "billing-faq",
    verdicts: tuple[str, ...] = ("supported", "contradicted"),
    minute: int = 14,
    **fields: object,
) -> VerdictEvent:
    event = {
        "schema": "claimwatch.verdict/v1",
        "event_id": f"e-{n:04d}",
        "trace_id": f"tr-{n:04d}",
        "observed_at": f"2026-11-21T09:{minute:02d}:{n % 60:02d}.512Z",
        "route": route,
        "query": {
            "text": f"question {n}",
            "query_type": "lookup",
            "stakes": ("low", "high")[n % 2],
            "answerable": n % 3 != 0,
        },
        "answer": {"text": f"answer {n}", "action": ("served", "abstained")[n % 5 == 0]},
        "versions": {"model": f"gen-{n % 2}", "prompt": "faq-v14"},
        "claims": [
            {"claim_id": f"c{i + 1}", "text": f"claim {n}.{i}", "verdict": v, "score": round(0.1 * (i + 1), 2)}
            for i, v in enumerate(verdicts)
        ],
    }
    event.update(fields)
    return validate_event(event)


def mixed_events(count: int, start: int = 0) -> list[VerdictEvent]:
    routes = ("billing-faq", "parcel-status", "hr/policies")
    shapes = (
        ("supported",),
        ("supported", "unsupported", "trivial"),
        ("contradicted", "stale", "no_source", "overreach"),
        ("not_enough_info", "entailed"),
        (),
    )
    return [make_event(n, routes[n % 3], shapes[n % 5], minute=10 + n % 3) for n in range(start, start + count)]


def totals(store: Store) -> dict[str, int]:
    """Row counts as stored right now, without FINAL: what a query sees before background merges."""
    return {
        "events": store.query("SELECT count() AS n FROM events")[0]["n"],
        "claims": store.query("SELECT count() AS n FROM claims")[0]["n"],
        "rate_events": store.query("SELECT sum(events) AS n FROM rate_minute WHERE dim = ''")[0]["n"],
        "rate_claims": store.query("SELECT sum(claims) AS n FROM rate_minute WHERE dim = ''")[0]["n"],
    }


def expected_totals(events: list[VerdictEvent]) -> dict[str, int]:
    return {
        "events": len(events),
        "claims": sum(len(e.claims) for e in events),
        "rate_events": len(events),
        "rate_claims": sum(c.verdict != "trivial" for e in events for c in e.claims),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", BACKENDS)
def test_migrate_applies_once_and_survives_a_restart(kind: str, tmp_path: Path) -> None:
    shipped = sorted(int(p.name[:3]) for p in MIGRATIONS.iterdir() if re.fullmatch(r"\d{3}_\w+\.sql", p.name))
    with open_backend(kind, tmp_path) as store:
        assert migrate(store) == shipped
        assert migrate(store) == []
        tables = {r["name"] for r in store.query("SELECT name FROM system.tables WHERE database = currentDatabase()")}
    with open_backend(kind, tmp_path) as store:
        assert migrate(store) == []
        applied = store.query("SELECT version, name FROM schema_migrations ORDER BY version")
    assert [r["version"] for r in applied] == shipped and applied[0] == {"version": 1, "name": "baseline"}
    assert {"events", "claims", "claims_mv", "rate_minute", "rate_minute_mv", "dlq", "schema_migrations"} <= tables


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_store_from_before_the_baseline_is_refused_with_how_to_start_fresh(kind: str, tmp_path: Path) -> None:
    with open_backend(kind, tmp_path) as store:
        migrate(store)
        store.insert("schema_migrations", [{"version": 2, "name": "alerts"}])  # as a pre-0.1.0 store holds
        tables = store.query("SELECT count() AS n FROM system.tables WHERE database = currentDatabase()")
        with pytest.raises(StoreError) as refused:
            migrate(store)
        assert store.query("SELECT count() AS n FROM system.tables WHERE database = currentDatabase()") == tables
    message = str(refused.value)
    assert "002_alerts" in message and store.url in message
    assert "Start fresh" in message and "move the store's directory aside" in message


@pytest.mark.slow
def test_both_back_ends_store_and_read_back_the_same_rows(tmp_path: Path) -> None:
    events = mixed_events(60)
    snapshots = {}
    for kind in BACKENDS:
        with open_backend(kind, tmp_path / kind) as store:
            migrate(store)
            writer = EventWriter(store)
            assert writer.write(events[:40]).inserted == 40
            assert writer.write(events[30:]).inserted == 20  # ten redelivered
            snapshots[kind] = {
                "events": store.query("SELECT * EXCEPT ingested_at FROM events ORDER BY event_id"),
                "claims": store.query("SELECT * FROM claims ORDER BY event_id, claim_idx"),
                "rates": store.query(
                    f"SELECT dim, value, route, minute, {', '.join(f'sum({c}) AS {c}' for c in RATE_SUMS)} "
                    "FROM rate_minute GROUP BY dim, value, route, minute ORDER BY dim, value, route, minute"
                ),
                "verdicts": store.query(
                    "SELECT route, verdict, count() AS n FROM claims GROUP BY route, verdict ORDER BY route, verdict"
                ),
            }
    chdb, http = snapshots["chdb"], snapshots["http"]
    assert chdb == http
    assert [r["event_id"] for r in chdb["events"]] == sorted(e.event_id for e in events)
    expected = Counter((e.route, c.verdict) for e in events for c in e.claims)
    assert {(r["route"], r["verdict"]): r["n"] for r in chdb["verdicts"]} == expected
    whole_route = [r for r in chdb["rates"] if r["dim"] == ""]
    assert {r["route"] for r in whole_route} == {"billing-faq", "parcel-status", "hr/policies"}
    for route in ("billing-faq", "parcel-status", "hr/policies"):
        on_route = [e for e in events if e.route == route]
        assert sum(r["events"] for r in whole_route if r["route"] == route) == len(on_route)
        assert sum(r["failed"] for r in whole_route if r["route"] == route) == sum(
            c.verdict in FAILED_VERDICTS for e in on_route for c in e.claims
        )
    first = chdb["events"][0]
    assert (first["observed_at"], first["versions"], first["verdicts"]) == (
        "2026-11-21 09:10:00.512",
        {"model": "gen-0", "prompt": "faq-v14"},
        ["supported"],
    )


def test_hostile_values_are_stored_and_read_back_exactly(store: Store) -> None:
    for value in HOSTILE:
        row = store.query("SELECT {v:String} AS v, {a:Array(String)} AS a", {"v": value, "a": [value, "plain"]})
        assert row == [{"v": value, "a": [value, "plain"]}]
    events = [
        make_event(
            n,
            event_id=value[:128],
            trace_id=value[-128:],
            tenant=value[:256],
            query={"text": value},
            answer={"text": value, "action": "served"},
            versions={"model": value[:256], value[:64]: "v"},
            attributes={"note": value[:256]},
            claims=[{"text": value, "verdict": "supported", "span": value}],
        )
        for n, value in enumerate(HOSTILE)
    ]
    assert EventWriter(store).write(events).inserted == len(HOSTILE)
    assert EventWriter(store).write(events).inserted == 0  # the ids themselves survive the IN {ids:Array(String)} check
    for event, value in zip(events, HOSTILE):
        stored = store.query(
            "SELECT event_id, trace_id, tenant, query_text, answer_text, versions, attributes, "
            "claim_texts, spans FROM events WHERE event_id = {id:String}",
            {"id": event.event_id},
        )
        assert stored == [
            {
                "event_id": value[:128],
                "trace_id": value[-128:],
                "tenant": value[:256],
                "query_text": value,
                "answer_text": value,
                "versions": {"model": value[:256], value[:64]: "v"},
                "attributes": {"note": value[:256]},
                "claim_texts": [value],
                "spans": [value],
            }
        ]
        claims = store.query("SELECT text, span FROM claims WHERE event_id = {id:String}", {"id": event.event_id})
        assert claims == [{"text": value, "span": value}]
    assert totals(store)["events"] == len(HOSTILE)  # and the events table is still there


def test_dedup_token_makes_a_retried_insert_a_noop_in_events_and_views(store: Store) -> None:
    store.command("SYSTEM STOP MERGES")
    events = mixed_events(12)
    rows = [event_to_row(e) for e in events]
    retried = {**INSERT_SETTINGS, "insert_deduplication_token": "batch-1"}
    store.insert("events", rows, retried)
    store.insert("events", rows, retried)
    assert totals(store) == expected_totals(events)
    # The token is what decides: the same rows under another token are a new block, counted again.
    store.insert("events", rows, {**INSERT_SETTINGS, "insert_deduplication_token": "batch-2"})
    assert totals(store) == {k: 2 * v for k, v in expected_totals(events).items()}


@pytest.mark.slow
def test_redelivery_through_the_writer_never_double_counts_before_merges(store: Store) -> None:
    store.command("SYSTEM STOP MERGES")
    writer = EventWriter(store)
    first, later = mixed_events(300), mixed_events(50, start=300)  # 300 ids are past the URL limit: form-encoded
    assert writer.write(first).inserted == 300
    again = writer.write(first)
    assert (again.inserted, again.duplicates) == (0, 300)
    mixed = writer.write(first[:10] + later + later[:5])  # old, new, and repeats within the batch
    assert (mixed.inserted, mixed.duplicates) == (50, 15)
    assert totals(store) == expected_totals(first + later)
    parts = store.query(
        "SELECT count() AS n FROM system.parts WHERE database = currentDatabase() AND table = 'events' AND active"
    )[0]["n"]
    assert parts == 2  # two inserts landed as two unmerged parts: the counts above are pre-merge


def test_intake_lines_store_exactly_what_row_inserts_store(store: Store) -> None:
    """The writer's intake lines (the events' own JSON, turned into rows by the intake view) and the
    ``events`` rows of the same events read back identically, down to the truncated millisecond."""
    store.command("SYSTEM STOP MERGES")
    events = mixed_events(20) + [
        make_event(
            900 + i,
            query={"text": text, "answerable": None},
            attributes={"k": text[:256]},
            observed_at="2026-11-21T09:14:03.512999+01:00",
            evidence=[{"chunk_id": text[:256], "text": text, "used": True}, {"chunk_id": "k", "version": "v2"}],
            signals={"cherry_pick": [text[:256]], "premise_similarity": 1, "support_delta": -(0.1**7)},
            claims=[{"text": text, "verdict": "contradicted", "span": text}, {"verdict": "supported"}],
        )
        for i, text in enumerate(HOSTILE)
    ]
    intake = {**INSERT_SETTINGS, **INTAKE_SETTINGS, "insert_deduplication_token": "lines"}
    lines = b"\n".join(intake_line(e) for e in events)
    store.insert_lines(INTAKE_TABLE, lines, intake, INTAKE_FORMAT)
    store.insert_lines(INTAKE_TABLE, lines, intake, INTAKE_FORMAT)  # a retried insert: a no-op in events and every view
    assert totals(store) == expected_totals(events)
    renamed = [{**event_to_row(e), "event_id": "row-" + e.event_id} for e in events]
    store.insert("events", renamed, INSERT_SETTINGS)

    def stored(prefix: str, table: str) -> list[dict]:
        rows = store.query(
            f"SELECT * EXCEPT ingested_at FROM {table} WHERE startsWith(event_id, {{p:String}}) "
            "ORDER BY event_id" + (", claim_idx" if table == "claims" else ""),
            {"p": prefix},
        )
        return [{**r, "event_id": r["event_id"].removeprefix("row-")} for r in rows]

    for table in ("events", "claims"):
        assert stored("row-", table) == stored("e-", table) and len(stored("e-", table)) > len(events) // 2
    assert totals(store) == {k: 2 * v for k, v in expected_totals(events).items()}


def test_the_intake_table_declares_the_models_fields_in_the_models_order(store: Store) -> None:
    """Intake lines carry values by position (records.INTAKE_FORMAT): a field added to the model, or a column to
    the intake table, in a different place would store every value in its neighbour's column."""

    def names(struct) -> list[str]:
        return [f.encode_name for f in msgspec.structs.fields(struct)]

    columns = {
        r["name"]: r["type"]
        for r in store.query(
            "SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = {t:String} "
            "ORDER BY position",
            {"t": INTAKE_TABLE},
        )
    }
    assert list(columns) == [n for n in names(VerdictEvent) if n != "schema"]
    for column, struct in (("query", Query), ("answer", Answer), ("claims", Claim), ("sampling", Sampling)):
        elements = re.findall(r"[(,] ?(\w+) ", columns[column].removeprefix("Array("))
        assert elements == names(struct), (column, columns[column])


def test_a_bad_statement_raises_store_error_with_clickhouse_message(store: Store) -> None:
    with pytest.raises(StoreError, match=r"(?s)Code: 62\. DB::Exception: Syntax error.*SYNTAX_ERROR"):
        store.query("SELEC 1")
    with pytest.raises(StoreError, match=r"(?s)Code: 60\. DB::Exception: .*no_such_table.*UNKNOWN_TABLE"):
        store.command("DROP TABLE no_such_table")
    with pytest.raises(StoreError, match=r"(?s)Code: 60\. DB::Exception: .*UNKNOWN_TABLE"):
        store.insert("no_such_table", [{"a": 1}])
    bad_time = {**event_to_row(make_event(1)), "observed_at": "not a time"}
    with pytest.raises(StoreError, match=r"(?s)Code: \d+\. DB::Exception: .*observed_at"):
        store.insert("events", [bad_time])
    with pytest.raises(StoreError, match=r"(?s)Code: 115\. DB::Exception: .*UNKNOWN_SETTING"):
        store.insert("events", [event_to_row(make_event(2))], {"no_such_setting": 1})
    assert totals(store)["events"] == 0  # nothing half-written
    assert store.query("SELECT 1 AS ok") == [{"ok": 1}]  # and the store still answers


def test_an_embedded_stores_reads_do_not_wait_for_its_writes(tmp_path: Path) -> None:
    """A dashboard read while an ingest INSERT holds the write connection (its lock, here) answers at once,
    and sees what the other connection wrote before."""
    import threading

    with open_backend("chdb", tmp_path) as store:
        migrate(store)
        EventWriter(store).write([make_event(1)])
        answered = threading.Event()
        with store._write_lock:  # an INSERT under way
            reader = threading.Thread(
                target=lambda: answered.set() if store.query("SELECT count() AS n FROM events")[0]["n"] == 1 else None
            )
            reader.start()
            assert answered.wait(30)
        reader.join()


@pytest.mark.slow
@pytest.mark.parametrize("operator", [None, "dirty_decay_ms:3000"])
def test_the_embedded_store_loads_chdb_with_its_allocator_settings_unless_the_operator_gave_some(tmp_path, operator):
    """chDB's allocator reads JE_MALLOC_CONF once, as the library loads: the store sets its default just before
    (a fresh interpreter, as a worker starts), and leaves an operator's own alone."""
    env = {k: v for k, v in os.environ.items() if k != "JE_MALLOC_CONF"} | (
        {"JE_MALLOC_CONF": operator} if operator else {}
    )
    script = (
        "import os, sys; from services.store.backends import ChdbStore; assert 'chdb' not in sys.modules; "
        f"ChdbStore({str(tmp_path / 'ch')!r}).query('SELECT 1'); print(os.environ['JE_MALLOC_CONF'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == (operator or CHDB_ALLOCATOR)


def test_chdb_refuses_an_allocator_setting_it_does_not_know_so_the_variable_is_the_one_it_reads(tmp_path):
    env = os.environ | {"JE_MALLOC_CONF": "abort_conf:true,no_such_option:1"}
    script = f"from services.store.backends import ChdbStore; ChdbStore({str(tmp_path / 'ch')!r}).query('SELECT 1')"
    assert (
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=120, cwd=ROOT).returncode
        != 0
    )


def test_the_allocator_is_purged_only_above_its_limit_and_at_most_once_a_second():
    resident, now = [100], [0.0]
    purge = AllocatorPurge(200, lambda: resident[0], lambda: now[0])
    assert not purge.due()  # small: the kept pages speed the next write
    resident[0] = 300
    assert purge.due() and purge.purges == 1
    now[0] = 0.5
    assert not purge.due()  # a purge costs ~0.1 s: not after every statement
    now[0] = 1.5
    assert purge.due() and purge.purges == 2
    assert not AllocatorPurge(200, lambda: None).due()  # no /proc: nothing to go by


@pytest.mark.slow
def test_a_large_worker_gives_chdbs_kept_pages_back(tmp_path):
    """chDB keeps a write's freed pages (1 GB after this insert); above PURGE_ABOVE_BYTES the next statement returns
    them. In a fresh interpreter, so the figures are this store's alone."""
    script = f"""
from services.store.backends import ChdbStore, resident_bytes
store = ChdbStore({str(tmp_path / "ch")!r}, purge_above=1 << 40)
store.command("CREATE TABLE t (a String) ENGINE = MergeTree ORDER BY a")
store.command("INSERT INTO t SELECT repeat(toString(number), 50) FROM numbers(1500000)")
kept = resident_bytes()
store.purge.limit = 0
store.query("SELECT count() AS n FROM t")
print(kept, resident_bytes(), store.purge.purges)
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True, cwd=ROOT
    )
    kept, after, purges = map(int, out.stdout.split())
    assert purges == 1 and kept - after > 300 << 20, (kept >> 20, after >> 20)
