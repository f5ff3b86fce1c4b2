"""What a learner sees while the connection to the server is lost: one calm line, in place
of Reflex's default overlay (a toast naming the socket address and a pulsing icon). The
page keeps working as far as it can: typed text stays in the box, and a message sent
meanwhile waits in the browser and goes once the connection is back (components/sending).

The banner is one for every page, so it reads its words from the page it shows on: each
page puts them, in its own language, in a `data-connection-lost` attribute
(`connection_words`)."""

from __future__ import annotations

import json

import reflex as rx
from reflex_base.components.memo import memo
from reflex_components_core.core.banner import has_connection_errors

LOST = "Connection lost — reconnecting… Your message is kept."  # a page msgid
# The page's words (read when the banner shows; English if a page has none).
_LOST_TEXT = rx.Var(
    "((typeof document !== 'undefined' && document.querySelector('[data-connection-lost]')"
    f"?.getAttribute('data-connection-lost')) || {json.dumps(LOST)})",
    _var_type=str,
)


def connection_words(words: str | rx.Var[str]) -> dict[str, str | rx.Var[str]]:
    """For a page's root element: the banner's words in the page's language."""
    return {"data-connection-lost": words}

_STYLE = {
    "position": "fixed", "top": "0", "left": "0", "right": "0", "z_index": "1000",
    "display": "flex", "justify_content": "center", "align_items": "center", "gap": ".5rem",
    "padding": ".5rem 1rem", "background": "#fff4d6", "color": "#3d2f00",
    "border_bottom": "1px solid #e6cf8a", "font_size": ".95rem",
}


def connection_banner() -> rx.Component:
    return rx.cond(
        has_connection_errors,
        rx.el.div(
            rx.icon("wifi-off", size=16, aria_hidden="true"),
            rx.el.span(_LOST_TEXT),
            id="connection-lost",
            class_name="connection-lost",
            role="status",
            style=_STYLE,
        ),
    )


def _overlay() -> rx.Component:
    return rx.fragment(connection_banner())


def connection_overlay(stateful: bool) -> rx.Component | None:
    """For rx.App's overlay slot: the banner, on pages with state (as Reflex's own)."""
    return rx.fragment(memo(_overlay)()) if stateful else None
