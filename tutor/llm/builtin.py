"""The built-in tutor: walks a module's authored content offline, deterministically.

It behaves like a model as far as the app can tell: it returns RESPONSE_SCHEMA JSON *text*
that goes through `contract.parse` and the server's progress reconciliation like any reply.
It reads only `request.context` (the module, progress after the learner's evidence, the
topics the learner mentioned, the learner's input, and what the server decided about
teaching this turn: tutor.teach.teaching), never the prompt.

How a turn is chosen:

- opening turn: greet with the module's title and description, then teach the first topic
  not seen yet (or, for a finished module, offer a summary);
- the server asks a check this turn (`teaching.ask`): say why, briefly, and teach nothing
  new; the server shows the question as a form below the reply. After an answer below the
  threshold the same check comes back, with a word of encouragement;
- a question is answered from the module's material: the best matching passages, quoted
  with their topic and source, then an offer to go on (to the whole topic, or onwards);
  a question that names a topic whose own passage answers it best is taught that topic;
- a request for a topic ("Next: X", "Tell me about X") is answered with THAT topic;
- a form answer whose option names a `next_topic` leads there ("Mental" -> the mental level);
- anything else (a mastered answer, a reflection, "Continue", other form answers) is
  acknowledged and the tutor moves on in the author's order: the first topic not seen;
- with every topic seen and every check mastered, the tutor offers a summary.

The topics taught are claimed in meta.progress.covered_topics by canonical id, so the
server can count them; a topic only quoted in an answer is not (a glimpse of one passage is
not its lesson: "Continue" still teaches it in its turn, and its check comes after that).
In the closing review, a check answered well is followed by how many topics still wait for
one, and the next comes when the learner continues. A milestone the turn reaches, and that
has not fired before, is celebrated once (a paragraph, emotion "celebratory"; the page
shows the banner). Scores and feedback are the server's: this tutor never grades.

It speaks the module's language: its own phrases come from the message catalogues
(tutor.i18n, English when a phrase or language is missing); the taught text is the author's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tutor.contract import Progress
from tutor.i18n import N_, Translator, translator
from tutor.contract.authored import markdown_blocks
from tutor.llm.base import ANSWERED_BESIDE_CHECK, CheckData, Completion, CompletionRequest, TurnContext, folded
from tutor.llm.builtin_answers import block as _block
from tutor.llm.builtin_answers import respond_to_learner as _respond_to_learner
from tutor.progress import (
    ProgressState,
    checked_count,
    coverage_count,
    done_count,
    is_complete,
    mastered_ids,
    milestones_reached,
    module_state,
    next_topic,
    percentage,
)
from tutor.topic_mentions import detect_text

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module, Topic

__all__ = ["BuiltinTutor", "compose_reply", "markdown_blocks"]

SKIP_REPLY = N_("Skip this check")
SUMMARY_REPLY = N_("Show me a summary")
CONTINUE_REPLY = N_("Continue")
# Messages after which the lesson waits for the learner instead of moving on by itself: all
# that is answered beside an open check (an answer off topic or about medicine, more on the
# same topic, a learner's own experience heard, a greeting, thanks or goodbye, "I don't know")
# but a question, whose quoted answer holds the lesson where it is anyway.
_WAITS = tuple(i for i in ANSWERED_BESIDE_CHECK if i != "question")


class BuiltinTutor:
    """Provider protocol implementation; needs no network, key or model."""

    name = "builtin"

    def __init__(self, model: str = "builtin-tutor") -> None:
        self.model = model

    async def complete(self, request: CompletionRequest) -> Completion:
        text = compose_reply(request.context)
        tokens_in = sum(len(m.content) for m in request.messages) // 4
        return Completion(text, "stop", tokens_in, len(text) // 4, self.model)

    async def aclose(self) -> None:
        return None


def compose_reply(ctx: TurnContext | None) -> str:
    """One tutor turn as RESPONSE_SCHEMA JSON text."""
    if ctx is None:
        blocks = [_block("warning", translator(None)("The built-in tutor needs the module context to teach."))]
        return _dump({"content": {"text_blocks": blocks}, "meta": {"response_type": "error"}})
    module, state, ask = ctx.module, ctx.progress, ctx.teaching.ask
    t = translator(module.language)
    # A turn that asks a check anew teaches nothing new: a question asked meanwhile is
    # answered from the module's material, above the check, even one that names a topic.
    teaches = ask is None or (ask.again and ctx.teaching.intent in ANSWERED_BESIDE_CHECK)
    blocks, topic, quoted = (_greeting(module, state, t), None, ()) if ctx.learner is None else \
        _respond_to_learner(ctx, t, teaches=teaches)
    seen = set(state.covered)
    # The learner's message was answered (off topic, medical, more on the same topic): the
    # lesson waits for them instead of moving on by itself.
    waits = ctx.teaching.intent in _WAITS
    if not teaches:
        topic = None
    elif ask is None and topic is None and not quoted and ctx.teaching.intent != "summary" and not waits:
        goto = module.topic(ctx.teaching.goto_topic) if ctx.teaching.goto_topic else None
        topic = goto or next_topic(module, state)
    shown = [topic.id] if topic is not None else []
    newly = [t for t in shown if t not in seen]
    claimed = ProgressState(state.covered + tuple(newly), state.milestones, state.mastered)
    # A review check answered well: the next one waits for the learner ("Continue"), so the
    # review at the end is not a wall of checks.
    pause = (ask is None and topic is None and not quoted and ctx.teaching.judged is not None
             and not is_complete(module, claimed))
    fired = [m for m in milestones_reached(module, claimed) if m not in state.milestones]
    milestone = fired[-1] if fired else None

    content: dict[str, Any] = {}
    if topic is not None:
        blocks += _teach(topic, t)
        if topic.form is not None:
            content["forms"] = [topic.form.form.model_dump(mode="json", exclude_none=True)]
        if topic.media:
            content["media"] = [m.model_dump(mode="json", exclude_none=True) for m in topic.media]
    elif pause:
        left = checked_count(module) - len(mastered_ids(module, claimed))
        blocks.append(_block("paragraph", t.plural(
            "To complete the module, {n} topic still has a check waiting. Continue when you're ready.",
            "To complete the module, {n} topics still have a check waiting. Continue when you're ready.",
            left)))
    elif ask is None and not quoted and not waits:
        blocks += _summary(module, claimed, t)
    if milestone:
        blocks += _celebrate(module, milestone, claimed, t)
    if ask is not None:
        blocks += _check_intro(ctx, ask, t)
    content["next_step"] = ({"prompt": None, "suggestions": [t(CONTINUE_REPLY), t(SUMMARY_REPLY)], "can_skip": True}
                            if pause else _next_step(ctx, topic or (_lesson_topic(module, state) if waits else None),
                                                     quoted, claimed, t))

    learner, judged = ctx.learner, ctx.teaching.judged
    emotion = ("celebratory" if milestone else "encouraging" if learner is None or ask is not None or judged
               else "supportive" if learner.is_form else "informative")
    response_type = ("educational" if topic or quoted else "assessment" if ask is not None
                     else "conversational" if waits or pause else "summary")
    progress = Progress(
        percentage=percentage(module, claimed),
        covered_topics=[t for t in claimed.covered if t in set(module.topic_ids)],
        newly_covered=newly,
        remaining_topics=len(module.topic_ids) - done_count(module, claimed),
        milestone=milestone,
    )
    return _dump({
        "content": {"text_blocks": blocks, **content},
        "meta": {
            "response_type": response_type,
            "progress": progress.model_dump(mode="json"),
            "module_state": module_state(module, claimed).model_dump(mode="json"),
            "emotion": emotion,
        },
    })


def _lesson_topic(module: Module, state: ProgressState) -> Topic | None:
    """The topic the lesson is on (taught last): what a reply that waits for the learner offers
    to ask about or go on from, as the lesson's own turn did."""
    return module.topic(state.covered[-1]) if state.covered else None


def _check_intro(ctx: TurnContext, ask: CheckData, t: Translator) -> list[dict[str, Any]]:
    judged, title = ctx.teaching.judged, ask.topic_title
    if judged is not None and judged.check_id == ask.check_id:
        text = (t("You can try again below, or carry on.") if judged.score is None else
                t("Have another go below when you're ready, or skip it for now: we can come back to it later."))
    elif ctx.teaching.intent == "exercise":
        text = t("Here is something to practise: a question on **{topic}**.", topic=title)
    elif ask.again and ctx.teaching.intent == "question" and ctx.teaching.kind == "near_check":
        text = t("If that was your answer to the question about **{topic}**, write it in the box below and "
                 "press **Check my answer**.", topic=title)
    elif ask.again and ctx.teaching.intent in ANSWERED_BESIDE_CHECK:
        text = t("When you're ready, the question about **{topic}** is still below.", topic=title)
    elif ask.again and ctx.teaching.intent == "retry":
        text = t("Of course. Here is the question about **{topic}** again.", topic=title)
    elif ask.review:
        text = t("You've seen every topic. To complete the module, let's come back to **{topic}**.", topic=title)
    else:
        text = t("Before we move on, let's check what stayed with you from **{topic}**.", topic=title)
    return [_block("paragraph", text)]


def _next_step(ctx: TurnContext, topic: Topic | None, quoted: tuple[str, ...], done: ProgressState,
               t: Translator) -> dict[str, Any]:
    """Quick replies: the topic's own, then one that moves on. Navigation replies must not
    count as evidence for topics nobody taught yet, or the walk would skip them. A question
    the learner already sent is not offered again (following the quick replies must lead
    on, never round in a circle)."""
    def new(replies: list[str]) -> list[str]:
        return [r for r in replies if folded(r) not in ctx.asked]

    module, ask = ctx.module, ctx.teaching.ask
    seen = set(done.covered)
    later = next((t for t in module.topics if t.id not in seen), None)
    if ask is not None:
        suggestions = [t(SKIP_REPLY)] + ([t(SUMMARY_REPLY)] if ask.review else [])
        return {"prompt": None, "suggestions": suggestions,  # the check's form says how to answer, once
                "can_skip": True}
    if quoted:
        first = module.topic(quoted[0])
        suggestions = new([t("Tell me more about {topic}", topic=first.title)]) if first is not None else []
        return {"prompt": t("Ask another question, or let's go on."), "suggestions": [*suggestions, t(CONTINUE_REPLY)],
                "can_skip": True}
    suggestions = new(list(topic.suggestions)) if topic is not None else []
    open_check = topic is not None and bool(topic.checks) and topic.id not in set(done.mastered)
    if open_check:
        suggestions.append(t(CONTINUE_REPLY))  # next comes the topic's check
    elif later is not None:
        suggestions.append(_navigation(module, t("Next: {topic}", topic=later.title), seen | {later.id}, t))
    elif topic is not None:
        suggestions.append(_navigation(module, t(SUMMARY_REPLY), seen, t))
    else:
        suggestions += [t("Review: {topic}", topic=x.title) for x in module.topics[:3]]
    if topic is not None:
        prompt = t("Ask me anything about {topic}, share your own experience, or continue when you're ready.",
                   topic=topic.title)
    else:
        prompt = t("Ask about any topic to review it, or tell me what stayed with you.")
    return {"prompt": prompt, "suggestions": list(dict.fromkeys(suggestions)), "can_skip": True}


def _greeting(module: Module, state: ProgressState, t: Translator) -> list[dict[str, Any]]:
    total = len(module.topic_ids)
    done = coverage_count(module, state)
    if done:
        opening = t.plural("Welcome back! You've covered {done} of {n} topic so far.",
                           "Welcome back! You've covered {done} of {n} topics so far.", total, done=done)
        checked = checked_count(module)
        if checked:
            opening += " " + t.plural("You've mastered {mastered} of the {n} topic with checks.",
                                      "You've mastered {mastered} of the {n} topics with checks.", checked,
                                      mastered=len(mastered_ids(module, state)))
    else:
        opening = t("Welcome! We'll go through {topics} in {sections}, one step at a time. "
                    "You can type a question or your own thoughts whenever you like; forms are always optional.",
                    topics=t.plural("{n} topic", "{n} topics", total),
                    sections=t.plural("{n} section", "{n} sections", len(module.sections)))
    return [_block("heading", module.title, 1), _block("paragraph", module.description.strip()),
            _block("paragraph", opening)]


def _teach(topic: Topic, t: Translator) -> list[dict[str, Any]]:
    authored = markdown_blocks(topic.content or "")
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in authored]
    if not authored or authored[0].type != "heading":
        blocks.insert(0, _block("heading", topic.title, 2))
    if not authored:
        blocks.append(_block("paragraph", t("Let's explore **{topic}**. What do you already know "
                                            "about it, or what would you like to ask?", topic=topic.title)))
    return blocks


def _celebrate(module: Module, milestone: str, state: ProgressState, t: Translator) -> list[dict[str, Any]]:
    total = len(module.topic_ids)
    checked = checked_count(module)
    title = module.title
    if milestone == "100%":
        text = (t.plural("You've completed *{title}*: {n} topic, with every check mastered. Well done!",
                         "You've completed *{title}*: all {n} topics, with every check mastered. Well done!",
                         total, title=title) if checked else
                t.plural("You've completed *{title}*: {n} topic covered. Well done!",
                         "You've completed *{title}*: all {n} topics covered. Well done!", total, title=title))
    else:
        covered = coverage_count(module, state)
        text = (t.plural("You've reached **{milestone}** of *{title}*: {covered} of {n} topic covered, "
                         "{mastered} of {checked} mastered.",
                         "You've reached **{milestone}** of *{title}*: {covered} of {n} topics covered, "
                         "{mastered} of {checked} mastered.", total, milestone=milestone, title=title,
                         covered=covered, mastered=len(mastered_ids(module, state)), checked=checked) if checked else
                t.plural("You've reached **{milestone}** of *{title}*: {covered} of {n} topic covered.",
                         "You've reached **{milestone}** of *{title}*: {covered} of {n} topics covered.", total,
                         milestone=milestone, title=title, covered=covered))
    # Plain words: the page's banner (or, at 100%, its completion view) is the one celebration,
    # and a judged answer's "Well done" callout may already sit above.
    return [_block("paragraph", text)]


def _summary(module: Module, state: ProgressState, t: Translator) -> list[dict[str, Any]]:
    items = [f"- **{s.title}**: {', '.join(x.title for x in s.topics)}" for s in module.sections]
    total = len(module.topic_ids)
    blocks = [
        _block("heading", t("Summary: {title}", title=module.title), 2),
        _block("paragraph", t.plural("You've covered the module's {n} topic. Here is what we went through:",
                                     "You've covered all {n} topics. Here is what we went through:", total)
               if next_topic(module, state) is None else
               t.plural("You've covered {covered} of {n} topic. Here is the whole module:",
                        "You've covered {covered} of {n} topics. Here is the whole module:", total,
                        covered=coverage_count(module, state))),
        _block("list", "\n".join(items)),
    ]
    waiting = [x.title for x in module.topics if x.checks and x.id not in set(state.mastered)]
    if waiting and not is_complete(module, state):
        blocks.append(_block("info", t("To complete the module, answer the checks on: {topics}. "
                                       "Say *{continue_reply}* when you're ready.", topics=", ".join(waiting),
                                       continue_reply=t(CONTINUE_REPLY))))
    blocks.append(_block("tip", t("Ask about any topic to go over it again.")))
    return blocks


def _navigation(module: Module, text: str, allowed: set[str], t: Translator) -> str:
    """A navigation reply, unless its words would count as evidence for other topics."""
    return text if detect_text(module, text) <= allowed else t(CONTINUE_REPLY)


def _dump(reply: dict[str, Any]) -> str:
    return json.dumps(reply, ensure_ascii=False)

