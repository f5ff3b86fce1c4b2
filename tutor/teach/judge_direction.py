"""Ideas stated the wrong way round: a relation the check's own model answer states one way
and the learner's answer states the other ("daily stresses pour water in" / "each stress
takes water out"; "the fear grows" / "so the fear shrinks"; "the brain stores the day's
learning" / "sleep erases what you learnt").

No author writes these: the model answer (the check's example answer) and its criteria's
descriptions are the reference. Each of the answer's clauses (tutor.teach.judge_meaning) is
paired with the reference clause that shares most of its content words (the things it is
about: stress, bucket, fear, brain); when both say something about a direction listed
in OPPOSITES — up or down, faster or slower, filling or emptying, danger or safety,
keeping or erasing, mending or wearing out, over- or underestimating, the worst or the best,
most or least useful — and they disagree, the answer has reversed an idea. A negation just
before a direction word turns it ("the body does not recover" is the opposite of "the body
recovers"), and a clause naming both directions, or tied between reference clauses that
disagree, says nothing sure. A clause too short to share two content words with any
reference clause ("the heart slows down") is paired with those about the same thing (the
same first content word: "The heart beats faster"), unless either tells of a moment
("again", "once it passes", "at first"): two phases of one story are not one relation
turned. A clause that shares at least half of its nearest reference clauses' content words
has also reversed the idea when it denies what they state or states what they deny ("genes
don't play any part" / "genes do play a part"). English and Vietnamese: direction words are
matched with accents folded, Vietnamese content words keep theirs.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from tutor.content.material import Check
from tutor.teach.judge_meaning import CONNECTING, NEGATIONS, Clauses, clauses, negated_before
from tutor.teach.phrases import AnswerText, compile_phrase

__all__ = ["OPPOSITES", "Reversal", "reversed_idea"]

# Each line: (one direction, its opposite), as phrases (a trailing '*' accepts any ending).
# Kept to words that name a direction wherever they are used: not "more"/"less", "better"/
# "worse", "now"/"later", which carry other meanings in everyday answers.
OPPOSITES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("faster", "speed* up", "sped up", "quicker", "quicken*", "racing", "rapid*", "nhanh", "dồn dập"),
     ("slower", "slow* down", "slow* right down", "chậm lại", "chậm dần", "chậm hơn")),
    (("increas*", "rise", "rises", "rising", "rose", "go* up", "went up", "higher", "grow*", "grew", "bigger",
      "larger", "stronger", "build* up", "built up", "pile* up", "tăng", "tăng lên", "lớn dần", "lớn hơn",
      "mạnh hơn", "nặng hơn"),
     ("decreas*", "drop*", "go* down", "went down", "lower", "shrink*", "shrank", "smaller", "weaker", "fade*",
      "disappear*", "giảm", "giảm dần", "giảm đi", "nhỏ dần", "yếu đi", "dịu xuống", "lắng xuống")),
    (("fill*", "full", "pour*", "add* to", "top* up", "đổ vào", "đổ thêm", "tích tụ", "chồng chất"),
     ("drain*", "empt*", "take* out", "took out", "taking out", "let* out", "remov*")),
    (("danger*", "threat*", "unsafe", "nguy hiểm", "đe dọa", "đe doạ"),
     ("safe", "harmless", "an toàn", "vô hại")),
    (("remember*", "store", "stores", "stored", "storing", "consolidat*", "file* away", "lưu lại", "ghi nhớ",
      "củng cố"),
     ("forget*", "forgot*", "eras*", "delet*", "wipe*", "wiping", "clear* out", "xoá", "xóa")),
    (("recover*", "repair*", "restor*", "heal", "heals", "healing", "healed", "rebuild*", "hồi phục", "phục hồi",
      "tái tạo", "sửa chữa"),
     ("wear* out", "worn out", "wore out", "damag*", "break* down", "hao mòn", "kiệt sức")),
    (("overestimat*", "đánh giá quá cao", "phóng đại"), ("underestimat*", "đánh giá quá thấp", "xem nhẹ")),
    (("the worst", "worst case", "tệ nhất", "xấu nhất"), ("the best", "best case", "tốt nhất")),
    (("most useful", "most helpful", "works best", "hữu ích nhất", "hiệu quả nhất"),
     ("least useful", "least helpful", "works worst", "ít hữu ích nhất", "kém hiệu quả nhất")),
)
# Left out although they name directions: words that fold (accents dropped) into common
# other words — "vơi"/"với", "cạn"/"can", "xả"/"xa", "cất"/"cắt", "quên"/"quen", "vá lại"/
# "và lại", "nhỏ lại"/"nhớ lại" — and "fall", which is mostly "fall asleep".
_SYLLABLE = re.compile(r"\w+")
# A clause is paired only on two shared content words or more: on one ("the fear"), "the fear
# drops when you stay" was paired with "the fear grows" (after escaping) and called reversed.
_SHARED_AT_LEAST = 2
# Negation words that deny no statement: "see that nothing bad happens" states what happens.
_NOT_DENIALS = frozenset({"nothing"})
# A clause under a condition states another relation than the unconditional one it shares
# words with ("the fear shrinks only if you stay" beside "the fear grows").
_CONDITION = re.compile(r"\b(?:if|unless|only when|as long as|provided|nếu|trừ khi|miễn là|neu|tru khi|mien la)\b",
                        re.IGNORECASE)


# Words that place a clause at another moment than the relation it may seem to reverse.
_LATER = re.compile(r"\b(?:when|whenever|once|after|afterwards|again|until|later|eventually|then|over time"
                    r"|at first|at the start|to begin with|khi|sau khi|sau đó|dần dần|lúc đầu|ban đầu)\b",
                    re.IGNORECASE)


@dataclass(frozen=True)
class Reversal:
    answer_clause: str
    reference_clause: str
    index: int  # of the answer's clause (Clauses.texts)


@dataclass(frozen=True)
class _Read:
    text: str
    content: frozenset[str]  # the words it is about
    directions: dict[int, bool]  # group -> which way (False: the first of the pair)
    negated: frozenset[str]  # content words with a negation just before them ("don't bring relief")
    head: str = ""  # its first content word: what a short clause is about ("the heart" slows down)


def _read(text: str, found: AnswerText | None = None) -> _Read:
    found = found if found is not None else AnswerText(text)
    direction_words: set[int] = set()
    directions: dict[int, bool] = {}
    ambiguous: set[int] = set()
    for group, pair in enumerate(OPPOSITES):
        for way, phrases in enumerate(pair):
            for phrase in phrases:
                for start, end in found.find(compile_phrase(phrase)):
                    direction_words.update(range(start, end))
                    said = bool(way) != negated_before(found, start)
                    if directions.get(group, said) != said:
                        ambiguous.add(group)
                    directions[group] = said
    for group in ambiguous:
        del directions[group]
    content = _content(text, found, direction_words)
    negated = frozenset(w for i, w in enumerate(found.words)
                        if w in content and negated_before(found, i, besides=_NOT_DENIALS))
    head = next((w for w in found.words if w in content), "")
    return _Read(text, content, directions, negated, head)


def _content(text: str, found: AnswerText, skip: set[int]) -> frozenset[str]:
    """What a clause is about: its words other than connecting words, negations and
    direction words; in Vietnamese, pairs of syllables with their accents ("cơ thể", the
    body, is not "có thể", can, though both fold to "co the")."""
    plain = frozenset(w for i, w in enumerate(found.words)
                      if i not in skip and w not in CONNECTING and w not in NEGATIONS and len(w) > 2)
    if text.isascii():
        return plain
    syllables = _SYLLABLE.findall(unicodedata.normalize("NFC", text).casefold())
    pairs = {f"{a} {b}" for a, b in zip(syllables, syllables[1:]) if not (a + b).isascii()}
    return plain | frozenset(pairs)


def _reference(check: Check) -> tuple[_Read, ...]:
    return _reference_of(check.example_answer, tuple(c.description for c in check.rubric.criteria))


@lru_cache(maxsize=512)
def _reference_of(example_answer: str, descriptions: tuple[str, ...]) -> tuple[_Read, ...]:
    """The model answer's clauses and the criteria's descriptions."""
    texts = clauses(example_answer) + list(descriptions)
    return tuple(r for r in (_read(t) for t in texts) if r.content)


def reversed_idea(check: Check, parts: Clauses) -> Reversal | None:
    """The first of the answer's clauses (`parts`, as the judge read them) that states one of
    the reference's relations the other way round, or None."""
    reference = _reference(check)
    if not reference:
        return None
    directed = [r for r in reference if r.directions]
    for index, (clause, found) in enumerate(zip(parts.texts, parts.found)):
        said = _read(clause, found)
        if not said.content or _CONDITION.search(clause):
            continue
        turned = _turned_way(said, directed) or _denied_instead(said, reference)
        if turned is not None:
            return Reversal(clause, turned.text, index)
    return None


def _turned_way(said: _Read, reference: Sequence[_Read]) -> _Read | None:
    """A direction the nearest reference clauses state the other way (each direction is its
    own relation: turned when every nearest clause that states it states it the other way)."""
    if not said.directions:
        return None
    _, nearest = _nearest(said, reference)
    if not nearest and said.head and not _LATER.search(said.text):
        # A short clause ("the heart slows down"): the reference clauses about the same thing,
        # unless either tells of a moment ("the anxiety drops" beside "anxiety rises at
        # first"; "the heart slows down again"): two phases of one story, not one relation turned.
        nearest = [r for r in reference if r.head == said.head and not _LATER.search(r.text)]
    for group, way in said.directions.items():
        stating = [r for r in nearest if group in r.directions]
        if stating and all(r.directions[group] != way for r in stating):
            return stating[0]
    return None


def _denied_instead(said: _Read, reference: Sequence[_Read]) -> _Read | None:
    """The same statement with the negation the other way: the clause shares at least half
    the content words of its nearest reference clauses (two or more), and denies what they
    all state, or states what they all deny ("genes don't play any part" / "genes do play a
    part"; "you should take them as facts" / "they are not facts")."""
    best, nearest = _nearest(said, reference)
    nearest = [r for r in nearest if 2 * best >= len(r.content)]
    if nearest and all(bool(said.negated & r.content) != bool(r.negated & said.content) for r in nearest):
        return nearest[0]
    return None


def _nearest(said: _Read, reference: Sequence[_Read]) -> tuple[int, list[_Read]]:
    """The reference clauses sharing the most content words with `said`, and how many; none
    when that is fewer than _SHARED_AT_LEAST."""
    best = max((len(said.content & r.content) for r in reference), default=0)
    if best < _SHARED_AT_LEAST:
        return best, []
    return best, [r for r in reference if len(said.content & r.content) == best]
