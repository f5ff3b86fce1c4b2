"""The security headers middleware on a real ASGI app: every HTTP response carries them,
the media hosts the operator lists are the only other origins images may come from."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from tutor.web.web_security import content_security_policy, security_headers


def _client() -> TestClient:
    async def hello(request):
        return PlainTextResponse("hi", headers={"x-frame-options": "SAMEORIGIN"})
    return TestClient(security_headers(Starlette(routes=[Route("/", hello)])))


def test_every_response_carries_the_policy_and_overrides_weaker_headers() -> None:
    for path in ("/", "/missing"):
        response = _client().get(path)
        assert response.headers["content-security-policy"].startswith("default-src 'self'")
        assert response.headers["x-frame-options"] == "DENY"  # the app's weaker value is replaced
        assert response.headers["x-content-type-options"] == "nosniff"
    assert _client().get("/").text == "hi"


def test_media_hosts_are_the_only_other_image_origins(monkeypatch) -> None:
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "cdn.example.org, .school.example")
    policy = dict(part.split(" ", 1) for part in content_security_policy().split("; "))
    assert policy["img-src"] == ("'self' data: blob: http://cdn.example.org:* https://cdn.example.org:* "
                                 "http://*.school.example:* https://*.school.example:* "
                                 "http://school.example:* https://school.example:*")
    assert policy["media-src"] == policy["img-src"]
    assert policy["connect-src"] == "'self'"
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "")
    assert "example" not in content_security_policy()


# ----------------------------------------------------------------------------- the event socket

def _socket_app() -> Starlette:
    from starlette.routing import WebSocketRoute

    async def echo(websocket) -> None:
        await websocket.accept()
        await websocket.send_text("open")
        await websocket.close()

    async def poll(request):
        return PlainTextResponse("polled")

    return Starlette(routes=[WebSocketRoute("/_event/", echo), Route("/_event/", poll), Route("/", poll)])


@pytest.fixture(autouse=True)
def _settings_read_afresh():
    from tutor.access.accounts import auth_settings

    auth_settings.cache_clear()
    yield
    auth_settings.cache_clear()  # the next test reads its own environment


def _guarded(monkeypatch, **env: str) -> TestClient:
    from tutor.access.accounts import auth_settings
    from tutor.web.web_security import socket_origin_guard

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    auth_settings.cache_clear()
    return TestClient(socket_origin_guard(_socket_app()), base_url="http://testserver")


def test_the_socket_opens_for_the_sites_own_page_only(monkeypatch) -> None:
    from starlette.websockets import WebSocketDisconnect

    client = _guarded(monkeypatch)
    with client.websocket_connect("/_event/", headers={"origin": "http://testserver"}) as ws:
        assert ws.receive_text() == "open"
    for origin in ("http://testserver:8799", "http://evil.example", "null", "", "testserver"):
        with pytest.raises(WebSocketDisconnect) as refused:
            with client.websocket_connect("/_event/", headers={"origin": origin} if origin else {}):
                pass
        assert refused.value.code == 1008, origin
    assert client.get("/_event/", headers={"origin": "http://evil.example"}).status_code == 403
    assert client.get("/_event/").status_code == 403  # no origin: not a page of this site
    assert client.get("/", headers={"origin": "http://evil.example"}).text == "polled"  # pages are not the socket


def test_behind_a_proxy_the_public_address_and_a_trusted_forwarded_host_are_the_sites_own(monkeypatch) -> None:
    from starlette.websockets import WebSocketDisconnect

    client = _guarded(monkeypatch, TUTOR_PUBLIC_URL="https://tutor.example.org, https://alt.example.org:8443")
    for origin in ("https://tutor.example.org", "https://alt.example.org:8443"):
        with client.websocket_connect("/_event/", headers={"origin": origin}) as ws:
            assert ws.receive_text() == "open"
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect("/_event/", headers={"origin": "http://tutor.example.org"}):  # not https
            pass
    from tutor.access.accounts import AuthSettings

    settings = AuthSettings.from_env({"TUTOR_TRUSTED_PROXIES": "127.0.0.1"})
    assert settings.origin_allowed("https://a.example", "app:3000", "a.example", "127.0.0.1")  # trusted proxy
    assert not settings.origin_allowed("https://a.example", "app:3000", "a.example", "203.0.113.9")  # not trusted
    # By default no proxy is trusted, loopback included: its X-Forwarded-Host is not believed.
    assert not AuthSettings.from_env({}).origin_allowed("https://a.example", "app:3000", "a.example", "127.0.0.1")


def test_a_wrong_public_address_names_the_setting() -> None:
    from tutor.access.accounts import AuthSettings

    with pytest.raises(ValueError, match="TUTOR_PUBLIC_URL"):
        AuthSettings.from_env({"TUTOR_PUBLIC_URL": "tutor.example.org"})
