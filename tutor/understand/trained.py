"""A classifier trained once on exemplars and kept on disk: the intent reader and each
module's topic reader (tutor.teach) are trained on their texts' vectors beside folded word
features, and read back from the cache at every later start."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from tutor.understand.embedder import embedder
from tutor.understand.ngrams import HASH_DIM, ngram_rows
from tutor.understand.softmax import SoftmaxClassifier, train_softmax
from tutor.understand.vectors import VectorCache, cache_dir

__all__ = ["trained_once"]


def trained_once(name: str, texts: Sequence[str], labels: Sequence[str], training: dict[str, Any],
                 vectors_in: str) -> SoftmaxClassifier:
    """The classifier for (`texts`, `labels`) under `training`, trained now only if this
    very model, features, settings and exemplars were never trained before (the file
    `models/<name>-<version>.npz` in the cache folder; the texts' vectors in the
    `vectors_in` collection)."""
    model = embedder()
    version = hashlib.sha256(json.dumps([model.id, HASH_DIM, training, list(texts), list(labels)],
                                        ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
    path = cache_dir() / "models" / f"{name}-{version}.npz"
    classifier = SoftmaxClassifier.load(path)
    if classifier is None:
        vectors = VectorCache(model.id, vectors_in).vectors(texts, model.embed_many)
        classifier = train_softmax(vectors, list(labels), words=ngram_rows(texts), **training)
        classifier.save(path)
    return classifier
