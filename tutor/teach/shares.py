"""What a learner's personal share is about, so the tutor acknowledges it as a person would:
something hard right now ("my grandad died in the spring…") is met with "That sounds really
hard", something that went well ("I tried the breathing before my talk and it helped") with
gladness, support they are seeking ("I've booked an appointment with my GP") as a good
step; plain background ("I'm a nurse and I work nights") is simply thanked for.

A light classifier (the sentence vector beside folded word features, as the intent reader)
trained on tutor/understand/shares.yaml. A kind is named only when the classifier is sure of
it (SURE); "" otherwise, and the tutor thanks the learner as before. Gladness asks for more
certainty than the others: "That's good to hear" said to a loss is the worst mistake here.
"""

from __future__ import annotations

import threading

import numpy as np

from tutor.understand import fold_accents, ngram_rows
from tutor.understand.intent_bank import share_bank
from tutor.understand.trained import trained_once

__all__ = ["SURE", "share_kind", "warm"]

TRAINING = {"l2": 1e-4, "steps": 300, "scale": 2.0}
# The probability from which a kind is named (chosen on evals/teach/dev/shares.yaml).
SURE = {"struggle": 0.5, "progress": 0.8, "help": 0.5}

_reader = None
_lock = threading.Lock()


def _classifier():
    global _reader
    if _reader is None:
        with _lock:
            if _reader is None:
                texts, kinds = [], []
                for kind, text in share_bank():
                    for variant in dict.fromkeys((text, fold_accents(text))):  # learners type both ways
                        texts.append(variant)
                        kinds.append(kind)
                _reader = trained_once("shares", texts, kinds, TRAINING, "share-exemplars")
    return _reader


def share_kind(text: str, vector: np.ndarray) -> str:
    """"struggle", "progress" or "help" when the share (its `vector` from the embedder) is
    surely that; "" for plain background or when unsure."""
    classifier = _classifier()
    proba = classifier.proba(vector[None, :], ngram_rows([text]))[0]
    best = int(np.argmax(proba))
    kind = classifier.classes[best]
    return kind if proba[best] >= SURE.get(kind, 2.0) else ""


def warm() -> None:
    """Train the reader now (once; read from disk after), before any learner waits on it."""
    _classifier()
