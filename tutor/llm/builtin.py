"""The built-in tutor: walks a module's authored content offline, deterministically.

It behaves like a model as far as the app can tell: it returns RESPONSE_SCHEMA JSON *text*
that goes through `contract.parse` and the server's progress reconciliation like any reply.
It reads only `request.context` (the module, progress after the learner's evidence, the
topics detected this turn, the learner's input), never the prompt.

How a turn is chosen:

- opening turn: greet with the module's title and description, then teach the first
  uncovered topic (or, for a finished module, offer a summary);
- a question or navigation request ("...?", "Next: X", "Tell me about X") that mentions a
  topic is answered with THAT topic's content;
- anything else (a reflection, "Continue", form answers) is acknowledged and the tutor
  moves on in the author's order: the first topic not yet covered;
- with every topic covered, the tutor offers a summary and topics to review.

The topic taught is claimed in meta.progress.covered_topics by its canonical id, so the
server counts it. A milestone the turn reaches, and that has not fired before, is
celebrated once (heading + success block, emotion "celebratory").
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tutor.contract import Form, Progress, TextBlock
from tutor.llm.base import Completion, CompletionRequest, TurnContext
from tutor.progress import (
    ProgressState,
    coverage_count,
    detect_text,
    milestones_reached,
    module_state,
    next_topic,
    percentage,
    words,
)

if TYPE_CHECKING:  # pragma: no cover
    from tutor.modules import Module, Topic

__all__ = ["BuiltinTutor", "compose_reply", "markdown_blocks"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_CALLOUT = re.compile(r"^\s*!!!\s*(info|warning|success|tip)\b[ \t]*(.*)$", re.IGNORECASE)
# First words that make a message a request to be taught something, in any topic order.
_ASKING = frozenset("what why how when where who which can could is are do does tell explain "
                    "show review next describe define more".split())
_MOVING_ON = frozenset("continue next ok okay yes sure go ready done".split())


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
        blocks = [_block("warning", "The built-in tutor needs the module context to teach.")]
        return _dump({"content": {"text_blocks": blocks}, "meta": {"response_type": "error"}})
    module, state = ctx.module, ctx.progress
    blocks, topic = _respond_to_learner(ctx)
    covered = set(state.covered)
    if topic is None:
        topic = next_topic(module, state)
    newly = [topic.id] if topic is not None and topic.id not in covered else []
    claimed = ProgressState(state.covered + tuple(newly), state.milestones)
    fired = [m for m in milestones_reached(module, claimed.covered) if m not in state.milestones]
    milestone = fired[-1] if fired else None

    content: dict[str, Any] = {}
    if topic is not None:
        blocks += _teach(topic)
        if topic.form is not None:
            content["forms"] = [topic.form.form.model_dump(mode="json", exclude_none=True)]
        if topic.media:
            content["media"] = [m.model_dump(mode="json", exclude_none=True) for m in topic.media]
    else:
        blocks += _summary(module)
    if milestone:
        blocks += _celebrate(module, milestone, coverage_count(module, claimed))
    content["next_step"] = _next_step(module, topic, set(claimed.covered))

    learner = ctx.learner
    emotion = ("celebratory" if milestone else "encouraging" if learner is None
               else "supportive" if learner.is_form else "informative")
    progress = Progress(
        percentage=percentage(module, claimed),
        covered_topics=[t for t in claimed.covered if t in set(module.topic_ids)],
        newly_covered=newly,
        remaining_topics=len(module.topic_ids) - coverage_count(module, claimed),
        milestone=milestone,
    )
    return _dump({
        "content": {"text_blocks": blocks, **content},
        "meta": {
            "response_type": "educational" if topic is not None else "summary",
            "progress": progress.model_dump(mode="json"),
            "module_state": module_state(module, claimed).model_dump(mode="json"),
            "emotion": emotion,
        },
    })


def _respond_to_learner(ctx: TurnContext) -> tuple[list[dict[str, Any]], Topic | None]:
    """What the tutor says about the learner's input, and the topic asked about, if any."""
    module, learner = ctx.module, ctx.learner
    if learner is None:
        return _greeting(module, ctx.progress), None
    if learner.is_form:
        return _acknowledge_form(module, learner.form_id or "", learner.answers or {}), None
    text = learner.text or ""
    mentioned = [t for t in module.topics if t.id in ctx.detected]
    if mentioned and _asks(text):
        # "Next: Anxiety and fear" also mentions the keyword "anxiety" of another topic:
        # the topic named by its title is the one asked about.
        titled = [t for t in mentioned if _contains(text, t.title)]
        return [], (titled or mentioned)[0]
    if mentioned:
        titles = ", ".join(f"**{t.title}**" for t in mentioned)
        return [_block("paragraph", f"Thank you for sharing that. It connects to {titles}.")], None
    if _asks(text, questions_only=True):
        return [_block("paragraph", "I don't have a prepared answer to that question. Ask about any "
                                    "topic of this module by name, or let's carry on.")], None
    if not _navigates(text):
        return [_block("paragraph", "Thank you for sharing that.")], None
    return [], None


def _next_step(module: Module, topic: Topic | None, done: set[str]) -> dict[str, Any]:
    """Quick replies: the topic's own, then one that moves on. Navigation replies must not
    count as evidence for topics nobody taught yet, or the walk would skip them."""
    suggestions = list(topic.suggestions) if topic is not None else []
    later = next((t for t in module.topics if t.id not in done), None)
    if later is not None:
        suggestions.append(_navigation(module, f"Next: {later.title}", done | {later.id}))
    elif topic is not None:
        suggestions.append(_navigation(module, "Show me a summary", done))
    else:
        suggestions += [f"Review: {t.title}" for t in module.topics[:3]]
    if topic is not None:
        prompt = f"Ask me anything about {topic.title}, share your own experience, or continue when you're ready."
    else:
        prompt = "Ask about any topic to review it, or tell me what stayed with you."
    return {"prompt": prompt, "suggestions": list(dict.fromkeys(suggestions)), "can_skip": True}


def markdown_blocks(markdown: str) -> list[TextBlock]:
    """Authored markdown -> text blocks: '#' lines become headings, runs of list items a
    list, '> ' lines a quote, a paragraph starting '!!! tip' (info/warning/success) that
    callout, anything else a paragraph. Blank lines separate paragraphs."""
    blocks: list[TextBlock] = []
    lines = markdown.strip("\n").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if heading := _HEADING.match(line.strip()):
            blocks.append(TextBlock(type="heading", content=heading.group(2), level=len(heading.group(1))))
            i += 1
            continue
        j = i + 1
        if callout := _CALLOUT.match(line):
            while j < len(lines) and lines[j].strip():
                j += 1
            body = "\n".join([callout.group(2), *(ln.strip() for ln in lines[i + 1 : j])]).strip()
            if body:
                blocks.append(TextBlock(type=callout.group(1).lower(), content=body))
        elif _LIST_ITEM.match(line):
            while j < len(lines) and (_LIST_ITEM.match(lines[j]) or lines[j][:1] in (" ", "\t")) and lines[j].strip():
                j += 1
            blocks.append(TextBlock(type="list", content="\n".join(lines[i:j]).strip()))
        elif line.lstrip().startswith(">"):
            while j < len(lines) and lines[j].lstrip().startswith(">"):
                j += 1
            quoted = "\n".join(re.sub(r"^\s*>\s?", "", ln) for ln in lines[i:j]).strip()
            if quoted:
                blocks.append(TextBlock(type="quote", content=quoted))
        else:
            while j < len(lines) and lines[j].strip() and not _starts_block(lines[j]):
                j += 1
            blocks.append(TextBlock(type="paragraph", content="\n".join(lines[i:j]).strip()))
        i = j
    return blocks


def _starts_block(line: str) -> bool:
    return bool(_HEADING.match(line.strip()) or _CALLOUT.match(line) or _LIST_ITEM.match(line)
                or line.lstrip().startswith(">"))


def _block(kind: str, text: str, level: int | None = None) -> dict[str, Any]:
    return {"type": kind, "content": text, **({"level": level} if level else {})}


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


def _greeting(module: Module, state: ProgressState) -> list[dict[str, Any]]:
    total = len(module.topic_ids)
    done = len(set(state.covered) & set(module.topic_ids))
    if done:
        opening = f"Welcome back! You've covered {done} of {total} topics so far."
    else:
        opening = (f"Welcome! We'll go through {total} topics in {len(module.sections)} sections, one step at a time. "
                   "You can type a question or your own thoughts whenever you like; forms are always optional.")
    return [_block("heading", module.title, 1), _block("paragraph", module.description.strip()),
            _block("paragraph", opening)]


def _teach(topic: Topic) -> list[dict[str, Any]]:
    authored = markdown_blocks(topic.content or "")
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in authored]
    if not authored or authored[0].type != "heading":
        blocks.insert(0, _block("heading", topic.title, 2))
    if not authored:
        blocks.append(_block("paragraph", f"Let's explore **{topic.title}**. What do you already know "
                                          "about it, or what would you like to ask?"))
    return blocks


def _acknowledge_form(module: Module, form_id: str, answers: dict[str, Any]) -> list[dict[str, Any]]:
    entry = module.find_form(form_id)
    lines = _answer_lines(entry.form, answers) if entry is not None else []
    if not lines:
        return [_block("paragraph", "Thank you. Let's keep going.")]
    return [_block("paragraph", "Thank you for sharing. You answered:"), _block("list", "\n".join(lines))]


def _answer_lines(form: Form, answers: dict[str, Any]) -> list[str]:
    lines = []
    for field in form.fields:
        value = answers.get(field.id)
        if value in (None, "", [], ()):
            continue
        labels = {o.value: o.label for o in field.options or ()}
        values = value if isinstance(value, (list, tuple)) else [value]
        shown = ", ".join(labels.get(str(v), str(v)) for v in values)
        lines.append(f"- {field.label} **{shown}**")
    return lines


def _celebrate(module: Module, milestone: str, done: int) -> list[dict[str, Any]]:
    total = len(module.topic_ids)
    if milestone == "100%":
        text = f"You've covered **all {total} topics** of *{module.title}*. Well done!"
    else:
        text = f"You've reached **{milestone}**: {done} of {total} topics of *{module.title}* covered."
    return [_block("heading", f"🎉 {milestone} complete", 2), _block("success", text)]


def _summary(module: Module) -> list[dict[str, Any]]:
    items = [f"- **{s.title}**: {', '.join(t.title for t in s.topics)}" for s in module.sections]
    return [
        _block("heading", f"Summary: {module.title}", 2),
        _block("paragraph", f"You've covered all {len(module.topic_ids)} topics. Here is what we went through:"),
        _block("list", "\n".join(items)),
        _block("tip", "Ask about any topic to go over it again."),
    ]


def _navigation(module: Module, text: str, allowed: set[str]) -> str:
    """A navigation reply, unless its words would count as evidence for other topics."""
    return text if detect_text(module, text) <= allowed else "Continue"


def _dump(reply: dict[str, Any]) -> str:
    return json.dumps(reply, ensure_ascii=False)
