"""The semantic layer of the offline safety screen: risk recognised by meaning.

A light classifier (tutor.understand.softmax) is trained on the vectors of an authored
exemplar bank — `exemplars_<language>.yaml` beside the safety file: crisis messages per
label and severity, and ordinary messages that share their words (idioms, the course's own
vocabulary of fear and panic, films and history, goodbyes with a harmless reason). Each
Vietnamese exemplar is also learnt as typed without diacritics, since the model reads
those far less well. A message is read in windows of whole sentences
(tutor.understand.spans). Each window gets a score: the classifier's log-odds of risk
(1 - P(ordinary)) plus NEIGHBOUR_WEIGHT times how much closer its nearest crisis exemplars
are than its nearest ordinary ones (mean cosine of the NEIGHBOURS nearest of each). The
classifier generalises over the whole bank; the neighbours keep what a single exemplar
says exactly ("gave away my cat, figured they should have her now" beside "gave away my
old books after graduating"). A window whose score reaches THRESHOLD raises a flag for the
label with the most weight, and for a second label holding a good share of it (an overdose
is self-harm and a medical emergency). The flag's evidence is the window (offsets +
SHA-256, like every flag); its severity is the more likely of the label's two classes. A
window flagged without much confidence gets a second look from the distress reader
(tutor.risk.distress): heavy distress with no wish to die is not flagged.

    semantic = load_semantic(bank_folder)        # vectors cached on disk, trained once
    reading = semantic.read(text, vectors)       # vectors: one per window (embed off the loop)
    reading.flags, reading.severity_at(label, start)
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tutor.risk import distress
from tutor.risk._lines import parse_yaml
from tutor.risk.screen import Evidence, RiskFlag
from tutor.understand import (
    HASH_DIM,
    EmbedderUnavailable,
    SoftmaxClassifier,
    VectorCache,
    cache_dir,
    embedder,
    fold_accents,
    ngram_rows,
    train_softmax,
    windows,
)

__all__ = ["ORDINARY", "SEVERITIES", "BankError", "Exemplar", "Reading", "SemanticScreen", "load_bank",
           "load_semantic", "semantic_screen"]

log = logging.getLogger("tutor.risk")

ORDINARY = "none"
SEVERITIES = ("imminent", "serious")
# A window's score: logit(risk) + NEIGHBOUR_WEIGHT * (mean cosine of its NEIGHBOURS nearest
# crisis exemplars - that of its NEIGHBOURS nearest ordinary ones). Both chosen on
# evals/safety/dev.yaml, semantic layer alone: recall at 3% false alarms 77.5% (classifier
# alone) and 80.0% (neighbours alone) -> 90.8% together; results move little for weights
# 150-300 and 2-4 neighbours. Cosines of this model sit close together (a margin of 0.05
# is a lot), hence the large weight.
NEIGHBOURS = 3
NEIGHBOUR_WEIGHT = 200.0
# Score from which a window is flagged; chosen on evals/safety/dev.yaml.
THRESHOLD = 0.0
# Below this score a window reads as ordinary with confidence: a listed phrase matched in it
# is an idiom, a story or a question the phrases did not foresee (tutor.risk.offline).
# Chosen on evals/safety/messages.yaml and dev.yaml together: from -0.5 up, phrases dropped
# in plain crisis messages ("I wrote a goodbye letter to my family", "I was raped last
# month…"); at -4 one of 197 is lost, and dev's false alarms are 8.3% (-6: 11.7%).
ORDINARY_BELOW = -4.0
# Score needed in a window where the phrase layer matched an authored idiom or negation:
# the highest that keeps dev's recall (5 and 6 lose a message).
IDIOM_THRESHOLD = 4.0
# A window of fewer words is left to the phrase layer: "Tonight", "Yes I will", "Continue"
# carry too little meaning to read (the model called "Tonight" 94% a threat), while the
# phrases still read "I want to die" and "toi muon chet".
SHORT_WORDS = 4
# A second label is flagged too when it holds this share of the window's risk and at least
# SECOND_LABEL_SUPPORT of the window's SECOND_LABEL_NEIGHBOURS nearest crisis exemplars carry
# it: an overdose is read as self-harm and a medical emergency because exemplars of both lie
# beside it, while a plan "for tonight" is not also a threat to others because a few threats
# share its sense of a date.
# Chosen on evals/safety/dev.yaml: labels flagged beyond a crisis message's own 34 -> 18,
# recall unchanged (5 neighbours and 2 of them: 14, but one message lost).
SECOND_LABEL_SHARE = 0.15
SECOND_LABEL_NEIGHBOURS = 10
SECOND_LABEL_SUPPORT = 3  # of those nearest exemplars, at least this many carry the label


class BankError(ValueError):
    """An exemplar file cannot be used; the message has ``file:line:`` locations."""


@dataclass(frozen=True)
class Exemplar:
    text: str
    label: str  # a canonical label, or ORDINARY
    severity: str = ""  # imminent | serious for a crisis exemplar
    kind: str = ""
    language: str = ""

    @property
    def target(self) -> str:
        return ORDINARY if self.label == ORDINARY else f"{self.label}/{self.severity}"


def load_bank(folder: Path, labels: Sequence[str]) -> list[Exemplar]:
    """Every `exemplars_*.yaml` in `folder` (the language is the part after the underscore)."""
    out: list[Exemplar] = []
    problems: list[str] = []
    for path in sorted(folder.glob("exemplars_*.yaml")):
        language = path.stem.split("_", 1)[1]
        data, lines, found = parse_yaml(path.read_text(encoding="utf-8"), str(path))
        problems += found
        entries = data.get("exemplars") if isinstance(data, dict) else None
        if not found and not isinstance(entries, list):
            problems.append(f"{path}:1: expected a mapping with an `exemplars:` list")
            continue
        for i, entry in enumerate(entries or []):
            line = lines.get(("exemplars", i), 1)
            text = entry.get("text") if isinstance(entry, dict) else None
            label = entry.get("label") if isinstance(entry, dict) else None
            severity = str(entry.get("severity") or "") if isinstance(entry, dict) else ""
            if not isinstance(text, str) or not text.strip():
                problems.append(f"{path}:{line}: each exemplar needs a non-empty `text`")
            elif label != ORDINARY and label not in labels:
                problems.append(f"{path}:{line}: `label` must be {ORDINARY} or one of {sorted(labels)}, got {label!r}")
            elif label != ORDINARY and severity not in SEVERITIES:
                problems.append(f"{path}:{line}: a crisis exemplar needs `severity`: imminent or serious")
            else:
                out.append(Exemplar(text.strip(), label, severity if label != ORDINARY else "",
                                    str(entry.get("kind") or ""), language))
    if problems:
        raise BankError("\n".join(problems))
    return out


def course_exemplars(texts: Sequence[str], per_text: int = 40) -> list[Exemplar]:
    """Ordinary exemplars from the modules' own words (topic content, checks and their
    example answers), read in the same windows as a message: a learner answering "the heart
    beats faster and breathing speeds up" is talking about the lesson, and the course's
    vocabulary of fear, panic and the body's alarm is what the screen must not mistake."""
    out: list[Exemplar] = []
    for text in texts:
        plain = re.sub(r"^\s*(#+|[-*>]|\d+\.|!!!\s*\w+)\s*", "", text, flags=re.MULTILINE)
        for start, end in windows(plain)[:per_text]:
            piece = plain[start:end].strip()
            if len(piece.split()) >= 4:
                out.append(Exemplar(piece, ORDINARY, "", "course", "module"))
    return out


def _training_texts(bank: Sequence[Exemplar]) -> tuple[list[str], list[str], list[str]]:
    """Each exemplar's texts (with a Vietnamese one typed without diacritics too), with the
    target and kind of each."""
    texts, targets, kinds = [], [], []
    for ex in bank:
        variants = {ex.text, fold_accents(ex.text)} if not ex.text.isascii() else {ex.text}
        for text in sorted(variants):
            texts.append(text)
            targets.append(ex.target)
            kinds.append(ex.kind)
    return texts, targets, kinds


@dataclass(frozen=True)
class Reading:
    """What the semantic layer read in one text: its flags, and per window the class
    probabilities (for the severity of a flag another layer raised)."""

    flags: list[RiskFlag]
    spans: list[tuple[int, int]] = field(default_factory=list)
    proba: np.ndarray | None = None
    classes: tuple[str, ...] = ()
    text: str = ""
    scores: np.ndarray | None = None  # per window (see THRESHOLD)

    def window_of(self, start: int) -> int:
        return next((i for i, (a, b) in enumerate(self.spans) if a <= start < b), 0)

    def reads_ordinary_at(self, start: int) -> bool:
        """The window holding offset `start` reads as plainly ordinary (False when nothing was
        read, or the window is too short to read by meaning)."""
        if self.scores is None or not self.spans:
            return False
        row = self.window_of(start)
        a, b = self.spans[row]
        if len(self.text[a:b].split()) < SHORT_WORDS:
            return False
        return bool(self.scores[row] < ORDINARY_BELOW)

    def severity_at(self, label: str, start: int) -> str:
        """The severity the window holding offset `start` suggests for `label` ("imminent"
        when nothing was read: a missed emergency is worse than an unneeded one)."""
        if self.proba is None or not self.spans:
            return "imminent"
        return _severity(self.proba[self.window_of(start)], self.classes, label)


def _nearest(cosines: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """Per row of (windows, exemplars) cosines, the mean of the `k` highest."""
    k = min(k, cosines.shape[1])
    return np.partition(cosines, cosines.shape[1] - k, axis=1)[:, -k:].mean(axis=1)


def _severity(row: np.ndarray, classes: tuple[str, ...], label: str) -> str:
    imminent = row[classes.index(f"{label}/imminent")] if f"{label}/imminent" in classes else 0.0
    serious = row[classes.index(f"{label}/serious")] if f"{label}/serious" in classes else 0.0
    return "imminent" if imminent >= serious else "serious"


@dataclass(frozen=True)
class SemanticScreen:
    classifier: SoftmaxClassifier
    threshold: float = THRESHOLD
    version: str = ""
    # The bank's vectors, crisis and ordinary exemplars apart (rows of unit vectors), for
    # the neighbour part of a window's score.
    crisis: np.ndarray | None = field(default=None, repr=False)
    ordinary: np.ndarray | None = field(default=None, repr=False)
    crisis_labels: tuple[str, ...] = field(default=(), repr=False)  # the label of each crisis row
    # The second look at a doubtful window: distress with no wish to die? (tutor.risk.distress)
    distress_reader: SoftmaxClassifier | None = field(default=None, repr=False)

    def cosines(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Each window's cosines with the crisis exemplars and with the ordinary ones (None
        without a bank's vectors). Computed once per reading: the score and the second-label
        check both read them."""
        if self.crisis is None or self.ordinary is None or not len(self.crisis) or not len(self.ordinary):
            return None
        return vectors @ self.crisis.T, vectors @ self.ordinary.T

    def near_labels(self, crisis_cosines: np.ndarray) -> set[str] | None:
        """The labels at least SECOND_LABEL_SUPPORT of the SECOND_LABEL_NEIGHBOURS crisis
        exemplars nearest a window carry, from its cosines with them (None without the
        exemplars' labels: any label may then be a second one)."""
        if len(self.crisis_labels) != len(crisis_cosines):
            return None
        k = min(SECOND_LABEL_NEIGHBOURS, len(crisis_cosines))
        nearest = [self.crisis_labels[i] for i in np.argpartition(crisis_cosines, len(crisis_cosines) - k)[-k:]]
        return {label for label in nearest if nearest.count(label) >= SECOND_LABEL_SUPPORT}

    def scores(self, risk: np.ndarray, cosines: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        """Per window, from its risk (1 - P(ordinary)) and its cosines with the bank (see
        THRESHOLD; without them the neighbour part is 0)."""
        risk = np.clip(risk, 1e-6, 1 - 1e-6)
        margin = 0.0 if cosines is None else _nearest(cosines[0]) - _nearest(cosines[1])
        return np.log(risk / (1.0 - risk)) + NEIGHBOUR_WEIGHT * margin

    def windows(self, text: str) -> list[tuple[int, int]]:
        return windows(text)

    def read(self, text: str, vectors: np.ndarray, spans: list[tuple[int, int]] | None = None,
             idioms: Sequence[tuple[int, int]] = ()) -> Reading:
        """Flags for `text`, given one vector per window of self.windows(text). A window
        holding an authored idiom or negation (`idioms`: spans the phrase layer matched as
        ordinary) is flagged only from IDIOM_THRESHOLD; one of fewer than SHORT_WORDS words is
        not flagged (the phrases read it), nor one under distress.GATE_BELOW that the distress
        reader reads as distress with no wish to die."""
        spans = self.windows(text) if spans is None else spans
        if not spans:
            return Reading([])
        classes = self.classifier.classes
        words = ngram_rows([text[a:b] for a, b in spans])
        proba = self.classifier.proba(vectors, words)
        risk = 1.0 - proba[:, classes.index(ORDINARY)]
        cosines = self.cosines(vectors)
        scores = self.scores(risk, cosines)
        doubtful = (scores >= self.threshold) & (scores < distress.GATE_BELOW)
        calm = (distress.risk_of(self.distress_reader, vectors, words) < distress.RISK_BELOW
                if self.distress_reader is not None and doubtful.any() else np.zeros(len(spans), bool))
        labels = sorted({c.split("/")[0] for c in classes if c != ORDINARY})
        best: dict[str, tuple[float, int]] = {}
        for row, score in enumerate(scores):
            start, end = spans[row]
            if len(text[start:end].split()) < SHORT_WORDS:
                continue
            if score < (IDIOM_THRESHOLD if any(start <= a < end for a, _ in idioms) else self.threshold):
                continue
            if doubtful[row] and calm[row]:
                continue
            confidence = float(1.0 / (1.0 + np.exp(-score)))
            mass = {lab: sum(proba[row, i] for i, c in enumerate(classes) if c.startswith(lab + "/"))
                    for lab in labels}
            top = max(mass.values())
            near: set[str] | None = None
            for lab, value in mass.items():
                if value != top:  # a second label (SECOND_LABEL_SHARE)
                    if value < SECOND_LABEL_SHARE * risk[row]:
                        continue
                    if near is None and cosines is not None:
                        near = self.near_labels(cosines[0][row])
                    if near is not None and lab not in near:
                        continue
                if lab not in best or confidence > best[lab][0]:
                    best[lab] = (confidence, row)
        flags = []
        for lab, (confidence, row) in sorted(best.items(), key=lambda kv: -kv[1][0]):
            start, end = spans[row]
            flags.append(RiskFlag(lab, round(confidence, 3), (Evidence.of(text, start, end),), "semantic",
                                  severity=_severity(proba[row], classes, lab)))
        return Reading(flags, spans, proba, classes, text, scores)


# How the classifier is trained (part of the bank's version: a change retrains).
TRAINING: dict[str, Any] = {"l2": 1e-5, "steps": 300, "rate": 0.05, "scale": 2.0,
                            "class_weight": {ORDINARY: 3.0}}


def _bank_version(model: str, bank: Sequence[Exemplar]) -> str:
    features = f"vector+ngrams{HASH_DIM}"
    digest = hashlib.sha256(json.dumps([model, features, TRAINING, [(e.text, e.target) for e in bank]],
                                       ensure_ascii=False).encode("utf-8")).hexdigest()
    return digest[:16]


def _distress_version(version: str, kinds: Sequence[str]) -> str:
    digest = hashlib.sha256(json.dumps([version, distress.DISTRESS_KINDS, distress.TRAINING, list(kinds)])
                            .encode("utf-8")).hexdigest()
    return f"distress-{digest[:16]}"


def load_semantic(folder: Path, labels: Sequence[str], course: Sequence[str] = ()) -> SemanticScreen | None:
    """The trained layer for the bank in `folder` (and `course`, the served modules' texts,
    as ordinary exemplars); None when the folder has no bank. Raises BankError for an
    unusable bank, EmbedderUnavailable without the model."""
    bank = load_bank(folder, labels)
    if bank:
        bank += course_exemplars(course)
    if not bank:
        return None
    if not any(e.label == ORDINARY for e in bank) or all(e.label == ORDINARY for e in bank):
        raise BankError(f"{folder}: the exemplar bank needs both crisis and ordinary ({ORDINARY}) exemplars")
    model = embedder()
    version = _bank_version(model.id, bank)
    texts, targets, kinds = _training_texts(bank)
    vectors = VectorCache(model.id, "safety-exemplars").vectors(texts, model.embed_many)
    reader_version = _distress_version(version, kinds)
    classifier, reader = _trained(version), _trained(reader_version)
    wants_reader = reader is None and any(kind in distress.DISTRESS_KINDS for kind in kinds)
    if classifier is None or wants_reader:  # the word features only to train (a load keeps ~60 MB less)
        words = ngram_rows(texts)
        if classifier is None:
            classifier = train_softmax(vectors, targets, words=words, **TRAINING)
            _keep_trained(version, classifier)
        if wants_reader:
            reader = distress.train_distress(vectors, targets, kinds, words, ORDINARY)
            if reader is not None:
                _keep_trained(reader_version, reader)
    crisis = np.array([t != ORDINARY for t in targets])
    return SemanticScreen(classifier, THRESHOLD, version, np.ascontiguousarray(vectors[crisis]),
                          np.ascontiguousarray(vectors[~crisis]),
                          tuple(t.split("/")[0] for t in targets if t != ORDINARY), reader)


def _trained_path(version: str) -> Path:
    return cache_dir() / "models" / f"safety-{version}.npz"


def _trained(version: str) -> SoftmaxClassifier | None:
    """The classifier trained on this very bank, model and settings before, if kept."""
    return SoftmaxClassifier.load(_trained_path(version))


def _keep_trained(version: str, classifier: SoftmaxClassifier) -> None:
    classifier.save(_trained_path(version))


_loaded: dict[tuple[str, tuple[str, ...], str], SemanticScreen | None] = {}
_loading = threading.Lock()  # the start-up thread and a first request must not train it twice


def semantic_screen(folder: Path, labels: Sequence[str], course: Sequence[str] = ()) -> SemanticScreen | None:
    """load_semantic, once per process, bank folder and course texts. The model missing is
    logged once as an error and the phrase layer screens alone (None)."""
    key = (str(folder), tuple(labels), hashlib.sha256("\x00".join(course).encode("utf-8")).hexdigest())
    with _loading:
        if key not in _loaded:
            try:
                _loaded[key] = load_semantic(folder, labels, course)
            except EmbedderUnavailable as exc:
                log.error("the safety screen's semantic layer is off: %s. Only listed phrases are "
                          "recognised until it is installed.", exc)
                _loaded[key] = None
        return _loaded[key]
