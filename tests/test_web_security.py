"""The security headers middleware on a real ASGI app: every HTTP response carries them,
the media hosts the operator lists are the only other origins images may come from."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from tutor.web_security import content_security_policy, security_headers


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
