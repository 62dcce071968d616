"""Bench runs as records: a bench run with ``--record`` appends one JSON line to ``bench/results/<bench>.jsonl``.

A line holds what makes its figures comparable later: the commit (and whether the tree had changes), the UTC
date, the load before the run, the exact command (without ``--record``), and each figure with its unit, its
target and, where the bench measures one in the same run, the baseline it is compared with. `make figures`
(bench/figures.py) renders docs/performance.md and its plots from these files. Runs seeded from the lab
notebook that page used to be say where they were read in ``source``.
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import msgspec

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
RECORD_HELP = "append this run's figures to bench/results/<bench>.jsonl (make figures renders them)"

Commit = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{7,40}$")]
# A recorded run's date is to the second; a run seeded from the notebook may know only its day.
Date = Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?$")]
Name = Annotated[str, msgspec.Meta(min_length=1)]


class Target(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """At least and/or at most a value of the figure; ``text`` says it as the docs do ("< 1 GiB", "93-97%")."""

    at_least: float | None = None
    at_most: float | None = None
    text: str = ""

    def met(self, value: float) -> bool:
        return (self.at_least is None or value >= self.at_least) and (self.at_most is None or value <= self.at_most)

    def __str__(self) -> str:
        if self.text:
            return self.text
        if self.at_least is not None and self.at_most is not None:
            return f"{self.at_least:g}-{self.at_most:g}"
        return f"≥ {self.at_least:g}" if self.at_least is not None else f"≤ {self.at_most:g}"


class Figure(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One measured figure. ``baseline`` is the same run's measurement it is compared with, in the same unit, and
    ``ratio`` the figure over it, as the bench prints them."""

    name: Name
    value: float
    unit: str = ""
    target: Target | None = None
    baseline: float | None = None
    ratio: float | None = None


class Load(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The machine before the run: a 1-minute load average near the core count means others shared the CPU."""

    loadavg_1m: float
    cores: int


class Run(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    bench: Name
    commit: Commit
    dirty: bool  # the tree had uncommitted changes: the code measured is the commit plus them
    date: Date
    command: Name
    figures: tuple[Figure, ...]
    load: Load | None = None  # None for a run seeded from the notebook, which said "quiet" or "shared CPU" in note
    source: str = ""  # where a seeded run was read: "docs/performance.md@<commit>"
    note: str = ""  # what else the figures depend on: which variant ran, the machine's state


class RecordError(ValueError):
    """A record line that is not a well-formed run; the message names the file and the line."""


_decoder = msgspec.json.Decoder(Run)


def read_runs(path: Path) -> list[Run]:
    """The runs of one results file, in the order they were appended."""
    runs = []
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            run = _decoder.decode(line)
        except msgspec.DecodeError as exc:  # ValidationError is one
            raise RecordError(f"{path}:{number}: {exc}") from None
        if run.bench != path.stem:
            raise RecordError(f"{path}:{number}: a run of bench {run.bench!r} in the file of {path.stem!r}")
        runs.append(run)
    return runs


def read_results(results: Path = RESULTS) -> dict[str, list[Run]]:
    """Every results file's runs, by bench, benches in name order."""
    return {path.stem: read_runs(path) for path in sorted(results.glob("*.jsonl"))}


def append_run(run: Run, results: Path = RESULTS) -> Path:
    path = results / f"{run.bench}.jsonl"
    results.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as out:
        out.write(msgspec.json.encode(run) + b"\n")
    return path


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise SystemExit(f"--record needs the git checkout's commit: git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def _plain(figure: Figure) -> Figure:
    """Numbers as Python floats, whatever a bench computed them with (numpy's scalars among them)."""
    as_float = lambda x: None if x is None else float(x)  # noqa: E731
    return msgspec.structs.replace(
        figure, value=float(figure.value), baseline=as_float(figure.baseline), ratio=as_float(figure.ratio)
    )


class Recording:
    """One run being recorded: what held before it (commit, date, load), then its figures once measured."""

    def __init__(self, bench: str, command: str, commit: str, dirty: bool, date: str, load: Load, results: Path):
        self.bench, self.command, self.results = bench, command, results
        self.commit, self.dirty, self.date, self.load = commit, dirty, date, load

    @classmethod
    def start(cls, bench_file: str, argv: Sequence[str] | None = None, results: Path = RESULTS) -> Recording:
        """Before the run: ``bench_file`` is the bench's ``__file__``, ``argv`` its arguments (default: sys.argv's)."""
        bench = Path(bench_file).stem
        args = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--record"]
        return cls(
            bench,
            shlex.join(["python", f"bench/{bench}.py", *args]),
            _git("rev-parse", "--short", "HEAD"),
            # untracked files too: new code is measured with them; recorded results are not code, so a second
            # bench recorded after a first is measured on the same tree
            bool(_git("status", "--porcelain", "--", ".", ":!bench/results")),
            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            Load(round(os.getloadavg()[0], 2), os.cpu_count() or 1),
            results,
        )

    def finish(self, figures: Iterable[Figure], note: str = "", command: str = "") -> Run:
        """Append the run with its figures; ``command`` when what made them is not the bench's own command line
        (bench/suite.py: the pytest command it ran). A figure that is not a number (a run too small to time it) is
        left out. The run as written."""
        figures = [_plain(f) for f in figures if math.isfinite(f.value)]
        run = Run(
            self.bench,
            self.commit,
            self.dirty,
            self.date,
            command or self.command,
            tuple(figures),
            self.load,
            note=note,
        )
        path = append_run(run, self.results)
        print(f"recorded {len(run.figures)} figures in {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        return run
