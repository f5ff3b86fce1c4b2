"""The distress reader: a second look at a window the semantic layer flags without much
confidence, asking one question only — is this heavy distress with no wish to die?

The semantic layer's classifier learns one `none` class from every kind of ordinary
exemplar: idioms, the course's words, films, goodbyes, errands and distress alike. The line
between "I got fired in front of everyone and I can't stop shaking" and "…and I wish I
could just stop existing" is a small part of what it learns, and the look-alikes of heavy
distress were the false alarms the development sets and the public C-SSRS vignettes found
most. This reader is trained on that line alone: every crisis exemplar against the
exemplars of DISTRESS_KINDS (distress and low mood with no wish to die, each written beside
its minimal step across). A window the semantic layer would flag with a score under
GATE_BELOW (confidence under ~0.9) is left unflagged when this reader gives it a risk under
RISK_BELOW. A window read with confidence is flagged as before, and the phrase layer is not
touched: the reader can only take back a doubtful flag of the semantic layer.

Both settings were chosen on the development sets (evals/safety/dev*.yaml and
messages.yaml, with ordinary lesson talk): false alarms 36 -> 31 of 545 ordinary messages,
heavy-distress look-alikes of dev4 10 -> 5 of 30, no crisis message lost, lesson talk
unchanged. From RISK_BELOW 0.4 up, plans were lost ("Trượt nữa là em không ở lại đâu, em
quyết rồi"); adding the bank's negations ("I'd never hurt myself") to the distress side taught the reader that the
words of a crisis mean distress, and lost five crisis messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tutor.understand import SoftmaxClassifier, SparseRows, train_softmax

__all__ = ["DISTRESS_KINDS", "GATE_BELOW", "RISK", "RISK_BELOW", "TRAINING", "risk_of", "train_distress"]

DISTRESS_KINDS = ("distress", "low_mood")
RISK = "risk"
CALM = "distress"
RISK_BELOW = 0.3
GATE_BELOW = 2.2  # a window's semantic score (tutor.risk.semantic.THRESHOLD scale): confidence 0.9
TRAINING: dict[str, Any] = {"l2": 1e-5, "steps": 300, "rate": 0.05, "scale": 2.0}


def train_distress(vectors: np.ndarray, targets: Sequence[str], kinds: Sequence[str], words: SparseRows,
                   ordinary: str) -> SoftmaxClassifier | None:
    """The reader, from the bank's rows: crisis targets against ordinary rows of
    DISTRESS_KINDS (None when the bank has none of them)."""
    rows = [i for i, (target, kind) in enumerate(zip(targets, kinds))
            if target != ordinary or kind in DISTRESS_KINDS]
    labels = [RISK if targets[i] != ordinary else CALM for i in rows]
    if len(set(labels)) < 2:
        return None
    return train_softmax(vectors[rows], labels, words=words.take(rows), **TRAINING)


def risk_of(reader: SoftmaxClassifier, vectors: np.ndarray, words: SparseRows) -> np.ndarray:
    """Per window, the reader's probability that it is a crisis rather than distress."""
    return reader.proba(vectors, words)[:, reader.classes.index(RISK)]
