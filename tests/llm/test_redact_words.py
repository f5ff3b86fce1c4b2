"""scrub() searches a text with a secret pattern only when the text holds the words the
pattern needs (tutor/llm/redact.py); the property: that skip never changes what is
scrubbed, whatever the case or the look-alike letters ("ſ", the kelvin sign, "İ", "ı")
that the patterns' case-blind matching accepts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.llm import redact
from tutor.llm.redact import scrub

WORDS = ["authorization", "Bearer", "bearer", "sk-", "rk-", "api_key", "x-api-key", "access_token", "auth-token",
         "client_secret", "secret", "password", "passwd", "token", "?key=", "&sig=", "&signature=", "https://",
         "user", "lesson", "ant-", "proj-"]
LOOKALIKES = {"s": "ſ", "k": "\u212a", "i": "\u0130", "I": "\u0131", "a": "A", "e": "E"}
PIECES = st.sampled_from(WORDS + [": ", "=", "\"", "'", " ", "@", "/", "abc123XYZ", "0123456789", "_", "-"])


def _swap(word: str, picks: list[bool]) -> str:
    return "".join(LOOKALIKES.get(ch, ch) if pick else ch for ch, pick in zip(word, picks + [False] * len(word)))


def _everything(text: str) -> str:
    for pattern, replacement, _ in redact._SECRETS:
        text = pattern.sub(replacement, text)
    return text


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(PIECES, st.lists(st.booleans(), max_size=12)), max_size=12))
def test_skipping_patterns_by_their_words_scrubs_exactly_as_searching_every_pattern(parts):
    text = "".join(_swap(piece, picks) for piece, picks in parts)
    assert scrub(text, secrets=[]) == _everything(text)


def test_a_look_alike_letter_does_not_hide_a_secret():
    assert scrub("ſecret: hunter22", secrets=[]) == "ſecret: ***"
    assert scrub("authorİzation: Bearer abcdefgh", secrets=[]) != "authorİzation: Bearer abcdefgh"
