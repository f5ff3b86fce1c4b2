"""Reflex state: who is signed in (tutor.access.accounts decides), and the sign-in pages. Thin.

The identity comes from the event socket's own request headers: the HttpOnly session
cookie (accounts), a trusted proxy's header (header), or this browser's random key in local
storage (anonymous). The browser's key is never a credential in the first two modes.
"""

from __future__ import annotations

import logging
import uuid

import reflex as rx

from tutor.access.accounts import (
    Identity,
    auth_settings,
    identity_for_request,
    message_for,
)
from tutor.access.redirects import auth_page, safe_next
from tutor.access.tab_identity import binding, credential_of, credential_part
from tutor.i18n import localize
from tutor.storage import dbfaults
from tutor.turns.runtime import get_engine
from tutor.web.page_words import StartWords

log = logging.getLogger(__name__)


class TutorState(rx.State):
    """Who the learner is. `learner_key`: this browser's random key (anonymous mode; in
    accounts mode it lets a sign-up keep the conversations this browser had before).

    A tab's state belongs to one identity (tutor.access.tab_identity): every event is checked by
    tutor.web.identity_gate before it runs, and every handler that reads or writes a learner's
    or the console's data asks `checked_identity` itself; when the identity differs from
    the one the state was built for, every state of the tab is reset first."""

    learner_key: str = rx.LocalStorage("", name="tutor_learner")
    signed_in_as: str = ""  # the username shown in the header; "" when anonymous
    auth_mode: str = ""  # accounts | header | anonymous, once a page has loaded
    confirm_forget: bool = False  # "Not you? Start fresh" waits for a confirmation
    _bound: str = ""  # whose data this tab's state holds (tutor.access.tab_identity.binding)
    _checked: Identity | None = None  # who the event `_checked_txid` was checked for
    _checked_txid: str = ""

    def ensure_learner(self) -> str:
        if not self.learner_key:
            self.learner_key = uuid.uuid4().hex
        return self.learner_key

    def _headers(self) -> dict[str, str]:
        headers = self.router.headers
        raw = {k.lower(): v for k, v in headers.raw_headers.items()}
        if headers.cookie:
            raw["cookie"] = headers.cookie
        raw.pop("asgi-scope-client", None)
        return raw

    async def identity(self, local_key: str | None = None) -> Identity | None:
        """The signed-in person for this tab's connection, or None: one indexed read of the
        session (tutor.access.sessions.session_account), never a remembered answer. Raises
        dbfaults.DatabaseUnavailable when the database cannot say. `local_key`: anonymous
        mode's key as the browser sent it (else this state's, made if missing)."""
        settings = auth_settings()
        if settings.mode == "anonymous":
            if local_key is None:
                local_key = self.ensure_learner()
                self.note_place(local_key)
            return identity_for_request(None, {}, "", local_key=local_key, settings=settings)
        # The socket's direct peer (rxconfig leaves trusted_proxy_hops at 0, so Reflex does
        # not take it from X-Forwarded-For): what TUTOR_TRUSTED_PROXIES is checked against.
        client = self.router.session.client_ip
        store = get_engine().store
        return await store.run(identity_for_request, store, self._headers(), client, settings=settings)

    async def checked_identity(self, role: str = "", *, fresh: bool = False,
                               local_key: str | None = None) -> Identity | None:
        """Who is asking, checked now, with the tab's state reset first when it was built for
        someone else; None when nobody is signed in or `role` ("operator") is not theirs.
        Within one event the gate's check is reused (`fresh`: check again, e.g. after a long
        read). Raises dbfaults.DatabaseUnavailable: the tab's state is reset first unless the
        connection still presents the credential it was built for."""
        txid = _event_txid()
        if fresh or not txid or txid != self._checked_txid or local_key is not None:
            settings = auth_settings()
            try:
                who = await self.identity(local_key)
            except dbfaults.DatabaseUnavailable:
                self._checked_txid = ""
                if credential_part(self._bound) != self._credential(settings, local_key):
                    await self.bind_tab(None, "")
                raise
            await self.bind_tab(who, self._credential(settings, local_key))
            # The gate's check of a browser key (anonymous mode) is not the handler's: the
            # handler's own may make the key the browser does not have yet.
            self._checked, self._checked_txid = who, txid if local_key is None else ""
        else:
            who = self._checked
        if who is None or (role == "operator" and not who.is_operator):
            return None
        return who

    def _credential(self, settings, local_key: str | None) -> str:
        key = self.learner_key if local_key is None else local_key
        return credential_of(settings, self._headers(), key)

    async def bind_tab(self, who: Identity | None, credential: str) -> None:
        """The tab's state is `who`'s from now on: when it was someone else's (or nobody's),
        every state of the tab is reset before this event goes on."""
        settings = auth_settings()
        bound = binding(credential, who)
        if bound != self._bound:
            await self._reset_tab()
            self._bound = bound
        if self.auth_mode != settings.mode:  # an assignment is sent to the page, changed or not
            self.auth_mode = settings.mode
        name = who.username if who else ""
        if self.signed_in_as != name:
            self.signed_in_as = name

    async def _reset_tab(self) -> None:
        key = self.learner_key  # the browser's own key is the browser's, not the state's
        for cls in _below(TutorState):
            await self.get_state(cls)  # loaded, so the reset reaches it (Redis loads lazily)
        self.reset()  # this state and every state below it
        if key:
            self.learner_key = key

    def note_place(self, learner_key: str) -> None:
        """Anonymous mode: where this browser is (the socket's peer, or the address a
        TUTOR_TRUSTED_PROXIES proxy forwarded), so the usage limits count per address too
        and a fresh browser key from the same place brings no fresh allowance."""
        usage = get_engine().usage
        if usage is None or not learner_key:
            return
        router = self.router  # built anew at each read of the attribute
        forwarded = ",".join(v for k, v in router.headers.raw_headers.items() if k.lower() == "x-forwarded-for")
        usage.seen_at(learner_key, auth_settings().client_address(forwarded, router.session.client_ip))

    async def signed_in_learner(self) -> tuple[str, rx.event.EventSpec | None]:
        """(learner key, None), or ("", a redirect to the sign-in page) when nobody is."""
        who = await self.checked_identity()
        if who is not None:
            return who.learner_key, None
        url = self.router.url
        here = (url.path.rstrip("/") or "/") + (f"?{url.query}" if url.query else "")
        return "", rx.redirect(auth_page("/signin", here))

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


class AuthPageState(StartWords, TutorState):
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
        try:
            who = await self.checked_identity()
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "sign-in page")
            self.error = localize(dbfaults.UNAVAILABLE, self._pick_language())
            return None
        # After the identity check (it may reset the tab): no module here, the learner's language.
        language = self._pick_language()
        self.error = localize(message_for(code, minutes), language)
        if who is not None and self.auth_mode != "anonymous":
            return rx.redirect(self.next_path)
        if self.auth_mode == "header":
            self.error = localize(message_for("proxy"), language)
        elif self.auth_mode == "anonymous":
            return rx.redirect("/")
        return None


def _event_txid() -> str:
    """The id of the event being handled ("" outside one: a test calling a handler)."""
    from reflex_base.event.context import EventContext

    try:
        return EventContext.get().txid
    except LookupError:
        return ""


def _below(cls: type[rx.State]) -> list[type[rx.State]]:
    found = []
    for sub in cls.get_substates():
        found += [sub, *_below(sub)]
    return found
