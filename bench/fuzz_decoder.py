"""Coverage-guided fuzzing of the event decoder (atheris / libFuzzer), bounded in time.

Invariant for every input: Decoder.decode returns a VerdictEvent that survives its own contract
JSON, or a Rejection with a rule, a path and a row the DLQ can store. An exception, a hang
(-timeout) or a memory blow-up (-rss_limit_mb) is a finding; libFuzzer saves the input.

It also times the crafted hostile inputs of issue 7 (deep nesting, huge events, a million claims)
against the decode of one ordinary event, in the same process.

    python bench/fuzz_decoder.py --seconds 60

The fuzzer runs in a child process (libFuzzer exits the process when done); the parent seeds the
corpus from tests/fixtures/contract_examples.jsonl, reads libFuzzer's statistics and prints them.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402

EXAMPLES = ROOT / "tests" / "fixtures" / "contract_examples.jsonl"
ARTIFACT_KINDS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


# --- child: the fuzz target ------------------------------------------------------------------


def run_target(libfuzzer_args: list[str]) -> None:
    import atheris
    import pydantic  # noqa: F401  imported first, so only the project's code is instrumented

    atheris.enabled_hooks.add("RegEx")  # lets the fuzzer solve the timestamp and route patterns
    atheris.enabled_hooks.add("str")
    with atheris.instrument_imports(include=["services.contract"]):
        from services.contract.decode import DEFAULT_MAX_BYTES, Decoder, Rejection
        from services.contract.model import VerdictEvent
    from services.ingest.records import DeadLetter
    from services.store.writer import dead_letter_row

    decoder = Decoder()
    roundtrip = Decoder(max_bytes=4 * DEFAULT_MAX_BYTES)  # contract JSON adds defaults, so allow growth

    def test_one_input(data: bytes) -> None:
        result = decoder.decode(data)
        if isinstance(result, VerdictEvent):
            again = roundtrip.decode(orjson.dumps(result.to_json_dict()))
            if again != result:
                raise AssertionError(f"valid event does not survive its contract JSON: {again!r}")
            return
        if not isinstance(result, Rejection):
            raise AssertionError(f"decode returned {type(result).__name__}, neither an event nor a rejection")
        if not (result.problems and all(p.rule and p.path and p.message for p in result.problems)):
            raise AssertionError(f"rejection without rule, path or message: {result!r}")
        orjson.dumps(dead_letter_row(DeadLetter("fuzz", 0, 0, data, result)))

    atheris.Setup([sys.argv[0], *libfuzzer_args], test_one_input)
    atheris.Fuzz()


# --- parent: seeds, run, report ----------------------------------------------------------------


def seeds() -> list[bytes]:
    """Contract examples, compact and pretty, and a few near-misses that open other branches."""
    examples = [orjson.loads(line) for line in EXAMPLES.read_bytes().splitlines()]
    out = []
    for e in examples:
        out += [orjson.dumps(e), orjson.dumps(e, option=orjson.OPT_INDENT_2)]
        out.append(orjson.dumps({**e, "observed_at": "2026-11-21T09:14:03"}))
        out.append(orjson.dumps({**e, "claims": [{"verdict": "NEI", "score": 1.5}, {"text": "x"}]}))
        out.append(orjson.dumps({k: v for k, v in e.items() if k != "route"}))
    out += [b"", b"null", b"[]", b"{}", b"\xff\xfe", b"[" * 1100, b'{"schema": "claimwatch.verdict/v2"}']
    return out


DICTIONARY = [
    *(
        f'"{w}"'
        for w in (
            "schema",
            "claimwatch.verdict/v1",
            "event_id",
            "trace_id",
            "observed_at",
            "route",
            "tenant",
            "query",
            "answer",
            "versions",
            "evidence",
            "claims",
            "first_failed_stage",
            "signals",
            "attributes",
            "text",
            "verdict",
            "score",
            "claim_id",
            "claim_type",
            "chunk_id",
            "source_id",
            "span",
            "labeler",
            "cherry_pick",
            "premise_similarity",
            "support_delta",
            "sample_disagreement",
            "query_type",
            "stakes",
            "answerable",
            "action",
            "used",
            "version",
            "supported",
            "unsupported",
            "contradicted",
            "overreach",
            "stale",
            "no_source",
            "trivial",
            "unlinked",
            "nei",
            "refuted",
            "entailment",
            "served",
            "abstained",
            "lookup",
            "high",
            "numeric",
            "passed",
            "2026-11-21T09:14:03.512+00:00",
            "2026-11-21T09:14:03Z",
        )
    ),
    "true",
    "false",
    "null",
    "1e308",
    "-0",
    "[{",
    "}]",
]


def write_inputs(workdir: Path) -> tuple[Path, Path]:
    corpus = workdir / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in seeds():
        (corpus / hashlib.sha1(seed).hexdigest()).write_bytes(seed)
    dictionary = workdir / "json.dict"
    dictionary.write_text("".join(f"kw{i}={orjson.dumps(w).decode()}\n" for i, w in enumerate(DICTIONARY)))
    return corpus, dictionary


def parse_stats(log: str) -> dict:
    stats = {k: int(v) for k, v in re.findall(r"^stat::(\w+):\s+(\d+)", log, re.M)}
    status = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", log, re.M)
    if status:
        runs, cov, ft, corp = map(int, status[-1])
        stats.update(last_status_runs=runs, cov=cov, ft=ft, corpus=corp)
    done = re.search(r"^Done (\d+) runs in (\d+) second", log, re.M)
    if done:
        stats.update(done_runs=int(done[1]), done_seconds=int(done[2]))
    return stats


def fuzz(seconds: int, rss_limit_mb: int, workdir: Path) -> tuple[int, list[Figure]]:
    """The exit status (1: findings, or libFuzzer failed) and the figures of a run."""
    corpus, dictionary = write_inputs(workdir)
    artifacts = workdir / "artifacts"
    artifacts.mkdir(exist_ok=True)
    args = [
        f"-max_total_time={seconds}",
        f"-rss_limit_mb={rss_limit_mb}",
        "-timeout=10",
        "-max_len=8192",
        f"-dict={dictionary}",
        f"-artifact_prefix={artifacts}/",
        "-print_final_stats=1",
        str(corpus),
    ]
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *args]
    print(f"fuzzing {seconds}s: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, errors="replace")
    wall = time.perf_counter() - started
    log = proc.stdout + proc.stderr
    (workdir / "libfuzzer.log").write_text(log)
    stats = parse_stats(log)
    found = sorted(p for p in artifacts.iterdir() if p.name.startswith(ARTIFACT_KINDS))

    runs = stats.get("number_of_executed_units", stats.get("done_runs", stats.get("last_status_runs", 0)))
    print(f"  executions       {runs:,}")
    print(
        f"  exec/s           {stats.get('average_exec_per_sec', 0):,} (libFuzzer's average; wall {wall:.0f}s "
        f"incl. start-up)"
    )
    print(
        f"  coverage         cov {stats.get('cov', '?')} edges, ft {stats.get('ft', '?')} features, "
        f"corpus {stats.get('corpus', '?')} inputs, {stats.get('new_units_added', '?')} new this run"
    )
    print(f"  peak RSS         {stats.get('peak_rss_mb', '?')} MB (limit {rss_limit_mb} MB)")
    print(f"  corpus outcomes  {corpus_outcomes(corpus)} (every file kept in {corpus.name}/, seeds included)")
    print(f"  findings         {len(found)} (exit code {proc.returncode})")
    for path in found:
        data = path.read_bytes()
        print(f"    {path}  {len(data)} bytes: {data[:200]!r}")
    if proc.returncode and not found:
        print("  libFuzzer stopped abnormally without an artifact; its log ends with:")
        print("    " + "\n    ".join(log.strip().splitlines()[-15:]))
    print(f"  log and corpus   {workdir}")
    figures = [
        Figure("inputs/s", stats.get("average_exec_per_sec", 0), "inputs/s"),
        Figure("escapes", len(found), "findings", Target(at_most=0, text="0")),
    ]
    return 1 if found or proc.returncode else 0, figures


def corpus_outcomes(corpus: Path) -> str:
    """What the inputs the fuzzer kept decode to: how far into validation it reached."""
    from collections import Counter

    from services.contract.decode import Decoder

    decoder = Decoder()
    counts = Counter(getattr(decoder.decode(p.read_bytes()), "rule", "valid") for p in corpus.iterdir())
    return ", ".join(f"{rule} {n}" for rule, n in counts.most_common())


def hostile_inputs() -> dict[str, bytes]:
    event = orjson.loads(EXAMPLES.read_bytes().splitlines()[0])
    head = orjson.dumps({k: v for k, v in event.items() if k != "claims"})[:-1] + b',"claims":'
    return {
        "ordinary valid event (baseline)": orjson.dumps(event),
        "100,000-level nesting": b"[" * 100_000 + b"]" * 100_000,
        "2,000,000-level nesting": b"[" * 2_000_000 + b"]" * 2_000_000,
        "3 MiB answer text": orjson.dumps({**event, "answer": {"text": "x" * (3 << 20)}}),
        "1,000,000 claims": head + b"[" + b",".join([b'{"verdict":"supported"}'] * 1_000_000) + b"]}",
        "520,000 claims of 0 (under 1 MiB)": head + b"[" + b",".join([b"0"] * 520_000) + b"]}",
        "60,000 claims, unknown verdict": head + b"[" + b",".join([b'{"verdict":"x"}'] * 60_000) + b"]}",
        "55,000 valid claims (under 1 MiB)": head + b"[" + b",".join([b'{"verdict":"nei"}'] * 55_000) + b"]}",
    }


RECORDED = ("ordinary valid event (baseline)", "100,000-level nesting")  # of the hostile inputs' times


def time_hostile(repeats: int = 3) -> list[Figure]:
    from services.contract.decode import Decoder

    print(f"\nhostile input refusal (best of {repeats}, same process)")
    baseline, figures = None, []
    for name, raw in hostile_inputs().items():
        best, result = float("inf"), None
        for _ in range(repeats):
            started = time.perf_counter()
            result = Decoder().decode(raw)
            best = min(best, time.perf_counter() - started)
        baseline = baseline or best
        outcome = getattr(result, "rule", "valid")
        print(f"  {name:36s} {len(raw):>10,} B  {outcome:16s} {best * 1e3:9.3f} ms  {best / baseline:9.1f}x baseline")
        if name in RECORDED:
            figures.append(Figure(name, round(best * 1e3, 3), "ms"))
    return figures


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        run_target(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time (libFuzzer -max_total_time)")
    parser.add_argument("--rss-limit-mb", type=int, default=2048, help="libFuzzer -rss_limit_mb")
    parser.add_argument("--workdir", type=Path, help="corpus, artifacts and log (default: a fresh temp dir)")
    parser.add_argument("--skip-hostile", action="store_true", help="do not time the crafted hostile inputs")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    # Fuzz first: a child forked after the hostile timings would inherit their peak RSS (Linux keeps
    # ru_maxrss across exec), and libFuzzer reads that figure for -rss_limit_mb.
    status, figures = fuzz(
        args.seconds, args.rss_limit_mb, args.workdir or Path(tempfile.mkdtemp(prefix="fuzz-decoder-"))
    )
    if not args.skip_hostile:
        figures += time_hostile()
    if recording:
        recording.finish(figures)
    return status


if __name__ == "__main__":
    sys.exit(main())
