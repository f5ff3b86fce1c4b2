"""Images, video and audio with alt text and caption. A source that fails to load is
replaced by its alt text and caption (handled in the browser, no round trip)."""

from __future__ import annotations

import reflex as rx

from tutor.display import MediaItem

# Swap a broken element for the text fallback that sits next to it.
_ON_ERROR = rx.Var(
    "((e) => { const f = e.target.closest('figure'); if (f) { f.classList.add('media-broken'); } })"
)


def media_item(media: rx.Var[MediaItem]) -> rx.Component:
    fallback = rx.el.div(
        rx.icon("image-off", size=16, aria_hidden="true"),
        rx.el.span(rx.cond(media.alt != "", media.alt, "Media unavailable")),
        class_name="media-fallback",
    )
    element = rx.match(
        media.type,
        (
            "video",
            rx.el.video(
                src=media.src, controls=True, preload="metadata", aria_label=media.alt,
                custom_attrs={"onError": _ON_ERROR},
            ),
        ),
        (
            "audio",
            rx.el.audio(
                src=media.src, controls=True, preload="metadata", aria_label=media.alt,
                custom_attrs={"onError": _ON_ERROR},
            ),
        ),
        rx.el.img(
            src=media.src, alt=media.alt, loading="lazy", referrer_policy="no-referrer",
            custom_attrs={"onError": _ON_ERROR},
        ),
    )
    return rx.el.figure(
        element,
        fallback,
        rx.cond(media.caption != "", rx.el.figcaption(media.caption)),
        class_name="media media-" + media.type,
    )
