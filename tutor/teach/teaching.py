"""Teaching in a turn: checks asked and judged, passages found, quotes verified, and the
learner's progress (seen and mastered) decided on the server. The engine calls `prepare`
before the tutor is asked and `finish` after, and stays a thin sequence of steps.

Before the tutor speaks (`prepare`):

1. what the learner's input is (tutor.teach.intent): an answer to the check the tutor asked
   last (its form, or free text right after it), a question, a request to skip, retry or
   move on, a module form, or something they shared;
2. an answer is judged at once: with no model by the built-in rubric judge, with a model by
   the JUDGE contract (tutor.teach.judge_call); a judge that fails leaves the answer unscored
   (flags judge_failed, needs_review), never with an invented score;
3. a question or a remark finds the module's best passages (tutor.teach.retrieve);
4. which check to ask now (tutor.teach.check_plan): the same one again after an answer below its
   threshold (or a question asked while it was open); else the check of the most recently
   seen topic not asked yet; once every topic is seen, the unmastered check asked longest
   ago. None while the learner asks questions, skips, follows a form's `next_topic`, or
   asks for a topic by name.

After (`finish`): citations are verified (unverifiable ones dropped, flag unverified_quote)
and shown with their source and section; the topics the reply showed are seen
(tutor.progress.shown_topics); the score and feedback are put first in the reply and the
check's form last, both the server's; `meta.progress` is the server's.

What the database says about checks and mastery is tutor.teach.mastery (re-exported here).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tutor import progress as progress_mod
from tutor.content.material import Check
from tutor.content.modules import Module, Topic
from tutor.contract import Citation, Form, NextStep, ParsedReply, TextBlock, TutorResponse
from tutor.i18n import translator
from tutor.llm.base import JudgedData, PassageData, Provider, TeachingContext
from tutor.llm.config import LLMSettings
from tutor.llm.policy import AttemptRecord
from tutor.progress import ProgressState, ProgressUpdate
from tutor.render.views import ProgressView
from tutor.storage.store import Store
from tutor.teach import judge_builtin, module_sources, retrieve, verify_quote
from tutor.teach.builtin_judge import next_step, topic_material
from tutor.teach.check_plan import plan_check
from tutor.teach.feedback import (
    ANSWER_FIELD,
    CHECK_FORM_PREFIX,
    check_form,
    check_id_of,
    failed_block,
    feedback_block,
)
from tutor.teach.intent import SKIP_REPLY, asks, classify, points_back, small_talk
from tutor.teach.judge_call import judge_with_model
from tutor.teach.mastery import (
    CheckHistory,
    check_history,
    learner_state,
    mastered_from,
    read_history,
    read_scores,
    with_mastery,
    with_scores,
)
from tutor.teach.meaning import more_about, quoted_topic, said_words, shown_in
from tutor.teach.understanding import understand_async
from tutor.topic_mentions import form_covers
from tutor.understand import EmbedderUnavailable
from tutor.understand.accents import written_in

__all__ = [
    "CheckHistory", "Finished", "TurnPlan", "finish", "learner_state", "prepare",
    "progress_view", "with_mastery", "with_scores", "with_server_meta",
    # tutor.teach.mastery's, re-exported: the engine, tutor.turns.turn_store and the console read them here
    "check_history", "mastered_from", "read_history", "read_scores",
]

if TYPE_CHECKING:  # pragma: no cover
    from tutor.turns.conversations import PendingTurn  # the turn layer calls this one

log = logging.getLogger(__name__)

PASSAGES = 3  # passages that travel with a turn
# The reader's intents as the lesson's flow names them (tutor.llm.base.TeachingContext).
_FLOW = {"next": "navigate"}
SHARE_FITS = 0.86  # a personal share gets a passage only when one is this close in meaning


# --- before the tutor speaks ----------------------------------------------------------------


@dataclass
class TurnPlan:
    context: TeachingContext
    state: ProgressState  # before the turn, mastery included
    interim: ProgressState  # after the learner's evidence: what the tutor is told
    seen: frozenset[str] = frozenset()  # evidence before the reply: form covers, the answered check's topic
    mastered: tuple[str, ...] = ()  # after this turn's judgement
    detected: frozenset[str] = frozenset()
    attempts: list[AttemptRecord] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # CheckAttempt fields
    feedback: TextBlock | None = None
    ask_form: Form | None = None
    typed_answer: tuple[str, int | None] | None = None  # a check answered in the message box: (form id, score)


async def prepare(
    store: Store, provider: Provider, settings: LLMSettings, module: Module, conversation_id: int,
    pending: PendingTurn | None, progress: ProgressState, detected: frozenset[str],
    history: CheckHistory | None = None, recent: Sequence[str] = (), earlier: str = "",
) -> TurnPlan:
    """`history`: the conversation's checks if the caller has read them (read_history);
    `recent`: what the tutor said in the last few turns (a passage shown there is not shown
    again as "more"); `earlier`: the learner's message before this one."""
    if history is None:
        history = await store.run(read_history, store, conversation_id, pending.learner.seq if pending else None)
    state = replace(progress, mastered=mastered_from(module, history.scored))
    if pending is None:
        return TurnPlan(TeachingContext(intent="opening"), state, state, mastered=state.mastered)
    learner = pending.learner_input
    plan = TurnPlan(TeachingContext(), state, state, detected=detected)
    answered: tuple[Topic, Check] | None = None
    found: list[Any] | None = None  # passages found by meaning (None: not read by meaning)
    answer = ""
    seen: set[str] = set()
    goto = None
    kind = ""  # what a share or a social message is (TeachingContext.kind)
    if learner.is_form:
        check_id = check_id_of(learner.form_id)
        answered = module.find_check(check_id) if check_id else None
        intent = "answer" if answered else "form"
        answer = str((learner.answers or {}).get(ANSWER_FIELD) or "")
        seen |= form_covers(module, learner.form_id, learner.answers)
        goto = _form_next_topic(module, learner.form_id, learner.answers or {})
    else:
        open_check = module.find_check(history.last_asked) if history.last_asked else None
        read = await _understand(module, learner.text or "", open_check, earlier)
        intent, found, kind = read if read is not None else (
            classify(learner.text, check_open=open_check is not None), None, "")
        if intent == "answer":
            answered, answer = open_check, learner.text or ""
        elif intent == "back":
            goto = progress_mod.previous_topic(module, state)
    judged = None
    if answered is not None:
        topic, check = answered
        judged = await _judge(plan, provider, settings, module, pending, topic, check, answer)
        if not learner.is_form:
            plan.typed_answer = (CHECK_FORM_PREFIX + check.id, judged.score)
        history = history.with_score(check.id, judged.score)
        seen.add(topic.id)  # answering a check is engaging with its topic
    mastered = mastered_from(module, history.scored)
    interim = progress_mod.apply_evidence(module, state, seen, mastered)
    passages: tuple[PassageData, ...] = ()
    if learner.is_form:
        pass
    elif intent == "more":
        # More about the topic the learner names ("tell me more about box breathing": of those
        # named, the likeliest by meaning), else about what the tutor just quoted (an answer to a
        # question), else the topic the conversation is on; a topic only glimpsed so far gives
        # its own lesson first.
        named = [p.topic_id for p in found or () if p.topic_id in detected] or [
            t.id for t in module.topics if t.id in detected]
        current = (named[0] if named else None) or (quoted_topic(module, recent[-1]) if recent else None) or \
            _current_topic(module, state, history)
        passages = tuple(_passage(p) for p in more_about(module, current, shown=recent,
                                                         own=current not in state.covered)) if current else ()
    elif found is not None:
        said = said_words(recent)
        passages = tuple(_passage(p, shown_in(p.text, said)) for p in found)
    elif intent in ("question", "other") and learner.text:
        said = said_words(recent)
        passages = tuple(_passage(p, shown_in(p.text, said))
                         for p in retrieve(module, learner.text, k=PASSAGES, on_topic_only=True))
    ask = plan_check(module, interim, history, intent, answered[1] if answered else None, goto, detected,
                     now=pending.learner.seq)
    if ask is not None:
        found = module.find_check(ask.check_id)
        assert found is not None
        # "Try again" only once the learner has answered it (asked again after a question is not a retry).
        tried = any(check_id == ask.check_id for check_id, _ in history.scored)
        plan.ask_form = check_form(found[1], found[0].title, again=tried, language=module.language)
    if intent == "social":
        kind = small_talk(learner.text) or ""
    hint = ""
    if intent == "stuck" and ask is not None:  # "I don't know": a way in; the check is asked again below
        hint = next_step(module.find_check(ask.check_id)[1], translator(module.language))
    language = written_in(learner.text) if learner.text and passages else None
    if language == module.language.split("-")[0]:
        language = None
    plan.context = TeachingContext(intent=intent, passages=passages, judged=judged, ask=ask, goto_topic=goto,
                                   kind=kind if intent in ("social", "share", "question") else "", hint=hint,
                                   written_in=language or "")
    plan.interim, plan.seen, plan.mastered = interim, frozenset(seen), mastered
    return plan


def _current_topic(module: Module, state: ProgressState, history: CheckHistory) -> str | None:
    """The topic the conversation is on: the open check's, else the one taught last."""
    found = module.find_check(history.last_asked) if history.last_asked else None
    if found is not None and found[0].id in state.covered[-1:]:
        return found[0].id
    return state.covered[-1] if state.covered else (found[0].id if found else None)


async def _understand(module: Module, text: str, open_check: tuple[Topic, Check] | None, earlier: str = ""
                      ) -> tuple[str, list[Any], str] | None:
    """What the message is doing, the passages that answer it and, for a share, what it is
    about (tutor.teach.shares), read by meaning (tutor.teach.understanding); None when the
    semantic layer is not installed (the rules and BM25 decide, as before). Passages come
    only with intents that use them: a question, "tell me more" (which of the topics it
    names it is about), a share close to one, and a learner seeking help, which the
    module's part on getting support speaks to.
    `earlier`: the learner's message before this one. A short question that points back to
    it and says little of its own ("why do I do that?") is read with it; alone, it reads as
    off topic or as about whatever "that" most often is in the module."""
    check = open_check[1] if open_check else None
    try:
        read = await understand_async(module, text, check, k=PASSAGES)
        if read.intent in ("off_topic", "question", "share") and earlier and points_back(text):
            both = await understand_async(module, f"{earlier[:1000]}\n{text}", check, k=PASSAGES)
            if not both.found.off_topic and both.intent in ("question", "share"):
                read = replace(both, reading=replace(both.reading, intent="question" if asks(text) else both.intent))
    except EmbedderUnavailable as exc:
        log.warning("reading the learner's message by words only: %s", exc)
        return None
    intent, kind = _FLOW.get(read.intent, read.intent), read.reading.kind
    uses = intent in ("question", "more") or (
        intent == "share" and (read.found.relevance >= SHARE_FITS or kind == "help"))
    return intent, list(read.found.passages) if uses else [], kind


async def _judge(
    plan: TurnPlan, provider: Provider, settings: LLMSettings, module: Module, pending: PendingTurn,
    topic: Topic, check: Check, answer: str,
) -> JudgedData:
    """Judge one answer; the score, the stored row and the feedback block go into `plan`."""
    if provider.name == "builtin":
        result, source = judge_builtin(check, answer, material=topic_material(module, topic.id),
                                       language=module.language), "builtin"
    else:
        call = await judge_with_model(provider, settings, module, check, answer, topic_material(module, topic.id))
        result, source = call.result, "model"
        plan.attempts += call.attempts
        plan.flags += call.flags  # what the server changed of the model's judgement (tutor.teach.judge_verdict)
        if result is None:
            log.warning("conversation %s: judge failed for check %s: %s", pending.conversation_id, check.id,
                        call.problem)
            plan.flags += ["judge_failed", "needs_review"]
    plan.rows.append({
        "conversation_id": pending.conversation_id, "message_id": pending.learner.id, "module_id": module.id,
        "topic_id": topic.id, "check_id": check.id, "score": result.score if result else None,
        "criteria_json": json.dumps(result.criteria_scores if result else {}),
        "feedback": result.feedback if result else "", "source": source,
    })
    if result is None:
        plan.feedback = failed_block(module.language)
        return JudgedData(check.id, topic.id, topic.title, check.question, None, check.threshold, False)
    plan.feedback = feedback_block(topic.title, result.score, check.threshold, result.feedback, module.language)
    return JudgedData(check.id, topic.id, topic.title, check.question, result.score, check.threshold,
                      result.score >= check.threshold, result.feedback)


def _form_next_topic(module: Module, form_id: str | None, answers: dict[str, Any]) -> str | None:
    """The topic a module form's chosen option leads to (`next_topic`), if any."""
    entry = module.find_form(form_id) if form_id else None
    for form_field in entry.fields if entry else ():
        chosen = answers.get(form_field.id)
        values = chosen if isinstance(chosen, list) else [chosen]
        for option in form_field.options or ():
            if option.value in values and getattr(option, "next_topic", None):
                return option.next_topic
    return None


def _passage(p: Any, shown: bool = False) -> PassageData:
    return PassageData(p.source_id, p.source_title, p.section_id, p.section_title, p.topic_id, p.text, p.score,
                       shown)


# --- after the tutor spoke ------------------------------------------------------------------


@dataclass
class Finished:
    shown: TutorResponse | None
    update: ProgressUpdate
    flags: list[str]


def finish(module: Module, plan: TurnPlan, parsed: ParsedReply) -> Finished:
    response = parsed.response
    flags: list[str] = []
    claimed: list[str] = []
    text = ""
    shown = None
    if response is not None:
        # A copy whose content may be changed: every change below assigns new lists, so
        # a shallow copy of the content is enough (a deep copy cost ~1 ms a turn).
        shown = response.model_copy(update={"content": response.content.model_copy()})
        if shown.content.citations:
            kept, dropped = verify_citations(module, shown.content.citations)
            if dropped:
                log.info("dropped %d unverifiable quote(s)", dropped)
                flags.append("unverified_quote")
            shown.content.citations = kept or None
        text = "\n".join([*(b.content for b in response.content.text_blocks),
                          *(c.quote for c in shown.content.citations or ())])
        claimed = list(response.meta.progress.covered_topics or []) if response.meta.progress else []
        _add_check(shown, plan, module.language)
    reply = progress_mod.shown_topics(module, plan.interim, claimed, text, preferred=plan.detected)
    update = progress_mod.reconcile(module, plan.state, set(plan.seen) | set(reply.topics), plan.mastered)
    update = replace(update, ignored_claims=reply.ignored, at=reply.topics[-1] if reply.topics else None)
    return Finished(with_server_meta(shown, module, update), update, flags)


def _add_check(shown: TutorResponse, plan: TurnPlan, language: str | None = None) -> None:
    """The server's parts of a reply: feedback first, the check's form last, and "Skip this
    check" among the quick replies (the check's one way past, whoever wrote the reply).
    Check forms a model wrote itself are dropped: asking and judging checks is the server's."""
    forms = shown.content.forms
    if forms and any(check_id_of(f.id) for f in forms):
        forms = [f for f in forms if check_id_of(f.id) is None]
        shown.content.forms = forms or None
    if plan.ask_form is not None:
        shown.content.forms = [*(forms or []), plan.ask_form]
        skip = translator(language)(SKIP_REPLY)
        step = shown.content.next_step or NextStep()
        if skip not in (step.suggestions or ()):
            shown.content.next_step = step.model_copy(update={"suggestions": [skip, *(step.suggestions or ())]})
    if plan.feedback is not None:
        shown.content.text_blocks = [plan.feedback, *shown.content.text_blocks]


def verify_citations(module: Module, citations: Iterable[Citation]) -> tuple[list[Citation], int]:
    """(verified citations as the learner sees them: the author's exact words, location
    "Source title › Section title"; how many were dropped)."""
    sources = module_sources(module)
    kept: list[Citation] = []
    dropped = 0
    for citation in citations:
        verified = verify_quote(sources, citation)
        if verified is None:
            dropped += 1
            continue
        shown = Citation(source_id=verified.source_id, quote=verified.quote,
                         location=f"{verified.source_title} › {verified.section_title}")
        if shown not in kept:
            kept.append(shown)
    return kept, dropped


def with_server_meta(response: TutorResponse | None, module: Module, update: ProgressUpdate) -> TutorResponse | None:
    """The learner sees the server's progress; the model's claim stays in the raw text."""
    if response is None:
        return None
    shown = response.model_copy(update={"meta": response.meta.model_copy()})  # only meta changes
    shown.meta.progress = progress_mod.server_progress(module, update)
    shown.meta.module_state = progress_mod.module_state(module, update.state, update.at)
    return shown


def lesson_at(module: Module, latest_reply: Mapping[str, Any] | None) -> str | None:
    """Where the latest reply left the lesson, read back from what it showed (its server
    meta names the section): a topic of that section, for progress_view's `at`."""
    where = ((latest_reply or {}).get("meta") or {}).get("module_state") or {}
    title = where.get("current_section")
    section = next((s for s in module.sections if s.title == title), None) if title else None
    return section.topics[0].id if section is not None and section.topics else None


def progress_view(module: Module, state: ProgressState, milestone: str | None,
                  at: str | None = None) -> ProgressView:
    return ProgressView(
        percentage=progress_mod.percentage(module, state),
        covered=progress_mod.covered_ids(module, state),
        total=len(module.topic_ids),
        milestone=milestone,
        milestones=list(state.milestones),
        module_state=progress_mod.module_state(module, state, at).model_dump(exclude_none=True),
        mastered=progress_mod.mastered_ids(module, state),
        checked=progress_mod.checked_count(module),
        done=progress_mod.done_count(module, state),
    )
