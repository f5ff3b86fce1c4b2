"""The progress export over HTTP: only an operator's session gets the file; the file is a
download with formulas defused."""

from __future__ import annotations

import asyncio
import csv
import io

import pytest
from starlette.testclient import TestClient

from tutor.access import accounts, sessions
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.turns.engine import Engine
from tutor.web.operator_routes import operator_api

LIBRARY = load_library()
MODULE = "understanding_anxiety"
SITE = "http://testserver"


@pytest.fixture
def client(store, monkeypatch) -> TestClient:
    monkeypatch.setenv("TUTOR_AUTH", "accounts")
    accounts.create_account(store, "olga", "pass-phrase one", role="operator")
    ana = accounts.create_account(store, "ana", "pass-phrase one")
    engine = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())
    key = accounts.identity_of(store, ana).learner_key

    async def lesson():
        view = await engine.open(key, MODULE)
        await engine.send(view.id, LearnerInput(text="Continue"))

    asyncio.run(lesson())
    return TestClient(operator_api(store, LIBRARY), base_url=SITE, follow_redirects=False)


def cookie_for(store, username: str) -> dict[str, str]:
    account = accounts.find_account(store, username)
    token = sessions.create_session(store, account.id, days=1)
    return {"cookie": f"{sessions.COOKIE_NAME}={token}"}


def test_an_operator_downloads_the_progress_as_csv(client, store):
    r = client.get("/operator/progress.csv", headers=cookie_for(store, "olga"))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"].startswith('attachment; filename="tutor-progress-')
    assert r.headers["cache-control"] == "no-store"
    rows = list(csv.reader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert rows[0][:3] == ["learner", "username", "module"]
    [ana] = [row for row in rows[1:] if row[1] == "ana"]
    assert ana[2] == MODULE and int(ana[3]) >= 1


def test_learners_and_signed_out_visitors_get_no_file(client, store):
    learner = client.get("/operator/progress.csv", headers=cookie_for(store, "ana"))
    assert learner.status_code == 403 and learner.text == "This page is for operators."
    anonymous = client.get("/operator/progress.csv")
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/signin")
    forged = client.get("/operator/progress.csv", headers={"cookie": f"{sessions.COOKIE_NAME}=made-up"})
    assert forged.status_code == 303 and "ana" not in forged.text


def test_behind_a_proxy_only_named_operators_from_a_trusted_address_get_it(store, monkeypatch):
    monkeypatch.setenv("TUTOR_AUTH", "header")
    monkeypatch.setenv("TUTOR_OPERATORS", "boss")
    monkeypatch.setenv("TUTOR_TRUSTED_PROXIES", "127.0.0.1")
    proxy = TestClient(operator_api(store, LIBRARY), base_url=SITE, client=("127.0.0.1", 40000))
    elsewhere = TestClient(operator_api(store, LIBRARY), base_url=SITE, client=("203.0.113.9", 40000))
    assert proxy.get("/operator/progress.csv", headers={"x-forwarded-user": "boss"}).status_code == 200
    assert proxy.get("/operator/progress.csv", headers={"x-forwarded-user": "ana"}).status_code == 403
    assert elsewhere.get("/operator/progress.csv", headers={"x-forwarded-user": "boss"}).status_code == 403


def test_in_header_mode_a_second_identity_header_gets_no_file(store, monkeypatch):
    from tutor.access.accounts import auth_settings

    monkeypatch.setenv("TUTOR_AUTH", "header")
    monkeypatch.setenv("TUTOR_OPERATORS", "olga")
    monkeypatch.setenv("TUTOR_TRUSTED_PROXIES", "127.0.0.1")
    auth_settings.cache_clear()
    try:  # the request comes from 127.0.0.1, the trusted proxy
        client = TestClient(operator_api(store, LIBRARY), base_url=SITE, follow_redirects=False,
                            client=("127.0.0.1", 50000))
        alone = client.get("/operator/progress.csv", headers={"x-forwarded-user": "olga"})
        assert alone.status_code == 200  # the proxy's one header: the operator
        # The client sent its own header too; the proxy appended the real one.
        both = client.get("/operator/progress.csv",
                          headers=[("x-forwarded-user", "olga"), ("x-forwarded-user", "ana")])
        assert both.status_code != 200 and "text/csv" not in both.headers.get("content-type", "")
    finally:
        auth_settings.cache_clear()
