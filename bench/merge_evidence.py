"""What tells two halves of one failure from two neighbouring failures: the evidence behind suggested merges
(services/issues/merges.py; docs/performance.md#merge-suggestions).

Each dataset is clustered as the product clusters it, once per UMAP seed. Every pair of issues whose centroids
are at cosine >= 0.6 is a candidate; it is "one intent" when both issues' commonest true intent is the same.
Printed: each figure's ROC AUC over the candidates (0.5 is chance), then, for a grid of rules "similarity >= S
and link ratio >= L", accepting every pair that passes (joined transitively, as merge_groups joins them): the
runs where NMI is not lower, and the most issues any run of the first dataset keeps, against 1.3x its intents.
Last, whether the close pairs (similarity >= 0.7) are two modes of density or one mode cut in two: the share whose
claims, projected on the line between the two centroids, are bimodal by Hartigan's dip test (p < 0.05; a cut
through one mode projects as one mode).

    python bench/merge_evidence.py                   # BANKING77 test and CLINC150 test, UMAP seeds 42,1,2,3
    python bench/merge_evidence.py --data /work/shared/data/clinc150.jsonl --splits val --seeds 42
    python bench/merge_evidence.py --model /path/to/all-mpnet-base-v2 --backend torch   # another model's space

The dip test needs the bench extra: pip install -e '.[bench]'.

Figures: centroid cosine; the link ratio over each claim's 15 nearest claims (shipped) and over 30; the mean
HDBSCAN membership strength of the claims linked across the pair (a cut through one dense failure leaves
strong claims on both sides; a valley between two failures leaves weak ones); the correlation of the two issues'
centroid similarities to the 10 issues nearest either (two halves of one failure should stand alike to the rest).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import normalized_mutual_info_score, roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.clustering import NOW, claims_of, load  # noqa: E402
from bench.results import RECORD_HELP, Figure, Recording  # noqa: E402
from clustering.config import DEFAULT_CONFIG  # noqa: E402
from clustering.embed import BACKENDS, CachedEmbedder, MemoryEmbeddingCache, SentenceTransformerEmbedder  # noqa: E402
from clustering.neighbours import K, link_counts, link_ratios  # noqa: E402
from clustering.pipeline import IssuePipeline  # noqa: E402

try:
    from diptest import diptest
except ImportError:
    sys.exit("bench/merge_evidence.py needs the dip test: pip install -e '.[bench]'")

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
DATA = [FIXTURES / "banking77" / "banking77-test.jsonl", FIXTURES / "clinc150" / "clinc150-test.jsonl"]
FLOOR = 0.6  # candidates: pairs of issues at least this similar
FIGURES = ("similarity", f"links@{K}", f"links@{2 * K}", "boundary strength", "neighbour profile")


def candidates(run, intent: list[str]) -> dict[str, np.ndarray]:
    """Per candidate pair: both issues' indices, whether they share their commonest intent, and each figure."""
    labels, vectors = run.labels_, run.vectors_
    found = int(labels.max()) + 1
    centroids = np.stack([vectors[labels == c].mean(axis=0) for c in range(found)])
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    similarity = centroids @ centroids.T
    truth = np.asarray(intent)
    commonest = [Counter(truth[labels == c]).most_common(1)[0][0] for c in range(found)]
    near, near_wide = link_ratios(link_counts(vectors, labels)), link_ratios(link_counts(vectors, labels, k=2 * K))
    strength = _strength(run)
    linked = _nearest(vectors, K)
    a, b = np.triu_indices(found, 1)
    keep = similarity[a, b] >= FLOOR
    a, b = a[keep], b[keep]
    boundary = [_boundary_strength(labels, linked, strength, x, y) for x, y in zip(a, b)]
    profile = [_profile_correlation(similarity, x, y) for x, y in zip(a, b)]
    return {
        "a": a,
        "b": b,
        "one": np.array([commonest[x] == commonest[y] for x, y in zip(a, b)]),
        FIGURES[0]: similarity[a, b],
        FIGURES[1]: near[a, b],
        FIGURES[2]: near_wide[a, b],
        FIGURES[3]: np.array(boundary),
        FIGURES[4]: np.array(profile),
    }


def _strength(run) -> np.ndarray:
    """HDBSCAN's membership strength per claim (every claim is in the fitted sample at these sizes)."""
    model = run.clusterer_.model_
    if model is None or len(model.probabilities_) != len(run.labels_):
        sys.exit("every claim must be in the fitted sample: use a dataset under the fit_sample_size")
    return model.probabilities_


def _nearest(vectors: np.ndarray, k: int) -> np.ndarray:
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    return np.argpartition(-similarity, k, axis=1)[:, :k]


def _boundary_strength(labels, linked, strength, a: int, b: int) -> float:
    """Mean strength of a's claims linked to b and b's linked to a; 0 when none are."""
    neighbour_labels = labels[linked]
    across = ((labels == a) & (neighbour_labels == b).any(axis=1)) | (
        (labels == b) & (neighbour_labels == a).any(axis=1)
    )
    return float(strength[across].mean()) if across.any() else 0.0


def _profile_correlation(similarity: np.ndarray, a: int, b: int, n: int = 10) -> float:
    """How alike a's and b's similarities to the issues nearest either are (Pearson): two halves of one failure
    should stand alike to the rest, two neighbouring failures less so."""
    others = np.setdiff1d(np.arange(len(similarity)), [a, b])
    near = others[np.argsort(-np.maximum(similarity[a, others], similarity[b, others]))[:n]]
    return float(np.corrcoef(similarity[a, near], similarity[b, near])[0, 1])


def bimodal(vectors: np.ndarray, labels: np.ndarray, a: int, b: int) -> bool:
    """Whether a's and b's claims, projected on the line between their centroids, form two modes (dip test)."""
    first, second = vectors[labels == a], vectors[labels == b]
    axis = first.mean(axis=0) - second.mean(axis=0)
    projected = np.concatenate([first, second]) @ (axis / np.linalg.norm(axis))
    return diptest(projected)[1] < 0.05


def accept(labels: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Labels after joining every pair (a[i], b[i]), transitively: each issue's connected component (noise stays)."""
    found = int(labels.max()) + 1
    _, component = connected_components(coo_matrix((np.ones(len(a)), (a, b)), shape=(found, found)), directed=False)
    return np.where(labels < 0, labels, component[np.maximum(labels, 0)])


def nmi(truth, labels) -> float:
    return normalized_mutual_info_score(truth, [str(x) for x in labels])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=DATA)
    parser.add_argument("--splits", default="test")
    parser.add_argument("--seeds", default="42,1,2,3")
    parser.add_argument("--model", default=DEFAULT_CONFIG.model, help="a sentence-transformers directory")
    parser.add_argument("--backend", default=DEFAULT_CONFIG.backend, choices=BACKENDS)
    parser.add_argument("--record", action="store_true", help=RECORD_HELP)
    args = parser.parse_args()
    recording = Recording.start(__file__) if args.record else None
    config = replace(DEFAULT_CONFIG, model=args.model, backend=args.backend)
    embedder = CachedEmbedder(SentenceTransformerEmbedder(config.model, backend=config.backend), MemoryEmbeddingCache())
    runs = []
    for path in args.data:
        for split in args.splits.split(","):
            rows = load(path, split)
            intent_of = {r["id"]: r["intent"] for r in rows}
            for seed in (int(s) for s in args.seeds.split(",")):
                run = IssuePipeline.from_config(replace(config, random_state=seed), embedder).fit(claims_of(rows), NOW)
                intent = [intent_of[i] for i in run.ids]
                runs.append((f"{path.stem}/{split}/{seed}", run, intent, candidates(run, intent)))
                print(
                    f"clustered {runs[-1][0]}: {int(run.labels_.max()) + 1} issues, {len(set(intent))} intents, "
                    f"{len(runs[-1][3]['a'])} candidate pairs",
                    flush=True,
                )
    print(f"\nROC AUC of each figure, one intent against two (candidates: centroid cosine >= {FLOOR})")
    for name, _, _, pairs in runs:
        print(f"  {name:<32} " + "  ".join(f"{f} {roc_auc_score(pairs['one'], pairs[f]):.3f}" for f in FIGURES))
    first = args.data[0].stem
    limit = 1.3 * len(set(runs[0][2]))
    print(
        f"\nrule: similarity >= S and links@{K} >= L; runs where NMI is not lower (of {len(runs)}); "
        f"most issues in a {first} run (1.3x its intents: {limit:.0f})"
    )
    for floor in (0.6, 0.7, 0.8):
        cells = []
        for least in np.arange(0.10, 0.31, 0.04):
            kept, most = 0, 0
            for name, run, intent, pairs in runs:
                passing = (pairs[FIGURES[0]] >= floor) & (pairs[FIGURES[1]] >= least)
                merged = accept(run.labels_, pairs["a"][passing], pairs["b"][passing])
                kept += nmi(intent, merged) >= nmi(intent, run.labels_)
                if name.startswith(first):
                    most = max(most, len(set(merged[merged >= 0].tolist())))
            cells.append(f"L {least:.2f}: {kept:>2}, {most:>3}")
        print(f"  S {floor:.1f}  " + "   ".join(cells))
    print("\npairs at similarity >= 0.7 whose claims form two modes along the line between the centroids (dip test)")
    for name, run, _, pairs in runs:
        close = pairs[FIGURES[0]] >= 0.7
        shares = []
        for one in (True, False):
            chosen = close & (pairs["one"] == one)
            modes = [bimodal(run.vectors_, run.labels_, x, y) for x, y in zip(pairs["a"][chosen], pairs["b"][chosen])]
            shares.append(f"{'one' if one else 'two'} intent {sum(modes):>3} of {len(modes):>3}")
        print(f"  {name:<32} " + "   ".join(shares))
    if recording:  # the shipped figure and the centroids' similarity, each data set's mean over the seeds
        aucs: dict[str, list[float]] = {}
        for name, _, _, pairs in runs:
            for figure in FIGURES[:2]:
                data = name.rsplit("/", 1)[0]
                aucs.setdefault(f"{data}: ROC AUC of {figure}", []).append(roc_auc_score(pairs["one"], pairs[figure]))
        recording.finish(Figure(name, round(float(np.mean(v)), 3)) for name, v in aucs.items())


if __name__ == "__main__":
    main()
