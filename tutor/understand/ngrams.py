"""Learnt word features beside the sentence vector: hashed word unigrams, bigrams and
character 4-grams of the text folded to plain letters (case and diacritics dropped).

The embedding model reads Vietnamese typed without diacritics barely better than noise
(measured: a classifier on its vectors separates crisis from ordinary messages no better
than chance there), while the same words, folded, are plain to a classifier that learns
their weights from exemplars — "chan song", "uong het vi thuoc". These are features a
classifier weighs, learnt from the exemplar bank, not phrases anyone lists.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tutor.understand.spans import fold_accents

__all__ = ["HASH_DIM", "SparseRows", "ngram_rows"]

HASH_DIM = 1 << 14
_WORD = re.compile(r"[^\W_]+")


def _features(text: str) -> dict[int, int]:
    """Hashed counts of the folded text's words, word pairs and character 4-grams ("#abcd"),
    in the order first seen."""
    words = _WORD.findall(fold_accents(text).casefold())
    crc = zlib.crc32
    keys = [crc(w.encode("utf-8")) for w in words]
    keys += [crc(f"{a} {b}".encode("utf-8")) for a, b in zip(words, words[1:])]
    spaced = f" {' '.join(words)} "
    data = spaced.encode("utf-8")
    if len(data) == len(spaced):  # one byte a character: slice the bytes, "#" hashed once
        mark = crc(b"#")
        keys += [crc(data[i:i + 4], mark) for i in range(len(data) - 3)]
    else:
        keys += [crc(("#" + spaced[i:i + 4]).encode("utf-8")) for i in range(len(spaced) - 3)]
    return Counter(key % HASH_DIM for key in keys)


@dataclass(frozen=True)
class SparseRows:
    """Rows of hashed features, unit length each: `cols[starts[i]:starts[i+1]]` and `vals`."""

    cols: np.ndarray  # int64
    vals: np.ndarray  # float32
    starts: np.ndarray  # int64, len rows + 1

    @property
    def rows(self) -> int:
        return len(self.starts) - 1

    def take(self, rows: Sequence[int]) -> SparseRows:
        """These rows only, in the order given."""
        pieces = [(self.starts[i], self.starts[i + 1]) for i in rows]
        index = np.concatenate([np.arange(a, b) for a, b in pieces]) if pieces else np.zeros(0, np.int64)
        starts = np.concatenate([[0], np.cumsum([b - a for a, b in pieces], dtype=np.int64)])
        return SparseRows(self.cols[index], self.vals[index], starts.astype(np.int64))

    def row_ids(self) -> np.ndarray:
        return np.repeat(np.arange(self.rows), np.diff(self.starts))

    def times(self, weights: np.ndarray) -> np.ndarray:
        """(rows, k) = this (rows, HASH_DIM) matrix times (HASH_DIM, k) weights."""
        out = np.zeros((self.rows, weights.shape[1]), dtype=np.float64)
        filled = np.diff(self.starts) > 0
        if filled.any():
            products = weights[self.cols] * self.vals[:, None]
            out[filled] = np.add.reduceat(products, self.starts[:-1][filled], axis=0)
        return out

    def transposed_times(self, grad: np.ndarray) -> np.ndarray:
        """(HASH_DIM, k) = this matrix transposed times (rows, k)."""
        out = np.zeros((HASH_DIM, grad.shape[1]), dtype=np.float64)
        if len(self.cols):
            order = self._by_column()
            cols = self.cols[order]
            products = grad[self.row_ids()[order]] * self.vals[order, None]
            firsts = np.flatnonzero(np.r_[True, cols[1:] != cols[:-1]])
            out[cols[firsts]] = np.add.reduceat(products, firsts, axis=0)
        return out

    def _by_column(self) -> np.ndarray:
        cached = self.__dict__.get("_order")
        if cached is None:
            cached = np.argsort(self.cols, kind="stable")
            object.__setattr__(self, "_order", cached)
        return cached


def ngram_rows(texts: Sequence[str]) -> SparseRows:
    cols: list[int] = []
    vals: list[float] = []
    starts = [0]
    for text in texts:
        counts = _features(text)
        norm = sum(v * v for v in counts.values()) ** 0.5 or 1.0
        for key, value in counts.items():
            cols.append(key)
            vals.append(value / norm)
        starts.append(len(cols))
    return SparseRows(np.array(cols, dtype=np.int64), np.array(vals, dtype=np.float32),
                      np.array(starts, dtype=np.int64))
