"""Fixtures for backend tests: loopback provider servers and settings with tiny delays."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `pytest` (not `python -m pytest`) does not add the repo root
    sys.path.insert(0, str(ROOT))

from tests.fakes.servers import FakeLLMServer  # noqa: E402
from tutor.llm.config import LLMSettings  # noqa: E402


@pytest.fixture
def openai_server():
    with FakeLLMServer("openai") as server:
        yield server


@pytest.fixture
def anthropic_server():
    with FakeLLMServer("anthropic") as server:
        yield server


def settings_for(server: FakeLLMServer, **overrides) -> LLMSettings:
    """Settings pointing at a fake server, with backoff delays small enough for unit tests."""
    base = LLMSettings(
        provider=server.kind,
        base_url=server.base_url,
        api_key="test-key",
        model="fake-model-1",
        strategy="prompt",
        temperature=0.7,
        max_tokens=512,
        timeout_s=2.0,
        max_retries=2,
        retry_base_delay_s=0.001,
        retry_max_delay_s=0.02,
    )
    return replace(base, **overrides)
