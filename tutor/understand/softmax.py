"""A light classifier: multinomial logistic regression with an L2 penalty and per-class
weights, trained by full-batch gradient descent (Adam) in numpy, on sentence vectors and,
optionally, hashed word features beside them (tutor.understand.ngrams). Thousands of
exemplars and a dozen classes train in seconds; predicting is a matrix product."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tutor.understand.ngrams import HASH_DIM, SparseRows

__all__ = ["SoftmaxClassifier", "train_softmax"]

log = logging.getLogger("tutor.understand")


@dataclass(frozen=True)
class SoftmaxClassifier:
    classes: tuple[str, ...]
    weights: np.ndarray  # (dim, classes), for the dense vectors
    bias: np.ndarray  # (classes,)
    sparse_weights: np.ndarray | None = None  # (HASH_DIM, classes), for the word features

    def proba(self, vectors: np.ndarray, words: SparseRows | None = None) -> np.ndarray:
        """(n, classes) probabilities for (n, dim) vectors (and their n rows of word features)."""
        logits = vectors @ self.weights + self.bias
        if self.sparse_weights is not None and words is not None:
            logits = logits + words.times(self.sparse_weights)
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def save(self, path: Path) -> None:
        """Keep the trained classifier (written whole, then renamed); a failure is logged:
        it is trained again at the next start."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as out:
                sparse = self.sparse_weights if self.sparse_weights is not None else np.zeros(0)
                np.savez(out, classes=np.array(self.classes), weights=self.weights, bias=self.bias,
                         sparse_weights=sparse)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not keep a trained classifier in %s (%s)", path, exc)

    @classmethod
    def load(cls, path: Path) -> SoftmaxClassifier | None:
        """The classifier kept at `path`, or None."""
        try:
            with np.load(path, allow_pickle=False) as data:
                sparse = data["sparse_weights"]
                return cls(tuple(str(c) for c in data["classes"]), data["weights"], data["bias"],
                           sparse if sparse.size else None)
        except (OSError, ValueError, KeyError):
            return None


class _Adam:
    def __init__(self, shape: tuple[int, ...], rate: float) -> None:
        self.m, self.v, self.rate, self.t = np.zeros(shape), np.zeros(shape), rate, 0

    def step(self, param: np.ndarray, grad: np.ndarray) -> None:
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * grad
        self.v = 0.999 * self.v + 0.001 * grad**2
        correction = np.sqrt(1 - 0.999**self.t) / (1 - 0.9**self.t)
        param -= self.rate * correction * self.m / (np.sqrt(self.v) + 1e-8)


def train_softmax(vectors: np.ndarray, labels: list[str], *, words: SparseRows | None = None, l2: float = 1e-3,
                  steps: int = 400, rate: float = 0.05, class_weight: dict[str, float] | None = None,
                  scale: float = 1.0) -> SoftmaxClassifier:
    """Fit on (n, dim) vectors (and n rows of word features) and their class names. Classes
    are weighted so each counts as much as the others in total, times `class_weight[name]`
    (default 1). `scale` multiplies the dense vectors (unit-length vectors need larger
    weights than the penalty lets them grow to). Deterministic."""
    classes = tuple(sorted(set(labels)))
    index = {name: i for i, name in enumerate(classes)}
    y = np.array([index[name] for name in labels])
    n, k = len(y), len(classes)
    x = vectors.astype(np.float64) * scale
    counts = np.bincount(y, minlength=k).astype(np.float64)
    per_class = np.array([(class_weight or {}).get(name, 1.0) for name in classes]) * n / (k * counts)
    sample_w = per_class[y] / per_class[y].sum()
    onehot = np.zeros((n, k))
    onehot[np.arange(n), y] = 1.0
    w, b = np.zeros((x.shape[1], k)), np.zeros(k)
    ws = np.zeros((HASH_DIM, k)) if words is not None else None
    opt_w, opt_b = _Adam(w.shape, rate), _Adam(b.shape, rate)
    opt_s = _Adam(ws.shape, rate) if ws is not None else None
    for _ in range(steps):
        logits = x @ w + b
        if ws is not None and words is not None:
            logits += scale * words.times(ws)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) * sample_w[:, None]
        opt_w.step(w, x.T @ g + l2 * w)
        opt_b.step(b, g.sum(axis=0))
        if ws is not None and words is not None and opt_s is not None:
            opt_s.step(ws, scale * words.transposed_times(g) + l2 * ws)
    return SoftmaxClassifier(classes, (w * scale).astype(np.float32), b.astype(np.float32),
                             None if ws is None else (ws * scale).astype(np.float32))
