"""Sign-in, sign-up and sign-out as plain HTTP form posts (Starlette routes mounted in front
of the Reflex app). The session cookie is set here, HttpOnly, so no page script ever holds
the token; each post answers with a 303 back to a page (errors as `?error=CODE`, with the
typed username, never the password)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from tutor.access import sessions
from tutor.access.accounts import (
    AccountError,
    AuthSettings,
    authenticate,
    check_password,
    check_username,
    create_account,
    normalise_username,
)
from tutor.access.redirects import safe_next
from tutor.access.signin_limit import Refusal, SignupLimit
from tutor.storage import dbfaults

log = logging.getLogger(__name__)
# Built on first use from the environment; in Redis when TUTOR_REDIS_URL is set (tutor.access.signin_limit).
LIMIT = sessions.FailureLimitFromEnv()  # failed sign-ins per (name, address) and per name
SIGNUPS = sessions.FailureLimitFromEnv(kind=SignupLimit)  # new accounts per address and day

REFUSED = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Tutor</title></head>
<body><main><h1>That form could not be sent</h1>
<p>It has to be sent from Tutor's own page. Please go back, reload the page and try again.</p>
<p><a href="/signin">Go to the sign-in page</a></p></main></body></html>"""


def _store(request: Request):
    given = getattr(request.app.state, "tutor_store", None)
    if given is not None:
        return given
    from tutor.turns.runtime import (
        get_engine,  # the engine is built on first use, not at import
    )

    return get_engine().store


def client_address(request: Request, settings: AuthSettings) -> str:
    """The direct peer, or the address a TUTOR_TRUSTED_PROXIES proxy forwarded (every copy
    of X-Forwarded-For, in order: a proxy may add a header of its own after the client's)."""
    direct = request.client.host if request.client else ""
    return settings.client_address(",".join(request.headers.getlist("x-forwarded-for")), direct)


def same_origin(request: Request, settings: AuthSettings) -> bool:
    """CSRF check: the post must come from a page of this site (Origin, else Referer)."""
    source = request.headers.get("origin") or request.headers.get("referer") or ""
    return settings.origin_allowed(source, request.headers.get("host", ""), request.headers.get("x-forwarded-host", ""),
                                   request.client.host if request.client else "")


def _secure(request: Request) -> bool:
    return sessions.is_https(request.headers, request.url.scheme)


def _back(page: str, code: str, username: str, next_path: str, **extra: object) -> RedirectResponse:
    query = {"error": code, "username": username.strip()[:64], **{k: str(v) for k, v in extra.items()}}
    if next_path != "/":
        query["next"] = next_path
    return RedirectResponse(f"{page}?{urlencode(query)}", status_code=303)


def _signed_in(request: Request, account_id: int, next_path: str, settings: AuthSettings, store) -> Response:
    token = sessions.create_session(store, account_id, days=settings.session_days)
    response = RedirectResponse(next_path, status_code=303)
    response.headers.append("set-cookie", sessions.session_cookie(token, days=settings.session_days,
                                                                  secure=_secure(request)))
    return response


async def _end_previous(request: Request, store) -> None:
    """Whoever was signed in on this browser before is signed out: their session ends."""
    old = sessions.cookie_value(request.headers.get("cookie", ""))
    if old:
        await store.run(sessions.end_session, store, old)


@dataclass(frozen=True)
class _Post:
    """A sign-in or sign-up post that came from our own page, with both fields filled."""

    settings: AuthSettings
    form: dict[str, str]
    username: str
    password: str
    next_path: str


async def _post(request: Request, page: str) -> _Post | Response:
    """The post, or the answer to give at once: a redirect when accounts are off, a refusal
    for a post from another site, back to `page` when a field is empty."""
    settings = AuthSettings.from_env()
    if settings.mode != "accounts":
        return RedirectResponse("/", status_code=303)
    if not same_origin(request, settings):
        return HTMLResponse(REFUSED, status_code=403)
    form = {k: str(v) for k, v in (await request.form()).items() if isinstance(v, str)}
    username, password = form.get("username", ""), form.get("password", "")
    next_path = safe_next(form.get("next"))
    if not username.strip() or not password:
        return _back(page, "missing", username, next_path)
    return _Post(settings, form, username, password, next_path)


async def _session_for(request: Request, store, account_id: int, post: _Post) -> Response:
    """The browser's previous session ended, a new one started: the redirect carrying it."""
    await _end_previous(request, store)
    return await store.run(_signed_in, request, account_id, post.next_path, post.settings, store)


def _refused(page: str, refusal: Refusal, post: _Post) -> Response:
    return _back(page, refusal.code, post.username, post.next_path, minutes=refusal.minutes)


async def signin(request: Request) -> Response:
    post = await _post(request, "/signin")
    if isinstance(post, Response):
        return post
    username, next_path = post.username, post.next_path
    name, address = normalise_username(username), client_address(request, post.settings)
    # The try is counted before the password is checked, in one step with the check of the
    # count (parallel guesses cannot all pass it); it may be in Redis: off the event loop.
    attempt = await asyncio.to_thread(LIMIT.attempt, name, address)
    if isinstance(attempt, Refusal):
        return _refused("/signin", attempt, post)
    account = None
    try:
        store = _store(request)
        account = await store.run(authenticate, store, username, post.password)
        response = await _session_for(request, store, account.id, post)
    except AccountError as refusal:
        if refusal.code != "credentials":  # a right password for a switched-off account
            await asyncio.to_thread(LIMIT.succeeded, attempt)
        return _back("/signin", refusal.code, username, next_path)
    except dbfaults.DatabaseUnavailable as fault:
        dbfaults.report(fault, log, "sign-in")
        await asyncio.to_thread(LIMIT.checked_nothing if account is None else LIMIT.succeeded, attempt)
        return _back("/signin", "unavailable", username, next_path)
    await asyncio.to_thread(LIMIT.succeeded, attempt)
    return response


async def signup(request: Request) -> Response:
    post = await _post(request, "/signup")
    if isinstance(post, Response):
        return post
    username, next_path = post.username, post.next_path
    try:
        # What the form alone can tell comes first and costs nothing; what needs the
        # database (made, or "username taken") takes one of the address's sign-ups a day.
        check_username(username)
        check_password(post.password)
    except AccountError as refusal:
        return _back("/signup", refusal.code, username, next_path)
    address = client_address(request, post.settings)
    ticket = await asyncio.to_thread(SIGNUPS.attempt, address)
    if isinstance(ticket, Refusal):
        return _refused("/signup", ticket, post)
    account = None
    try:
        store = _store(request)
        account = await store.run(create_account, store, username, post.password,
                                  local_key=post.form.get("local_key", ""))
        response = await _session_for(request, store, account.id, post)
    except AccountError as refusal:
        return _back("/signup", refusal.code, username, next_path)
    except dbfaults.DatabaseUnavailable as fault:
        dbfaults.report(fault, log, "sign-up")
        if account is None:  # nothing made, nothing learnt: the sign-up is given back
            await asyncio.to_thread(SIGNUPS.checked_nothing, address, ticket)
        return _back("/signup", "unavailable", username, next_path)
    return response


async def signout(request: Request) -> Response:
    settings = AuthSettings.from_env()
    if not same_origin(request, settings):
        return HTMLResponse(REFUSED, status_code=403)
    token = sessions.cookie_value(request.headers.get("cookie", ""))
    if token:
        try:
            store = _store(request)
            await store.run(sessions.end_session, store, token)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "sign-out")  # the cookie still goes
    response = RedirectResponse("/signin" if settings.mode == "accounts" else "/", status_code=303)
    response.headers.append("set-cookie", sessions.cleared_cookie(secure=_secure(request)))
    return response


def auth_api(store=None) -> Starlette:
    """The routes, for `rx.App(api_transformer=auth_api())`: Reflex mounts its own app
    (pages, event socket) under this one, so everything else passes through. `store`: a
    database of its own (else the app's engine's, made on first use). A wrong TUTOR_AUTH*
    setting stops the app here, at start-up, naming the variable and a value that works."""
    try:
        AuthSettings.from_env()
    except ValueError as wrong:
        raise SystemExit(f"tutor: {wrong}") from None
    app = Starlette(routes=[
        Route("/auth/signin", signin, methods=["POST"]),
        Route("/auth/signup", signup, methods=["POST"]),
        Route("/auth/signout", signout, methods=["POST"]),
    ])
    app.state.tutor_store = store
    return app
