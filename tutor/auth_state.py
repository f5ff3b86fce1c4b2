"""Reflex state: who is signed in (tutor.accounts decides), and the sign-in pages. Thin.

The identity comes from the event socket's own request headers: the HttpOnly session
cookie (accounts), a trusted proxy's header (header), or this browser's random key in local
storage (anonymous). The browser's key is never a credential in the first two modes.
"""

from __future__ import annotations

import logging
import time
import uuid

import reflex as rx

from tutor import dbfaults
from tutor.accounts import Identity, auth_page, auth_settings, identity_for_request, message_for, safe_next
from tutor.i18n import localize
from tutor.runtime import get_engine
from tutor.settings import LANGUAGE

log = logging.getLogger(__name__)


class TutorState(rx.State):
    """Who the learner is. `learner_key`: this browser's random key (anonymous mode; in
    accounts mode it lets a sign-up keep the conversations this browser had before)."""

    learner_key: str = rx.LocalStorage("", name="tutor_learner")
    signed_in_as: str = ""  # the username shown in the header; "" when anonymous
    auth_mode: str = ""  # accounts | header | anonymous, once a page has loaded
    confirm_forget: bool = False  # "Not you? Start fresh" waits for a confirmation
    _signed_in_key: str = ""  # the learner this tab was opened for (accounts, header)
    _checked_at: float = 0.0  # when that was last confirmed (time.monotonic)

    def ensure_learner(self) -> str:
        if not self.learner_key:
            self.learner_key = uuid.uuid4().hex
        return self.learner_key

    async def identity(self) -> Identity | None:
        """The signed-in person for this tab's connection, or None. Raises
        dbfaults.DatabaseUnavailable when the database cannot say."""
        settings = auth_settings()
        local_key = self.ensure_learner() if settings.mode == "anonymous" else ""
        headers = self.router.headers
        raw = {k.lower(): v for k, v in headers.raw_headers.items()}
        if headers.cookie:
            raw["cookie"] = headers.cookie
        raw.pop("asgi-scope-client", None)
        # The socket's direct peer (rxconfig leaves trusted_proxy_hops at 0, so Reflex does
        # not take it from X-Forwarded-For): what TUTOR_TRUSTED_PROXIES is checked against.
        client = self.router.session.client_ip
        who = None
        if settings.mode == "anonymous":
            who = identity_for_request(None, raw, client, local_key=local_key, settings=settings)
            self.note_place(local_key)
        else:
            store = get_engine().store
            who = await store.run(identity_for_request, store, raw, client, local_key=local_key, settings=settings)
        self.auth_mode = settings.mode
        self.signed_in_as = who.username if who else ""
        return who

    def note_place(self, learner_key: str) -> None:
        """Anonymous mode: where this browser is (the socket's peer, or the address a
        TUTOR_TRUSTED_PROXIES proxy forwarded), so the usage limits count per address too
        and a fresh browser key from the same place brings no fresh allowance."""
        usage = get_engine().usage
        if usage is None or not learner_key:
            return
        headers = self.router.headers.raw_headers.items()
        forwarded = ",".join(v for k, v in headers if k.lower() == "x-forwarded-for")
        usage.seen_at(learner_key, auth_settings().client_address(forwarded, self.router.session.client_ip))

    async def signed_in_learner(self) -> tuple[str, rx.event.EventSpec | None]:
        """(learner key, None), or ("", a redirect to the sign-in page) when nobody is."""
        who = await self.identity()
        if who is not None:
            self._signed_in_key, self._checked_at = who.learner_key, time.monotonic()
            return who.learner_key, None
        url = self.router.url
        here = (url.path.rstrip("/") or "/") + (f"?{url.query}" if url.query else "")
        return "", rx.redirect(auth_page("/signin", here))

    async def still_signed_in(self) -> bool:
        """Before a send: is the person who opened this tab still signed in? Checked again
        at most every TUTOR_SESSION_RECHECK seconds (a session that expired, was signed out elsewhere or whose
        account an operator disabled stops working within that time, not at the next
        reload). Anonymous mode has no session to lose."""
        if self.auth_mode in ("", "anonymous") or not self._signed_in_key:
            return True
        now = time.monotonic()
        if now - self._checked_at < auth_settings().recheck_s:
            return True
        try:
            who = await self.identity()
        except dbfaults.DatabaseUnavailable:
            return True  # the send itself will say the service is unavailable
        if who is None or who.learner_key != self._signed_in_key:
            return False
        self._checked_at = now
        return True

    @rx.event
    def ask_forget(self) -> None:
        self.confirm_forget = True

    @rx.event
    def cancel_forget(self):
        self.confirm_forget = False  # the page puts the focus back (data-return-focus)

    @rx.event
    def forget_me(self):
        """Anonymous mode on a shared computer: this browser forgets its learner, so the next
        person starts clean (the rows stay; nobody here can reach them again)."""
        self.confirm_forget = False
        self.learner_key = uuid.uuid4().hex
        return rx.redirect("/")


class AuthPageState(TutorState):
    """The sign-in and sign-up pages: the error the last post came back with, and where to
    go after (the username typed comes back in the address, never the password)."""

    error: str = ""
    next_path: str = "/"
    # The other page's address, keeping where to go after (sign-in <-> sign-up).
    signin_href: str = "/signin"
    signup_href: str = "/signup"

    @rx.event
    async def load(self):
        params = self.router.url.query_parameters
        self.next_path = safe_next(params.get("next"))
        self.signin_href, self.signup_href = auth_page("/signin", self.next_path), auth_page("/signup", self.next_path)
        code = params.get("error", "")
        try:
            minutes = int(params.get("minutes", "15"))
        except ValueError:
            minutes = 15
        self.error = localize(message_for(code, minutes), LANGUAGE)  # no module here: the start page's language
        try:
            who = await self.identity()
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "sign-in page")
            self.error = localize(dbfaults.UNAVAILABLE, LANGUAGE)
            return None
        if who is not None and self.auth_mode != "anonymous":
            return rx.redirect(self.next_path)
        if self.auth_mode == "header":
            self.error = localize(message_for("proxy"), LANGUAGE)
        elif self.auth_mode == "anonymous":
            return rx.redirect("/")
        return None
