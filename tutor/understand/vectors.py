"""Vectors kept on disk by content: a text's vector is computed once per model and read
back on every later start (the safety bank, ~6,000 texts, takes 3-5 minutes of CPU to
embed, ~10 ms to read). One file per model and collection, written whole to a temporary
file and renamed (two workers writing at once leave one complete file; the other's vectors
are simply computed again next time)."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["VectorCache", "cache_dir"]

log = logging.getLogger("tutor.understand")


def cache_dir() -> Path:
    """TUTOR_CACHE_DIR, else $XDG_CACHE_HOME/tutor, else ~/.cache/tutor."""
    explicit = os.environ.get("TUTOR_CACHE_DIR", "").strip()
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "tutor"


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class VectorCache:
    """`vectors(texts, compute)`: rows for `texts`, computing (with `compute`, a batch
    function) only those not already on disk for this model, then saving them."""

    def __init__(self, model: str, collection: str, folder: Path | None = None) -> None:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{collection}-{model}")
        self.path = (folder or cache_dir()) / "vectors" / f"{safe}.npz"

    def _read(self) -> dict[bytes, np.ndarray]:
        try:
            with np.load(self.path) as data:
                keys, rows = data["keys"], data["rows"]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError) as exc:
            log.warning("ignoring an unreadable vector cache %s (%s); it will be rebuilt", self.path, exc)
            return {}
        return {bytes(k): rows[i] for i, k in enumerate(keys)}

    def _write(self, kept: dict[bytes, np.ndarray]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as out:
                keys = np.array([np.frombuffer(k, dtype=np.uint8) for k in kept], dtype=np.uint8)
                np.savez(out, keys=keys.reshape(len(kept), 16), rows=np.stack(list(kept.values())))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not save vectors to %s (%s): they will be computed again at the next "
                        "start; set TUTOR_CACHE_DIR to a writable folder", self.path, exc)

    def vectors(self, texts: Sequence[str], compute: Callable[[Sequence[str]], np.ndarray]) -> np.ndarray:
        kept = self._read()
        keys = [_key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in kept))
        if missing:
            for text, row in zip(missing, compute(missing)):
                kept[_key(text)] = np.asarray(row, dtype=np.float32)
            wanted = set(keys)
            # Keep only what this collection uses now: an edited bank does not grow the file forever.
            self._write({k: v for k, v in kept.items() if k in wanted})
        return np.stack([kept[k] for k in keys]) if keys else np.zeros((0, 0), np.float32)
