"""One chat message: the learner's words, or a tutor reply (blocks, verified quotes, media,
forms, next step), or an unreadable reply shown as plain markdown with a small notice (a long one
shows its first part, the rest behind "Show the rest").

`message_view` is memoised and reads nothing from the state directly: everything comes in
as props, so a new turn re-renders the new message only, not the whole conversation."""

from __future__ import annotations

import reflex as rx

from components.blocks import cited_quote, rendered, text_block
from components.forms import FormContext, form_view
from components.media import media_item
from tutor.render.display import FormState, MessageItem
from tutor.web.state import ChatState, ui

_TONE_ICONS = {
    "celebratory": "party-popper",
    "encouraging": "sparkles",
    "supportive": "heart-handshake",
    "informative": "lightbulb",
}


def _tone_icon(emotion: rx.Var[str]) -> rx.Component:
    cases = [(tone, rx.icon(icon, size=16, aria_hidden="true")) for tone, icon in _TONE_ICONS.items()]
    return rx.match(emotion, *cases, rx.icon("graduation-cap", size=16, aria_hidden="true"))


def _next_step(msg: rx.Var[MessageItem], latest: rx.Var[bool], words: rx.Var[dict[str, str]]) -> rx.Component:
    return rx.cond(
        (msg.prompt != "") | (msg.suggestions.length() > 0),
        rx.el.div(
            rx.cond(msg.prompt != "", rendered(rx.el.p, msg.prompt, class_name="next-prompt")),
            rx.cond(
                msg.suggestions.length() > 0,
                rx.el.div(
                    rx.foreach(
                        msg.suggestions,
                        lambda s: rx.el.button(
                            s,
                            type="button",
                            class_name="chip",
                            disabled=~latest,
                            on_click=ChatState.send_suggestion(s),
                        ),
                    ),
                    class_name="chips",
                    role="group",
                    aria_label=rx.cond(latest, ui("Suggested replies", words), ui("Earlier suggestions", words)),
                ),
            ),
            class_name="next-step",
        ),
    )


def _rest_of_fallback(msg: rx.Var[MessageItem], words: rx.Var[dict[str, str]]) -> rx.Component:
    """The rest of a long unreadable reply, behind a native disclosure (keyboard and screen
    reader support come with the element)."""
    return rx.el.details(
        rx.el.summary(ui("Show the rest", words), class_name="fallback-more-toggle"),
        rendered(rx.el.div, msg.more_html, class_name="md fallback-more-body"),
        class_name="fallback-more",
    )


def _tutor(msg: rx.Var[MessageItem], latest: rx.Var[bool], ctx: FormContext) -> rx.Component:
    return rx.el.article(
        rx.el.div(
            # Decorative: the tone shows as the icon and the message's accent, not as words.
            rx.el.span(_tone_icon(msg.emotion), class_name="avatar", aria_hidden="true"),
            rx.el.span(ui("Tutor", ctx.words), class_name="who"),
            class_name="msg-head",
        ),
        rx.cond(
            msg.notice != "",
            rx.el.div(
                rx.el.p(rx.icon("file-text", size=14, aria_hidden="true"), " ", msg.notice, class_name="fallback-notice"),
                rendered(rx.el.div, msg.html, class_name="md fallback-body"),
                rx.cond(msg.more_html != "", _rest_of_fallback(msg, ctx.words)),
                class_name="fallback",
            ),
            rx.el.div(rx.foreach(msg.blocks, lambda b: text_block(b, ctx.words)), class_name="blocks"),
        ),
        rx.cond(
            msg.cut_note != "",
            rx.el.p(rx.icon("square", size=12, aria_hidden="true"), " ", msg.cut_note, class_name="cut-note",
                    role="note"),
        ),
        rx.cond(
            msg.quotes.length() > 0,
            rx.el.div(rx.foreach(msg.quotes, cited_quote), class_name="cited", role="group",
                      aria_label=ui("From the module's material", ctx.words)),
        ),
        rx.foreach(msg.media, media_item),
        rx.foreach(msg.forms, lambda f: form_view(f, ctx)),
        _next_step(msg, latest, ctx.words),
        class_name="msg msg-tutor emotion-" + msg.emotion,
        data_message_id=msg.id,
        data_emotion=msg.emotion,
        aria_label=ui("Tutor message", ctx.words),
    )


def _learner(msg: rx.Var[MessageItem], words: rx.Var[dict[str, str]]) -> rx.Component:
    return rx.el.article(
        rendered(rx.el.div, msg.html, class_name="md"),
        class_name=rx.cond(msg.is_form_answer, "msg msg-learner msg-form-answer", "msg msg-learner"),
        data_message_id=msg.id,
        aria_label=rx.cond(msg.is_form_answer, ui("Your form answers", words), ui("Your message", words)),
    )


@rx.memo
def message_view(
    msg: rx.Var[MessageItem],
    latest: rx.Var[bool],
    forms: rx.Var[dict[str, FormState]],
    error_key: rx.Var[str],
    error_field: rx.Var[str],
    error: rx.Var[str],
    words: rx.Var[dict[str, str]],
) -> rx.Component:
    # `words`: the page's words in the module's language (ChatState.ui), as a prop like the rest.
    ctx = FormContext(forms, error_key, error_field, error, words)
    return rx.cond(msg.role == "learner", _learner(msg, words), _tutor(msg, latest, ctx))


def message(msg: rx.Var[MessageItem], forms: rx.Var[dict[str, FormState]]) -> rx.Component:
    """A message with the props that concern it: the form error only reaches the latest
    tutor message, so a refused form re-renders that one message."""
    latest = msg.id == ChatState.latest_tutor_id
    return message_view(
        msg=msg,
        latest=latest,
        forms=forms,
        error_key=rx.cond(latest, ChatState.form_error_key, ""),
        error_field=rx.cond(latest, ChatState.form_error_field, ""),
        error=rx.cond(latest, ChatState.form_error, ""),
        words=ChatState.ui,
    )
