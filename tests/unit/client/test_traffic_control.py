"""The demo's live traffic control: `claimwatch demo-traffic stop|break|resume ROUTE` and the simulator reading it."""

from __future__ import annotations

import orjson

from services.client.simulate import generate
from services.client.simulate_run import UNREAD_SCHEMA, SimulationRequest, TrafficControl, send_after
from services.contract.model import parse_timestamp

EVENT = orjson.dumps({"schema": "claimwatch.verdict/v1", "route": "billing-faq", "event_id": "e1"})


def test_a_stopped_route_sends_nothing_and_a_broken_one_an_unread_contract_version(tmp_path):
    writer, reader = TrafficControl(tmp_path / "control.json"), TrafficControl(tmp_path / "control.json")
    reader.refresh()
    assert reader.apply(b"billing-faq", EVENT) == EVENT  # no file: nothing changes
    writer.change("billing-faq", "stop")
    reader.refresh()
    assert reader.apply(b"billing-faq", EVENT) is None and reader.apply(b"parcel-status", b"x") == b"x"
    writer.change("billing-faq", "break")  # a route is either stopped or broken
    reader.refresh()
    assert orjson.loads(reader.apply(b"billing-faq", EVENT))["schema"] == UNREAD_SCHEMA
    assert reader.apply(b"billing-faq", b"not json") == b"not json"  # bad input stays as it was
    writer.change("billing-faq", "resume")
    reader.refresh()
    assert (reader.stopped, reader.broken) == (frozenset(), frozenset())


def test_a_half_written_file_keeps_what_was_in_force(tmp_path):
    control = TrafficControl(tmp_path / "control.json")
    control.change("a", "stop")
    (tmp_path / "control.json").write_bytes(b'{"stopped": ["a"')
    control.refresh()
    assert control.stopped == frozenset({"a"})


def test_live_traffic_sends_each_event_after_its_own_time_and_within_a_minute_of_it():
    """An event sent before its event time shows as 'last seen in 30s' on an issue. The simulator's late and
    duplicate deliveries are meant to be later."""
    request = SimulationRequest.build(
        3, seed=5, start="2026-11-30T01:00:00Z", regression_at=0, corpus_change_at="none", bad_fraction=0.0, scale=1.0
    )
    sent = [sim for sim in generate(request.scenario, request.start, request.minutes, request.seed) if sim.event]
    lag = {
        id(sim): send_after(sim.minute, 60.0)
        - (parse_timestamp(sim.event["observed_at"]) - request.start).total_seconds()
        for sim in sent
    }
    on_time = [lag[id(sim)] for sim in sent if not (sim.late or sim.duplicate)]
    assert len(on_time) > 100 and len(on_time) < len(sent)
    assert min(lag.values()) >= 0
    assert max(on_time) <= 60


def test_demo_traffic_refuses_an_unknown_route_and_works_from_any_folder(tmp_path, monkeypatch):
    """`demo-traffic stop billing-faqq` (a typo) printed "stopped"; run from another folder it wrote a control
    file the demo never read."""
    import os

    from click.testing import CliRunner

    from services.app.cli import main
    from services.client.demo import demo_record

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    demo_folder, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run = lambda *args: CliRunner().invoke(main, ["demo-traffic", *args])  # noqa: E731
    nothing = run("stop", "billing-faq")
    assert nothing.exit_code == 1 and "no demo is running" in nothing.output
    demo_record().write(
        os.getpid(), control=str(demo_folder / "var" / "demo-control.json"), routes=["billing-faq", "parcel-status"]
    )
    typo = run("stop", "billing-faqq")
    assert (
        typo.exit_code == 1 and "no route 'billing-faqq'" in typo.output and "billing-faq, parcel-status" in typo.output
    )
    assert not (demo_folder / "var" / "demo-control.json").exists()
    stopped = run("stop", "billing-faq")
    assert stopped.exit_code == 0, stopped.output
    control = TrafficControl(demo_folder / "var" / "demo-control.json")
    control.refresh()
    assert control.stopped == frozenset({"billing-faq"}) and not (elsewhere / "var").exists()
    demo_record().forget(os.getpid())
    assert run("resume", "billing-faq").exit_code == 1  # the demo stopped: nothing to change
