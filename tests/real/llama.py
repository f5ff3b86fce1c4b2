"""Find and run llama.cpp's `llama-server` with the Gemma 3 270M GGUF on 127.0.0.1.

Shared by the real-model tests (tests/real/conftest.py) and `python -m benchmarks.strategy_bench`.
`scripts/install-llama.sh` builds both into a cache outside the repository and writes
`installed.json` there; this module only reads it. Nothing here downloads anything.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tutor.llm.config import LLMSettings

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install-llama.sh"
MODEL_ALIAS = "gemma-3-270m"
CONTEXT_TOKENS = 8192  # the size the issue documents (`-c 8192`)
# Both cores of the 2-core machines CI runs on. On a machine shared with other busy
# processes two threads wait on each other at every step; TUTOR_LLAMA_THREADS=1 then helps.
THREADS = int(os.environ.get("TUTOR_LLAMA_THREADS") or 2)
# One slot: requests run one at a time anyway (tests and evals are sequential), and a single
# slot keeps the whole context for one prompt and reuses its cached prefix (the system
# prompt) from one call to the next.
PARALLEL = 1
START_TIMEOUT_S = 120.0
HOW_TO_BUILD = (
    "run scripts/install-llama.sh (builds llama-server once, ~20 min on 2 cores; "
    "scripts/test.sh does this), or deselect these tests with -m 'not real_model'"
)


class LlamaUnavailable(RuntimeError):
    """No usable server: the message says why and how to fix it."""


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """Where the install script puts the build, as the script itself says (`--where`): one
    rule, in one place (TUTOR_LLAMA_CACHE, else $XDG_CACHE_HOME or ~/.cache, then
    tutor/llama-<version>-portable)."""
    env = dict(os.environ if env is None else env)
    try:
        run = subprocess.run(["bash", str(INSTALL_SCRIPT), "--where"], env=env, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaUnavailable(f"cannot ask {INSTALL_SCRIPT} where its cache is: {exc}") from None
    where = run.stdout.strip().splitlines()
    if run.returncode != 0 or not where:
        raise LlamaUnavailable(f"{INSTALL_SCRIPT} --where failed ({run.returncode}): {run.stderr.strip()[-300:]}")
    return Path(where[-1])


@dataclass(frozen=True)
class Installation:
    server: Path
    model: Path
    info: dict[str, Any]


def find_installation() -> Installation:
    """The cached server and model, or LlamaUnavailable saying what is missing."""
    error = os.environ.get("TUTOR_LLAMA_ERROR")
    if error:
        raise LlamaUnavailable(f"the llama.cpp build failed: {error}. To retry: {HOW_TO_BUILD}")
    cache = cache_dir()
    stamp = cache / "installed.json"
    if not stamp.is_file():
        raise LlamaUnavailable(f"no llama.cpp server installed in {cache} ({stamp.name} missing): {HOW_TO_BUILD}")
    info = json.loads(stamp.read_text())
    server, model = Path(info["server"]), Path(info["model"])
    for what, path in (("server", server), ("model", model)):
        if not path.is_file():
            raise LlamaUnavailable(f"the cached {what} {path} is gone: delete {stamp} and {HOW_TO_BUILD}")
    return Installation(server, model, info)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child before exec: the server gets SIGTERM when the process that started it
    dies, even by a signal that skips our cleanup, so no server outlives its test run."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: stop() still ends it on every normal exit


class LlamaServer:
    """`with LlamaServer.start() as llama: ...`; `.base_url` is what TUTOR_LLM_BASE_URL would be."""

    def __init__(self, installation: Installation, port: int, process: subprocess.Popen, log_path: Path):
        self.installation = installation
        self.port = port
        self.process = process
        self.log_path = log_path

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @classmethod
    def start(cls, *, log_dir: Path | None = None, extra_args: list[str] | None = None) -> LlamaServer:
        installation = find_installation()
        log_dir = Path(log_dir or tempfile.mkdtemp(prefix="tutor-llama-"))
        for _ in range(3):  # the free port may be taken between asking and binding
            port = free_port()
            log_path = log_dir / f"llama-server-{port}.log"
            command = [
                str(installation.server),
                "--model", str(installation.model),
                "--alias", MODEL_ALIAS,
                "--host", "127.0.0.1",
                "--port", str(port),
                "--ctx-size", str(CONTEXT_TOKENS),
                "--threads", str(THREADS),
                "--parallel", str(PARALLEL),
                "--no-webui",
                *(extra_args or []),
            ]
            with open(log_path, "wb") as log:
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           preexec_fn=_die_with_parent)
            server = cls(installation, port, process, log_path)
            try:
                server._wait_healthy()
                return server
            except LlamaUnavailable:
                tail = server.log_tail()
                server.stop()
                if "bind" in tail.lower() and "address" in tail.lower():
                    continue
                raise
        raise LlamaUnavailable(f"llama-server could not bind a free port:\n{server.log_tail()}")

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last = "no answer"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LlamaUnavailable(
                    f"llama-server exited with {self.process.returncode} before it was ready; "
                    f"its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            try:
                status, body = self.get("/health", timeout=2)
                if status == 200 and body.get("status") == "ok":
                    return
                last = f"{status} {body}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.25)
        raise LlamaUnavailable(
            f"llama-server was not healthy within {START_TIMEOUT_S:g}s (last /health: {last}); "
            f"its log ({self.log_path}) ends:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------- llama.cpp's own endpoints

    def get(self, path: str, *, timeout: float = 10) -> tuple[int, dict[str, Any]]:
        return self._call(urllib.request.Request(self.root + path), timeout)

    def post(self, path: str, body: dict[str, Any], *, timeout: float = 60) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(self.root + path, data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"}, method="POST")
        return self._call(request, timeout)

    @staticmethod
    def _call(request: urllib.request.Request, timeout: float) -> tuple[int, dict[str, Any]]:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"{}")
            except ValueError:
                return exc.code, {}

    def props(self) -> dict[str, Any]:
        status, body = self.get("/props")
        assert status == 200, body
        return body

    def n_ctx(self) -> int:
        return int(self.props()["default_generation_settings"]["n_ctx"])

    def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        status, body = self.post("/tokenize", {"content": text, "add_special": add_special})
        assert status == 200, body
        return list(body["tokens"])

    def apply_template(self, messages: list[dict[str, str]]) -> str:
        """The prompt text the server builds from chat messages (its chat template)."""
        status, body = self.post("/apply-template", {"messages": messages})
        assert status == 200, body
        return str(body["prompt"])

    # ------------------------------------------------------------------------- our settings

    def settings(self, **overrides: Any) -> LLMSettings:
        """Settings for our OpenAI-compatible backend pointing at this server, sized for a small
        CPU model: short replies, a generous timeout, no backoff to speak of."""
        base = LLMSettings(
            provider="openai",
            base_url=self.base_url,
            api_key=None,
            model=MODEL_ALIAS,
            strategy="prompt",
            temperature=0.7,
            max_tokens=500,
            timeout_s=180.0,
            deadline_s=300.0,  # a busy 2-core machine: the tiny model may take minutes
            max_retries=1,
            retry_base_delay_s=0.05,
            retry_max_delay_s=0.5,
            stream=False,
        )
        return replace(base, **overrides)


def serve_for_tests(log_dir: Path, who: str):
    """The body of a session fixture: a running server, or the test fails saying why (never
    a skip). `who` names the tests that need it, for the failure message."""
    try:
        server = LlamaServer.start(log_dir=log_dir)
    except LlamaUnavailable as exc:
        pytest.fail(f"{who} need llama.cpp's server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
