"""Dimensionality reduction before density clustering: UMAP, or nothing for tiny inputs."""

from __future__ import annotations

import warnings
from typing import Protocol

import numpy as np


class Reducer(Protocol):
    def fit_transform(self, vectors: np.ndarray) -> np.ndarray: ...

    def transform(self, vectors: np.ndarray) -> np.ndarray: ...


class NoReducer:
    """Passes vectors through: BERTopic's no-op stage, for inputs too small for UMAP."""

    def fit_transform(self, vectors: np.ndarray) -> np.ndarray:
        return np.asarray(vectors, dtype=np.float32)

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        return np.asarray(vectors, dtype=np.float32)


class UmapReducer:
    """umap-learn with a fixed random_state, so the same input in the same order reduces the same way.

    Below ``min_points`` the manifold estimate is meaningless (and UMAP fails outright below
    n_neighbors), so the reducer passes vectors through and says so in ``skipped_``.

    The neighbourhood grows with the input (``neighbors_fraction`` of the points, at least
    ``n_neighbors``), as the minimum issue size does: a fixed 15 neighbours among 15,000
    points is so local that which neighbouring groups fused depended on the random seed.
    """

    def __init__(
        self,
        n_neighbors: int = 15,
        n_components: int = 5,
        min_dist: float = 0.0,
        metric: str = "cosine",
        random_state: int = 42,
        min_points: int = 60,
        neighbors_fraction: float = 0.0,
    ):
        self.n_neighbors = n_neighbors
        self.neighbors_fraction = neighbors_fraction
        self.n_components = n_components
        self.min_dist = min_dist
        self.metric = metric
        self.random_state = random_state
        self.min_points = min_points

    def fit_transform(self, vectors: np.ndarray) -> np.ndarray:
        self.skipped_ = len(vectors) < max(self.min_points, self.n_neighbors + 2)
        if self.skipped_:
            self.umap_ = None
            return NoReducer().fit_transform(vectors)
        import umap  # imported late: numba compilation costs seconds, and tiny runs never need it

        self.n_neighbors_ = self.neighbors_for(len(vectors))
        self.umap_ = umap.UMAP(
            n_neighbors=self.n_neighbors_,
            n_components=self.n_components,
            min_dist=self.min_dist,
            metric=self.metric,
            random_state=self.random_state,
        )
        with warnings.catch_warnings():
            # "n_jobs overridden by random_state": single-threaded is the price of reproducible ids
            warnings.simplefilter("ignore", UserWarning)
            reduced = self.umap_.fit_transform(vectors)
        return np.asarray(reduced, dtype=np.float32)

    def neighbors_for(self, n: int) -> int:
        return max(self.n_neighbors, round(self.neighbors_fraction * n))

    def transform(self, vectors: np.ndarray) -> np.ndarray:
        if self.umap_ is None:
            return NoReducer().transform(vectors)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return np.asarray(self.umap_.transform(vectors), dtype=np.float32)


def warm_up_umap(dimension: int = 384) -> float:
    """Compile UMAP's numba kernels ahead of the first real run; returns the seconds spent.

    UMAP takes exact neighbours below 4,096 points and NN-descent above, and each path
    compiles on first use (tens of seconds on 2 cores). A worker can call this at start-up,
    off the critical path, so its first timed re-clustering does not pay for it.
    """
    import time

    started = time.perf_counter()
    rng = np.random.default_rng(0)
    for n in (200, 5000):
        UmapReducer(min_points=10).fit_transform(rng.normal(size=(n, dimension)).astype(np.float32))
    return time.perf_counter() - started
