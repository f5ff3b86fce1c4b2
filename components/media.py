"""Images, video and audio with alt text and caption. A source the server refused never
reaches the page: its alt text and caption show instead. A source that fails to load in
the browser is swapped for the same text (handled in the browser, no round trip)."""

from __future__ import annotations

import reflex as rx

from tutor.render.display import MediaItem

# The element failed to load: show the text fallback that sits next to it instead.
_ON_ERROR = rx.Var(
    "((e) => { const f = e.currentTarget.closest('figure');"
    " if (f) { f.classList.add('media-broken'); f.dataset.state = 'broken'; } })"
)


def _fallback(media: rx.Var[MediaItem]) -> rx.Component:
    return rx.el.p(
        rx.icon("image-off", size=16, aria_hidden="true"),
        rx.el.span(media.fallback),
        class_name="media-fallback",
    )


def _element(media: rx.Var[MediaItem]) -> rx.Component:
    events = {"onError": _ON_ERROR}
    return rx.match(
        media.type,
        (
            "video",
            rx.el.video(
                "Your browser cannot play this video. ", media.fallback,
                src=media.src, controls=True, preload="metadata", aria_label=media.label,
                custom_attrs=events,
            ),
        ),
        (
            "audio",
            rx.el.audio(
                "Your browser cannot play this audio. ", media.fallback,
                src=media.src, controls=True, preload="metadata", aria_label=media.label,
                custom_attrs=events,
            ),
        ),
        rx.el.img(
            src=media.src, alt=media.alt, loading="lazy", referrer_policy="no-referrer",
            decoding="async", custom_attrs=events,
        ),
    )


def media_item(media: rx.Var[MediaItem]) -> rx.Component:
    return rx.el.figure(
        rx.cond(media.refused, rx.fragment(), _element(media)),
        _fallback(media),
        rx.cond(media.caption != "", rx.el.figcaption(media.caption)),
        class_name=rx.cond(media.refused, "media media-broken media-", "media media-") + media.type,
        data_state=rx.cond(media.refused, "refused", "ok"),
    )
