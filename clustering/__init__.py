"""Failing claims become named issues: normalize → embed → reduce → cluster → name → track.

What the worker timer and the CLI call:

    config = get_config("clustering@2026-11-21")            # or config_from_settings(...)
    embedder = CachedEmbedder(SentenceTransformerEmbedder(config.model), cache)
    run = IssuePipeline.from_config(config, embedder, progress).fit(claims, now)
    tracker = IssueTracker(config)
    issues = tracker.match(previous_issues, run, now)      # store issue.to_row() for each
    assignments = run.assignments(tracker.cluster_issue_ids_)
    assigner = OnlineAssigner.from_issues(issues, ClaimVectorizer(embedder, config.fields), config.name,
                                          config.attach_min_similarity)
    issue_id, probability = assigner.assign(claim)

Offline: ``cluster_file(input, out, issues_out, config, progress)``.
"""
from clustering.assign import OnlineAssigner
from clustering.cluster import NOISE, HdbscanClusterer
from clustering.config import CONFIGS, DEFAULT_CONFIG, ClusteringConfig, config_from_settings, get_config
from clustering.embed import (
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    MemoryEmbeddingCache,
    ModelError,
    SentenceTransformerEmbedder,
    text_key,
)
from clustering.issue import IssueRecord
from clustering.naming import IssueNamer
from clustering.normalize import Normalizer, normalize
from clustering.offline import cluster_file
from clustering.pipeline import IssuePipeline
from clustering.records import FailingClaim, RecordError
from clustering.reduce import NoReducer, UmapReducer
from clustering.run import ClusteringRun, ClusterSummary
from clustering.track import IssueTracker
from clustering.vectorize import ClaimVectorizer

__all__ = [
    "CONFIGS", "DEFAULT_CONFIG", "NOISE", "CachedEmbedder", "ClaimVectorizer", "ClusterSummary", "ClusteringConfig",
    "ClusteringRun", "Embedder", "EmbeddingCache", "FailingClaim", "HdbscanClusterer", "IssueNamer", "IssuePipeline",
    "IssueRecord", "IssueTracker", "MemoryEmbeddingCache", "ModelError", "NoReducer", "Normalizer", "OnlineAssigner",
    "RecordError", "SentenceTransformerEmbedder", "UmapReducer", "cluster_file", "config_from_settings",
    "get_config", "normalize", "text_key",
]
