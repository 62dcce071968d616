"""`claimwatch demo` run again: it starts from a clean var/ (the earlier run's data moved aside, said in one line),
waits only for an alert its own traffic raised, and shows the runbook of the issue that alert names, or none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.client.demo import PREVIOUS, chdb_dir, issue_behind, start_clean, this_runs_firing

T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def earlier_demo(var):
    """What `claimwatch demo` leaves in var/: the store, Faust's scratch files, the traffic control and the logs."""
    (var / "clickhouse" / "store").mkdir(parents=True)
    (var / "clickhouse" / "store" / "part.bin").write_bytes(b"rows")
    (var / "faust" / "claimwatch").mkdir(parents=True)
    (var / "demo-control.json").write_text('{"stopped": ["billing-faq"]}')
    (var / "demo-up.log").write_text("first run\n")
    (var / "demo-traffic.log").write_text("first run\n")


def test_an_earlier_demo_is_moved_aside_and_said_in_one_line(tmp_path):
    var = tmp_path / "var"
    earlier_demo(var)
    said = start_clean(var, var / "clickhouse")
    assert said is not None and "\n" not in said and "earlier demo" in said and f"{var}/{PREVIOUS}/" in said
    assert sorted(p.name for p in var.iterdir()) == [PREVIOUS]  # nothing of it left where this run writes
    previous = var / PREVIOUS
    assert (previous / "clickhouse" / "store" / "part.bin").read_bytes() == b"rows"
    assert (previous / "demo-control.json").is_file() and (previous / "faust" / "claimwatch").is_dir()


def test_a_third_run_keeps_only_the_one_before(tmp_path):
    var = tmp_path / "var"
    earlier_demo(var)
    start_clean(var, var / "clickhouse")
    (var / "demo-up.log").write_text("second run\n")
    start_clean(var, var / "clickhouse")
    assert [p.name for p in (var / PREVIOUS).iterdir()] == ["demo-up.log"]
    assert (var / PREVIOUS / "demo-up.log").read_text() == "second run\n"


def test_a_fresh_or_empty_var_says_nothing_and_moves_nothing(tmp_path):
    var = tmp_path / "var"
    assert start_clean(var, var / "clickhouse") is None and not var.exists()
    (var / "clickhouse").mkdir(parents=True)  # created, never written
    assert start_clean(var, var / "clickhouse") is None and (var / "clickhouse").is_dir()


def test_faust_scratch_alone_is_no_earlier_demo(tmp_path):
    """Any worker run from here (the test suite's, `claimwatch up`) leaves Faust's empty table directories."""
    var = tmp_path / "var"
    (var / "faust" / "t1a61bd794f" / "v1" / "tables").mkdir(parents=True)
    assert start_clean(var, var / "clickhouse") is None and (var / "faust" / "t1a61bd794f").is_dir()
    (var / "demo-up.log").write_text("first run\n")  # with a file of an earlier run, the scratch moves with it
    assert start_clean(var, var / "clickhouse") is not None
    assert sorted(p.name for p in (var / PREVIOUS).iterdir()) == ["demo-up.log", "faust"]


def test_a_store_outside_var_is_the_users_and_stays(tmp_path):
    var, theirs = tmp_path / "var", tmp_path / "their-store"
    earlier_demo(var)
    theirs.mkdir()
    (theirs / "part.bin").write_bytes(b"theirs")
    start_clean(var, theirs)
    assert (theirs / "part.bin").read_bytes() == b"theirs"
    assert (var / "clickhouse").is_dir() and not (var / "demo-up.log").exists()  # only the demo's own state moved


def test_the_store_directory_of_an_embedded_store_only():
    assert str(chdb_dir("chdb:./var/clickhouse")) == "var/clickhouse"
    assert chdb_dir("http://default:@localhost:8123/claimwatch") is None


def alert(alert_id, starts_at, kind="hallucination_rate_rise", state="firing"):
    return {
        "alert_id": alert_id,
        "kind": kind,
        "state": state,
        "route": "billing-faq",
        "pending_since": (starts_at - timedelta(minutes=2)).isoformat(),
        "starts_at": starts_at.isoformat(),
    }


def test_only_alerts_this_runs_traffic_raised_count_first_fired_first():
    old_open = alert("a-old", T0 + timedelta(minutes=5))  # listed before this run's traffic
    old_stored = alert("a-stale", T0 - timedelta(minutes=30))  # firing since before this run's first change
    later = alert("a-later", T0 + timedelta(minutes=3), kind="mix_shift")
    drift = alert("a-drift", T0 + timedelta(minutes=1))
    pending = alert("a-pending", T0 + timedelta(minutes=2), state="pending")
    found = this_runs_firing([old_open, old_stored, later, pending, drift], T0, before={"a-old"})
    assert [a["alert_id"] for a in found] == ["a-drift", "a-later"]
    assert this_runs_firing([old_open, old_stored], T0, before={"a-old"}) == []


def test_the_runbook_shown_is_the_issue_the_alert_names_once_its_window_is_clustered():
    named = {"explanation": {"status": "", "issues": [{"issue_id": "iss-top"}, {"issue_id": "iss-next"}]}}
    clustering = {
        "explanation": {"status": "clustering 812 failing claims of this window", "issues": [{"issue_id": "iss-early"}]}
    }
    assert issue_behind(named) == "iss-top"
    assert issue_behind(clustering) is None and issue_behind(clustering, settled=False) == "iss-early"
    for unnamed in (
        None,
        {},
        {"explanation": None},
        {"explanation": {"status": "clustering 9 failing claims", "issues": []}},
    ):
        assert issue_behind(unnamed, settled=False) is None
