"""Sign-in and sign-up pages, and the "Signed in as NAME · Sign out" control.

The forms are plain HTML form posts to /auth/* (tutor/web/auth_routes.py): the server answers
with the session cookie (HttpOnly) and a redirect, so no page script ever holds a token.
"""

from __future__ import annotations

from collections.abc import Callable

import reflex as rx
from reflex_base.components.component import field
from reflex_components_core.el.elements.base import BaseHTML

from components.connection import LOST, connection_words
from tutor.web.auth_state import AuthPageState, TutorState
from tutor.web.page_words import page_word


def _w(msgid: str) -> rx.Var[str]:
    """These pages' word: in the learner's language, as the start page (StartWords)."""
    return AuthPageState.words[page_word(msgid)]

# A tab's event socket speaks for whoever was signed in when the page opened (the cookie is
# read when the socket connects). When this browser signs in, up or out in one tab, its other
# tabs load again, so a shared computer never leaves the last person's chat open in a tab.
_SYNC_JS = r"""
if (!window.__tutorAuthSync && window.BroadcastChannel) {
  window.__tutorAuthSync = true;
  const channel = new BroadcastChannel('tutor-auth');
  channel.onmessage = () => window.location.reload();
  document.addEventListener('submit', (e) => {
    const action = (e.target && e.target.getAttribute && e.target.getAttribute('action')) || '';
    if (action.startsWith('/auth/')) { channel.postMessage('changed'); }
  }, true);
}
"""


# After a refused post the page's address has the username typed (never the password): put
# it back in the box, unless the person has started typing already. (Done in the page, not
# through the state: a box re-made when the state arrives would drop what was typed.)
_REFILL_JS = r"""
(() => {
  const name = new URLSearchParams(window.location.search).get('username');
  const fill = (tries) => {
    const box = document.getElementById('username');
    if (box && !box.closest('[hidden]')) { if (name && !box.value) { box.value = name.slice(0, 64); } return; }
    if (tries > 0) { setTimeout(() => fill(tries - 1), 50); }
  };
  fill(200);
})();
"""


def auth_sync() -> rx.Component:
    return rx.script(_SYNC_JS)


class PlainForm(BaseHTML):
    """A <form> the browser itself sends (rx.el.form always stops that in page script)."""

    tag = "form"
    action: rx.Var[str] = field(doc="Where the form is posted")
    method: rx.Var[str] = field(doc="post")


def _field(label: str, name: str, kind: str, autocomplete: str, *, hint: str = "") -> rx.Component:
    described = rx.cond(AuthPageState.error != "", "auth-error", "") if not hint else \
        rx.cond(AuthPageState.error != "", f"auth-error {name}-hint", f"{name}-hint")
    return rx.el.div(
        rx.el.label(_w(label), html_for=name),
        rx.el.input(id=name, name=name, type=kind, auto_complete=autocomplete, required=True,
                    aria_describedby=described,
                    aria_invalid=rx.cond(AuthPageState.error != "", "true", "false")),
        rx.el.p(_w(hint), id=f"{name}-hint", class_name="auth-hint") if hint else rx.fragment(),
        class_name="auth-field",
    )


def _error() -> rx.Component:
    return rx.cond(
        AuthPageState.error != "",
        rx.el.p(AuthPageState.error, id="auth-error", class_name="auth-error", role="alert"),
    )


def _page(title: str, form: rx.Component, other: rx.Component) -> rx.Component:
    # The form shows once the page is live: a box typed into before that would be emptied
    # when the page takes over the server-rendered markup. It is hidden, not taken out, while
    # the page is not live: the page loads its state again after a lost connection (and may
    # on a slow first load), and a form made again then would drop what was typed.
    ready = rx.fragment(
        rx.el.div(form, hidden=~rx.State.is_hydrated),
        rx.el.p(_w("Loading…"), class_name="auth-hint", role="status", hidden=rx.State.is_hydrated),
    )
    return rx.el.main(
        rx.el.header(rx.el.h1("Tutor"), rx.el.p(_w(title)), class_name="home-header"),
        rx.el.section(_error(), ready, other, class_name="auth-card", aria_label=_w(title)),
        auth_sync(),
        rx.script(_REFILL_JS),
        class_name="page home auth",
        lang=AuthPageState.page_language,  # the learner's language (Accept-Language), else TUTOR_LANGUAGE
        custom_attrs=connection_words(_w(LOST)),
    )


def signin_page() -> rx.Component:
    form = PlainForm.create(
        _field("Username", "username", "text", "username"),
        _field("Password", "password", "password", "current-password"),
        rx.el.input(type="hidden", name="next", value=AuthPageState.next_path),
        rx.el.button(_w("Sign in"), type="submit", id="signin-submit", class_name="primary"),
        action="/auth/signin", method="post", id="signin-form",
    )
    other = rx.el.p(
        _w("New here?"), " ",
        rx.el.a(_w("Create an account"), href=AuthPageState.signup_href, id="create-account", class_name="auth-switch"),
        class_name="auth-other",
    )
    return _page("Sign in to continue learning", rx.cond(AuthPageState.auth_mode == "header", rx.fragment(), form),
                 rx.cond(AuthPageState.auth_mode == "header", rx.fragment(), other))


def signup_page() -> rx.Component:
    form = PlainForm.create(
        _field("Username", "username", "text", "username",
               hint="3–32 characters: letters, digits, dots, dashes or underscores."),
        _field("Password", "password", "password", "new-password", hint="At least 8 characters."),
        rx.el.input(type="hidden", name="next", value=AuthPageState.next_path),
        # This browser's earlier learner (if any): their conversations come along.
        rx.el.input(type="hidden", name="local_key", value=TutorState.learner_key),
        rx.el.button(_w("Create account"), type="submit", id="signup-submit", class_name="primary"),
        action="/auth/signup", method="post", id="signup-form",
    )
    other = rx.el.p(_w("Already have an account?"), " ",
                    rx.el.a(_w("Sign in"), href=AuthPageState.signin_href, id="have-account", class_name="auth-switch"),
                    class_name="auth-other")
    return _page("Create an account", form, other)


def account_bar(word: Callable[[str], str | rx.Var[str]]) -> rx.Component:
    """Who is signed in, and the way out: "Signed in as NAME · Sign out" (accounts),
    the name alone (proxy), or "Not you? Start fresh" (anonymous, after a confirmation).
    `word` gives the page's words (the start page's language; `ui` on the chat page)."""
    signout = PlainForm.create(
        rx.el.button(word("Sign out"), type="submit", id="signout", class_name="link-button"),
        action="/auth/signout", method="post", class_name="inline-form",
    )
    signed_in = rx.el.p(
        word("Signed in as"), " ", rx.el.strong(TutorState.signed_in_as, id="signed-in-as"),
        rx.cond(TutorState.auth_mode == "accounts", rx.fragment(" · ", signout)),
        class_name="account-bar",
    )
    forget = rx.cond(
        TutorState.confirm_forget,
        rx.el.div(
            rx.el.p(word("Start fresh? This browser forgets your conversations here; the next person starts clean.")),
            rx.el.button(word("Yes, start fresh"), on_click=TutorState.forget_me, id="forget-confirm", class_name="danger"),
            rx.el.button(word("Cancel"), on_click=TutorState.cancel_forget, id="forget-cancel", class_name="confirm-cancel",
                         custom_attrs={"data-return-focus": "forget-me"}),
            class_name="account-bar confirm", role="group", aria_label=word("Start fresh"),
        ),
        rx.el.p(rx.el.button(word("Not you? Start fresh"), on_click=TutorState.ask_forget, id="forget-me",
                             class_name="link-button"), class_name="account-bar"),
    )
    return rx.fragment(
        rx.cond(
            TutorState.signed_in_as != "",
            signed_in,
            rx.cond(TutorState.auth_mode == "anonymous", forget, rx.fragment()),
        ),
        auth_sync(),
    )
