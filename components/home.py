"""The start page: every module with its size and the learner's progress; start, resume,
or start over (after a confirmation, since it clears the module's progress)."""

from __future__ import annotations

import reflex as rx

from components.auth import account_bar
from components.behaviour import chat_behaviour
from components.connection import LOST, connection_words
from components.progress import progress_bar
from components.theme import theme_choice
from tutor.render.display import ModuleCard
from tutor.web.home_state import HomeState
from tutor.web.page_words import page_word


def _w(msgid: str) -> rx.Var[str]:
    """The start page's word: in the learner's language (tutor.web.page_words.StartWords)."""
    return HomeState.words[page_word(msgid)]


def _progress(card: rx.Var[ModuleCard]) -> rx.Component:
    return rx.el.div(
        progress_bar(card.percent, label=_w("Your progress in") + " " + card.title),
        rx.el.p(
            rx.el.strong(card.percent.to_string() + "%"),
            " · " + card.covered_text,
            rx.cond(card.mastered > 0, " · " + card.mastered_text, ""),
            rx.cond(card.activity != "", rx.el.span(" · " + card.activity)),
            class_name="card-progress-text",
        ),
        class_name="card-progress",
    )


def _restart(card: rx.Var[ModuleCard]) -> rx.Component:
    asking = HomeState.confirm_restart == card.id
    return rx.cond(
        asking,
        rx.el.div(
            rx.el.p(
                _w("Start over? Your progress in this module goes back to 0% and a new conversation begins."),
                id="confirm-text-" + card.id,
            ),
            rx.el.div(
                rx.el.button(
                    _w("Yes, start over"), type="button", class_name="btn btn-danger",
                    on_click=HomeState.start_over(card.id), id="confirm-restart-" + card.id,
                    auto_focus=True, aria_describedby="confirm-text-" + card.id,
                ),
                rx.el.button(
                    _w("Cancel"), type="button", class_name="btn btn-quiet confirm-cancel",
                    on_click=HomeState.cancel_restart, id="cancel-restart-" + card.id,
                    custom_attrs={"data-return-focus": "restart-" + card.id},
                ),
                class_name="card-actions",
            ),
            class_name="confirm",
            role="group",
            aria_label=_w("Confirm starting over"),
        ),
        rx.el.button(
            _w("Start over"), type="button", class_name="btn btn-quiet",
            on_click=HomeState.ask_restart(card.id), id="restart-" + card.id,
            aria_label=_w("Start over:") + " " + card.title,
        ),
    )


def _module_card(card: rx.Var[ModuleCard]) -> rx.Component:
    return rx.el.li(
        rx.el.h2(card.title, id="title-" + card.id),
        rx.el.p(card.description, class_name="card-description"),
        rx.el.p(
            card.topics_text,
            rx.cond(card.completed, rx.fragment(" · ", rx.el.span(
                rx.icon("circle-check", size=14, aria_hidden="true"), _w("Completed"),
                class_name="badge badge-done", id="completed-" + card.id))),
            class_name="card-meta", id="topics-" + card.id,
        ),
        rx.cond(card.started, _progress(card)),
        rx.el.div(
            rx.el.a(
                rx.cond(card.completed, _w("Review"), rx.cond(card.started, _w("Resume"), _w("Start"))),
                href="/learn?module=" + card.id,
                class_name="btn btn-primary",
                id="open-" + card.id,
                aria_label=rx.cond(card.completed, _w("Review") + " ", rx.cond(card.started, _w("Resume") + " ", _w("Start") + " ")) + card.title,
            ),
            rx.cond(card.started, _restart(card)),
            class_name="card-actions",
        ),
        class_name="module-card",
        id="card-" + card.id,
        aria_labelledby="title-" + card.id,
    )


def home_page() -> rx.Component:
    return rx.el.main(
        rx.el.header(
            rx.el.h1("Tutor"),
            rx.el.p(_w("Pick a module and learn by conversation. Type anything, any time.")),
            account_bar(_w),
            theme_choice("home-theme", _w),
            class_name="home-header",
        ),
        rx.cond(  # the database is down: say so calmly instead of showing no modules
            HomeState.unavailable != "",
            rx.el.p(HomeState.unavailable, class_name="operator-notice", id="unavailable", role="alert"),
        ),
        rx.cond(  # start over refused by a usage limit
            HomeState.restart_refused != "",
            rx.el.p(HomeState.restart_refused, class_name="operator-notice", id="restart-refused", role="status"),
        ),
        rx.el.ul(rx.foreach(HomeState.modules, _module_card), class_name="module-list", id="modules"),
        rx.cond(
            HomeState.problems.length() > 0,
            rx.el.details(
                rx.el.summary(_w("Some modules could not be loaded")),
                rx.el.ul(rx.foreach(HomeState.problems, lambda p: rx.el.li(rx.el.code(p)))),
                class_name="problems",
            ),
        ),
        chat_behaviour(),  # Escape closes a confirmation here too
        class_name="page home",
        lang=HomeState.page_language,  # the learner's language (Accept-Language), else TUTOR_LANGUAGE
        custom_attrs=connection_words(_w(LOST)),
    )
