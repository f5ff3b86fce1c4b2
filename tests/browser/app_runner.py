"""Start the app the way a user does (scripts/run.sh) on a free port with its own database,
and launch Debian's chromium. Shared by the browser tests and `python -m benchmarks.ui_bench`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

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
START_TIMEOUT_S = 900  # the first start builds the frontend (npm install)


def free_port() -> int:
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
    extra: dict = field(default_factory=dict)

    @classmethod
    def create(cls, data_dir: Path, **env: str) -> RunningApp:
        """An app on a free port with a fresh SQLite database in `data_dir`; `env` adds
        settings (TUTOR_LLM_PROVIDER=..., ...)."""
        port = free_port()
        full = dict(os.environ)
        full.update(
            TUTOR_PORT=str(port),
            TUTOR_DATA_DIR=str(data_dir),
            TUTOR_DATABASE_URL=f"sqlite:///{data_dir / 'tutor.db'}",
            TUTOR_LLM_PROVIDER="builtin",
            # A fresh browser context is a fresh learner (tests/browser/test_accounts.py
            # runs an app with TUTOR_AUTH=accounts).
            TUTOR_AUTH="anonymous",
            # A browser test sends faster than a learner: no turns-per-minute limit unless
            # the test is about it (test_limits' app sets its own).
            TUTOR_TURNS_PER_MINUTE="0",
            # Every browser context comes from 127.0.0.1: in anonymous mode the limits count
            # per address too, so each test's learners get an allowance of their own.
            TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS="1000",
            # Test apps build their frontend apart from .web, so a copy of the app that a
            # person is running from this checkout keeps working during a test run.
            REFLEX_WEB_WORKDIR=str(REPO / ".web-test"),
        )
        full.update(env)
        return cls(f"http://127.0.0.1:{port}", port, data_dir, full)

    @property
    def db_path(self) -> Path:
        return self.data_dir / "tutor.db"

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
