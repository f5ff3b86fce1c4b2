"""What the built-in tutor says about the learner's message (tutor.llm.builtin): an answer
to their question from the module's passages, more on the topic they are on, the module's
referral for a medical question, a kind word for what they shared, or a plain "this module
doesn't cover that" with what it does cover. The server decided what the message is doing
(`TeachingContext.intent`, tutor.teach.teaching); this module only words it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tutor.i18n import N_, Translator, language_name, translator
from tutor.contract.authored import markdown_blocks
from tutor.llm.base import PassageData, TurnContext
from tutor.render.reflection import reflected
from tutor.text import words

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module, Topic

__all__ = ["block", "respond_to_learner"]

# First words that make a message a request to be taught something, in any topic order
# (accents folded: Vietnamese "kể", "giải thích", "tiếp theo", "xem lại", "tại sao", "vì sao").
_ASKING = frozenset("what why how when where who which can could is are do does tell explain "
                    "show review next describe define more "
                    "ke giai tiep xem tai vi lam hay".split())
_MOVING_ON = frozenset("continue next ok okay yes sure go ready done tiep vang duoc".split())
_SECOND_PASSAGE = 0.85  # a second passage is quoted when it scores this close to the best
# A greeting, thanks or goodbye alone is answered in kind; the lesson then waits for the learner.
_SOCIAL_REPLIES = {
    "greeting": N_("Hi! Good to have you here."),
    "thanks": N_("You're welcome. I'm glad it helps."),
    "goodbye": N_("Goodbye for now. Your progress is saved, so we can pick up right here next time."),
    "laugh": N_("Glad that made you smile."),
    "unsure": N_("That's okay, there's no rush."),
}
# What the learner shared is acknowledged for what it is (TeachingContext.kind): plain
# background is thanked for, as before.
_ACKNOWLEDGED = {
    "struggle": N_("That sounds really hard. Thank you for telling me."),
    "progress": N_("That's good to hear. Noticing what helps you is a real step."),
    "help": N_("Reaching out for support is a good step."),
}


def block(kind: str, text: str, level: int | None = None) -> dict[str, Any]:
    return {"type": kind, "content": text, **({"level": level} if level else {})}


def respond_to_learner(ctx: TurnContext, t: Translator, *, teaches: bool = True
                       ) -> tuple[list[dict[str, Any]], Topic | None, tuple[str, ...]]:
    """What the tutor says about the learner's input, the topic asked for, if any, and the
    topics whose passages it quoted. `teaches`: this turn may teach a topic (not when it asks
    a check anew): a question that names one is then answered from the passages instead."""
    module, learner, teaching = ctx.module, ctx.learner, ctx.teaching
    if teaching.judged is not None:
        return [], None, ()  # the server shows the score and feedback above this reply
    if learner.is_form:
        return _acknowledge_form(module, learner.form_id or "", learner.answers or {}, t), None, ()
    text = learner.text or ""
    mentioned = [t for t in module.topics if t.id in ctx.detected]
    intent = teaching.intent
    if intent == "medical":
        return _medical(module, t), None, ()
    titled = [t for t in mentioned if _contains(text, t.title)]
    if titled and _asks(text) and (teaches or not teaching.passages):
        return [], titled[0], ()  # "Tell me about Body, mind and behaviour": that topic, whatever else
    if intent == "social":
        return [block("paragraph", t(_SOCIAL_REPLIES.get(teaching.kind, _SOCIAL_REPLIES["greeting"])))], None, ()
    if intent == "stuck":  # the check is asked again below, unjudged
        return [block("paragraph", " ".join(filter(None, (t("That's okay: this isn't a test."), teaching.hint))))
                ], None, ()
    kind = teaching.kind if intent == "share" else ""
    if intent == "off_topic":
        return _not_covered(module, t), None, ()
    if intent == "more":
        if teaching.passages:
            return _answer_from(module, teaching.passages, t, t("Here is more on that from the module's material:"),
                                note=_language_note(ctx))
        return [block("paragraph", t("That is all this module says about it. You can ask me a question about "
                                     "it, or we can go on."))], None, ()
    if intent == "question" and teaching.passages:
        # A question naming a topic by its title, or by a keyword when that topic's passage
        # answers it best and it has not been taught yet, is a request to be taught it; any
        # other question is answered from the passages (a taught topic is not shown again).
        top = teaching.passages[0].topic_id
        seen = set(ctx.progress.covered)
        named = [t for t in mentioned if _contains(text, t.title)] or [
            t for t in mentioned if t.id == top and t.id not in seen]
        if named and teaches:
            note = _language_note(ctx)  # the lesson that follows is in the module's language
            return ([block("paragraph", note)] if note else []), named[0], ()
        return _answer_from(module, teaching.passages, t, note=_language_note(ctx))
    if intent == "share" and teaching.passages:
        return _answer_from(module, teaching.passages[:1], t, _heard(
            t, kind, N_("Thank you for sharing that. This part of the module may speak to it:"),
            N_("This part of the module may speak to it:")), heard=kind, note=_language_note(ctx))
    if mentioned and _asks(text):
        # "Next: Anxiety and fear" also mentions the keyword "anxiety" of another topic:
        # the topic named by its title is the one asked about.
        titled = [t for t in mentioned if _contains(text, t.title)]
        return [], (titled or mentioned)[0], ()
    if teaching.intent == "skip":
        return [block("paragraph", t("No problem. We can come back to it later."))], None, ()
    if intent == "exercise":  # the check to practise on says so itself (builtin._check_intro)
        return ([] if teaching.ask is not None else [block("paragraph", t(
            "You've mastered the checks on everything we've covered so far, so let's go on to something new."))]
                ), None, ()
    if mentioned:
        titles = ", ".join(f"**{m.title}**" for m in mentioned)
        return [block("paragraph", _heard(t, kind, N_("Thank you for sharing that. It connects to {titles}."),
                                          N_("It connects to {titles}."), titles=titles))], None, ()
    if _asks(text, questions_only=True) and intent not in ("summary", "back"):  # "where was I?": the recap says
        return [block("paragraph", t("I don't have a prepared answer to that question. Ask about any "
                                      "topic of this module by name, or let's carry on."))], None, ()
    if not _navigates(text) and teaching.intent not in ("retry", "summary", "navigate", "back"):
        return [block("paragraph", _heard(t, kind, N_("Thank you for sharing that.")))], None, ()
    return [], None, ()


def _heard(t: Translator, kind: str, plain: str, tail: str = "", **values: str) -> str:
    """What the learner shared acknowledged for what it is (`kind`, _ACKNOWLEDGED), then
    `tail`; `plain` (thanks, and the tail) for plain background."""
    if kind not in _ACKNOWLEDGED:
        return t(plain, **values)
    return f"{t(_ACKNOWLEDGED[kind])} {t(tail, **values)}" if tail else t(_ACKNOWLEDGED[kind])


def _language_note(ctx: TurnContext) -> str:
    """Said in the learner's language when they wrote in another than the module's: what
    follows from the module is in the module's ("lo âu là gì" in an English module)."""
    language = ctx.teaching.written_in
    if not language:
        return ""
    return translator(language)("This module is written in {language}, so what follows is in {language} too.",
                                language=language_name(ctx.module.language, language))


def _answer_from(module: Module, passages: tuple[PassageData, ...], t: Translator, intro: str = "",
                 heard: str | None = None, note: str = "") -> tuple[list[dict[str, Any]], None, tuple[str, ...]]:
    """The best passage, and a second that scores nearly as well, quoted with their topic
    and source; one the learner was shown a moment ago is pointed back to, not quoted again
    (`heard`: the learner shared their own experience, and is acknowledged for it first: the
    share's kind, "" for plain background; `note`: _language_note, before the quotes)."""
    best = passages[0].score or 1.0
    chosen = [p for i, p in enumerate(passages[:2]) if i == 0 or p.score >= _SECOND_PASSAGE * best]
    blocks: list[dict[str, Any]] = []
    topics: list[str] = []  # the topics answered from, quoted or pointed back to
    for passage in chosen:
        topic = module.topic(passage.topic_id) if passage.topic_id else None
        if passage.shown and topic is not None:
            pointer = (_heard(t, heard,
                              N_("Thank you for sharing that. It connects to what we just went through on "
                                 "**{topic}**, above."),
                              N_("It connects to what we just went through on **{topic}**, above."),
                              topic=topic.title) if heard is not None else
                       t("That is in what we just went through on **{topic}**, above.", topic=topic.title))
            blocks.append(block("paragraph", pointer))
            topics.append(topic.id)
    chosen = [p for p in chosen if p.topic_id not in topics]
    if not chosen:
        return blocks, None, tuple(dict.fromkeys(topics))
    if note:
        blocks.append(block("paragraph", note))
    blocks.append(block("paragraph", intro or t("Here is what this module's material says about that:")))
    for passage in chosen:
        topic = module.topic(passage.topic_id) if passage.topic_id else None
        blocks.append(block("quote", passage.text.strip()))
        part = (passage.section_title != passage.source_title
                and passage.section_id != (topic.id if topic else None))
        source, section = passage.source_title, passage.section_title
        if topic is not None:
            where = (t("From *{source}*, “{section}”, part of the topic **{topic}**.", source=source, section=section,
                       topic=topic.title) if part else
                     t("From *{source}*, part of the topic **{topic}**.", source=source, topic=topic.title))
            topics.append(topic.id)
        else:
            where = (t("From *{source}*, “{section}”", source=source, section=section) if part
                     else t("From *{source}*", source=source))
        blocks.append(block("paragraph", where))
    return blocks, None, tuple(dict.fromkeys(topics))


def _first_word(text: str) -> str:
    found = words(text)
    return found[0] if found else ""


def _asks(text: str, questions_only: bool = False) -> bool:
    """A question, or (unless questions_only) a request to be taught ("Next: X")."""
    if "?" in text or "\uff1f" in text:
        return True
    return not questions_only and _first_word(text) in _ASKING


def _navigates(text: str) -> bool:
    return _first_word(text) in _MOVING_ON


def _contains(text: str, phrase: str) -> bool:
    needle = " ".join(words(phrase))
    return bool(needle) and f" {needle} " in f" {' '.join(words(text))} "


def _acknowledge_form(module: Module, form_id: str, answers: dict[str, Any], t: Translator) -> list[dict[str, Any]]:
    # The answers are on the page twice already (the learner's message and the read-only
    # form): the tutor does not list them a third time, but says back what the author
    # asked it to reflect ("your belief went from 80 to 40"), else thanks and goes on.
    form = module.find_form(form_id)
    said = reflected(form, form.reflect_lines, answers) if form is not None else []
    if said:
        return [block("paragraph", " ".join(said))]
    return [block("paragraph", t("Thank you. Let's keep going."))]


def _medical(module: Module, t: Translator) -> list[dict[str, Any]]:
    """The module's referral for medicines, doses and diagnoses (authored, else the app's)."""
    authored = markdown_blocks(module.medical_reply or "")
    if authored:
        return [b.model_dump(mode="json", exclude_none=True) for b in authored]
    return [block("paragraph", t("Questions about medicines, doses or a diagnosis need someone who knows your "
                                 "health: please ask your doctor or pharmacist, and don't start, change or stop a "
                                 "medicine without them. I can help you understand the topics of this module.")),
            ]


def _not_covered(module: Module, t: Translator) -> list[dict[str, Any]]:
    """Off topic: say so plainly, and what the module does cover, instead of a stray quote."""
    sections = ", ".join(f"**{s.title}**" for s in module.sections)
    return [block("paragraph", t("That isn't something this module covers, so I'd rather not guess. "
                                 "*{title}* is about: {sections}. Ask me about any of these, or let's carry on.",
                                 title=module.title, sections=sections))]
