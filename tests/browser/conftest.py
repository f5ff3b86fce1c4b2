"""Browser tests: start the app the way a user does (scripts/run.sh) and drive Debian's
chromium with Playwright. These never skip: a missing browser is a failure.

Two apps serve the session: `app` with the built-in tutor (the embedded default), and
`model_app` whose model is a scripted OpenAI-compatible server on 127.0.0.1 (tests/fakes),
for replies the built-in tutor never writes (every block type, hostile markup, broken
media, invalid JSON). Only one runs at a time: both build into the same .web directory,
and a build bakes its own port into the frontend, so a second build would point the first
app's pages at the second app. Tests are ordered so each app starts once (plus the
walking skeleton's restart). Each test gets a fresh browser context: a fresh learner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.browser.app_runner import CHROMIUM, CHROMIUM_ARGS, REPO, RunningApp
from tests.fakes.servers import FakeLLMServer, Scripted
from tests.fakes.wire import openai_reply, openai_stream, tutor_reply
from tests.real.llama import LlamaServer, serve_for_tests

ARTIFACTS = REPO / "test-results"


class AppPool:
    """The session's apps, created on first use; starting one stops the other."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self.tmp = tmp
        self.apps: dict[str, RunningApp] = {}
        self.running: RunningApp | None = None

    def use(self, name: str, **env: str) -> RunningApp:
        app = self.apps.get(name)
        if app is None:
            app = self.apps[name] = RunningApp.create(self.tmp.mktemp(f"{name}-data"), **env)
        if self.running is not app or app.process is None or app.process.poll() is not None:
            if self.running is not None and self.running is not app:
                self.running.stop()
            app.start()
            self.running = app
        return app

    def stop_all(self) -> None:
        for app in self.apps.values():
            app.stop()


@pytest.fixture(scope="session")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppPool]:
    pool = AppPool(tmp_path_factory)
    yield pool
    pool.stop_all()


@pytest.fixture
def app(apps: AppPool) -> RunningApp:
    """The app with the built-in tutor."""
    return apps.use("builtin")


@pytest.fixture
def accounts_app(apps: AppPool) -> RunningApp:
    """The app with the built-in tutor and sign-in by username and password."""
    # Every test signs people up from 127.0.0.1: more than a day's sign-ups for one address.
    return apps.use("accounts", TUTOR_AUTH="accounts", TUTOR_SIGNUPS_PER_DAY="1000")


@pytest.fixture
def header_app(apps: AppPool) -> RunningApp:
    """The app behind a pretend sign-in proxy: the browser itself sends X-Forwarded-User
    from 127.0.0.1, made a trusted address (by default none is)."""
    return apps.use("header", TUTOR_AUTH="header", TUTOR_OPERATORS="alice", TUTOR_TRUSTED_PROXIES="127.0.0.1")


def screen_finds_nothing(request) -> Scripted | None:
    """The model safety screen's calls (on wherever a model is configured) answered at once
    with no flags, so they never take a scripted lesson reply; tests/test_safety_turns.py
    covers the screen itself."""
    body = request.body if isinstance(request.body, dict) else {}
    system = (body.get("messages") or [{}])[0].get("content", "")
    return openai_reply(json.dumps({"risk_flags": []})) if "risk_flags" in str(system) else None


class ScriptedModel:
    """The model behind `model_app`: queue the next replies; anything unscripted gets a
    short valid reply. The safety screen's calls are answered apart (no flags)."""

    def __init__(self, server: FakeLLMServer) -> None:
        self.server = server

    def reset(self) -> None:
        self.server.reset()
        self.server.default = lambda _request: openai_reply(json.dumps(tutor_reply("Let's keep going.")))
        self.server.intercept = screen_finds_nothing

    def reply(self, data: dict[str, Any], **kw: Any) -> None:
        """Queue one reply given as RESPONSE_SCHEMA data."""
        self.raw(json.dumps(data), **kw)

    def raw(self, text: str, *, delay_s: float = 0.0) -> None:
        """Queue one reply given as the model's raw text."""
        scripted = openai_reply(text)
        scripted.delay_s = delay_s
        self.server.script(scripted)

    def stream(self, text: str, *, pieces: int = 20, chunk_delay_s: float = 0.1, **kw: Any) -> None:
        """Queue one reply streamed as server-sent events, `pieces` chunks apart."""
        self.server.script(openai_stream(text, pieces=pieces, chunk_delay_s=chunk_delay_s, **kw))

    @property
    def requests(self):
        return self.server.requests


@pytest.fixture(scope="session")
def model_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer("openai") as server:
        yield server


def scripted_model_env(server: FakeLLMServer, **overrides: str) -> dict[str, str]:
    """Settings for an app whose model is the scripted loopback server (`overrides` add to
    or replace them)."""
    return {
        "TUTOR_LLM_PROVIDER": "openai",
        "TUTOR_LLM_BASE_URL": server.base_url,
        "TUTOR_LLM_MODEL": "scripted-model",
        "TUTOR_LLM_MAX_RETRIES": "0",
        "TUTOR_LLM_TIMEOUT": "30",
        "TUTOR_LLM_STREAM": "1",
        **overrides,
    }


def scripted(server: FakeLLMServer) -> Iterator[ScriptedModel]:
    """The scripted model, with nothing queued before or after the test."""
    model = ScriptedModel(server)
    model.reset()
    yield model
    model.reset()


@pytest.fixture
def model_app(apps: AppPool, model_server: FakeLLMServer) -> RunningApp:
    """The app whose model is the scripted loopback server."""
    return apps.use("model", **scripted_model_env(model_server))


@pytest.fixture
def model(model_server: FakeLLMServer, model_app: RunningApp) -> Iterator[ScriptedModel]:
    yield from scripted(model_server)


@pytest.fixture
def limits_app(apps: AppPool, model_server: FakeLLMServer) -> RunningApp:
    """The scripted-model app with low usage limits: 2 turns a minute per learner, one
    model call in flight at a time (tests/browser/test_limits.py)."""
    return apps.use("limits", **scripted_model_env(model_server, TUTOR_TURNS_PER_MINUTE="2",
                                                   TUTOR_MODEL_CALLS_IN_FLIGHT="1"))


@pytest.fixture
def limited_model(model_server: FakeLLMServer, limits_app: RunningApp) -> Iterator[ScriptedModel]:
    yield from scripted(model_server)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama.cpp's server with Gemma 3 270M (see tests/real): a real model, never skipped."""
    yield from serve_for_tests(tmp_path_factory.mktemp("llama-browser"), "real-model browser tests")


@pytest.fixture
def llama_app(apps: AppPool, llama_server: LlamaServer) -> RunningApp:
    """The app with a real model: llama.cpp, json_schema, streamed."""
    return apps.use(
        "llama",
        TUTOR_LLM_PROVIDER="openai",
        TUTOR_LLM_BASE_URL=llama_server.base_url,
        TUTOR_LLM_MODEL="gemma-3-270m",
        TUTOR_LLM_STRATEGY="json_schema",
        TUTOR_LLM_MAX_TOKENS="500",
        TUTOR_LLM_STREAM="1",
    )


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _page(browser: Browser, request: pytest.FixtureRequest, **context: Any) -> Iterator[Page]:
    # Every page runs under the app's real Content-Security-Policy (so a feature that
    # needs eval, e.g. rx.call_script, fails here); waits go through helpers.wait_until.
    ctx = browser.new_context(**context)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    ctx.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    yield from _page(browser, request, viewport={"width": 1100, "height": 900})


@pytest.fixture
def phone(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A 375 px wide touch screen."""
    yield from _page(
        browser, request, viewport={"width": 375, "height": 740}, device_scale_factor=2,
        is_mobile=True, has_touch=True,
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests of the built-in app first, then the sign-in app's, then those of the
    model app, then the one with a real model (one switch each).
    The sort is stable and leaves every other test where it was."""
    here = Path(__file__).parent

    def key(item: pytest.Item) -> tuple[int, int]:
        browser = Path(str(item.fspath)).is_relative_to(here)
        names = getattr(item, "fixturenames", ())
        if "accounts_app" in names or "header_app" in names:  # sign-in tests: their own apps, after the built-in one
            return (int(browser), 1)
        if "finish_app" in names:  # test_finish's own modules: its own app, started once too
            return (int(browser), 1)
        if "instances" in names:  # two instances of their own (test_instances), at the very end
            return (int(browser), 5)
        if "limits_app" in names:  # low usage limits: their own app, started once, last
            return (int(browser), 4)
        return (int(browser), 3 if "llama_app" in names else 2 * int(browser and "model_app" in names))

    items.sort(key=key)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
