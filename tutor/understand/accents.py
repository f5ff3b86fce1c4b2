"""Vietnamese typed without diacritics, given them back before the model reads it.

The embedding model reads "mình mệt mỏi quá" well and "minh met moi qua" poorly: on the
safety development sets, the same Vietnamese messages folded to plain letters kept their
recall but drew 12.5% false alarms instead of 2.8%. Learners type both ways, so a message
that is plain Vietnamese is read with its diacritics restored.

How: each plain syllable has the written forms that fold to it ("tu" -> tu, tư, từ, tử, tự,
tú …); the likeliest sequence is chosen by a bigram model of Vietnamese (Viterbi; Witten-Bell
interpolation with the unigram), counted from the project's own Vietnamese text written
with diacritics — the modules, the exemplar banks and the app's words (CORPUS). A word the
corpus never wrote keeps its letters. On the development sets' Vietnamese (safety and
teaching, 233 messages folded to plain letters), 93.4% of syllables come back as written,
in 0.6 ms a message (a trigram, measured on the corpus before the distress and acute
exemplars, when the bigram gave 93.0%: 93.3% at 2.8 ms).

A text is restored only when it looks like plain Vietnamese: ASCII, at least MIN_WORDS
words, and at least VIETNAMESE_SHARE of them plain forms of syllables that the corpus mostly
writes with diacritics and that are not common English words (ENGLISH): "go on", "me too"
and "I want to die" stay as they are, though "gõ", "ơn", "mẹ" and "tô" fold to their words.

    restore("minh met moi qua")  # -> "mình mệt mỏi quá"
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

from tutor.understand.spans import fold_accents

__all__ = ["CORPUS", "Restorer", "restore", "restorer", "written_in"]

_ROOT = Path(__file__).resolve().parents[2]
# Where the Vietnamese written with diacritics comes from (globs under the project root).
CORPUS = ("modules/**/*.yaml", "modules/**/*.md", "tutor/understand/*.yaml", "tutor/locales/vi/**/*.po")
# English the project writes (the English module, its sources, the English exemplars): a
# word common there ("go", "on", "me", "so", "hi") says nothing about a text being Vietnamese,
# though "gõ", "ơn", "mẹ", "sợ", "hì" fold to it.
ENGLISH = ("modules/understanding_anxiety.yaml", "modules/understanding_anxiety/**/*.md",
           "modules/safety/exemplars_en*.yaml", "tutor/locales/en/**/*.po")
ENGLISH_COMMON = 3  # times an English word is written there to count as common
MIN_WORDS = 2
# On the safety development sets, the share of such words is at most 0.05 in an English
# message and at least 0.38 in a Vietnamese one (folded).
VIETNAMESE_SHARE = 0.25
CANDIDATES = 8  # written forms tried for a plain syllable, the commonest first
_TOKEN = re.compile(r"[^\W\d_]+")
_PHRASE = re.compile(r"[^.!?;:,()\[\]\"\n]+")  # a run of words no punctuation breaks


def _units(text: str) -> Iterable[str]:
    """Lines of a corpus file that hold Vietnamese with diacritics (a line of English or of
    plain letters would teach that a syllable is written plain)."""
    for line in text.splitlines():
        if not line.isascii() and fold_accents(line) != line:
            yield line.casefold()


class Restorer:
    def __init__(self, texts: Iterable[str], english: Iterable[str] = ()) -> None:
        unigrams: Counter[str] = Counter()
        bigrams: Counter[tuple[str, str]] = Counter()
        for text in texts:
            for phrase in _PHRASE.findall(text):
                words = _TOKEN.findall(phrase)
                unigrams.update(words)
                bigrams.update(zip(["<s>"] + words, words))
        forms: dict[str, Counter[str]] = defaultdict(Counter)
        for word, n in unigrams.items():
            forms[fold_accents(word)][word] += n
        self._forms = {plain: [w for w, _ in c.most_common()] for plain, c in forms.items()}
        # Plain forms that are mostly written as they are (English words, "anh", "em"): they
        # do not make a text Vietnamese by themselves.
        english_counts = Counter(w for text in english for w in _TOKEN.findall(text.casefold()))
        self._vietnamese = {plain for plain, c in forms.items()
                            if c.get(plain, 0) < 0.5 * sum(c.values()) and english_counts[plain] < ENGLISH_COMMON}
        self._bigrams = bigrams
        self._after: Counter[str] = Counter()  # bigrams from each word
        self._kinds: Counter[str] = Counter()  # distinct words seen after it
        for (prev, _), n in bigrams.items():
            self._after[prev] += n
            self._kinds[prev] += 1
        self._total = sum(unigrams.values()) + len(unigrams)
        self._unigrams = unigrams

    def looks_vietnamese(self, text: str) -> bool:
        if not text.isascii():
            return False
        words = _TOKEN.findall(text.casefold())
        if len(words) < MIN_WORDS:
            return False
        return sum(1 for w in words if w in self._vietnamese) >= VIETNAMESE_SHARE * len(words)

    def _logp(self, prev: str, word: str) -> float:
        """log P(word | prev): the bigram interpolated with the unigram, Witten-Bell (the
        unigram weighs as much as the kinds of words seen after `prev`)."""
        kinds = self._kinds.get(prev, 0) or 1
        unigram = (self._unigrams.get(word, 0) + 1) / self._total
        return math.log((self._bigrams.get((prev, word), 0) + kinds * unigram) / (self._after.get(prev, 0) + kinds))

    def _best(self, words: list[str]) -> list[str]:
        """The likeliest written forms of a run of plain words (Viterbi over the bigram)."""
        paths: dict[str, tuple[float, list[str]]] = {"<s>": (0.0, [])}
        for word in words:
            nxt: dict[str, tuple[float, list[str]]] = {}
            for form in (self._forms.get(word) or [word])[:CANDIDATES]:
                score, path = max(((score + self._logp(prev, form), path) for prev, (score, path) in paths.items()),
                                  key=lambda item: item[0])
                nxt[form] = (score, path + [form])
            paths = nxt
        return max(paths.values(), key=lambda item: item[0])[1]

    def restore(self, text: str) -> str:
        """`text` with diacritics on its plain Vietnamese words; unchanged unless it looks
        like plain Vietnamese. Case, punctuation and spacing are kept."""
        if not self.looks_vietnamese(text):
            return text
        out, last = [], 0
        for sentence in _PHRASE.finditer(text):
            matches = list(_TOKEN.finditer(sentence.group()))
            if not matches:
                continue
            chosen = self._best([m.group().casefold() for m in matches])
            for m, form in zip(matches, chosen):
                a, b = sentence.start() + m.start(), sentence.start() + m.end()
                original = text[a:b]
                if len(form) == len(original):  # each letter's case as typed ("KHONG" -> "KHÔNG")
                    form = "".join(f.upper() if o.isupper() else f for f, o in zip(form, original))
                else:
                    form = original
                out.append(text[last:a])
                out.append(form)
                last = b
        out.append(text[last:])
        return "".join(out)


def _read(patterns: Iterable[str]) -> Iterable[str]:
    for pattern in patterns:
        for path in sorted(_ROOT.glob(pattern)):
            yield path.read_text(encoding="utf-8", errors="replace")


_restorer: Restorer | None = None
_lock = threading.Lock()


def restorer() -> Restorer:
    """The process's restorer, counted once from CORPUS (a fraction of a second)."""
    global _restorer
    if _restorer is None:
        with _lock:
            if _restorer is None:
                texts = [unit for text in _read(CORPUS) for unit in _units(text)]
                english = [line for text in _read(ENGLISH) for line in text.splitlines() if line.isascii()]
                _restorer = Restorer(texts, english)
    return _restorer


def restore(text: str) -> str:
    """`text` with its diacritics restored when it is plain Vietnamese, else as it is."""
    return restorer().restore(text)


# Letters only Vietnamese writes (with or without a tone on them), and English words common
# enough that two of them in a plain message make it English.
_VIETNAMESE_LETTERS = re.compile(r"[đăâêôơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ]", re.IGNORECASE)
_ENGLISH_WORDS = frozenset("""the a an is are was were do does did what why how when which who can could should
would will i my me you your it this that of to in on for with and or not if about before after""".split())


def written_in(text: str) -> str | None:
    """"vi" or "en" when the message is plainly written in it ("lo âu là gì", "lo au la gi vay";
    "what are the stages of sleep"), else None (too short, a name, mixed)."""
    if _VIETNAMESE_LETTERS.search(text) or restorer().looks_vietnamese(text):
        return "vi"
    words = re.findall(r"[a-z']+", text.casefold())
    if text.isascii() and len(words) >= 3 and sum(w in _ENGLISH_WORDS for w in words) >= 2:
        return "en"
    return None
