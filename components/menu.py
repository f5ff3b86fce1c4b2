"""The chat page's menu: the theme, and "Start over" with its confirmation (Escape or
Cancel closes it and gives the focus back to the button that asked)."""

from __future__ import annotations

import reflex as rx

from components.theme import theme_choice
from tutor.web.state import ChatState, ui


def _confirm() -> rx.Component:
    return rx.el.div(
        rx.el.p(ui("Start over? Your progress in this module goes back to 0% and a new conversation begins."),
                id="chat-confirm-text"),
        rx.el.div(
            rx.el.button(
                ui("Yes, start over"), type="button", class_name="btn btn-danger", id="confirm-restart",
                on_click=ChatState.start_over, auto_focus=True, aria_describedby="chat-confirm-text",
            ),
            rx.el.button(
                ui("Cancel"), type="button", class_name="btn btn-quiet confirm-cancel", id="cancel-restart",
                on_click=ChatState.cancel_restart, custom_attrs={"data-return-focus": "menu-restart"},
            ),
            class_name="card-actions",
        ),
        class_name="confirm",
        role="group",
        aria_label=ui("Confirm starting over"),
    )


def chat_menu() -> rx.Component:
    return rx.el.details(
        rx.el.summary(
            rx.icon("menu", size=18, aria_hidden="true"),
            rx.el.span(ui("Menu"), class_name="menu-label"),
            id="menu-toggle",
        ),
        rx.el.div(
            theme_choice("chat-theme", ui),
            rx.cond(
                ChatState.confirm_restart,
                _confirm(),
                rx.el.button(
                    rx.icon("rotate-ccw", size=16, aria_hidden="true"), ui("Start over"),
                    type="button", class_name="btn btn-quiet", id="menu-restart",
                    on_click=ChatState.ask_restart,
                ),
            ),
            class_name="menu-panel",
        ),
        class_name="chat-menu",
        id="chat-menu",
    )
