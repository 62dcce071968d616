"""From failing claims to one vector each: pick fields, screen, normalise, embed, weight.

Each configured field (``claim``, ``question``, ``answer``, ``span``) is normalised and
embedded on its own, and a claim's vector is the weighted mean of its fields' vectors.
A field listed twice weighs twice: ``("question", "question", "claim")`` gives the
question its due weight. Embedding fields separately means a question shared by several
claims of one answer is embedded once, and cached once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from clustering.embed import Embedder
from clustering.normalize import Normalizer
from clustering.records import EMBED_FIELDS, FailingClaim
from clustering.screen import TextProblem, TextScreen
from services.contract.errors import RecordError

EMBED_CHUNK = 2048  # texts per embedder call, so long runs can report progress


@dataclass
class Vectorized:
    """Rows of ``vectors`` belong to ``claims[i]`` for i in ``embedded`` (indices into the input)."""

    vectors: np.ndarray
    embedded: np.ndarray
    texts: list[str]  # normalised text per embedded claim, for naming and exemplars
    problems: list[TextProblem] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # claim id -> why it was not embedded


@dataclass
class Prepared:
    field_texts: list[dict[str, str]] = field(default_factory=list)  # normalised text per field, per claim
    embedded: list[int] = field(default_factory=list)
    problems: list[TextProblem] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


class ClaimVectorizer:
    def __init__(
        self,
        embedder: Embedder,
        fields: Sequence[str] = ("question", "question", "claim"),
        normalizer: Normalizer | None = None,
        screen: TextScreen | None = None,
        require_claim_text: bool = True,
    ):
        unknown = sorted(set(fields) - set(EMBED_FIELDS))
        if unknown or not fields:
            raise RecordError(f"clustering.fields {list(fields)!r}: use a non-empty list of {list(EMBED_FIELDS)}")
        self.embedder = embedder
        self.weights = Counter(fields)
        self.normalizer = normalizer or Normalizer()
        self.screen = screen or TextScreen()
        self.require_claim_text = require_claim_text

    def field_texts(self, claim: FailingClaim) -> tuple[dict[str, str], list[TextProblem], str | None]:
        """Normalised text per field, the problems found, and why the claim is skipped (or None)."""
        if self.require_claim_text and not (claim.text or "").strip():
            return {}, [], "no claim text: counted through its event, not embedded"
        texts: dict[str, str] = {}
        problems: list[TextProblem] = []
        for name in self.weights:
            screened = self.screen.screen(claim.id, claim.field_text(name))
            if screened.problem is not None and (name == "claim" or screened.problem.kind != "empty"):
                problems.append(screened.problem)
            if screened.text is not None:
                normalised = self.normalizer.normalize(screened.text)
                if normalised:
                    texts[name] = normalised
        if not texts:
            return {}, problems, f"none of the fields {sorted(self.weights)} has text"
        return texts, problems, None

    def prepare(self, claims: Sequence[FailingClaim]) -> Prepared:
        """Screen and normalise every claim's fields; no model involved."""
        prepared = Prepared()
        for i, claim in enumerate(claims):
            texts, found, why = self.field_texts(claim)
            prepared.problems.extend(found)
            if why is not None:
                prepared.skipped[claim.id] = why
                continue
            prepared.field_texts.append(texts)
            prepared.embedded.append(i)
        return prepared

    def embed(self, prepared: Prepared, progress: Callable[[int, int], None] | None = None) -> Vectorized:
        """Embed each distinct normalised text once and combine each claim's fields by weight."""
        per_claim = prepared.field_texts
        if not per_claim:
            return Vectorized(np.zeros((0, 0), np.float32), np.zeros(0, int), [], prepared.problems, prepared.skipped)
        unique = list(dict.fromkeys(t for texts in per_claim for t in texts.values()))
        vectors_of = self._embed_unique(unique, progress)
        dim = len(next(iter(vectors_of.values())))
        out = np.zeros((len(per_claim), dim), dtype=np.float32)
        for row, texts in enumerate(per_claim):
            for name, text in texts.items():
                out[row] += self.weights[name] * vectors_of[text]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        joined = [" ".join(dict.fromkeys(texts.values())) for texts in per_claim]
        return Vectorized(out, np.asarray(prepared.embedded, dtype=int), joined, prepared.problems, prepared.skipped)

    def vectorize(
        self, claims: Sequence[FailingClaim], progress: Callable[[int, int], None] | None = None
    ) -> Vectorized:
        return self.embed(self.prepare(claims), progress)

    def vectorize_one(self, claim: FailingClaim) -> np.ndarray | None:
        """One claim's vector (for online assignment), or None when it cannot be embedded."""
        result = self.vectorize([claim])
        return result.vectors[0] if len(result.embedded) else None

    def _embed_unique(self, texts: list[str], progress: Callable[[int, int], None] | None) -> dict[str, np.ndarray]:
        vectors_of: dict[str, np.ndarray] = {}
        for start in range(0, len(texts), EMBED_CHUNK):
            chunk = texts[start : start + EMBED_CHUNK]
            vectors_of.update(zip(chunk, self.embedder.embed(chunk)))
            if progress is not None:
                progress(min(start + EMBED_CHUNK, len(texts)), len(texts))
        return vectors_of
