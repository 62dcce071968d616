"""Uncached embedding throughput of the back ends, and how far their vectors drift from torch fp32.

Back ends: sentence-transformers on torch (fp32) at several batch sizes; ONNX Runtime fp32
and dynamic int8 (exported locally from the bundled model, see clustering/onnx_backend.py).
All run in one process on the same texts, rounds interleaved so a noisy neighbour on the
2 shared cores hurts every back end alike; the best round per back end is reported, with
its ratio to torch fp32. Also the single-text latency that online assignment pays.

    python bench/embedding.py                     # 2,000 CLINC test queries, 3 rounds
    python bench/embedding.py --texts 4500 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.results import RECORD_HELP, Figure, Recording, Target  # noqa: E402
from clustering.embed import SentenceTransformerEmbedder  # noqa: E402

# The CLINC150 test split ships with the repository (CC BY 3.0); pass --data for the full file with val and train.
DATA = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "clinc150" / "clinc150-test.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--onnx-dir", type=Path, default=None, help="where exported ONNX files are cached")
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    rows = [json.loads(line) for line in args.data.read_text().splitlines()]
    texts = [r["text"] for r in rows if r["split"] == "test"][: args.texts]
    candidates = {
        "torch fp32 batch 32": SentenceTransformerEmbedder(batch_size=32),
        "torch fp32 batch 128": SentenceTransformerEmbedder(batch_size=128),
        "torch fp32 batch 256": SentenceTransformerEmbedder(batch_size=256),
        "onnx fp32 batch 128": SentenceTransformerEmbedder(batch_size=128, backend="onnx", onnx_dir=args.onnx_dir),
        "onnx int8 batch 32": SentenceTransformerEmbedder(batch_size=32, backend="onnx-int8", onnx_dir=args.onnx_dir),
        "onnx int8 batch 128": SentenceTransformerEmbedder(batch_size=128, backend="onnx-int8", onnx_dir=args.onnx_dir),
    }
    for name, embedder in candidates.items():
        started = time.perf_counter()
        embedder.embed(texts[:16])  # load, export or quantise once; not timed below
        print(f"ready {name:<22} {time.perf_counter() - started:.1f}s")
    best = dict.fromkeys(candidates, 0.0)
    vectors = {}
    for _ in range(args.rounds):
        for name, embedder in candidates.items():
            started = time.perf_counter()
            vectors[name] = embedder.embed(texts)
            best[name] = max(best[name], len(texts) / (time.perf_counter() - started))
    reference = vectors["torch fp32 batch 128"]
    base = best["torch fp32 batch 128"]
    print(f"\n{len(texts)} texts, best of {args.rounds} rounds (2 shared cores: figures vary with the neighbours)")
    print(f"{'back end':<22} {'texts/s':>8} {'vs torch':>9} {'cos mean':>9} {'cos min':>8}")
    for name in candidates:
        cos = (vectors[name] * reference).sum(axis=1)
        print(f"{name:<22} {best[name]:>8.0f} {best[name] / base:>8.2f}x {cos.mean():>9.4f} {cos.min():>8.4f}")
    for name in ("torch fp32 batch 128", "onnx int8 batch 128"):
        embedder = candidates[name]
        latencies = []
        for text in texts[:200]:
            started = time.perf_counter()
            embedder.embed([text])
            latencies.append(time.perf_counter() - started)
        p50, p95 = np.percentile(latencies, [50, 95]) * 1000
        print(f"one text, {name:<22} p50 {p50:.1f} ms  p95 {p95:.1f} ms")
    if recording:  # the shipped back end (onnx int8, batch 32) against torch fp32 at batch 128
        shipped = "onnx int8 batch 32"
        recording.finish(
            [
                Figure(shipped, round(best[shipped]), "texts/s", Target(at_least=1000), round(base)),
                Figure("onnx int8 batch 128", round(best["onnx int8 batch 128"]), "texts/s", None, round(base)),
                Figure("onnx int8 cosine to fp32", round(float((vectors[shipped] * reference).sum(axis=1).mean()), 3)),
            ]
        )


if __name__ == "__main__":
    main()
