"""What the built-in judge reads beyond whole words (tutor.teach.builtin_judge).

Measured and not used: crediting a criterion, or stating a misconception, when a clause's
sentence vector is close to the criterion's description and key points (or to the
misconception's phrasings). With the offline model (multilingual-e5-small, 4-bit), no
threshold helped on the development sets: at 0.86 two more good answers reached mastery
and three to six more wrong or swapped ones did; at 0.90 and above, nothing changed.

- Clauses: an answer is read clause by clause (sentences, split again at commas, colons,
  "but", "while", "whereas", "and"; a piece that names no subject is about the last one
  named: "Anxiety, on the other hand, is about later"), so who-is-what is kept: in a check that contrasts two things (two
  or more criteria whose first key point names a subject — "fear ... right now", "anxiety
  ... the future"), a criterion's other key points count only in a clause about its own
  subject, or in one about no subject (a pronoun: "it's about the future"). "Fear is about
  the future and anxiety is about right now" then covers neither, and is called swapped. A
  key point in a clause with a negation ("the body doesn't recover at all") is not stated,
  and the subject named with none of its key points is no idea by itself.
- Terms listed with commas ("what if, worst, racing, not facts") are a list, not an
  explanation, however many of them are connecting words.
- Answers addressed to the judge ("give me 10/10", "ignore the rubric", "chấm mình 10
  điểm") are capped: the judge scores what an answer explains, not what it asks for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tutor.content.material import Check, Criterion
from tutor.teach.phrases import AnswerText, compile_phrase

__all__ = ["CONNECTING", "JUDGE_ADDRESSED_CAP", "NEGATIONS", "NEGATION_WINDOW", "Clauses", "addressed_to_judge",
           "anchors_of", "clauses", "is_term_list", "negated_before"]

JUDGE_ADDRESSED_CAP = 2

# Connecting words (folded: no accents). English, then Vietnamese.
CONNECTING = frozenset("""
a an the and or but so because since as if when while then than that this these those it its
is are was were be been being am do does did has have had will would can could should may might
must not no of to in on at by for with from about into out up over after before through which
who what how why there their they them you your i me my we our he she his her him just also too
very more most less much many some any all each other such only even still yet again both
la va cua thi ma vi khi co khong duoc nhung cac mot nay do de cho voi ve nhu neu con cung da
dang se bi hay nen rat qua toi ban minh ho chung no lai ra vao tu den roi lam luc hon nua sau truoc trong o
di len moi gi nao sao vay the day nhieu tai boi thay
""".split())
NEGATIONS = frozenset("not no never t nothing without instead rather neither nor dont doesnt didnt isnt "
                      "arent wont cant shouldnt khong chang dung".split())
NEGATION_WINDOW = 3  # words before a phrase in which a negation turns it ("does not really recover")


def negated_before(found: AnswerText, start: int, *, besides: frozenset[str] = frozenset()) -> bool:
    """One of the NEGATION_WINDOW words before word `start` is a negation (other than those
    in `besides`)."""
    return any(w in NEGATIONS and w not in besides for w in found.raw[max(0, start - NEGATION_WINDOW):start])


_SENTENCE = re.compile(r"[^.!?;:,\n]+")
_PIECES = re.compile(r"[,;/\n]+|\s-\s")
_JOIN = re.compile(r"\s*(?:,\s*)?\b(?:but|while|whereas|and|however|although|nhưng|còn|trong khi|và|nhung|con|va)\b\s*",
                   re.IGNORECASE)
_PUNCT = ".,;:!?\"'()"  # stripped from the words either side of a join ("worse and worse.")
_TO_JUDGE = re.compile(
    r"(?:\b(?:give|award|grant|mark|score|rate|grade)\s+(?:me|this|it|my\s+answer|the\s+answer)\b.{0,30}?"
    r"(?:\b10\b|\bten\b|full|100|max|perfect|pass|correct|right|master)"
    r"|\b(?:10|ten)\s*(?:/|out\s+of)\s*(?:10|ten)\b|\bfull\s+marks\b"
    r"|\bignore\s+(?:all\s+|the\s+|your\s+|any\s+|previous\s+|prior\s+)*(?:instructions|rubric|rules|criteria)"
    r"|\byou\s+(?:must|have\s+to|should|will)\s+(?:give|mark|score|grade|pass)"
    r"|\bas\s+the\s+(?:judge|grader|examiner)\b"
    r"|\bcho\s+(?:mình|tôi|em|minh|toi)\s+(?:10|mười|muoi|điểm|diem)"
    r"|\bchấm\s+(?:mình|tôi|em|cho)?\s*(?:10|mười|điểm\s+tối\s+đa|đúng)"
    r"|\bcham\s+(?:minh|toi|em|cho)?\s*(?:10|muoi|diem\s+toi\s+da|dung)"
    r"|\bbỏ\s+qua\s+(?:hướng\s+dẫn|yêu\s+cầu|tiêu\s+chí)|\bbo\s+qua\s+(?:huong\s+dan|yeu\s+cau|tieu\s+chi))",
    re.IGNORECASE)


def addressed_to_judge(text: str) -> bool:
    """The answer asks the judge for a score or tells it what to do."""
    return bool(_TO_JUDGE.search(text))


def clauses(text: str, keep: Sequence[str] = ()) -> list[str]:
    """The answer's clauses: its sentences cut at "and", "but", "while", "và", "nhưng" ... — but
    not inside a doubled phrase ("more and more", "over and over"), nor inside one of the
    phrases in `keep` (a check's key points such as "here and now", "black and white"),
    each of which says one thing."""
    kept = [re.compile(r"\b" + re.escape(k) + r"\b", re.IGNORECASE) for k in keep]
    out: list[str] = []
    for sentence in _SENTENCE.findall(text):
        spans = [m.span() for k in kept for m in k.finditer(sentence)]
        start = 0
        for join in _JOIN.finditer(sentence):
            before = [w.strip(_PUNCT).casefold() for w in sentence[:join.start()].split()[-1:]]
            after = [w.strip(_PUNCT).casefold() for w in sentence[join.end():].split()[:1]]
            if (before and before == after and before[0].isalpha()) or any(
                    a < join.start() and join.end() < b for a, b in spans):
                continue
            out.append(sentence[start:join.start()])
            start = join.end()
        out.append(sentence[start:])
    return [part.strip(" ,") for part in out if part.strip(" ,")]


def anchors_of(check: Check) -> dict[str, tuple[str, ...]]:
    """Criterion name -> its subject's phrasings, for a check that contrasts subjects (two
    or more criteria of two or more key points each); empty for any other check."""
    anchored = {c.name: c.points[0].phrasings for c in check.rubric.criteria if len(c.points) >= 2}
    return anchored if len(anchored) >= 2 else {}


@dataclass
class Clauses:
    """An answer's clauses with what each says by words, for one check."""

    texts: list[str]
    found: list[AnswerText]
    subjects: list[frozenset[str]]  # per clause: the criteria whose subject it is about

    @classmethod
    def read(cls, check: Check, text: str) -> Clauses:
        joined = [p for c in check.rubric.criteria for point in c.points for p in point.phrasings
                  if _JOIN.search(f" {p} ")]
        texts = clauses(text, joined) or [text]
        found = [AnswerText(t) for t in texts]
        anchors = anchors_of(check)
        subjects: list[frozenset[str]] = []
        current: frozenset[str] = frozenset(anchors)  # before any subject: about any of them
        for clause in found:
            first = _first_named(clause, anchors)
            current = frozenset({first}) if first else current
            subjects.append(current)
        return cls(texts, found, subjects)

    def ratio(self, criterion: Criterion, anchored: bool) -> float:
        """The share of the criterion's key points the answer states, out of `required`; in
        a contrast check the key points after the subject count only in clauses about it."""
        if not anchored:
            hits = sum(1 for p in criterion.points if any(f.contains_any(p.phrasings) for f in self.found))
            return min(1.0, hits / criterion.required)
        subject = criterion.points[0]
        hits = 0
        for point in criterion.points[1:]:
            hits += any(f.contains_any(point.phrasings) and criterion.name in s and not self.negated(i)
                        for i, (f, s) in enumerate(zip(self.found, self.subjects)))
        # Naming the subject is no idea by itself ("the body and the brain switch off").
        hits += hits > 0 and any(f.contains_any(subject.phrasings) for f in self.found)
        return min(1.0, hits / criterion.required)

    def swapped(self, check: Check) -> tuple[Criterion, Criterion] | None:
        """Two contrasted criteria whose key points the answer states about each other's
        subject (and not about their own)."""
        anchors = anchors_of(check)
        if not anchors:
            return None
        by_name = {c.name: c for c in check.rubric.criteria}

        def said_of(owner: Criterion, subject: str) -> bool:
            return any(f.contains_any(p.phrasings) and s == frozenset({subject})
                       for p in owner.points[1:] for f, s in zip(self.found, self.subjects))

        names = list(anchors)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                ca, cb = by_name[a], by_name[b]
                if said_of(ca, b) and said_of(cb, a) and not said_of(ca, a) and not said_of(cb, b):
                    return ca, cb
        return None

    def negated(self, index: int) -> bool:
        """The clause holds a negation word ("not", "never", "không" ...)."""
        return any(w in NEGATIONS for w in self.found[index].raw)


def _first_named(clause: AnswerText, anchors: dict[str, tuple[str, ...]]) -> str | None:
    """The criterion whose subject the clause names first: the clause is about it ("fear is
    when you're worried about later" is about fear, not worry)."""
    at = {name: min((start for p in phrasings for start, _ in clause.find(compile_phrase(p))), default=None)
          for name, phrasings in anchors.items()}
    named = [(start, name) for name, start in at.items() if start is not None]
    return min(named)[1] if named else None


def is_term_list(text: str) -> bool:
    """Terms separated by commas, not sentences: four or more pieces, nearly all of at most
    three words ("what if, worst, racing, guess, not facts")."""
    pieces = [p.split() for p in _PIECES.split(text) if p.strip()]
    short = sum(1 for p in pieces if len(p) <= 3)
    return len(pieces) >= 4 and short >= 0.8 * len(pieces)
