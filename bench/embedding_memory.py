"""How much memory the embedding model's inference keeps, by batch size.

Each batch size runs in a fresh process: the default model and back end (onnx-int8) embed 3,000 claim-like
texts of one to three sentences in calls of 500, as a re-clustering does, and the process's RSS is read once
the model is loaded and again after. onnxruntime keeps the memory its largest batch needed, so what a batch
size costs stays in `claimwatch up` and in the re-clustering child for as long as they run.

    python bench/embedding_memory.py                 # batch sizes 32 and 128
    python bench/embedding_memory.py --batches 16,32,64,128
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mib() -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", Path("/proc/self/status").read_text())[1]) // 1024


def child(batch: int) -> None:
    sys.path.insert(0, str(ROOT))
    from clustering.config import DEFAULT_CONFIG
    from clustering.embed import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(DEFAULT_CONFIG.model, backend=DEFAULT_CONFIG.backend, batch_size=batch)
    texts = [
        f"The proration credit takes {i} business days to process, counting from the request {i * 7}. " * (1 + i % 3)
        for i in range(3000)
    ]
    embedder.embed(texts[:10])
    loaded, started = rss_mib(), time.perf_counter()
    for start in range(0, len(texts), 500):
        embedder.embed(texts[start : start + 500])
    print(f"{batch},{loaded},{rss_mib()},{len(texts) / (time.perf_counter() - started):.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="32,128")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--record", action="store_true", help="append this run's figures to bench/results/")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    sys.path.insert(0, str(ROOT))  # here, not at the top: the children measure their own memory
    from bench.results import Figure, Recording

    recording = Recording.start(__file__) if args.record else None
    figures = []
    print(f"{'batch':>5} {'RSS loaded':>11} {'RSS after':>10} {'kept':>6} {'texts/s':>8}")
    for batch in map(int, args.batches.split(",")):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(batch)],
            capture_output=True,
            text=True,
            check=True,
            env={"HF_HUB_OFFLINE": "1", **os.environ},
        )
        b, loaded, after, rate = map(int, out.stdout.strip().splitlines()[-1].split(","))
        print(f"{b:>5} {loaded:>8} MiB {after:>6} MiB {after - loaded:>3} MiB {rate:>8,}")
        figures += [Figure(f"batch {b}: kept", after - loaded, "MiB"), Figure(f"batch {b}: texts/s", rate, "texts/s")]
    if recording:
        recording.finish(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
