"""Finding the passage that answers a question by meaning as well as by words.

Hybrid retrieval: BM25 over the module's passages and topic cards (tutor.teach.retrieval)
beside the sentence-embedding model (tutor.understand). A question's vector is compared
with every passage's ("passage: " vectors, computed once per content and kept on disk by a
hash of the text) and with every topic's card (title, keywords, aliases and check
questions). Each signal is scaled to the question (the best passage 1, the median 0), and
the three are added with the weights below. The vectors are multilingual, so a Vietnamese
question reaches an English passage with no shared word — but the small model reads
Vietnamese typed without diacritics poorly, so a question that uses terms of the module's
glossary (tutor.teach.glossary: "tim đập nhanh" -> "heart racing") is read again with those
terms added: its words gain them, and its vector is the mean of the two readings'.

Off-topic: a question whose best passage and best card are both far (cosine below
OFF_TOPIC_BELOW), or that reads as one of the author's `not_covered` questions (the
module's look-alikes: "how do I put my laptop to sleep" beside a sleep module), gets no
passage at all — "that isn't in this module" — instead of the least unrelated quote. The
embedding model's cosines sit in a narrow band (unrelated ~0.75, close ~0.85+); the
thresholds were set on the development sets (evals/teach/dev).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from tutor.content.material import MODULE_SOURCE_ID
from tutor.teach import glossary
from tutor.teach.retrieval import Index, Passage, PerModule, tokens
from tutor.text import words
from tutor.understand import (
    SoftmaxClassifier,
    VectorCache,
    embedder,
    fold_accents,
    ngram_rows,
    windows,
)
from tutor.understand.intent_bank import bank, other_subjects
from tutor.understand.trained import trained_once

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.material import Check
    from tutor.content.modules import Module, Topic

__all__ = ["OFF_TOPIC_BELOW", "Found", "ModuleVectors", "check_text", "find", "module_vectors", "more_about",
           "quoted_topic", "said_words", "shown_in", "warm_vectors"]

W_LEXICAL = 0.35
W_PASSAGE = 0.40
W_CARD = 0.20
W_TOPIC = 1.0
W_PRACTICE = 0.3  # added to a practice topic's passages for a "what can I do" question
# ... and the best of those found is put first when it scores at least this share of the best
# passage's. Development sets: unchanged at 0.75 and above, top-1 lost from 0.65.
SKILL_WITHIN = 0.75
_WHAT_TO_DO = re.compile(
    r"\b(?:what (?:can|could|should|do) (?:i|we|you) do|what to do|any (?:tips|advice|ideas)|tips (?:for|on|to)"
    r"|ways? to|is there (?:something|anything|a way)|how (?:can|do|should|could) (?:i|we|you) "
    r"(?:stop|calm|cope|deal|handle|manage|get over|get better|relax|fall asleep|sleep|beat|overcome|fix|ease"
    r"|reduce|quiet|slow|break|feel|get back|face)|how to (?:stop|calm|cope|deal|handle|manage|relax|fall asleep"
    r"|get over|reduce|ease|sleep|face)|help me (?:calm|stop|relax|sleep|cope)"
    r"|lam (?:gi|sao|the nao) (?:de|cho|khi|bay gio|thi)|nen lam gi|co cach nao|cach (?:nao|gi)? ?(?:de|giup)"
    r"|lam gi (?:khi|luc)|phai lam (?:gi|sao)|giup (?:minh|toi|em) (?:bot|het|ngu|binh tinh))")
ELSEWHERE = "(elsewhere)"  # the topic reader's class for messages about none of the module's topics
ELSEWHERE_ABOVE = 0.70
TOPIC_TRAINING = {"l2": 1e-4, "steps": 300, "scale": 2.0}
CLASSIFIER_WINDOW = 25  # words per training window of a topic's material
_MARKUP = re.compile(r"^\s*(#+|[-*>]|\d+\.|!!!\s*\w+)\s*", re.MULTILINE)
OFF_TOPIC_BELOW = 0.80
# A question this close to one of the author's `not_covered` questions (about the cosine of a
# paraphrase), and clearly closer to it than to anything the module teaches, is not the
# module's. The margin matters: the model's cosines crowd together (0.87-0.90 between a
# sleep question and "how do I stop my PC going to sleep"), and learnt as a topic-reader
# class the look-alikes took real questions with them (development sets: wrongly refused
# 2% -> 8%).
NOT_COVERED_AT = 0.92
NOT_COVERED_MARGIN = 0.03
WINDOW_WORDS = 60  # a passage is read in windows of whole sentences: the model reads short texts best


@dataclass(frozen=True)
class Found:
    passages: list[Passage]  # best first; empty when off topic
    relevance: float  # the best cosine between the question and a passage or a topic card
    off_topic: bool
    topic_share: float = 0.0  # the topic reader's probability for the likeliest of the module's topics


def _card(topic: Topic) -> str:
    parts = [topic.title, *topic.keywords, *topic.aliases, *(c.question for c in topic.checks)]
    return ". ".join(p for p in parts if p)


class ModuleVectors:
    """A module's passages and topic cards as unit vectors, in the order of its Index."""

    def __init__(self, module: Module, index: Index) -> None:
        model = embedder()
        texts: list[str] = []
        owner: list[int] = []  # per window, its passage
        for i, passage in enumerate(index.passages):
            for start, end in windows(passage.text, WINDOW_WORDS):
                texts.append(f"{passage.section_title}. {passage.text[start:end]}")
                owner.append(i)
        self.windows = VectorCache(model.id, f"passages-{module.id}").vectors(
            texts, lambda batch: model.embed_many(batch, passages=True)) if texts else np.zeros((0, 1), np.float32)
        self.owner = np.array(owner, dtype=np.intp)
        self.count = len(index.passages)
        by_id = {t.id: t for t in module.topics}
        cards = [_card(by_id[t]) if t in by_id else module.title for t in index.topics]
        self.cards = VectorCache(model.id, f"cards-{module.id}").vectors(cards, model.embed_many) \
            if cards else np.zeros((0, 1), np.float32)
        self.topics = _topic_reader(module, index)
        # the module's things to do (topics of a practice phase), and per topic whether it is one
        self.doing = frozenset(t.id for p in module.phases if p.practice for sec in p.sections for t in sec.topics)
        self.practice = np.array([float(t in self.doing) for t in index.topics])
        checks = [check for topic in module.topics for check in topic.checks]
        rows = VectorCache(model.id, f"checks-{module.id}").vectors(
            [check_text(c) for c in checks], model.embed_many) if checks else []
        self.checks = {c.id: row for c, row in zip(checks, rows)}  # what an answer to each check is about
        self.not_covered = VectorCache(model.id, f"not-covered-{module.id}").vectors(
            list(module.not_covered), model.embed_many) if module.not_covered else np.zeros((0, 1), np.float32)

    @classmethod
    def build(cls, module: Module) -> ModuleVectors:
        return _PER_MODULE.get(module, lambda m: cls(m, Index.build(m)))


_PER_MODULE: PerModule[ModuleVectors] = PerModule()
module_vectors = ModuleVectors.build


def warm_vectors(modules: list[Module]) -> None:
    """Embed the modules' passages now (in a thread at start; from the disk cache after the
    first time), so no learner waits for it."""
    for module in modules:
        ModuleVectors.build(module)


def elsewhere() -> list[str]:
    """Messages about anything but learning (the intent bank's `chat`) and questions about
    other subjects (elsewhere.yaml): what the topic reader learns "not this module" from."""
    return [text for act, text in bank() if act == "chat"] + list(other_subjects())


def _topic_reader(module: Module, index: Index) -> SoftmaxClassifier | None:
    """A classifier from a message to the topic whose material it is about, learnt from the
    module itself: every sentence window of a topic's passages, and its title, keywords,
    aliases, suggested questions and check questions (each also folded to plain letters, as
    learners type Vietnamese). Trained once per content and model, kept on disk."""
    texts: list[str] = []
    labels: list[str] = []
    for passage in index.passages:
        if passage.topic_id is None:
            continue
        plain = _MARKUP.sub("", passage.text)
        for start, end in windows(plain, CLASSIFIER_WINDOW):
            texts.append(plain[start:end])
            labels.append(passage.topic_id)
    for topic in module.topics:
        for text in (topic.title, *topic.keywords, *topic.aliases, *topic.suggestions, *(c.question for c in topic.checks)):
            texts.append(text)
            labels.append(topic.id)
    for text in elsewhere():
        texts.append(text)
        labels.append(ELSEWHERE)
    folded = [fold_accents(t) for t in texts]
    texts, labels = texts + [f for f, t in zip(folded, texts) if f != t], labels + [
        label for f, t, label in zip(folded, texts, labels) if f != t]
    if len(set(labels)) < 2:
        return None
    return trained_once(f"topics-{module.id}", texts, labels, TOPIC_TRAINING, f"topic-windows-{module.id}")


def asks_what_to_do(question: str) -> bool:
    """"What can I do when ...", "how do I calm down", "làm sao để bớt lo": a question that
    wants something to do, which a practice topic (a skill, an exercise, a habit) answers."""
    return bool(_WHAT_TO_DO.search(fold_accents(question).casefold()))


def _scaled(scores: np.ndarray) -> np.ndarray:
    top, mid = float(scores.max()), float(np.median(scores))
    return (scores - mid) / (top - mid) if top > mid else np.zeros_like(scores)


def find(module: Module, question: str, vector: np.ndarray, k: int = 3) -> Found:
    """The `k` passages that best answer `question` (its `vector` from the embedder), at
    most one per topic; none when the question is off topic."""
    index = Index.build(module)
    if not index.passages or k < 1:
        return Found([], 0.0, True)
    vectors = ModuleVectors.build(module)
    glossed = glossary.glossed(module, question[:2000])
    read = glossed or question
    if glossed:  # read again with the module's own terms added; the two readings averaged
        vector = vector + embedder().embed([glossed])[0]
        vector = vector / (np.linalg.norm(vector) or 1.0)
    passage_cos = np.full(vectors.count, -1.0)
    np.maximum.at(passage_cos, vectors.owner, vectors.windows @ vector)
    card_cos = vectors.cards @ vector
    relevance = float(max(passage_cos.max(), card_cos.max()))
    if relevance < OFF_TOPIC_BELOW or _reads_not_covered(vectors, vector, relevance):
        return Found([], relevance, True)
    lexical = index.lexical(tokens(read[:2000]))
    words = lexical[1] if lexical is not None else np.zeros(len(index.passages))
    score = (W_LEXICAL * words + W_PASSAGE * _scaled(passage_cos)
             + W_CARD * _scaled(card_cos)[index.topic_at])
    what_to_do = vectors.practice.any() and asks_what_to_do(question)
    if what_to_do:
        score = score + W_PRACTICE * vectors.practice[index.topic_at]
    if vectors.topics is not None:
        proba = dict(zip(vectors.topics.classes, vectors.topics.proba(vector[None, :], ngram_rows([read]))[0]))
        share = max(v for c, v in proba.items() if c != ELSEWHERE)
        if proba.get(ELSEWHERE, 0.0) >= ELSEWHERE_ABOVE:
            return Found([], relevance, True, share)
        score = score + W_TOPIC * np.array([proba.get(index.topics[i] or "", 0.0) for i in index.topic_at])
        found = index.ranked(score, k, 1)
        return Found(_skill_first(found, vectors.doing) if what_to_do else found, relevance, False, share)
    return Found(index.ranked(score, k, 1), relevance, False)


def _skill_first(found: list[Passage], doing: frozenset[str]) -> list[Passage]:
    """The passages found for a "what can I do" question, a thing to do (a topic in `doing`)
    first when it scores at least SKILL_WITHIN of the best: "what can I do at 3am when my
    mind races" had the passage on how body, mind and behaviour feed each other first, and
    box breathing second."""
    if not found or found[0].topic_id in doing:
        return found
    best = found[0].score or 1.0
    for j, p in enumerate(found[1:], 1):
        if p.topic_id in doing and p.score >= SKILL_WITHIN * best:
            return [p, *found[:j], *found[j + 1:]]
    return found


def _reads_not_covered(vectors: ModuleVectors, vector: np.ndarray, relevance: float) -> bool:
    """The question reads as one of the author's `not_covered` questions: closer to one of
    them than to any passage or topic card (by NOT_COVERED_MARGIN), and close in itself."""
    if not len(vectors.not_covered):
        return False
    nearest = float((vectors.not_covered @ vector).max())
    return nearest >= NOT_COVERED_AT and nearest >= relevance + NOT_COVERED_MARGIN


@lru_cache(maxsize=4096)
def _opening(text: str) -> str:
    """A passage's first words, by which a tutor turn is seen to quote it. Kept per text:
    every turn looks for each of a module's passages in the last replies."""
    return " ".join(words(text)[:12])


@lru_cache(maxsize=1024)
def _said(reply: str) -> str:
    """A tutor turn's words, one space apart: a stored reply is its JSON, whose escaped line
    breaks ("other\\nThe") would otherwise glue two words into one."""
    if reply.lstrip().startswith("{"):
        try:
            reply = " ".join(_strings(json.loads(reply)))
        except ValueError:
            pass
    return " ".join(words(reply))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [s for item in items for s in _strings(item)]


def more_about(module: Module, topic_id: str, k: int = 1, shown: Sequence[str] = (), *,
               own: bool = False) -> list[Passage]:
    """"Tell me more": the topic's passages beyond what it teaches itself (the source
    sections it points at), in reading order, leaving out any already in `shown` (what the
    tutor said in the last few turns); none when the topic has no more to give. `own`: its
    own content first (a topic only glimpsed in a quote, not taught yet)."""
    seen = said_words(shown)
    index = Index.build(module)
    out = [p for p in index.passages if p.topic_id == topic_id and (own or p.source_id != MODULE_SOURCE_ID)
           and _opening(p.text) not in seen]
    out.sort(key=lambda p: p.source_id != MODULE_SOURCE_ID)  # stable: reading order within each
    return out[:k]


def said_words(replies: Sequence[str]) -> str:
    """What the tutor said in `replies` (stored tutor turns), as words one space apart: read
    once a turn, then looked up by `shown_in` for each passage."""
    return " ".join(_said(reply) for reply in replies)


def shown_in(text: str, said: str) -> bool:
    """Whether a passage (`text`) is in `said` (said_words of the last turns), by its opening words."""
    return _opening(text) in said


def quoted_topic(module: Module, reply: str) -> str | None:
    """The topic of the first of the module's passages that `reply` (a tutor turn) quotes,
    found by the passage's opening words; None when it quotes none."""
    said = _said(reply)
    at = [(said.find(_opening(p.text)), p.topic_id) for p in Index.build(module).passages if p.topic_id]
    found = [(i, topic) for i, topic in at if i >= 0]
    return min(found)[1] if found else None


def check_text(check: Check) -> str:
    """What an answer to `check` is about: its question, key points and example answer."""
    points = [p for c in check.rubric.criteria for point in c.points for p in point.phrasings[:1]]
    return " ".join([check.question, *points, check.example_answer or ""])
