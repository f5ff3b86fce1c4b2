"""Text blocks: eight types, each styled as seed 002 says. HTML comes from the one
server-side markdown renderer (raw HTML off), never from the model directly."""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx

from tutor.render.callouts import CALLOUT_LABELS
from tutor.render.display import BlockItem, QuoteItem
from tutor.web.state import ui

_CALLOUT_ICON = {"info": "info", "warning": "triangle-alert", "success": "circle-check", "tip": "lightbulb"}
_HEADINGS = {1: rx.el.h1, 2: rx.el.h2, 3: rx.el.h3, 4: rx.el.h4, 5: rx.el.h5, 6: rx.el.h6}


def rendered(tag: Callable[..., rx.Component], html: rx.Var[str], **props) -> rx.Component:
    """An element whose inside is HTML made by tutor.render.markdown (escaped, safe links only).
    Only that renderer's output may come here: it is the one place markup is made."""
    return tag(custom_attrs={"dangerouslySetInnerHTML": {"__html": html}}, **props)


def _heading(block: rx.Var[BlockItem]) -> rx.Component:
    levels = [(n, rendered(tag, block.html, class_name=f"block block-heading block-h{n}")) for n, tag in _HEADINGS.items()]
    return rx.match(block.level, *levels[:-1], levels[-1][1])


def _callout(kind: str, block: rx.Var[BlockItem], words: rx.Var | None = None) -> rx.Component:
    # The callout's own title (block.label) if it has one, else a neutral word for its kind.
    # `words` (the page's words in the module's language) comes as a prop of a memo; without it, English.
    neutral = CALLOUT_LABELS[kind] if words is None else ui(CALLOUT_LABELS[kind], words)
    label = rx.cond(block.label != "", block.label, neutral)
    return rx.el.div(
        rx.el.p(
            rx.icon(_CALLOUT_ICON[kind], size=16, aria_hidden="true"),
            rx.el.span(label),
            class_name="callout-label",
        ),
        rendered(rx.el.div, block.html, class_name="md"),
        class_name=f"block block-callout block-{kind}",
        role="note",
        aria_label=label,
    )


def text_block(block: rx.Var[BlockItem], words: rx.Var | None = None) -> rx.Component:
    return rx.match(
        block.type,
        ("heading", _heading(block)),
        ("quote", rendered(rx.el.blockquote, block.html, class_name="block block-quote md")),
        ("list", rendered(rx.el.div, block.html, class_name="block block-list md")),
        ("info", _callout("info", block, words)),
        ("warning", _callout("warning", block, words)),
        ("success", _callout("success", block, words)),
        ("tip", _callout("tip", block, words)),
        rendered(rx.el.div, block.html, class_name="block block-paragraph md"),
    )


def cited_quote(quote: rx.Var[QuoteItem]) -> rx.Component:
    """A quote from the module's material that the server verified word for word, with its
    source title and section as the caption."""
    return rx.el.figure(
        rendered(rx.el.blockquote, quote.html, class_name="md"),
        rx.el.figcaption(
            rx.icon("book-open", size=14, aria_hidden="true"),
            rx.el.span(quote.caption),
            class_name="cited-caption",
        ),
        class_name="block block-cited",
        data_source=quote.source_id,
    )
