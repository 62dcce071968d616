"""The composition root builds each object once, from the one Settings, on a real chDB store."""

from __future__ import annotations

import pytest

import clustering.embed as embed_module
from clustering.config import DEFAULT_CONFIG
from services.app.compose import build
from services.app.settings import Settings


def model_of(components):
    return components.embedder.embedder  # CachedEmbedder -> SentenceTransformerEmbedder


def test_one_embedder_serves_clustering_and_the_eval_set(store):
    c = build(Settings(), store)
    assert c.issue_jobs.embedder is c.embedder
    assert c.evalset.promotion.embed.__self__ is c.embedder  # the bound method of the same object
    assert c.issues.issues is c.repos.issues and c.alerts.alerts is c.repos.alerts


def test_the_worker_embeds_with_the_configured_backend(store):
    default = build(Settings(), store)
    assert model_of(default).backend == DEFAULT_CONFIG.backend == "onnx-int8"
    assert default.clustering is DEFAULT_CONFIG

    torch = build(Settings(clustering={"backend": "torch"}), store)
    assert model_of(torch).backend == "torch"
    assert torch.clustering.backend == "torch"
    assert torch.clustering.name != DEFAULT_CONFIG.name  # another vector space gets another configuration name
    assert model_of(torch).model_id != model_of(default).model_id  # and other cache keys


def test_a_bad_backend_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="onnx-int8"):
        Settings(clustering={"backend": "tensorflow"})


def test_the_model_loads_once_for_clustering_and_promotion(store, monkeypatch):
    loads = []
    real = embed_module._load_sentence_transformer

    def counting(path, name):
        loads.append(name)
        return real(path, name)

    monkeypatch.setattr(embed_module, "_load_sentence_transformer", counting)
    c = build(Settings(clustering={"backend": "torch"}), store)
    assert loads == []  # nothing loads at start-up: a CLI command that never embeds stays fast
    first = c.issue_jobs.embedder.embed(["the refund window is 30 days"])
    second = c.evalset.promotion.embed(["parcels ship on friday"])
    assert first.shape == second.shape == (1, 384)
    assert loads == [DEFAULT_CONFIG.model]


def test_the_ingest_window_and_epoch_come_from_the_settings(store):
    from datetime import timedelta

    from services.ingest.window import EventTimeWindow

    settings = Settings(ingest={"backfill": True, "max_future_skew_seconds": 60}, retention={"raw_days": 7})
    ingestor = build(settings, store).ingestor("topic-incarnation-2")
    assert ingestor.window == EventTimeWindow(7, 400, True, timedelta(seconds=60))
    assert ingestor.epoch == "topic-incarnation-2"
    assert build(Settings(), store).ingestor().window == EventTimeWindow(30, 400, False, timedelta(minutes=5))


def test_the_issue_jobs_vectorize_claims_as_the_pipeline_does():
    from dataclasses import replace

    from clustering.embed import HashingEmbedder
    from clustering.pipeline import IssuePipeline
    from services.app.compose import claim_vectorizer

    for config in (DEFAULT_CONFIG, replace(DEFAULT_CONFIG, fields=("claim",), max_chars=500, require_claim_text=False)):
        embedder = HashingEmbedder()
        ours, pipeline = claim_vectorizer(config)(embedder), IssuePipeline.from_config(config, embedder).vectorizer
        assert ours.embedder is embedder
        assert (ours.weights, ours.require_claim_text) == (pipeline.weights, pipeline.require_claim_text)
        assert vars(ours.screen) == vars(pipeline.screen)
