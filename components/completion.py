"""The ending of a module, shown once every topic is done: what was covered, what is worth
reviewing, and what next (other modules, a summary, starting over)."""

from __future__ import annotations

import reflex as rx

from tutor.render.progress_display import LinkItem
from tutor.web.state import ChatState, ui

_C = ChatState.completion


def _next_module(link: rx.Var[LinkItem]) -> rx.Component:
    return rx.el.li(rx.el.a(link.title, href="/learn?module=" + link.id))


def completion_view() -> rx.Component:
    return rx.cond(
        _C.complete,
        rx.el.section(
            rx.el.h2(
                rx.el.span(rx.icon("award", size=22, aria_hidden="true"), class_name="completion-icon"),
                ui("Module complete:"), " ", ChatState.module_title,
                id="completion-title",
            ),
            rx.el.p(ui("Every topic is done. The conversation stays here: ask about anything again whenever you like.")),
            rx.el.h3(ui("What you covered")),
            rx.el.ul(rx.foreach(_C.covered, lambda t: rx.el.li(t)), id="completion-covered"),
            rx.el.h3(ui("Worth reviewing")),
            rx.cond(
                _C.review.length() > 0,
                rx.el.ul(rx.foreach(_C.review, lambda t: rx.el.li(t)), id="completion-review"),
                rx.el.p(ui("Nothing left open: every check was answered well."), id="completion-review"),
            ),
            rx.el.h3(ui("What next")),
            rx.cond(
                _C.next_modules.length() > 0,
                rx.el.ul(rx.foreach(_C.next_modules, _next_module), id="completion-next"),
                rx.el.p(ui("You have seen every module here. Going over this one again is a good way to remember it.")),
            ),
            rx.el.div(
                rx.el.button(
                    rx.icon("list-checks", size=16, aria_hidden="true"), ui("Show me a summary"),
                    type="button", class_name="btn btn-primary", id="completion-summary",
                    on_click=ChatState.send_suggestion(ui("Show me a summary")),
                ),
                rx.el.a(ui("All modules"), href="/", class_name="btn btn-quiet"),
                class_name="card-actions",
            ),
            class_name="completion",
            id="completion",
            aria_labelledby="completion-title",
        ),
    )
