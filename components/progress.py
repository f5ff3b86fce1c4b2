"""Progress, always visible but never in the way: bar, counts (topics seen, topics
mastered, to go), where we are, milestones."""

from __future__ import annotations

import reflex as rx

from tutor.web.state import ChatState, ui

_P = ChatState.progress


def progress_bar(percent: rx.Var[int], *, label: rx.Var[str] | str, **props) -> rx.Component:
    """An accessible bar for a whole-number percentage (chat header, module cards)."""
    return rx.el.div(
        rx.el.div(class_name="bar-fill", style={"width": percent.to_string() + "%"}),
        class_name="bar",
        role="progressbar",
        aria_valuemin=0,
        aria_valuemax=100,
        aria_valuenow=percent,
        aria_label=label,
        **props,
    )


def progress_panel() -> rx.Component:
    return rx.el.section(
        rx.el.div(
            progress_bar(_P.percent, label=ui("Module progress"), aria_valuetext=_P.summary, id="progress-bar"),
            rx.el.strong(_P.percent.to_string() + "%", id="progress-percent", class_name="progress-percent"),
            class_name="progress-row",
        ),
        rx.el.p(
            rx.el.span(_P.count_text, id="progress-count"),  # words made on the server, in the module's language
            rx.cond(
                _P.checked > 0,
                rx.fragment(
                    rx.el.span(" · ", aria_hidden="true"),
                    rx.el.span(_P.mastered_text,
                               id="progress-mastered", title=ui("Topics whose check you have answered well")),
                ),
            ),
            rx.el.span(" · ", aria_hidden="true"),
            rx.el.span(_P.remaining_text, id="progress-remaining"),
            rx.cond(
                _P.total_sections > 0,
                rx.fragment(
                    rx.el.span(" · ", aria_hidden="true"),
                    rx.el.span(
                        _P.sections_text,
                        id="progress-sections",
                    ),
                ),
            ),
            class_name="progress-text",
        ),
        rx.cond(
            _P.section != "",
            rx.el.p(
                rx.cond(_P.phase != "", rx.el.span(_P.phase, class_name="phase")),
                rx.cond(_P.phase != "", rx.el.span(" › ", aria_hidden="true")),
                rx.el.span(_P.section, class_name="section"),
                class_name="module-state",
                id="module-state",
                aria_label=_P.now_text,
            ),
        ),
        class_name="progress-panel",
        id="progress-details",
        aria_label=ui("Your progress"),
    )


def milestone_banner() -> rx.Component:
    """Shown once when a turn reaches a milestone: the one celebration of it (the completion
    view is the last one's). The motion stops for reduced-motion users."""
    return rx.el.div(
        rx.cond(
            (ChatState.milestone != "") & ~ChatState.completion.complete,
            rx.el.div(
                rx.el.span(rx.icon("party-popper", size=18, aria_hidden="true"), class_name="milestone-icon"),
                rx.el.span(
                    ui("Milestone reached:"), " ", rx.el.strong(ChatState.milestone), " ", ui("of the module. Well done!"),
                    class_name="milestone-text",
                ),
                rx.el.button(
                    rx.icon("x", size=14, aria_hidden="true"),
                    type="button",
                    class_name="icon-btn",
                    aria_label=ui("Dismiss the milestone message"),
                    on_click=ChatState.dismiss_milestone,
                    id="milestone-dismiss",
                ),
                class_name="milestone",
                id="milestone",
            ),
        ),
        role="status",  # always in the page, so screen readers announce what appears in it
        class_name="milestone-slot",
    )
