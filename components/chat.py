"""The chat page: progress header, the conversation, the typing indicator and the message
box. The message box is never disabled: the learner may always type, even while the
tutor thinks or a form is open. A slow turn shows it is alive: beside Stop, how long the
tutor has been at it ("Thinking… 12 s", "Writing… 40 s"), counted in the browser."""

from __future__ import annotations

import reflex as rx

from components.auth import account_bar
from components.behaviour import chat_behaviour
from components.completion import completion_view
from components.connection import LOST, connection_words
from components.menu import chat_menu
from components.message import message
from components.progress import milestone_banner, progress_panel
from components.sending import (
    char_counter,
    held_outbox,
    opening_flag,
    outbox,
    sending_behaviour,
    sending_fields,
)
from components.streaming import streaming_reply
from tutor.web.state import ChatState, live_buckets, ui

# Counted in the browser, so a slow turn costs no server push a second: from the moment
# Stop appears (the tutor is busy) until it goes, and again from each reply that lands while
# the tutor stays busy with the next message (data-turn: the latest reply); shown once it is
# more than a moment.
_ELAPSED_JS = r"""
if (!window.__tutorElapsed) {
  window.__tutorElapsed = true;
  const SHOW_AFTER_S = 3;
  const narrow = window.matchMedia('(max-width: 480px)');
  setInterval(() => {
    const el = document.getElementById('turn-elapsed');
    if (!el) { return; }
    const turn = el.dataset.turn || '';
    if (!el.dataset.since || el.dataset.sinceTurn !== turn) {
      el.dataset.since = String(Date.now());
      el.dataset.sinceTurn = turn;
    }
    const s = Math.floor((Date.now() - Number(el.dataset.since)) / 1000);
    const doing = document.getElementById('streaming-reply') ? (el.dataset.writing || 'Writing…') : (el.dataset.thinking || 'Thinking…');
    const text = s < SHOW_AFTER_S ? '' : (narrow.matches ? `${s} s` : `${doing} ${s} s`);
    if (el.textContent !== text) {
      el.textContent = text;
      el.style.display = text ? 'inline' : 'none';
    }
  }, 250);
}
"""


def _elapsed() -> rx.Component:
    return rx.el.span(
        id="turn-elapsed",
        data_turn=ChatState.latest_tutor_id.to_string(),  # a new reply: the next turn's count starts
        data_thinking=ui("Thinking…"),  # the words the script shows, in the module's language
        data_writing=ui("Writing…"),
        role="timer",  # not announced every second; the status below says the tutor is busy
        style={"display": "none", "align_self": "center", "color": "var(--muted)", "font_size": ".85rem",
               "white_space": "nowrap", "font_variant_numeric": "tabular-nums"},
    )


def _composer() -> rx.Component:
    has_error = ChatState.input_error != ""
    return rx.el.form(
        rx.el.label(ui("Your message"), html_for="message", class_name="sr-only"),
        rx.el.textarea(
            id="message",
            name="message",
            placeholder=ui("Type your message — Enter to send, Shift+Enter for a new line"),
            data_full_placeholder=ui("Type your message — Enter to send, Shift+Enter for a new line"),
            data_short_placeholder=ui("Type your message"),  # a phone's (components/behaviour.py)
            rows=2,
            auto_focus=True,
            aria_describedby="composer-help",
            aria_invalid=rx.cond(has_error, "true", "false"),
            enter_key_hint="send",
        ),
        *sending_fields(),
        rx.el.div(
            char_counter(),
            # Stop ends the reply being written; what arrived so far is kept.
            rx.cond(ChatState.thinking, _elapsed()),
            rx.cond(
                ChatState.thinking,
                rx.el.button(
                    rx.icon("square", size=16, aria_hidden="true"),
                    rx.el.span(ui("Stop"), class_name="send-label"),
                    type="button",
                    id="stop",
                    class_name="btn stop",
                    aria_label=ui("Stop the tutor's reply"),
                    on_click=ChatState.stop_reply,
                ),
            ),
            rx.el.button(
                rx.icon("send", size=18, aria_hidden="true"),
                rx.el.span(ui("Send"), class_name="send-label"),
                type="submit",
                id="send",
                class_name="btn btn-primary send",
                aria_label=ui("Send message"),
            ),
            class_name="composer-actions",
        ),
        rx.el.p(
            rx.cond(has_error, ChatState.input_error, ui("Enter sends; Shift+Enter starts a new line.")),
            id="composer-help",
            class_name=rx.cond(has_error, "input-error", "sr-only"),
            role=rx.cond(has_error, "alert", "none"),
        ),
        on_submit=ChatState.send_text,
        reset_on_submit=False,
        class_name="composer",
        id="composer",
        data_conversation=ChatState.conversation_id.to_string(),  # drafts are kept per conversation
        data_opening=opening_flag(),  # sends wait for the introduction (components/sending)
        aria_label=ui("Send a message to the tutor"),
    )


def _typing() -> rx.Component:
    return rx.el.div(
        rx.el.span(class_name="dot"), rx.el.span(class_name="dot"), rx.el.span(class_name="dot"),
        rx.el.span(
            rx.cond(ChatState.stream_status != "", ChatState.stream_status, ui("The tutor is thinking… you can keep typing.")),
            class_name="typing-text",
        ),
        class_name="typing",
        id="typing",
    )


def _with_forms(forms: rx.Var):
    # A one-argument function: rx.foreach passes the index to a second parameter.
    return lambda m: message(m, forms)


def _messages() -> rx.Component:
    return rx.el.section(
        rx.foreach(ChatState.history, _with_forms(ChatState.history_forms)),
        *[rx.foreach(bucket, _with_forms(forms)) for bucket, forms in live_buckets()],
        outbox(),  # messages being sent, shown at once (components/sending)
        rx.cond(ChatState.streaming, streaming_reply()),
        rx.cond(ChatState.thinking & ~ChatState.streaming, _typing()),
        held_outbox(),  # sends waiting for the opening turn, below it
        rx.el.div(id="chat-end"),
        id="messages",
        class_name="messages",
        aria_label=ui("Conversation"),
        aria_busy=rx.cond(ChatState.loaded, "false", "true"),
    )


def chat_page() -> rx.Component:
    return rx.el.div(
        rx.el.a(ui("Skip to the message box"), href="#message", class_name="skip-link"),
        rx.el.header(
            rx.el.nav(
                rx.el.a(rx.icon("arrow-left", size=16, aria_hidden="true"), rx.el.span(ui("All modules"), class_name="back-label"),
                        href="/", class_name="back"),
                aria_label=ui("Back"),
            ),
            # On a phone the header is one line; this opens the progress details below it.
            rx.el.button(
                ChatState.progress.percent.to_string() + "%",
                rx.icon("chevron-down", size=16, aria_hidden="true"),
                type="button", class_name="header-toggle", id="progress-toggle",
                aria_expanded="false", aria_controls="progress-details",
                aria_label=ui("Progress") + " " + ChatState.progress.percent.to_string() + "%: " + ui("show details"),
            ),
            chat_menu(),
            rx.el.h1(ChatState.module_title, class_name="module-title"),
            progress_panel(),
            milestone_banner(),
            account_bar(ui),
            class_name="chat-header",
        ),
        rx.el.main(
            rx.cond(
                ChatState.load_error != "",
                rx.el.div(
                    rx.el.p(ui("This module can't be opened:")),
                    rx.el.pre(ChatState.load_error),
                    rx.el.a(ui("Back to modules"), href="/"),
                    class_name="load-error",
                    role="alert",
                ),
            ),
            _messages(),
            completion_view(),
            rx.cond(
                ChatState.operator_notice != "",
                rx.el.p(ChatState.operator_notice, class_name="operator-notice", role="alert"),
            ),
            class_name="chat-main",
            custom_attrs=connection_words(ui(LOST)),
        ),
        rx.el.footer(_composer(), class_name="chat-footer"),
        rx.el.button(
            ui("New message"), " ", rx.icon("arrow-down", size=16, aria_hidden="true"),
            type="button", id="new-message", class_name="btn btn-primary new-message", hidden=True,
        ),
        # Polite announcements of each new tutor turn; the log above is not live itself,
        # so a long reply is announced once, as a short text.
        rx.el.div(ChatState.announcement, aria_live="polite", aria_atomic="true", class_name="sr-only", id="announcer"),
        rx.el.div(
            rx.cond(ChatState.thinking, ui("The tutor is thinking."), ""),
            role="status", class_name="sr-only", id="thinking-status",
        ),
        chat_behaviour(),
        sending_behaviour(),
        rx.script(_ELAPSED_JS),
        class_name="page chat",
        lang=ChatState.language,  # the module's language: screen readers pronounce it so
        # The tab's title: the module's (components/theme.py's head script sets it, and <html lang>).
        data_title=rx.cond(ChatState.module_title != "", ChatState.module_title + " — Tutor", "Tutor"),
    )
