"""The two pages: the start page (modules, progress, resume, start over) and the chat."""

from __future__ import annotations

import reflex as rx

from components.message import message_view
from components.progress import milestone_banner, progress_panel
from tutor.state import ChatState, HomeState, ModuleCard, live_vars

# Enter sends, Shift+Enter adds a line; the message list follows new messages.
_COMPOSER_JS = """
if (!window.__tutorComposer) {
  window.__tutorComposer = true;
  document.addEventListener('keydown', (e) => {
    const t = e.target;
    if (t && t.id === 'message' && e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (t.form) { t.form.requestSubmit(); }
    }
  });
  const follow = () => {
    const list = document.getElementById('messages');
    if (!list) { return; }
    new MutationObserver(() => {
      const end = document.getElementById('chat-end');
      if (end) { end.scrollIntoView({block: 'end'}); }
    }).observe(list, {childList: true, subtree: true});
  };
  const wait = setInterval(() => {
    if (document.getElementById('messages')) { clearInterval(wait); follow(); }
  }, 200);
}
"""


def _module_card(card: rx.Var[ModuleCard]) -> rx.Component:
    return rx.el.li(
        rx.el.h2(card.title),
        rx.el.p(card.description, class_name="card-description"),
        rx.el.p(
            card.topics.to_string() + " topics",
            rx.cond(
                card.started,
                rx.el.span(" · your progress: ", rx.el.strong(card.percentage.to_string() + "%")),
            ),
            class_name="card-meta",
        ),
        rx.el.div(
            rx.el.a(
                rx.cond(card.started, "Resume", "Start"),
                href="/learn?module=" + card.id,
                class_name="btn btn-primary",
                id="open-" + card.id,
            ),
            rx.cond(
                card.started,
                rx.el.button(
                    "Start over",
                    type="button",
                    class_name="btn btn-quiet",
                    on_click=HomeState.start_over(card.id),
                    id="restart-" + card.id,
                ),
            ),
            class_name="card-actions",
        ),
        class_name="module-card",
    )


def home_page() -> rx.Component:
    return rx.el.main(
        rx.el.header(
            rx.el.h1("Tutor"),
            rx.el.p("Pick a module and learn by conversation. Type anything, any time."),
            class_name="home-header",
        ),
        rx.el.ul(rx.foreach(HomeState.modules, _module_card), class_name="module-list", id="modules"),
        rx.cond(
            HomeState.problems.length() > 0,
            rx.el.details(
                rx.el.summary("Some modules could not be loaded"),
                rx.el.ul(rx.foreach(HomeState.problems, lambda p: rx.el.li(rx.el.code(p)))),
                class_name="problems",
            ),
        ),
        class_name="page home",
    )


def _composer() -> rx.Component:
    return rx.el.form(
        rx.el.label("Your message", html_for="message", class_name="sr-only"),
        rx.el.textarea(
            id="message",
            name="message",
            placeholder="Type your message — Enter to send, Shift+Enter for a new line",
            rows=2,
            auto_focus=True,
            aria_describedby="composer-help",
            aria_invalid=ChatState.input_error != "",
        ),
        rx.el.button(
            rx.icon("send", size=18, aria_hidden="true"),
            rx.el.span("Send", class_name="send-label"),
            type="submit",
            id="send",
            class_name="btn btn-primary send",
            aria_label="Send message",
        ),
        rx.el.p(
            rx.cond(ChatState.input_error != "", ChatState.input_error, ""),
            id="composer-help",
            class_name=rx.cond(ChatState.input_error != "", "input-error", "sr-only"),
            role=rx.cond(ChatState.input_error != "", "alert", "none"),
        ),
        on_submit=ChatState.send_text,
        reset_on_submit=False,
        class_name="composer",
        id="composer",
    )


def chat_page() -> rx.Component:
    return rx.el.div(
        rx.el.header(
            rx.el.a(rx.icon("arrow-left", size=16, aria_hidden="true"), " Modules", href="/", class_name="back"),
            rx.el.h1(ChatState.module_title, class_name="module-title"),
            progress_panel(),
            class_name="chat-header",
        ),
        rx.el.main(
            rx.cond(
                ChatState.load_error != "",
                rx.el.div(
                    rx.el.p("This module can't be opened:"),
                    rx.el.pre(ChatState.load_error),
                    rx.el.a("Back to modules", href="/"),
                    class_name="load-error",
                    role="alert",
                ),
            ),
            milestone_banner(),
            rx.el.div(
                rx.foreach(ChatState.history, lambda m: message_view(msg=m)),
                *[rx.foreach(v, lambda m: message_view(msg=m)) for v in live_vars()],
                rx.cond(
                    ChatState.thinking,
                    rx.el.div(
                        rx.el.span(class_name="dot"), rx.el.span(class_name="dot"), rx.el.span(class_name="dot"),
                        rx.el.span("The tutor is thinking…", class_name="typing-text"),
                        class_name="typing",
                        id="typing",
                        role="status",
                    ),
                ),
                rx.el.div(id="chat-end"),
                id="messages",
                class_name="messages",
            ),
            rx.cond(
                ChatState.operator_notice != "",
                rx.el.p(ChatState.operator_notice, class_name="operator-notice", role="alert"),
            ),
            class_name="chat-main",
        ),
        rx.el.footer(_composer(), class_name="chat-footer"),
        rx.el.div(ChatState.announcement, aria_live="polite", class_name="sr-only", id="announcer"),
        rx.script(_COMPOSER_JS),
        class_name="page chat",
    )
