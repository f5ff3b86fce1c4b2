"""Fixtures for the teaching core's tests."""

from __future__ import annotations

import pytest

from tutor.content.modules import REPO_ROOT, Module, load_library


@pytest.fixture(scope="session")
def sample() -> Module:
    return load_library(REPO_ROOT / "modules").get("understanding_anxiety")


@pytest.fixture(scope="session")
def library():
    return load_library(REPO_ROOT / "modules")
