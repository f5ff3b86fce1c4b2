"""llama.cpp's own endpoints the app can ask: the context window (/props) and the server's
tokenizer (/tokenize), and what they say about our sample module's system prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real.llama import CONTEXT_TOKENS, MODEL_ALIAS
from tutor.content.modules import load_library
from tutor.progress import ProgressState
from tutor.turns.prompts import build_messages

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]


def sample_system_prompt() -> str:
    module = load_library(ROOT / "modules").get("understanding_anxiety")
    [system, _user] = build_messages(module, ProgressState(), [], None)
    assert system.role == "system"
    return system.content


def test_props_report_the_context_window(llama):
    props = llama.props()
    settings = props["default_generation_settings"]
    assert settings["n_ctx"] == CONTEXT_TOKENS  # what the app should budget against
    assert props["total_slots"] == 1
    assert props["model_alias"] == MODEL_ALIAS
    # No chat template in the GGUF: the server falls back to ChatML.
    assert "<|im_start|>" in props["chat_template"]


def test_tokenize_counts_tokens(llama):
    tokens = llama.tokenize("Anxiety is the body's alarm system.")
    assert tokens and all(isinstance(t, int) for t in tokens)
    assert len(llama.tokenize("")) == 0
    # add_special prepends the model's BOS token
    assert len(llama.tokenize("hello", add_special=True)) == len(llama.tokenize("hello")) + 1


def test_sample_system_prompt_fits_the_context_with_room_to_talk(llama, record_property):
    text = sample_system_prompt()
    tokens = len(llama.tokenize(text))
    ratio = len(text) / tokens
    record_property("system_prompt_chars", len(text))
    record_property("system_prompt_tokens", tokens)
    record_property("chars_per_token", round(ratio, 3))
    assert 1.5 < ratio < 6  # a plausible English tokenizer: anything else means we measured wrong
    assert tokens < CONTEXT_TOKENS // 2  # history and the reply need the other half
