"""Security headers on every HTTP response the app serves (pages, assets, API routes):
a Content-Security-Policy, and the usual companions. Plain ASGI, wrapped around the whole
backend (tutor/tutor.py), so the frontend's static pages get them too.

The policy is what the page needs and no more:

- scripts from the app only, plus inline ones: the compiled page bootstraps itself with an
  inline script, and the chat's behaviour and theme scripts are inline (`rx.script`);
  nothing the model writes is ever a script (replies are rendered as escaped data);
- styles from the app and inline (the component library styles elements inline);
- the event socket and fetches to the app's own origin only;
- images and media from the app, `data:` (inline icons) and the hosts the operator lists
  in TUTOR_MEDIA_HOSTS — the same list the reply sanitiser allows, so a model's markup
  that slipped past it would still be refused by the browser;
- no plugins, no framing by other sites, forms post only to the app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tutor.settings import media_hosts

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

__all__ = ["content_security_policy", "security_headers", "socket_origin_guard"]


def _sources(hosts: tuple[str, ...]) -> str:
    # The reply checks allow a listed host on any port and over http or https; so does this.
    extra = []
    for host in hosts:
        if host.startswith("."):
            extra += [f"http://*{host}:*", f"https://*{host}:*", f"http://{host[1:]}:*", f"https://{host[1:]}:*"]
        else:
            extra += [f"http://{host}:*", f"https://{host}:*"]
    return " ".join(["'self'", "data:", "blob:", *extra])


def content_security_policy(hosts: tuple[str, ...] | None = None) -> str:
    media = _sources(media_hosts() if hosts is None else hosts)
    return "; ".join([
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        f"img-src {media}",
        f"media-src {media}",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "frame-src 'none'",
        "frame-ancestors 'none'",
        "base-uri 'self'",
        "form-action 'self'",
    ])


def security_headers(app: ASGIApp) -> ASGIApp:
    """`app` with the headers added to each HTTP response (websockets pass untouched)."""
    policy = content_security_policy().encode("latin-1")
    headers = [
        (b"content-security-policy", policy),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),
        (b"x-frame-options", b"DENY"),
        (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=()"),
    ]
    names = {name for name, _ in headers}

    async def wrapped(scope: Scope, receive, send) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message.get("type") == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message["headers"] = kept + headers
            await send(message)

        await app(scope, receive, send_with_headers)

    return wrapped


def socket_origin_guard(app: ASGIApp) -> ASGIApp:
    """`app` with its event socket open only to this site's own pages: a websocket (and any
    request to /_event) whose Origin is not the app's own (AuthSettings.origin_allowed: the
    host the browser asked for, a trusted proxy's forwarded host, or TUTOR_PUBLIC_URL) is
    refused before the app sees it, and so is one with no Origin (every browser sends one).
    Without this a page on another port of the same host, or a sibling subdomain, could act
    through a signed-in operator's browser (SameSite=Lax does not stop a same-site page)."""
    from tutor.access.accounts import auth_settings

    async def wrapped(scope: Scope, receive, send) -> None:
        kind = scope.get("type")
        if kind == "websocket" or (kind == "http" and str(scope.get("path", "")).startswith("/_event")):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            client = (scope.get("client") or ("", 0))[0]
            if not auth_settings().origin_allowed(headers.get("origin", ""), headers.get("host", ""),
                                                  headers.get("x-forwarded-host", ""), client):
                if kind == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                else:
                    await send({"type": "http.response.start", "status": 403,
                                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
                    await send({"type": "http.response.body", "body": b"This address does not accept other sites."})
                return
        await app(scope, receive, send)

    return wrapped
