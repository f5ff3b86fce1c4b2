"""Shared fixtures: the shipped default safety configuration, compiled once."""

from __future__ import annotations

import pytest

from tutor.risk import SafetyConfig, load_safety
from tutor.risk.config import REPO_ROOT

DEFAULT_FILE = REPO_ROOT / "modules" / "safety" / "default.yaml"


@pytest.fixture(scope="session")
def config() -> SafetyConfig:
    return load_safety(DEFAULT_FILE)
