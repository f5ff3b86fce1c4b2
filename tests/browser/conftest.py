"""Browser tests: start the app the way a user does (scripts/run.sh) and drive Debian's
chromium with Playwright. These never skip: a missing browser is a failure."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = REPO / "test-results"
START_TIMEOUT_S = 900  # the first start builds the frontend (npm install)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningApp:
    url: str
    port: int
    data_dir: Path
    env: dict[str, str]
    process: subprocess.Popen | None = None
    log_path: Path | None = None

    def start(self) -> None:
        self.log_path = self.data_dir / f"app-{int(time.time() * 1000)}.log"
        log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [str(REPO / "scripts" / "run.sh")],
            cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app exited early:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=2) as r:
                    if r.status == 200:
                        with urllib.request.urlopen(self.url + "/", timeout=5) as page:
                            if page.status == 200:
                                return
            except OSError:
                pass
            time.sleep(1)
        raise RuntimeError(f"the app did not start in {START_TIMEOUT_S}s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningApp]:
    data_dir = tmp_path_factory.mktemp("app-data")
    port = _free_port()
    env = dict(os.environ)
    env.update(
        TUTOR_PORT=str(port),
        TUTOR_DATA_DIR=str(data_dir),
        TUTOR_DATABASE_URL=f"sqlite:///{data_dir / 'tutor.db'}",
        TUTOR_LLM_PROVIDER="builtin",
    )
    running = RunningApp(f"http://127.0.0.1:{port}", port, data_dir, env)
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # noqa: ARG001
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
