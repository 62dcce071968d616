"""Failing claims become named issues: normalize → embed → reduce → cluster → name → track.

What the worker timer and the CLI call:

    config = get_config("clustering@2026-11-21b")           # or config_from_settings(...)
    embedder = CachedEmbedder(SentenceTransformerEmbedder(config.model), cache)
    run = IssuePipeline.from_config(config, embedder, progress).fit(claims, now)
    tracker = IssueTracker(config)
    issues = tracker.match(previous_issues, run, now)      # store issue.to_row() for each
    assignments = run.assignments(tracker.cluster_issue_ids_)
    assigner = OnlineAssigner.from_issues(issues, ClaimVectorizer(embedder, config.fields), config.name,
                                          config.attach_min_similarity)
    issue_id, probability = assigner.assign(claim)

Offline: ``cluster_file(input, out, issues_out, config, progress, now=now)``.
"""

from importlib import import_module

# Lazy re-exports: the worker and API import clustering.issue without paying for sklearn, UMAP and torch.
_WHERE = {
    "OnlineAssigner": "assign",
    "NOISE": "cluster",
    "HdbscanClusterer": "cluster",
    "CONFIGS": "config",
    "DEFAULT_CONFIG": "config",
    "ClusteringConfig": "config",
    "config_from_settings": "config",
    "get_config": "config",
    "CachedEmbedder": "embed",
    "Embedder": "embed",
    "EmbeddingCache": "embed",
    "MemoryEmbeddingCache": "embed",
    "ModelError": "errors",
    "SentenceTransformerEmbedder": "embed",
    "text_key": "embed",
    "IssueRecord": "issue",
    "IssueNamer": "naming",
    "Normalizer": "normalize",
    "normalize": "normalize",
    "cluster_file": "offline",
    "IssuePipeline": "pipeline",
    "FailingClaim": "records",
    "RecordError": "records",
    "NoReducer": "reduce",
    "UmapReducer": "reduce",
    "ClusteringRun": "run",
    "ClusterSummary": "run",
    "IssueTracker": "track",
    "ClaimVectorizer": "vectorize",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'clustering' has no attribute {name!r}")
    return getattr(import_module(f"clustering.{_WHERE[name]}"), name)
