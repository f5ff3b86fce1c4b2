"""One chat message: the learner's words, or a tutor reply (blocks, media, forms, next
step), or an unreadable reply shown as plain markdown with a small notice."""

from __future__ import annotations

import reflex as rx

from components.blocks import text_block
from components.forms import form_view
from components.media import media_item
from tutor.display import MessageItem
from tutor.state import ChatState


def _emotion_icon(emotion: rx.Var[str]) -> rx.Component:
    return rx.match(
        emotion,
        ("celebratory", rx.icon("party-popper", size=16, aria_hidden="true")),
        ("encouraging", rx.icon("sparkles", size=16, aria_hidden="true")),
        ("supportive", rx.icon("heart-handshake", size=16, aria_hidden="true")),
        ("informative", rx.icon("lightbulb", size=16, aria_hidden="true")),
        rx.icon("graduation-cap", size=16, aria_hidden="true"),
    )


def _next_step(msg: rx.Var[MessageItem]) -> rx.Component:
    is_latest = msg.id == ChatState.latest_tutor_id
    return rx.el.div(
        rx.cond(msg.prompt != "", rx.html(msg.prompt, class_name="next-prompt md-inline")),
        rx.cond(
            msg.suggestions.length() > 0,
            rx.el.div(
                rx.foreach(
                    msg.suggestions,
                    lambda s: rx.el.button(
                        s,
                        type="button",
                        class_name="chip",
                        disabled=~is_latest,
                        on_click=ChatState.send_suggestion(s),
                    ),
                ),
                class_name="chips",
                role="group",
                aria_label="Suggested replies",
            ),
        ),
        class_name="next-step",
    )


def _tutor(msg: rx.Var[MessageItem]) -> rx.Component:
    return rx.el.article(
        rx.el.div(
            rx.el.span(_emotion_icon(msg.emotion), class_name="avatar"),
            rx.el.span("Tutor", class_name="who"),
            class_name="msg-head",
        ),
        rx.cond(
            msg.notice != "",
            rx.el.div(
                rx.el.p(rx.icon("file-text", size=14, aria_hidden="true"), " ", msg.notice, class_name="fallback-notice"),
                rx.html(msg.html, class_name="md fallback-body"),
                class_name="fallback",
            ),
            rx.el.div(rx.foreach(msg.blocks, text_block), class_name="blocks"),
        ),
        rx.foreach(msg.media, media_item),
        rx.foreach(msg.forms, form_view),
        _next_step(msg),
        class_name="msg msg-tutor emotion-" + msg.emotion,
        data_message_id=msg.id,
        aria_label="Tutor message",
    )


def _learner(msg: rx.Var[MessageItem]) -> rx.Component:
    return rx.el.article(
        rx.html(msg.html, class_name="md"),
        class_name=rx.cond(msg.is_form_answer, "msg msg-learner msg-form-answer", "msg msg-learner"),
        data_message_id=msg.id,
        aria_label="Your message",
    )


@rx.memo
def message_view(msg: rx.Var[MessageItem]) -> rx.Component:
    return rx.cond(msg.role == "learner", _learner(msg), _tutor(msg))
