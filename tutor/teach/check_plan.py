"""Which check of understanding the tutor asks this turn (`plan_check`, called by
tutor.teach.teaching.prepare): the same one again after an answer below its threshold (or a
question asked while it was open); else the check of the most recently taught topic not
asked yet; once every topic is taught, the unmastered check asked longest ago. Never one
straight after another was answered well: new material comes first, or in the closing
review a pause until the learner goes on. None while the learner skips, follows a form's
`next_topic`, or asks for a topic by name, and while they ask questions or share their own
experience, unless a taught topic's check has waited SPACING turns with no check asked: then
it comes below the answer, so checks stay spread out instead of piling up into the closing
review."""

from __future__ import annotations

from collections.abc import Iterable

from tutor import progress as progress_mod
from tutor.content.material import Check
from tutor.content.modules import Module
from tutor.llm.base import ANSWERED_BESIDE_CHECK, CheckData
from tutor.progress import ProgressState
from tutor.teach.mastery import CheckHistory

SPACING = 2  # turns of questions after which a waiting check comes below the answer
# Messages that talk with the tutor about the material: answered (or heard) first, the
# waiting check only after SPACING such turns, so a learner telling how they feel is not
# met with a test.
_CONVERSING = ("question", "share")
# Messages after which the open check stays open (asked again below the reply), and those
# the tutor answers without moving the lesson on (the rest of what is answered beside a check).
_KEEPS_CHECK = ("retry", *ANSWERED_BESIDE_CHECK)
_ANSWERED = tuple(i for i in ANSWERED_BESIDE_CHECK if i not in _CONVERSING)


def plan_check(
    module: Module, state: ProgressState, history: CheckHistory, intent: str, answered: Check | None,
    goto: str | None, detected: Iterable[str], now: int | None = None,
) -> CheckData | None:
    """The check to ask this turn, if any (see the module docstring). `now`: the learner's
    message's place in the conversation (seq), for the spacing of checks among questions."""
    def still_open(check: Check) -> bool:
        return history.best(check.id) < check.threshold

    last = module.find_check(history.last_asked) if history.last_asked else None
    if answered is not None:
        if still_open(answered):
            return _ask(module, answered, again=True)
        return None  # answered: new material comes next (or, in the review, a pause), never a second check at once
    elif intent in _KEEPS_CHECK and last is not None and still_open(last[1]):
        return _ask(module, last[1], again=True)  # a question does not close the check
    if intent == "exercise":
        return _practice(module, state, history)
    if intent in _CONVERSING and not _due(history, now):
        return None
    if intent in ("summary", *_ANSWERED) or goto or (intent == "navigate" and set(detected)):
        return None
    if intent == "skip" and progress_mod.next_topic(module, state) is not None:
        return None  # skipping moves the lesson on; the check comes back at the end
    for topic_id in reversed(state.covered):
        topic = module.topic(topic_id)
        for check in topic.checks if topic else ():
            if still_open(check) and check.id not in history.asked:
                return _ask(module, check)
    if intent in _CONVERSING:
        return None  # a question is answered, a share heard; the review waits for the learner to go on
    if progress_mod.next_topic(module, state) is None and not progress_mod.is_complete(module, state):
        waiting = [c for t in module.topics for c in t.checks if still_open(c)]
        skipped = last[1].id if last is not None and answered is None else None
        pool = [c for c in waiting if c.id != skipped] or waiting
        if pool:
            check = min(pool, key=lambda c: history.asked.get(c.id, -1))  # never asked first, then oldest
            return _ask(module, check, again=check.id in history.asked, review=True)
    return None


def _due(history: CheckHistory, now: int | None) -> bool:
    """Whether SPACING turns (a learner message and a reply each) have passed since the
    tutor last asked a check, or since the conversation began."""
    if now is None:
        return False
    last = max(history.asked.values(), default=0)
    return now - last >= 2 * SPACING


def _practice(module: Module, state: ProgressState, history: CheckHistory) -> CheckData | None:
    """"Give me an exercise": the check of the topic taught last that is not mastered yet,
    else of any topic taught; None when every one of them is (the lesson goes on)."""
    for topic_id in reversed(state.covered):
        topic = module.topic(topic_id)
        for check in topic.checks if topic else ():
            if history.best(check.id) < check.threshold:
                return _ask(module, check, again=check.id in history.asked)
    return None


def _ask(module: Module, check: Check, *, again: bool = False, review: bool = False) -> CheckData:
    found = module.find_check(check.id)
    assert found is not None
    topic = found[0]
    return CheckData(check.id, topic.id, topic.title, check.question, again=again, review=review)
