"""The whole test suite's time, as `make test` runs it: the pytest command(s) of its recipe (read with
`make -n test`, so the two cannot drift apart; style and type checks are `make lint` and not timed here), their
wall time and the tests that passed. With --record the run goes to bench/results/suite.jsonl, and `make figures`
writes the README's sentence on the suite's time from the newest record.

    python bench/suite.py --record     # about 25 minutes on a 2-core machine
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results import RECORD_HELP, ROOT, Figure, Recording  # noqa: E402

OUTCOMES = ("passed", "failed", "error", "errors", "skipped")


def pytest_commands(makefile_dir: Path = ROOT) -> list[str]:
    """The pytest lines of `make test`'s recipe, its variables expanded."""
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", "test"], cwd=makefile_dir, capture_output=True, text=True
    )
    if dry.returncode:
        raise SystemExit(f"make -n test failed: {dry.stderr.strip()}")
    found = [line.strip() for line in dry.stdout.splitlines() if re.search(r"\s-m pytest\s", line)]
    if not found:
        raise SystemExit("make -n test shows no pytest command")
    return found


def outcomes(summary: str) -> dict[str, int]:
    """Counts from pytest's closing line ("2051 passed, 3 skipped in 1544.12s (0:25:44)")."""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary) if word in OUTCOMES}
    if "errors" in counts:
        counts["error"] = counts.pop("errors")
    return counts


def run(command: str) -> dict[str, int]:
    """Run ``command`` as make would, its output passed through; the counts of its closing line."""
    last = ""
    with subprocess.Popen(command, shell=True, cwd=ROOT, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            if re.search(r"\d+ (passed|failed)", line):
                last = line
    return outcomes(last)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args(argv)
    commands = pytest_commands()
    recording = Recording.start(__file__, argv) if args.record else None
    started, counts = time.perf_counter(), dict.fromkeys(OUTCOMES[:3], 0)
    for command in commands:
        for word, n in run(command).items():
            counts[word] = counts.get(word, 0) + n
    wall = time.perf_counter() - started
    minutes, seconds = divmod(round(wall), 60)
    print(f"suite: {counts['passed']:,} passed in {minutes} min {seconds:02d} s ({' && '.join(commands)})")
    bad = counts["failed"] + counts["error"]
    if recording:
        recording.finish(
            [Figure("passed", counts["passed"], "tests"), Figure("wall time", round(wall, 1), "s")],
            note=f"{counts['failed']} failed, {counts['error']} errors" if bad else "",
            command=" && ".join(commands),
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
