"""The reply being written: complete blocks (rendered once, server-side), the block still
growing (its pieces as plain text, appended in order), and media, a form's outline and
suggestions once they are complete. Nothing here is interactive: the stored reply
replaces all of it when the turn ends. The slots are described in `tutor.turns.live`."""

from __future__ import annotations

import reflex as rx

from components.blocks import text_block
from components.media import media_item
from tutor.render.display import BlockItem
from tutor.turns.live import STREAM_BLOCKS, STREAM_TAILS, FormOutline
from tutor.web.state import ChatState, ui


def _growing() -> rx.Component:
    pieces = [
        rx.cond(ChatState.stream_tail_from <= j, getattr(ChatState, f"stream_tail_{j}"), "")
        for j in range(STREAM_TAILS)
    ]
    return rx.cond(
        ChatState.stream_type != "",
        rx.el.div(
            *pieces,
            rx.el.span(class_name="caret", aria_hidden="true"),
            class_name="block growing block-" + ChatState.stream_type,
            data_block_type=ChatState.stream_type,
        ),
    )


def _form_outline(form: rx.Var[FormOutline]) -> rx.Component:
    return rx.el.div(
        rx.el.p(rx.icon("clipboard-list", size=14, aria_hidden="true"), " ",
                rx.cond(form.title != "", form.title, "A short form"), class_name="form-outline-title"),
        rx.el.ul(rx.foreach(form.fields, lambda label: rx.el.li(label)), class_name="form-outline-fields"),
        class_name="form-outline",
    )


def _extras() -> rx.Component:
    return rx.fragment(
        rx.foreach(ChatState.stream_media, media_item),
        rx.foreach(ChatState.stream_forms, _form_outline),
        rx.cond(
            ChatState.stream_suggestions.length() > 0,
            rx.el.div(
                rx.foreach(ChatState.stream_suggestions, lambda s: rx.el.span(s, class_name="chip chip-preview")),
                class_name="chips",
                aria_hidden="true",
            ),
        ),
    )


@rx.memo
def stream_block(block: rx.Var[BlockItem], words: rx.Var[dict[str, str]]) -> rx.Component:
    # A memo with the block as a prop, as a stored message's blocks are rendered: a block
    # type's nested matches cannot read the state directly (nor the page's words: `words`).
    return text_block(block, words)


def streaming_reply() -> rx.Component:
    blocks = [
        rx.cond(getattr(ChatState, f"stream_block_{i}").type != "", stream_block(block=getattr(ChatState, f"stream_block_{i}"), words=ChatState.ui))
        for i in range(STREAM_BLOCKS)
    ]
    return rx.el.article(
        rx.el.div(
            rx.el.span(rx.icon("graduation-cap", size=16, aria_hidden="true"), class_name="avatar"),
            rx.el.span(ui("Tutor"), class_name="who"),
            rx.el.span(ui("writing…"), class_name="writing-label"),
            class_name="msg-head",
        ),
        rx.el.div(*blocks, _growing(), class_name="blocks"),
        _extras(),
        class_name="msg msg-streaming",
        id="streaming-reply",
        aria_label=ui("Tutor message, being written"),
        aria_busy="true",
    )

