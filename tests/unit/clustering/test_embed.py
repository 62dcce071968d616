import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clustering.embed import (
    DEFAULT_MODEL,
    CachedEmbedder,
    HashingEmbedder,
    MemoryEmbeddingCache,
    ModelError,
    SentenceTransformerEmbedder,
    resolve_model_path,
    text_key,
)
from clustering.records import FailingClaim
from clustering.vectorize import ClaimVectorizer
from services.contract.errors import RecordError
from tests.support.paths import ROOT


class CountingEmbedder:
    """A real (hashing) embedder that records what it was asked to embed."""

    def __init__(self, model_id: str = "hashing-test"):
        self.inner = HashingEmbedder(64)
        self.model_id = model_id
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def minilm():
    return SentenceTransformerEmbedder(batch_size=16)


def test_missing_model_path_says_what_to_do(tmp_path):
    missing = tmp_path / "models" / "nope"
    with pytest.raises(ModelError) as err:
        SentenceTransformerEmbedder(str(missing))
    message = str(err.value)
    assert str(missing) in message and "does not exist" in message
    assert "clustering.model" in message and DEFAULT_MODEL in message


@pytest.mark.slow
def test_unknown_model_name_fails_offline_with_advice():
    embedder = SentenceTransformerEmbedder("no-such-org/no-such-model-xyz")
    with pytest.raises(ModelError, match="Nothing is downloaded at run time"):
        embedder.embed(["hello"])


def test_unknown_backend_is_refused():
    with pytest.raises(ModelError, match="unknown embedding backend 'tpu'"):
        SentenceTransformerEmbedder(backend="tpu")


def test_default_model_resolves_to_the_bundled_directory():
    path = Path(resolve_model_path(DEFAULT_MODEL))
    assert (path / "modules.json").is_file()


def test_minilm_vectors_are_unit_float32_and_meaningful(minilm):
    vectors = minilm.embed(
        [
            "annual plans can be refunded within 30 days",
            "you can get your money back on a yearly plan within a month",
            "the parcel will be delivered on friday",
        ]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


@pytest.mark.slow
def test_minilm_gives_the_same_vector_in_another_process(minilm):
    """Vectors cached by a previous worker sit beside fresh ones (CachedEmbedder): a restart must embed alike."""
    text = "the api allows 500 requests per minute"
    script = (
        "import json, sys; from clustering.embed import SentenceTransformerEmbedder; "
        "print(json.dumps(SentenceTransformerEmbedder(batch_size=16).embed([sys.argv[1]]).tolist()))"
    )
    seed = "4321" if os.environ.get("PYTHONHASHSEED") == "1234" else "1234"
    child = subprocess.run(
        [sys.executable, "-c", script, text],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
    )
    assert child.returncode == 0, child.stderr[-3000:]
    np.testing.assert_allclose(minilm.embed([text]), np.array(json.loads(child.stdout), dtype=np.float32), atol=1e-6)


def test_text_key_is_sha256_of_the_text():
    assert text_key("abc") == hashlib.sha256(b"abc").hexdigest()


def test_cached_embedder_embeds_only_misses_once_each():
    inner = CountingEmbedder()
    cache = MemoryEmbeddingCache()
    cached = CachedEmbedder(inner, cache)
    first = cached.embed(["a b", "c d", "a b"])
    assert inner.calls == [["a b", "c d"]]
    second = cached.embed(["c d", "e f"])
    assert inner.calls[-1] == ["e f"]
    np.testing.assert_array_equal(first[1], second[0])
    np.testing.assert_array_equal(first[0], first[2])
    assert (cached.hits_, cached.misses_) == (1, 3)
    assert len(cache) == 3


def test_cache_is_keyed_by_model_too():
    cache = MemoryEmbeddingCache()
    CachedEmbedder(CountingEmbedder("model-a"), cache).embed(["same text"])
    other = CountingEmbedder("model-b")
    CachedEmbedder(other, cache).embed(["same text"])
    assert other.calls == [["same text"]]
    assert set(cache.get_many("model-a", [text_key("same text")])) == {text_key("same text")}


def test_vectorizer_weights_fields_and_embeds_a_shared_question_once():
    inner = CountingEmbedder()
    vectorizer = ClaimVectorizer(inner, ("question", "question", "claim"))
    claims = [
        FailingClaim("e1:0", "refunds take 30 days", question="how long do refunds take"),
        FailingClaim("e1:1", "refunds need a receipt", question="how long do refunds take"),
    ]
    result = vectorizer.vectorize(claims)
    flat = [t for call in inner.calls for t in call]
    assert flat.count("how long do refunds take") == 1
    q, c = HashingEmbedder(64).embed(["how long do refunds take", "refunds take <num> days"])
    expected = 2 * q + c
    np.testing.assert_allclose(result.vectors[0], expected / np.linalg.norm(expected), atol=1e-6)


def test_claim_without_text_is_skipped_not_embedded():
    vectorizer = ClaimVectorizer(CountingEmbedder(), ("question", "claim"))
    result = vectorizer.vectorize([FailingClaim("x", None, question="q?"), FailingClaim("y", "a claim")])
    assert list(result.embedded) == [1]
    assert "no claim text" in result.skipped["x"]


def test_unknown_field_names_the_allowed_ones():
    with pytest.raises(RecordError, match="clustering.fields"):
        ClaimVectorizer(CountingEmbedder(), ("question", "title"))


def test_onnx_int8_backend_stays_close_to_torch(minilm, tmp_path_factory):
    texts = [
        "annual plans can be refunded within 30 days",
        "the parcel will be delivered on friday",
        "what is the weather like in paris",
        "book a table for two at eight",
    ]
    int8 = SentenceTransformerEmbedder(backend="onnx-int8")  # exported once per machine, then reused
    assert int8.model_id == f"{DEFAULT_MODEL}#onnx-int8"  # a different vector space: different cache keys
    quantised, exact = int8.embed(texts), minilm.embed(texts)
    assert quantised.shape == exact.shape and quantised.dtype == np.float32
    assert ((quantised * exact).sum(axis=1) > 0.93).all()
    # neighbours stay neighbours
    assert ((quantised @ quantised.T).argsort(axis=1)[:, -2] == (exact @ exact.T).argsort(axis=1)[:, -2]).all()


def test_onnx_backend_needs_a_local_directory():
    with pytest.raises(ModelError, match="need a local model directory"):
        SentenceTransformerEmbedder("some-org/some-model", backend="onnx").embed(["x"])
