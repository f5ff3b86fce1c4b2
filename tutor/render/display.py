"""What the page shows for one message, as plain data: every model string already turned
into safe HTML by the one markdown renderer, or kept as plain text that the page prints
as text. The web state holds these; components render them. No Reflex here, so it is
tested like the rest of the core. (Progress and module cards: tutor.render.progress_display;
where an unreadable reply is cut: tutor.render.fallback; both re-exported here.)"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from tutor.contract import Form, TutorResponse, is_safe_media_src
from tutor.contract.extract import clean
from tutor.i18n import N_, Translator, translator
from tutor.render.callouts import CALLOUT_LABELS, callout_title, quoted_html
from tutor.render.fallback import FALLBACK_CHARS, FALLBACK_SLACK, split_fallback  # noqa: F401 (re-exported)
from tutor.render.forms import answer_lines
from tutor.render.markdown import render, render_inline
from tutor.render.progress_display import (  # noqa: F401 (re-exported)
    ModuleCard,
    ProgressItem,
    module_card,
    progress_item,
)
from tutor.render.views import MessageView

# Catalogue msgids (tutor.i18n): message_item shows them in the conversation's language.
INVALID_NOTICE = N_("The tutor's reply couldn't be read as a structured lesson, so it is shown as plain text.")
MEDIA_UNAVAILABLE = N_("This media could not be shown.")
# A reply cut short keeps what had arrived (tutor.llm.policy); the page says so under it and
# offers a way on when the cut left no quick replies.
CUT_NOTES = {
    "stopped": N_("Stopped — this is what had arrived."),
    "deadline": N_("Cut short: this reply took too long. This is what had arrived."),
    "interrupted": N_("Cut short: the connection to the tutor broke. This is what had arrived."),
}
GO_ON = N_("Continue")
ANSWERED_IN_CHAT = N_("Answered in the chat.")
SCORED_IN_CHAT = N_("Answered in the chat: {score}/10.")


def answered_in_chat(score: Any, t: Translator) -> list[str]:
    """How a check answered in the message box reads where it was asked."""
    return [t(SCORED_IN_CHAT, score=score) if isinstance(score, int) else t(ANSWERED_IN_CHAT)]
WITHHELD_MEDIA = N_("A media item was left out because its source is not allowed.")
# What one reply may put on the page (tables and HTML: tutor.render.markdown, over the whole message).
MAX_BLOCKS, MAX_MEDIA, MAX_QUOTES, MAX_SUGGESTIONS = 60, 10, 10, 8
MORE_BLOCKS = N_("(the rest of this reply is too long to show)")

# Tone is shown quietly: an icon and an accent colour, named for those who hover or listen.
TONES = {
    "encouraging": "encouraging",
    "celebratory": "celebrating",
    "supportive": "supportive",
    "informative": "informative",
    "neutral": "neutral",
}


@dataclasses.dataclass
class BlockItem:
    type: str
    html: str
    level: int = 0
    label: str = ""  # a callout's own title (plain text); without one the page shows its kind's word


@dataclasses.dataclass
class OptionItem:
    value: str
    label: str
    dom_id: str


@dataclasses.dataclass
class FieldItem:
    id: str
    dom_id: str  # unique on the page; "<dom_id>-help" / "-error" / "-check" name its notes
    type: str
    label: str
    required: bool = False
    options: list[OptionItem] = dataclasses.field(default_factory=list)
    placeholder: str = ""
    help_text: str = ""
    min: str = ""
    max: str = ""
    range_hint: str = ""  # "From 0 to 10." for numbers with bounds
    described_by: str = ""  # the ids that describe the control (help, range, errors)


@dataclasses.dataclass
class FormItem:
    key: str  # "<message id>-<form id>": names the form to the server
    dom_key: str  # "m<message id>f<index>": safe in DOM ids whatever the form id is
    id: str
    title: str
    description: str
    fields: list[FieldItem]
    submit_label: str
    optional: bool
    has_required: bool = False  # "* marks a required answer": forms of more than one field with one required
    # A check of understanding: its description says how to answer and the reply's chip
    # "Skip this check" moves past it, so the page adds no "Optional" note and no Skip button.
    is_check: bool = False
    # As stored when the message was loaded; a later change comes as a FormState overlay.
    status: str = "open"  # open | submitted | skipped | answered (a check, in the message box)
    answers: list[str] = dataclasses.field(default_factory=list)  # "Label: answer" lines


@dataclasses.dataclass
class FormState:
    """A form's status after the message was sent to the page (answered, skipped)."""

    status: str
    answers: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class MediaItem:
    type: str
    src: str  # "" when the source was refused: only the text fallback shows
    alt: str
    caption: str
    fallback: str  # what shows instead when the source is refused or fails to load
    label: str = ""  # the accessible name of a video or audio player
    refused: bool = False


@dataclasses.dataclass
class QuoteItem:
    """A verified quote from the module's material (the server checked it is verbatim)."""

    html: str
    caption: str  # "Source title › Section title"
    source_id: str


@dataclasses.dataclass
class MessageItem:
    id: int
    role: str  # learner | tutor
    html: str = ""  # learner text, or an invalid reply shown as markdown (its first part)
    more_html: str = ""  # the rest of a long invalid reply, shown on request ("Show the rest")
    blocks: list[BlockItem] = dataclasses.field(default_factory=list)
    forms: list[FormItem] = dataclasses.field(default_factory=list)
    media: list[MediaItem] = dataclasses.field(default_factory=list)
    quotes: list[QuoteItem] = dataclasses.field(default_factory=list)
    prompt: str = ""
    suggestions: list[str] = dataclasses.field(default_factory=list)
    notice: str = ""
    cut_note: str = ""  # a reply cut short (Stop, the deadline, a broken stream): CUT_NOTES
    emotion: str = "neutral"
    tone: str = "neutral"
    response_type: str = ""
    milestone: str = ""
    is_form_answer: bool = False
    plain: str = ""  # a short text version, for screen-reader announcements


def message_item(view: MessageView, language: str | None = None) -> MessageItem:
    """A stored message as the page shows it; the app's own words in `language`."""
    t = translator(language)
    if view.role == "learner":
        return MessageItem(
            id=view.id,
            role="learner",
            html=render(view.text),
            is_form_answer=view.form_id is not None,
            plain=_plain(view.text),
        )
    response = _response(view.response)
    budget: dict = {}  # one render budget for the whole message (tutor.render.markdown)
    if response is None:
        shown, rest = split_fallback(view.raw or "")
        return MessageItem(
            id=view.id,
            role="tutor",
            html=render(shown, budget),
            more_html=render(rest, budget) if rest else "",
            notice=t(INVALID_NOTICE),
            plain=_plain(view.raw or ""),
        )
    content, meta = response.content, response.meta
    blocks = [block_item(b.type, b.content, b.level, budget, t) for b in content.text_blocks[:MAX_BLOCKS]]
    if len(content.text_blocks) > MAX_BLOCKS:
        blocks.append(BlockItem("paragraph", f'<p class="render-capped">{t(MORE_BLOCKS)}</p>\n'))
    media = [media_item(m) for m in (view.response or {}).get("content", {}).get("media") or []]
    if "unsafe_media" in view.flags:
        media += withheld_media(view.raw or "")
    media = [dataclasses.replace(m, fallback=t(m.fallback)) if m.fallback in (MEDIA_UNAVAILABLE, WITHHELD_MEDIA) else m
             for m in media[:MAX_MEDIA]]
    forms = []
    for index, form in enumerate(content.forms or []):
        item = form_item(view.id, form, index, t)
        state = view.form_states.get(form.id) or {}
        item.status = str(state.get("status") or "open")
        if item.status == "submitted":
            item.answers = answer_lines(form, state.get("answers") or {})
        elif item.status == "answered":
            item.answers = answered_in_chat(state.get("score"), t)
        forms.append(item)
    next_step = content.next_step
    emotion = meta.emotion or "neutral"
    cut = next((f for f in view.flags if f in CUT_NOTES), None) if view.outcome != "invalid" else None
    suggestions = list(dict.fromkeys(s for s in (next_step.suggestions or []) if s.strip()))[:MAX_SUGGESTIONS] \
        if next_step else []
    return MessageItem(
        id=view.id,
        role="tutor",
        blocks=blocks,
        forms=forms,
        media=media,
        quotes=[QuoteItem(quoted_html(c.quote, t, budget), c.location or c.source_id, c.source_id)
                for c in (content.citations or [])[:MAX_QUOTES]],
        prompt=render_inline(next_step.prompt, budget) if next_step and next_step.prompt else "",
        suggestions=suggestions or ([t(GO_ON)] if cut else []),
        cut_note=t(CUT_NOTES[cut]) if cut else "",
        emotion=emotion,
        tone=TONES.get(emotion, "neutral"),
        response_type=meta.response_type,
        milestone=(meta.progress.milestone or "") if meta.progress else "",
        plain=_plain(" ".join(b.content for b in content.text_blocks)),
    )


def block_item(kind: str, content: str, level: int | None = None, budget: dict | None = None,
               t: Translator | None = None) -> BlockItem:
    """One text block as the page shows it: a heading's text inline, anything else as
    markdown blocks; headings default to level 2; a callout's title (tutor.render.callouts)
    as its label; a quote with the author's callouts inside it (labelled in `t`'s language).
    `budget`: the message's (tutor.render.markdown)."""
    if kind == "heading":
        return BlockItem("heading", render_inline(content, budget), min(max(level or 2, 1), 6))
    if kind == "quote":
        return BlockItem(kind, quoted_html(content, t, budget), 0)
    if kind in CALLOUT_LABELS:
        title, text = callout_title(content)
        return BlockItem(kind, render(text, budget), 0, title)
    return BlockItem(kind, render(content, budget), 0)


def _response(data: dict[str, Any] | None) -> TutorResponse | None:
    """The stored reply; media are read one by one (media_item), so one refused source
    cannot take the whole reply down."""
    if data is None:
        return None
    content = {k: v for k, v in (data.get("content") or {}).items() if k != "media"}
    try:
        return TutorResponse.model_validate({**data, "content": content})
    except ValidationError:
        return None


def media_item(data: Any) -> MediaItem:
    """One media entry; a refused source keeps only its words (alt, caption)."""
    data = data if isinstance(data, dict) else {}
    kind = data.get("type") if data.get("type") in ("image", "video", "audio") else "image"
    src = str(data.get("src") or "")
    alt = str(data.get("alt") or "")
    caption = str(data.get("caption") or "")
    fallback = alt or MEDIA_UNAVAILABLE  # the caption, if any, shows below it anyway
    label = alt or caption or kind.capitalize()
    if not is_safe_media_src(src):
        return MediaItem(kind, "", alt, caption, fallback, label, refused=True)
    return MediaItem(kind, src, alt, caption, fallback, label)


def withheld_media(raw: str) -> list[MediaItem]:
    """Media the reply contract left out for an unsafe source (flag unsafe_media), shown as
    their alt text and caption so the learner knows something was meant to be there. The
    words come from the model's own raw text; the source is never used."""
    try:
        data = json.loads(clean(raw).text)
        items = data["content"]["media"]
    except (ValueError, KeyError, TypeError):
        return [MediaItem("image", "", "", "", WITHHELD_MEDIA, "Image", refused=True)]
    items = [items] if isinstance(items, dict) else items if isinstance(items, list) else []
    out = [media_item(m) for m in items if isinstance(m, dict)]
    return [m for m in out if m.refused] or [MediaItem("image", "", "", "", WITHHELD_MEDIA, "Image", refused=True)]


def form_item(message_id: int, form: Form, index: int = 0, t: Translator | None = None) -> FormItem:
    key = f"{message_id}-{form.id}"
    dom_key = f"m{message_id}f{index}"
    fields = []
    for i, f in enumerate(form.fields):
        dom_id = f"{dom_key}-{i}"
        hint = _range_hint(f.min, f.max, t or translator(None)) if f.type == "number" else ""
        described = [f"{dom_id}-error", f"{dom_id}-check"]
        if f.help_text or hint:
            described.insert(0, f"{dom_id}-help")
        fields.append(
            FieldItem(
                id=f.id,
                dom_id=dom_id,
                type=f.type,
                label=f.label,
                required=f.is_required,
                options=[
                    OptionItem(o.value, o.label, f"{dom_id}-{j}")
                    for j, o in enumerate(f.options or [])
                ],
                placeholder=f.placeholder or "",
                help_text=f.help_text or "",
                min="" if f.min is None else _num(f.min),
                max="" if f.max is None else _num(f.max),
                range_hint=hint,
                described_by=" ".join(described),
            )
        )
    return FormItem(
        key=key,
        dom_key=dom_key,
        id=form.id,
        title=form.title or "",
        description=form.description or "",
        fields=fields,
        submit_label=form.submit_label_or_default,
        optional=form.is_optional,
        has_required=len(form.fields) > 1 and any(f.is_required for f in form.fields),
        is_check=form.is_check,
    )


def find_form(view: MessageView, form_id: str) -> Form | None:
    response = _response(view.response)
    if response is None:
        return None
    return next((f for f in response.content.forms or [] if f.id == form_id), None)


def closed_forms(view: MessageView) -> dict[str, FormState]:
    """The forms of a tutor message that are no longer open, by form key."""
    out: dict[str, FormState] = {}
    for form_id, state in view.form_states.items():
        status = str(state.get("status") or "open")
        if status == "open":
            continue
        form = find_form(view, form_id)
        answers = answer_lines(form, state.get("answers") or {}) if form and status == "submitted" else []
        out[f"{view.id}-{form_id}"] = FormState(status, answers)
    return out


def form_values(form: Form, items: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Browser form entries -> answers by field id. Checkboxes send one entry per ticked
    option; anything the form did not offer is passed on for the server check to refuse."""
    values: dict[str, Any] = {}
    checkbox = {f.id for f in form.fields if f.type == "checkbox"}
    for name, value in items:
        if name in checkbox:
            values.setdefault(name, []).append(value)
        elif name in values:  # one choice sent twice (a tampered page): the check refuses it
            previous = values[name]
            values[name] = [*(previous if isinstance(previous, list) else [previous]), value]
        else:
            values[name] = value
    return values


def _range_hint(low: float | None, high: float | None, t: Translator) -> str:
    if low is not None and high is not None:
        return t("A number from {low} to {high}.", low=_num(low), high=_num(high))
    if low is not None:
        return t("A number of at least {low}.", low=_num(low))
    if high is not None:
        return t("A number of at most {high}.", high=_num(high))
    return ""


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_MD_NOISE = re.compile(r"[*_`#>\[\]]+")


def _plain(text: str, limit: int = 400) -> str:
    flat = " ".join(_MD_NOISE.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
