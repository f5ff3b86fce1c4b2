"""Text blocks: eight types, each styled as seed 002 says. HTML comes from the one
server-side markdown renderer (raw HTML off), never from the model directly."""

from __future__ import annotations

import reflex as rx

from tutor.display import BlockItem

_CALLOUT_LABEL = {"info": "Info", "warning": "Warning", "success": "Well done", "tip": "Tip"}
_CALLOUT_ICON = {"info": "info", "warning": "triangle-alert", "success": "circle-check", "tip": "lightbulb"}


def _heading(block: rx.Var[BlockItem]) -> rx.Component:
    content = rx.html(block.html, class_name="md-inline")
    return rx.match(
        block.level,
        (1, rx.el.h1(content, class_name="block block-heading")),
        (2, rx.el.h2(content, class_name="block block-heading")),
        (3, rx.el.h3(content, class_name="block block-heading")),
        (4, rx.el.h4(content, class_name="block block-heading")),
        (5, rx.el.h5(content, class_name="block block-heading")),
        rx.el.h6(content, class_name="block block-heading"),
    )


def _callout(kind: str, block: rx.Var[BlockItem]) -> rx.Component:
    return rx.el.div(
        rx.el.div(
            rx.icon(_CALLOUT_ICON[kind], size=16, aria_hidden="true"),
            rx.el.span(_CALLOUT_LABEL[kind]),
            class_name="callout-label",
        ),
        rx.html(block.html, class_name="md"),
        class_name=f"block block-callout block-{kind}",
        role="note",
        aria_label=_CALLOUT_LABEL[kind],
    )


def text_block(block: rx.Var[BlockItem]) -> rx.Component:
    return rx.match(
        block.type,
        ("heading", _heading(block)),
        ("quote", rx.el.blockquote(rx.html(block.html, class_name="md"), class_name="block block-quote")),
        ("list", rx.html(block.html, class_name="block block-list md")),
        ("info", _callout("info", block)),
        ("warning", _callout("warning", block)),
        ("success", _callout("success", block)),
        ("tip", _callout("tip", block)),
        rx.html(block.html, class_name="block block-paragraph md"),
    )
