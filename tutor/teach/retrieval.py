"""Retrieval over a module's sources and its authored topic content, with bm25s.

Why bm25s: a kept BM25 library whose only dependency is numpy, that runs in-process with
no download, builds this module's index in tens of milliseconds and answers in well under
one; the database's full-text search would tie retrieval to SQLite vs PostgreSQL dialects
and to a migration, for a corpus that fits in memory many times over.

Passages are windows of whole paragraphs (about 60 to 170 words) of each source section and
of each topic's content; a passage's text is always a verbatim span of its section, so a
model quoting it verifies. Each passage belongs to a topic: a topic's own content, or a
source section a topic points at (`sources:`; the first such topic in the author's order).

Tokens: words folded for case and accents (tutor.text), stop words removed (English ones
only from words typed without diacritics, so Vietnamese "sợ" is not English "so"), English
words stemmed (Snowball), plus every pair of adjacent words, so phrases ("what if") and
Vietnamese multi-syllable words ("tim đập nhanh") count for more than their parts. In a
query a word counts twice and a pair once. A topic's card (title, keywords, aliases in any
language, check questions and key points) is indexed with each of its passages and on its
own: a Vietnamese question finds the English passage through the topic's aliases.
"""

from __future__ import annotations

import re
import threading
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Generic, TypeVar

import bm25s
import numpy as np
import snowballstemmer

from tutor.content.material import MODULE_SOURCE_ID
from tutor.teach.quotes import module_sources
from tutor.text import words

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module, Topic

__all__ = ["Index", "Passage", "PerModule", "retrieve", "tokens"]

T = TypeVar("T")

_MIN_WORDS = 60
_MAX_WORDS = 170
_TOPIC_SHARE = 0.3  # how much the topic's own words count in a passage's score
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\n[ \t]*\n|\Z)", re.S)

_STOP_EN = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just let me more
most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves im ive dont doesnt isnt s t d ll m re ve get got really
actually please tell explain thing things something anything kind bit also still even ever much
""".split())
# Vietnamese function words, folded. Applied to every word; the English list only to words
# typed without diacritics, so "sợ" (fear) is not dropped as the English "so".
_STOP_VI = frozenset("""
la gi toi co khong va cua khi thi mot nhung cac duoc nay do tai sao lam the nao nhu vay de voi cho
ve o ra vao bi hay nen neu con rat qua ma cung da dang se ban minh nguoi thuong hon nhieu gium a oi
""".split())
_RAW_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Passage:
    score: float
    source_id: str  # a declared source, or "module" for a topic's own content
    source_title: str
    section_id: str
    section_title: str
    topic_id: str | None
    text: str  # verbatim from the section

    @property
    def header(self) -> str:
        """Seed 001's chunk header, for prompts."""
        return f'[Source: "{self.source_title}" (id: {self.source_id}), Section: "{self.section_title}"]'


_stemmer = snowballstemmer.stemmer("english")
_stem_lock = threading.Lock()  # Snowball stemmer objects keep state between calls
_BRITISH = re.compile(r"(\w{3,})is(e|es|ed|ing|ation|ations)$")  # catastrophising -> catastrophizing


@lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    word = _BRITISH.sub(r"\1iz\2", word)
    with _stem_lock:
        return _stemmer.stemWord(word)


def tokens(text: str) -> list[str]:
    """Index/query tokens: folded words without stop words, stemmed; plus every pair of
    adjacent words, stop words included ("what if", "lo âu là gì")."""
    folded: list[tuple[str, bool]] = []  # (stemmed word, is a stop word)
    for raw in _RAW_WORD.findall(unicodedata.normalize("NFC", text)):
        for word in words(raw):
            marked = word != raw.casefold()
            stop = word in _STOP_VI or (not marked and word in _STOP_EN)
            folded.append((_stem(word), stop))
    return [w for w, stop in folded if not stop] + [f"{a}_{b}" for (a, _), (b, _) in zip(folded, folded[1:])]


class _Scorer:
    """`bm25.get_scores(query)` for an indexed bm25s.BM25, the same float32 sums in the same
    order, at ~5 us a query instead of ~27 (twice on every question): each token's column
    is kept as a dense row over the documents, built on first use (a bounded number), and
    the rows are added in query order. A document without the token gets 0.0 added, which
    leaves a (non-negative) score exactly as it was."""

    _MAX_FLOATS = 1_000_000  # cached rows per index, in scores (4 MB)

    def __init__(self, bm25: bm25s.BM25) -> None:
        self._bm25 = bm25
        # Variants that add a constant for absent tokens (bm25l, bm25+) keep bm25s's own path,
        # and so does an index whose layout is not the one read here (another bm25s release).
        self._plain = getattr(bm25, "nonoccurrence_array", None) is None and hasattr(bm25, "scores")
        self._rows: dict[int, np.ndarray] = {}
        if self._plain:
            index = bm25.scores
            if not (isinstance(index, dict) and {"num_docs", "indptr", "indices", "data"} <= index.keys()
                    and hasattr(bm25, "vocab_dict") and hasattr(bm25, "dtype")):
                self._plain = False
                return
            self._num_docs = int(index["num_docs"])
            self._indptr = index["indptr"].tolist()
            self._max_rows = max(64, self._MAX_FLOATS // max(1, self._num_docs))

    def scores(self, query: list[str]) -> np.ndarray:
        if not self._plain:
            return self._bm25.get_scores(query)
        vocab, rows = self._bm25.vocab_dict, self._rows
        scores = np.zeros(self._num_docs, dtype=self._bm25.dtype)
        for token in query:
            token_id = vocab.get(token)
            if token_id is not None:
                row = rows.get(token_id)
                scores += self._row(token_id) if row is None else row
        return scores

    def _row(self, token_id: int) -> np.ndarray:
        index = self._bm25.scores
        start, end = self._indptr[token_id], self._indptr[token_id + 1]
        row = np.zeros(self._num_docs, dtype=self._bm25.dtype)
        row[index["indices"][start:end]] = index["data"][start:end]  # one entry per document
        row.flags.writeable = False
        if len(self._rows) >= self._max_rows:
            self._rows.clear()
        self._rows[token_id] = row
        return row


def _windows(text: str) -> list[str]:
    """Whole paragraphs grouped into verbatim spans of about _MIN_WORDS.._MAX_WORDS words."""
    spans = [(m.start(), m.end(), len(m.group().split())) for m in _PARAGRAPH.finditer(text)]
    out: list[str] = []
    start = end = count = 0
    for i, (s, e, n) in enumerate(spans):
        if count and count + n > _MAX_WORDS:
            out.append(text[start:end])
            count = 0
        if not count:
            start = s
        end, count = e, count + n
        remaining = sum(x[2] for x in spans[i + 1:])
        if count >= _MIN_WORDS and remaining >= _MIN_WORDS // 2:
            out.append(text[start:end])
            count = 0
    if count:
        out.append(text[start:end])
    return out


def _topic_words(topic: Topic) -> str:
    """What a topic is about, beyond its passages: title, keywords, aliases, and its checks'
    questions and key points with their alternatives (never the example answers)."""
    parts = [topic.title, *topic.keywords, *topic.aliases]
    for check in topic.checks:
        parts.append(check.question)
        parts += [p for c in check.rubric.criteria for point in c.points for p in point.phrasings]
    return " ".join(parts)


class PerModule(Generic[T]):
    """One value per loaded module object, made once (under a lock) and forgotten with the
    module: the word index here, the vectors in tutor.teach.meaning."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[weakref.ref, T]] = {}
        self._lock = threading.Lock()

    def holds(self, module: Module) -> bool:
        with self._lock:
            hit = self._kept.get(id(module))
            return hit is not None and hit[0]() is module

    def get(self, module: Module, make: Callable[[Module], T]) -> T:
        key = id(module)
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None and hit[0]() is module:
                return hit[1]
        value = make(module)
        with self._lock:
            self._kept[key] = (weakref.ref(module, lambda _r, k=key: self._kept.pop(k, None)), value)
        return value


class Index:
    """A module's passages and their BM25 indexes. Build with `Index.build(module)` (cached
    per module object), query with `search`.

    Two indexes: one document per passage (its text, its section title and its topic's
    words), and one short card per topic (title, keywords, aliases, check questions and key
    points). A passage's score blends its own with its topic card's (each scaled to the best
    for the query), so a question phrased like the topic rather than like the text still
    reaches that topic's best passage. Results are spread over topics (`per_topic`).
    """

    def __init__(self, passages: Sequence[Passage], documents: Sequence[list[str]],
                 cards: dict[str | None, list[str]]) -> None:
        self.passages = tuple(passages)
        self._topics = list(cards)
        self._vocab = {t for doc in documents for t in doc} | {t for card in cards.values() for t in card}
        self._card_words = {t for card in cards.values() for t in card if "_" not in t}
        self._bm25 = bm25s.BM25()
        self._topic_bm25 = bm25s.BM25()
        if self.passages:
            self._bm25.index([doc or ["_"] for doc in documents], show_progress=False)
            self._topic_bm25.index([card or ["_"] for card in cards.values()], show_progress=False)
        # As an index array: numpy would convert a list on every search.
        self._topic_at = np.array([self._topics.index(p.topic_id) for p in self.passages], dtype=np.intp)
        self._scorer, self._topic_scorer = _Scorer(self._bm25), _Scorer(self._topic_bm25)

    @classmethod
    def build(cls, module: Module) -> Index:
        return _PER_MODULE_INDEX.get(module, cls.from_module)

    @staticmethod
    def is_built(module: Module) -> bool:
        return _PER_MODULE_INDEX.holds(module)

    @classmethod
    def from_module(cls, module: Module) -> Index:
        topic_of: dict[tuple[str, str], str] = {}
        whole_source: dict[str, str] = {}
        for topic in module.topics:
            for ref in topic.sources:
                source_id, _, section_id = ref.partition("#")
                if section_id:
                    topic_of.setdefault((source_id, section_id), topic.id)
                else:
                    whole_source.setdefault(source_id, topic.id)
        meta = {t.id: tokens(_topic_words(t)) for t in module.topics}
        passages: list[Passage] = []
        documents: list[list[str]] = []
        cards: dict[str | None, list[str]] = {}  # topic id -> its card's tokens
        for source in module_sources(module).values():
            for section in source.sections:
                if source.id == MODULE_SOURCE_ID:
                    topic_id: str | None = section.id
                else:
                    topic_id = topic_of.get((source.id, section.id), whole_source.get(source.id))
                title = tokens(section.title)
                for text in _windows(section.text):
                    body = tokens(text) + title
                    passages.append(Passage(0.0, source.id, source.title, section.id, section.title, topic_id, text))
                    documents.append(body + meta.get(topic_id or "", []))
                    cards.setdefault(topic_id, meta.get(topic_id or "", []))
        return cls(passages, documents, cards)

    def search(self, query: str, k: int = 3, per_topic: int | None = 1) -> list[Passage]:
        """The `k` best passages for `query`, best first, at most `per_topic` from one topic
        (None: no limit); only passages that share a token with the query."""
        if not self.passages or k < 1:
            return []
        return self._search(tokens(query[:2000]), k, per_topic)

    def lexical(self, query: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """Per passage: its own BM25 score and the blend with its topic card's (each scaled
        to the best for the query, 0..1); None when the query shares no token with any."""
        if not self.passages:
            return None
        wanted = [t for t in query if t in self._vocab]
        if not wanted:
            return None
        wanted += [t for t in wanted if "_" not in t]  # a word counts twice, a pair of words once
        own = np.asarray(self._scorer.scores(wanted), dtype=float)
        topic = np.asarray(self._topic_scorer.scores(wanted), dtype=float)
        if own.max() <= 0:
            return None
        blended = _TOPIC_SHARE * topic[self._topic_at] / (topic.max() or 1.0) + (1 - _TOPIC_SHARE) * own / own.max()
        return own, blended

    @property
    def topic_at(self) -> np.ndarray:
        """Per passage, the position of its topic in `topics`."""
        return self._topic_at

    @property
    def topics(self) -> list[str | None]:
        return self._topics

    def _search(self, query: list[str], k: int, per_topic: int | None) -> list[Passage]:
        if not self.passages or k < 1:
            return []
        scored = self.lexical(query)
        if scored is None:
            return []
        own, blended = scored
        return self.ranked(blended, k, per_topic, own > 0)

    def ranked(self, scores: np.ndarray, k: int, per_topic: int | None, eligible: np.ndarray | None = None
               ) -> list[Passage]:
        """The `k` passages with the highest `scores` (at most `per_topic` from one topic),
        among the `eligible` ones, each carrying its score."""
        out: list[Passage] = []
        taken: dict[str | None, int] = {}
        for i in np.argsort(-scores, kind="stable"):
            passage = self.passages[int(i)]
            if (eligible is not None and not eligible[i]) or (
                    per_topic is not None and taken.get(passage.topic_id, 0) >= per_topic):
                continue
            taken[passage.topic_id] = taken.get(passage.topic_id, 0) + 1
            out.append(Passage(round(float(scores[i]), 4), passage.source_id, passage.source_title,
                               passage.section_id, passage.section_title, passage.topic_id, passage.text))
            if len(out) == k:
                break
        return out


    def on_topic(self, query: str) -> bool:
        """Whether `query` shares a word with some topic's card (title, keywords, aliases,
        check questions and key points). Off-topic questions ("Can you say that again?",
        "What's the capital of France?") match stray words of some passage; they get none."""
        return self._on_topic(tokens(query[:2000]))

    def _on_topic(self, query: list[str]) -> bool:
        return any(t in self._card_words for t in query if "_" not in t)


_PER_MODULE_INDEX: PerModule[Index] = PerModule()


def warm(modules: Iterable[Module]) -> None:
    """Build the modules' indexes now (~0.1 s of CPU each, mostly stemming): the app does it
    in a thread at start, so the first question on a module does not hold up the event
    loop, and every learner on it, while its index is built."""
    for module in modules:
        Index.build(module)


def retrieve(module: Module, question: str, k: int = 3, *, on_topic_only: bool = False) -> list[Passage]:
    """The module's `k` passages that best answer `question` (the index is built once);
    with `on_topic_only`, none for a question that shares no word with any topic's card."""
    index = Index.build(module)
    query = tokens(question[:2000])  # once, for both steps
    if on_topic_only and not index._on_topic(query):
        return []
    return index._search(query, k, 1)
