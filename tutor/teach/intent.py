"""What a learner's message is, for teaching: an answer to the open check, a question, a
request to skip, retry or move on, or something they shared.

The rule a tutor follows: free text right after a check question is the learner's answer,
unless it plainly is something else: a question (it has a question mark), a short request
to move on or skip ("Continue", "Next: ...", "Tell me more", "Skip this check"), or to try
again ("Try again"). Short means at most SHORT_WORDS words: "Yes, because it gets you
ready for what might go wrong" is an answer that happens to start with "yes".
"""

from __future__ import annotations

import re

from tutor.teach.retrieval import tokens
from tutor.text import words

__all__ = ["POINTING_OWN_WORDS", "POINTING_WORDS", "RETRY_REPLY", "SHORT_WORDS", "SKIP_REPLY", "SUMMARY_REPLY", "asks",
           "classify", "dont_know", "points_back", "question_form", "small_talk", "social"]

SHORT_WORDS = 8
SKIP_REPLY = "Skip this check"
RETRY_REPLY = "Try again"
SUMMARY_REPLY = "Show me a summary"

_SKIP_FIRST = frozenset("skip pass later".split())
_SKIP_PHRASES = ("not now", "maybe later", "move on", "no thanks", "bo qua")
_RETRY_PHRASES = ("try again", "another go", "another try", "one more try", "let me try", "retry", "again please",
                  "ask me again", "thu lai")
# "Where was I?" and "what will I learn?" (the recap answers both: what is covered, what the
# module holds, what comes next) and "go back" (the topic before the one the lesson is on), as
# short requests, question mark or not. Folded words.
_RECAP_PHRASES = ("where was i", "where were we", "where am i", "where are we up to", "where are we at",
                  "where did we stop", "where did i stop", "where did we leave off", "where did i leave off",
                  "what was i doing", "what will i learn", "what skills will i learn", "what am i going to learn",
                  "what does this course cover", "what does this module cover", "what topics are in",
                  "what is in this course", "what is in this module", "what s in this course", "what s in this module",
                  "whats in this course", "whats in this module",
                  "dang o dau", "hoc den dau", "hoc toi dau", "dang hoc den dau", "dung o dau", "den dau roi",
                  "se hoc duoc gi", "se hoc gi", "hoc phan nay day gi", "khoa hoc nay day gi",
                  "hoc phan nay co nhung", "khoa hoc nay co nhung", "hoc phan nay gom", "khoa hoc nay gom")
_BACK_PHRASES = ("go back", "previous topic", "topic before", "last topic again", "back to the last topic",
                 "bai truoc", "phan truoc", "chu de truoc", "quay lai bai", "quay lai phan", "quay lai chu de")
_MOVING_FIRST = frozenset("""continue next ok okay sure go ready done tell show explain review more teach
keep lets let carry proceed thanks thank tiep ke xem""".split())  # Vietnamese: tiếp, kể, xem (folded)


def classify(text: str | None, *, check_open: bool) -> str:
    """One of: social (a greeting, thanks or goodbye alone, or "I don't know" alone with no
    check open), stuck ("I don't know" alone, only when `check_open`), back (to the topic
    before), question, skip, retry, summary (also "where was I?", "what will I learn?"),
    navigate, answer (only when `check_open`), other."""
    raw = text or ""
    if social(raw):
        return "social"
    if dont_know(raw):  # to an open check: stuck; with none, the learner is unsure what next
        return "stuck" if check_open else "social"
    found = words(raw)
    phrase = " ".join(found)
    short = len(found) <= SHORT_WORDS
    if short and _says(phrase, _RECAP_PHRASES):
        return "summary"  # the recap says where they are, what the module holds and what comes next
    if short and _says(phrase, _BACK_PHRASES):
        return "back"
    if "?" in raw or "\uff1f" in raw:
        return "question"
    if short and (found[:1] and found[0] in _SKIP_FIRST or any(p in phrase for p in _SKIP_PHRASES)):
        return "skip"
    if short and _says(phrase, _RETRY_PHRASES):
        return "retry"
    if short and ("summary" in found or " tom tat " in f" {phrase} "):  # "tóm tắt"
        return "summary"
    if short and found[:1] and found[0] in _MOVING_FIRST:
        return "navigate"
    if not found:
        return "navigate"
    return "answer" if check_open else "other"


def _says(phrase: str, phrases: tuple[str, ...]) -> bool:
    """One of `phrases` is in `phrase` (folded words, one space apart) as whole words."""
    padded = f" {phrase} "
    return any(f" {p} " in padded for p in phrases)


# A greeting, thanks or goodbye, and nothing else: the tutor replies in kind and the lesson
# waits (tutor.llm.builtin_answers), instead of "this module doesn't cover that". Words
# folded (Vietnamese "cảm ơn" is "cam on"); a message with any other word ("hi, what is
# anxiety", "no thanks", "thanks, and what about sleep") is read as usual.
_SOCIAL = {
    "thanks": ("thank", "thanks", "thx", "ty", "cheers", "appreciate", "appreciated", "helpful", "useful",
               "cam on", "cam ta", "thank u"),
    "goodbye": ("bye", "goodbye", "byebye", "goodnight", "good night", "see you", "see ya", "cya",
                "tam biet", "hen gap lai", "chuc ngu ngon", "di ngu day"),
    "greeting": ("hi", "hello", "hey", "hiya", "heya", "howdy", "yo", "good morning", "good afternoon",
                 "good evening", "morning", "xin chao", "chao", "alo"),
    "laugh": ("haha", "hahaha", "hahahaha", "lol", "lmao", "hehe", "hihi", "kk", "hoho"),
}
_SOCIAL_FILLER = frozenset("""you u so much very a lot lots the there everyone all again for it that this was is
really super guys tutor teacher friend good great nice and now today tomorrow then oh ah well too
nha nhe ha ban nhieu nhiu lam minh em anh chi co thay moi nguoi oi vay ne""".split())
_SOCIAL_WORDS = frozenset(w for phrases in _SOCIAL.values() for p in phrases for w in p.split()) | _SOCIAL_FILLER
SOCIAL_WORDS = 8  # at most this many words


def small_talk(text: str | None) -> str | None:
    """What a message read as small talk is: social()'s kinds, or "unsure" for "I don't
    know" alone with no check open (the learner is not sure what to do next)."""
    return social(text) or ("unsure" if dont_know(text or "") else None)


def social(text: str | None) -> str | None:
    """"thanks", "goodbye", "greeting" or "laugh" when the message is only that (at most
    SOCIAL_WORDS words, each a social word or a filler such as "you", "so much", "everyone",
    and no question mark); else None. Thanks wins over goodbye over greeting ("thanks, bye!"
    is thanks)."""
    found = words(text or "")
    if not found or len(found) > SOCIAL_WORDS or "?" in (text or "") or any(w not in _SOCIAL_WORDS for w in found):
        return None  # "is that useful?" asks something
    phrase = " ".join(found)
    return next((kind for kind, phrases in _SOCIAL.items() if _says(phrase, phrases)), None)


# "I don't know" alone, said to an open check: the learner is stuck, not answering and not
# asking to skip; the tutor gives a hint and the check stays open, unjudged. Folded words; any
# other word ("idk maybe you start small") makes it an attempt, read as usual.
_DONT_KNOW = ("dont know", "don t know", "do not know", "didnt know", "didn t know", "idk", "dunno", "no idea",
              "not sure", "no clue", "cant remember", "can t remember", "dont remember", "don t remember",
              "forgot", "forget", "stuck", "clueless",
              "khong biet", "ko biet", "k biet", "hong biet", "hok biet", "chua biet", "khong ro", "ko ro",
              "chiu", "bo tay", "khong nho", "quen roi", "quen mat", "khong hieu")
_DONT_KNOW_FILLER = frozenset("""i im m really honestly tbh sorry um uh hmm erm the answer this that one question it
just totally completely actually to be and but what well oh ah again yet anything all at
minh em toi to tui thiet su that a ak nha nhe oi ca roi luon gi het cau nay hoi thi lam nua thoi""".split())
_DONT_KNOW_WORDS = frozenset(w for p in _DONT_KNOW for w in p.split()) | _DONT_KNOW_FILLER
DONT_KNOW_WORDS = 8  # at most this many words


def dont_know(text: str | None) -> bool:
    """The message only says the learner does not know ("I don't know", "no idea tbh",
    "không biết", "chịu"): at most DONT_KNOW_WORDS words, each one of those or a filler, and
    no question mark ("not sure?" asks something)."""
    found = words(text or "")
    if not found or len(found) > DONT_KNOW_WORDS or "?" in (text or ""):
        return False
    if any(w not in _DONT_KNOW_WORDS for w in found):
        return False
    phrase = " ".join(found)
    return _says(phrase, _DONT_KNOW)


# Words by which a short question points back to what the learner said before it, and says
# little else: at most one word of its own besides function words ("is that normal?", "how
# do I stop it?"); "what time is it in Tokyo?" has two, and is a question of its own.
_POINTING = frozenset("that it this those these them vay".split())
_POINTING_VI = ("đó", "đấy", "vậy", "thế", "này")
POINTING_WORDS = 10  # a follow-up question this short or shorter
POINTING_OWN_WORDS = 1
_ASKING_FIRST = frozenset("why how what when where which who is are do does did can could should would".split())


def points_back(text: str) -> bool:
    """A short question that points back to the learner's message before it (see above)."""
    found = words(text)
    if not 0 < len(found) <= POINTING_WORDS:
        return False
    lowered = f" {text.casefold()} "
    own = sum(1 for token in tokens(text) if "_" not in token)  # words of its own (pairs are "a_b")
    return own <= POINTING_OWN_WORDS and (
        any(w in _POINTING for w in found) or any(f" {w} " in lowered or f" {w}?" in lowered for w in _POINTING_VI))


def asks(text: str) -> bool:
    """A question mark, an English question word first, or a Vietnamese question word."""
    found, lowered = words(text), re.findall(r"\w+", text.casefold())
    return "?" in text or (bool(found) and found[0] in _ASKING_FIRST) or any(w in lowered for w in ("sao", "gì", "nào"))


# A question by its form, question mark or not: a question word first ("how come I shake"),
# an auxiliary and then who it asks about ("can kids do it too", "should i stop coffee"), a
# "be"/"does" and then the thing asked about ("isnt self compassion just being soft", "does
# coffee make it worse"), or a Vietnamese question frame ("có phải … không", "tại sao", "bao
# lâu", a closing "không"/"chưa" after "có"/"nên"/"được", or a closing "mấy", "gì", "nào",
# "sao" with no negation before it: "không ăn gì" is "ate nothing"). Chat drops its subjects, so an
# auxiliary first is not enough: "can't sleep again", "did the breathing today and it
# helped", "is so hard", "would love more examples" tell, not ask. Folded words.
_QUESTION_WORDS = frozenset("why how what when where which who whats hows whys".split())
_AUX_WHO = frozenset("can could should would will did do shall may might must".split())
_WHO = frozenset("""i you it we they he she there this that these those u someone anyone everyone everybody
anybody people kids children adults teens teenagers""".split())
_AUX_WHAT = frozenset("is are isnt arent was were does doesnt shouldnt".split())
_NOT_WHAT = frozenset("t not nt so too really just very still always never nothing been being gonna".split())
_VI_FRAMES = ("co phai", "tai sao", "vi sao", "lam sao", "the nao", "nhu the nao", "bao lau", "bao nhieu",
              "bao gio", "o dau", "la gi")
_VI_CLOSING = frozenset("khong ko k hong chua ha nhi chu".split())
_VI_ASKING_BEFORE = frozenset("co nen duoc phai the".split())
_VI_ASKING_LAST = frozenset("may gi nao sao".split())
_VI_NEGATORS = frozenset("khong ko chang cha chua".split())


# An English question asked indirectly: "I don't get why I feel sick before work", "wondering
# how long it takes" (folded words, so "don't" is "don t").
_INDIRECT = re.compile(r"\b(?:(?:don t|dont|do not|can t|cant|cannot|never) (?:get|understand|see|figure out|work out)"
                       r" (?:why|how|what)|(?:wonder|wondering|curious) (?:why|how|what|whether|if))\b")
_CLAUSE = re.compile(r"[,;:.!]+")  # "before i answer, does everyone get all three"


def _asks_first(clause: str) -> bool:
    found = words(clause)
    if not found:
        return False
    first, second = found[0], found[1] if len(found) > 1 else ""
    if first in _QUESTION_WORDS or (first in _AUX_WHO and second in _WHO):
        return True
    return first in _AUX_WHAT and bool(second) and second not in _NOT_WHAT and not second.endswith(("ing", "ed"))


def question_form(text: str) -> bool:
    """The message is worded as a question (see above), whatever it ends with."""
    found = words(text)
    if not found:
        return False
    if "?" in text or any(_asks_first(clause) for clause in _CLAUSE.split(text)):
        return True
    phrase = " ".join(found)
    if _INDIRECT.search(phrase):
        return True
    if _says(phrase, _VI_FRAMES):
        return True
    if len(found) > 1 and found[-1] in _VI_ASKING_LAST and not any(w in _VI_NEGATORS for w in found[:-1]):
        return True
    return found[-1] in _VI_CLOSING and any(w in _VI_ASKING_BEFORE for w in found[:-1])
