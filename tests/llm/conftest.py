"""Fixtures for backend tests: loopback provider servers and settings with tiny delays."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `pytest` (not `python -m pytest`) does not add the repo root
    sys.path.insert(0, str(ROOT))

from tests.fakes.servers import FakeLLMServer  # noqa: E402


@pytest.fixture
def openai_server():
    with FakeLLMServer("openai") as server:
        yield server


@pytest.fixture
def anthropic_server():
    with FakeLLMServer("anthropic") as server:
        yield server
