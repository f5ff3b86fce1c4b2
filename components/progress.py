"""Progress, always visible but never in the way: bar, counts, where we are, milestones."""

from __future__ import annotations

import reflex as rx

from tutor.state import ChatState


def progress_panel() -> rx.Component:
    return rx.el.div(
        rx.el.div(
            rx.el.div(
                class_name="bar-fill",
                style={"width": ChatState.percentage.to_string() + "%"},
            ),
            class_name="bar",
            role="progressbar",
            aria_valuemin=0,
            aria_valuemax=100,
            aria_valuenow=ChatState.percentage,
            aria_label="Module progress",
            id="progress-bar",
        ),
        rx.el.p(
            rx.el.strong(ChatState.percentage.to_string() + "%", id="progress-percent"),
            " · ",
            rx.el.span(ChatState.covered_count.to_string() + " of " + ChatState.total_topics.to_string() + " topics", id="progress-count"),
            rx.cond(
                ChatState.total_sections > 0,
                rx.el.span(
                    " · sections ", ChatState.sections_completed.to_string(), "/", ChatState.total_sections.to_string(),
                ),
            ),
            class_name="progress-text",
        ),
        rx.cond(
            ChatState.section != "",
            rx.el.p(
                rx.cond(ChatState.phase != "", rx.el.span(ChatState.phase, " › ")),
                rx.el.span(ChatState.section),
                class_name="module-state",
                id="module-state",
            ),
        ),
        class_name="progress-panel",
    )


def milestone_banner() -> rx.Component:
    return rx.cond(
        ChatState.milestone != "",
        rx.el.div(
            rx.icon("party-popper", size=18, aria_hidden="true"),
            rx.el.span("Milestone reached: ", rx.el.strong(ChatState.milestone), " of the module!"),
            rx.el.button(
                rx.icon("x", size=14, aria_hidden="true"),
                type="button",
                class_name="icon-btn",
                aria_label="Dismiss milestone",
                on_click=ChatState.dismiss_milestone,
            ),
            class_name="milestone",
            role="status",
            id="milestone",
        ),
    )
