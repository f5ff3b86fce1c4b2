"""A message of emoji alone is read by its symbols (tutor/risk/emoji.py): a means beside
death, blood or the writer is imminent self-harm; death beside the writer, or an ending
beside sadness, is serious; a skull of laughter or a means alone is ordinary."""

from __future__ import annotations

import pytest

from tutor.risk.emoji import emoji_flags
from tutor.risk.offline import offline_screen


@pytest.mark.parametrize("text, severity", [
    ("🗡️🩸", "imminent"),
    (" 💊💊🧍‍♀️ ", "imminent"),
    ("🪢🙋🏽‍♀️", "imminent"),
    ("🧍💀", "serious"),
    ("😢🪦", "serious"),
    ("💔🔚", "serious"),
])
def test_emoji_that_tell_of_self_harm_are_flagged_with_their_severity(config, text, severity):
    [flag] = offline_screen(text, config, None)
    assert (flag.label, flag.severity, flag.source) == ("self_harm", severity, "offline")
    [evidence] = flag.evidence
    assert evidence.matches(text) and evidence.snippet(text) == text.strip()


@pytest.mark.parametrize("text", [
    "💀", "😂💀💀", "😭💀",        # "I'm dead": laughing
    "💊🤒", "💊💊💊",              # medicine, a pharmacy run
    "🔪🥕🥒", "🪒🧔",              # cooking, a shave
    "🎃👻💀🕸️",                    # Halloween
    "🔪🩸 that horror film was so good",  # words: the other layers read it
    "",
])
def test_laughter_medicine_tools_and_messages_with_words_are_not_read_as_emoji_risk(config, text):
    assert emoji_flags(text, config.labels) == []


def test_without_a_self_harm_label_nothing_is_flagged():
    assert emoji_flags("🗡️🩸", ["abuse"]) == []
