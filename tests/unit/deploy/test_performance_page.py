"""The figures are data: docs/performance.md and the README's suite time are what `make figures` (bench/figures.py)
renders from bench/results/*.jsonl today, so a hand edit or a page left stale fails here; a record line that is not
a run fails naming its file and line; a bench's --record appends a well-formed run."""

from __future__ import annotations

import math
import os
import re

import msgspec
import pytest

from bench.figures import PAGE, PLOTS, README, render_page, series, suite_sentence, with_suite_sentence
from bench.results import Figure, Load, RecordError, Recording, Run, Target, read_results, read_runs
from bench.suite import outcomes

RERUN = "run `make figures` to render it from bench/results/*.jsonl"


def run(bench: str = "ingest", value: float = 0.274, commit: str = "236c8ae", **fields) -> Run:
    figure = Figure("envelopes / raw", value, "x", Target(at_least=0.25))
    return Run(bench, commit, False, "2026-11-29", "python bench/ingest.py", (figure,), **fields)


def test_the_page_is_what_the_records_render():
    assert PAGE.read_text() == render_page(read_results()), f"docs/performance.md is stale or edited by hand: {RERUN}"


def test_the_readme_states_the_newest_suite_record():
    readme = README.read_text()
    assert readme == with_suite_sentence(readme, read_results()["suite"]), (
        f"README.md's suite time is stale or edited by hand: {RERUN}"
    )


def test_the_page_is_short_and_every_figure_on_it_has_its_plot():
    assert len(PAGE.read_text().splitlines()) < 200
    plots = {s.plot for s in series(read_results())}
    assert plots - {p.name for p in PLOTS.glob("*.png")} == set(), f"plots missing: {RERUN}"
    assert {p.name for p in PLOTS.glob("*.png")} - plots == set(), f"plots of no figure: {RERUN}"


def test_the_newest_record_of_a_figure_is_the_one_shown():
    results = {"ingest": [run(value=0.274), run(value=0.21, commit="abc1234", load=Load(0.9, 2))]}
    page = render_page(results)
    assert "| 0.21x | ≥ 0.25 | **no** | 2026-11-29 | abc1234 | `python bench/ingest.py` |" in page
    assert "0.274" not in page


def test_a_malformed_record_names_its_file_and_line(tmp_path):
    path = tmp_path / "ingest.jsonl"
    good = msgspec.json.encode(run()).decode()
    for bad, why in (
        (good.replace('"value":0.274', '"value":"fast"'), "Expected `float`, got `str`"),
        (good.replace('"dirty":false', '"dirty":false,"speed":1'), "unknown field `speed`"),
        (good.replace('"2026-11-29"', '"29 Nov"'), "Expected `str` matching regex"),
        (good[:40], "truncated"),
        (good.replace('"bench":"ingest"', '"bench":"drift"'), "a run of bench 'drift' in the file of 'ingest'"),
    ):
        path.write_text(f"{good}\n\n{bad}\n")
        with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}:3: .*{re.escape(why)}"):
            read_runs(path)


def test_recording_appends_a_well_formed_run(tmp_path):
    def fake_bench(argv: list[str]) -> None:
        """A bench's shape: the recording starts before the run and gets the figures after it."""
        recording = Recording.start("bench/fake.py", argv, results=tmp_path)
        size = int(argv[1])
        recording.finish([Figure("speed", 2.5 * size, "ops/s", Target(at_least=10)), Figure("too fast", math.nan)])

    fake_bench(["--size", "4", "--record"])
    fake_bench(["--size", "5", "--record"])
    lines = (tmp_path / "fake.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first, second = read_runs(tmp_path / "fake.jsonl")
    assert [first.command, second.command] == ["python bench/fake.py --size 4", "python bench/fake.py --size 5"]
    assert first.figures == (Figure("speed", 10.0, "ops/s", Target(at_least=10)),)  # the NaN is left out
    assert re.fullmatch(r"[0-9a-f]{7,40}", first.commit) and isinstance(first.dirty, bool)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", first.date)
    assert first.load is not None and first.load.cores == os.cpu_count() and first.load.loadavg_1m >= 0
    assert first.source == ""  # measured, not seeded
    assert "| [fake: speed](figures/fake-speed.png) | 12.5 ops/s | ≥ 10 | yes |" in render_page(read_results(tmp_path))


def test_the_suite_sentence_replaces_what_stands_between_the_markers():
    runs = [
        Run("suite", "340daa6", True, "2026-12-06", "make test", (Figure("passed", 2051, "tests"),
            Figure("wall time", 1544, "s"))),
    ]  # fmt: skip
    readme = "Before.\n\n<!-- figures:suite -->\nThe suite took a while.\n<!-- /figures -->\n\nAfter.\n"
    sentence = suite_sentence(runs)
    assert " ".join(sentence.split()) == (
        "The whole suite (2,051 tests) took 25 min 44 s on 2026-12-06, at 340daa6 with uncommitted changes "
        "(`make test`)."
    )
    assert max(len(line) for line in sentence.splitlines()) <= 116
    assert with_suite_sentence(readme, runs) == readme.replace("The suite took a while.", sentence)
    with pytest.raises(ValueError, match="one <!-- figures:suite -->"):
        with_suite_sentence("No markers.\n", runs)


def test_the_suite_bench_reads_pytests_closing_line():
    assert outcomes("2051 passed, 3 skipped, 2 errors in 1544.12s (0:25:44)") == {
        "passed": 2051,
        "skipped": 3,
        "error": 2,
    }
    assert outcomes("1 failed, 2050 passed in 1500.00s") == {"failed": 1, "passed": 2050}
