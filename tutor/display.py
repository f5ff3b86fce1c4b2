"""What the page shows for one message, as plain data: every model string already turned
into safe HTML by the one markdown renderer. The web state holds these; components
render them. No Reflex here, so it is tested like the rest of the core."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from tutor.contract import Form, TutorResponse, is_safe_media_src
from tutor.forms import display_value
from tutor.markdown import render, render_inline
from tutor.views import MessageView

INVALID_NOTICE = "The tutor's reply couldn't be read as a structured lesson, so it is shown as plain text."

_EMOTION_ICONS = {
    "encouraging": "sparkles",
    "celebratory": "party-popper",
    "supportive": "heart-handshake",
    "informative": "lightbulb",
    "neutral": "message-circle",
}


@dataclasses.dataclass
class BlockItem:
    type: str
    html: str
    level: int = 0


@dataclasses.dataclass
class OptionItem:
    value: str
    label: str
    dom_id: str


@dataclasses.dataclass
class FieldItem:
    id: str
    dom_id: str
    type: str
    label: str
    required: bool = False
    options: list[OptionItem] = dataclasses.field(default_factory=list)
    placeholder: str = ""
    help_text: str = ""
    min: str = ""
    max: str = ""


@dataclasses.dataclass
class FormItem:
    key: str  # "<message id>-<form id>": unique on the page
    id: str
    title: str
    description: str
    fields: list[FieldItem]
    submit_label: str
    optional: bool


@dataclasses.dataclass
class MediaItem:
    type: str
    src: str
    alt: str
    caption: str


@dataclasses.dataclass
class MessageItem:
    id: int
    role: str  # learner | tutor
    html: str = ""  # learner text, or an invalid reply shown as markdown
    blocks: list[BlockItem] = dataclasses.field(default_factory=list)
    forms: list[FormItem] = dataclasses.field(default_factory=list)
    media: list[MediaItem] = dataclasses.field(default_factory=list)
    prompt: str = ""
    suggestions: list[str] = dataclasses.field(default_factory=list)
    notice: str = ""
    emotion: str = "neutral"
    icon: str = "message-circle"
    response_type: str = ""
    milestone: str = ""
    is_form_answer: bool = False
    plain: str = ""  # a short text version, for screen-reader announcements


def message_item(view: MessageView) -> MessageItem:
    if view.role == "learner":
        return MessageItem(
            id=view.id,
            role="learner",
            html=render(view.text),
            is_form_answer=view.form_id is not None,
            plain=view.text,
        )
    if view.response is None:
        return MessageItem(
            id=view.id,
            role="tutor",
            html=render(view.raw or ""),
            notice=INVALID_NOTICE,
            plain=_plain(view.raw or ""),
        )
    response = TutorResponse.model_validate(view.response)
    content, meta = response.content, response.meta
    blocks = [
        BlockItem(
            type=b.type,
            html=render_inline(b.content) if b.type == "heading" else render(b.content),
            level=min(max(b.level or 2, 1), 6) if b.type == "heading" else 0,
        )
        for b in content.text_blocks
    ]
    next_step = content.next_step
    emotion = meta.emotion or "neutral"
    return MessageItem(
        id=view.id,
        role="tutor",
        blocks=blocks,
        forms=[form_item(view.id, f) for f in content.forms or []],
        media=[
            MediaItem(m.type, m.src, m.alt or "", m.caption or "")
            for m in content.media or []
            if is_safe_media_src(m.src)
        ],
        prompt=render_inline(next_step.prompt) if next_step and next_step.prompt else "",
        suggestions=[s for s in (next_step.suggestions or []) if s.strip()] if next_step else [],
        emotion=emotion,
        icon=_EMOTION_ICONS.get(emotion, "message-circle"),
        response_type=meta.response_type,
        milestone=(meta.progress.milestone or "") if meta.progress else "",
        plain=_plain(" ".join(b.content for b in content.text_blocks)),
    )


def form_item(message_id: int, form: Form) -> FormItem:
    key = f"{message_id}-{form.id}"
    fields = []
    for f in form.fields:
        dom_id = f"f-{key}-{f.id}"
        fields.append(
            FieldItem(
                id=f.id,
                dom_id=dom_id,
                type=f.type,
                label=f.label,
                required=f.is_required,
                options=[
                    OptionItem(o.value, o.label, f"{dom_id}-{i}")
                    for i, o in enumerate(f.options or [])
                ],
                placeholder=f.placeholder or "",
                help_text=f.help_text or "",
                min="" if f.min is None else _num(f.min),
                max="" if f.max is None else _num(f.max),
            )
        )
    return FormItem(
        key=key,
        id=form.id,
        title=form.title or "",
        description=form.description or "",
        fields=fields,
        submit_label=form.submit_label_or_default,
        optional=form.is_optional,
    )


def answer_lines(view: MessageView, form_id: str) -> list[str]:
    """'Label: answer' lines for a submitted form, shown read-only in place of the form."""
    if view.response is None:
        return []
    state = view.form_states.get(form_id, {})
    answers: dict[str, Any] = state.get("answers") or {}
    response = TutorResponse.model_validate(view.response)
    form = next((f for f in response.content.forms or [] if f.id == form_id), None)
    if form is None:
        return []
    return [
        f"{f.label.rstrip(':')}: {display_value(f, answers[f.id])}"
        for f in form.fields
        if f.id in answers
    ]


def form_values(form: FormItem, data: dict[str, Any]) -> dict[str, Any]:
    """Browser form data -> answers by field id (checkbox options arrive one name each)."""
    values: dict[str, Any] = {}
    for field in form.fields:
        if field.type == "checkbox":
            values[field.id] = [
                o.value for o in field.options if _checked(data.get(f"{field.id}::{o.value}"))
            ]
        elif field.id in data:
            values[field.id] = data[field.id]
    unknown = [k for k in data if k.split("::", 1)[0] not in {f.id for f in form.fields}]
    for key in unknown:  # a tampered submission: let the server check refuse it
        values[key] = data[key]
    return values


def _checked(value: Any) -> bool:
    return value in (True, "on", "true", "1") or (isinstance(value, str) and value != "" and value != "false")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_MD_NOISE = re.compile(r"[*_`#>\[\]]+")


def _plain(text: str, limit: int = 400) -> str:
    flat = " ".join(_MD_NOISE.sub("", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
