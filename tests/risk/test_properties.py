"""Properties that must hold for ANY learner text, attack strings included: evidence spans
stay inside the text and hash what they cover; a crisis phrase inserted anywhere is found."""

from __future__ import annotations

import hashlib
import unicodedata

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tutor.risk import locate_evidence, screen
from tutor.risk.tokens import tokenize

# Characters that have broken text handling before: combining marks, zero-width and bidi
# controls, emoji (incl. ZWJ sequences and skin tones), full-width and ligature letters,
# Vietnamese, other scripts, CR/LF, apostrophe and quote variants, sentence punctuation.
ATTACK = list(
    "\u0301\u0323\u031b\u0336\u0338\u200b\u200c\u200d\u2060\ufeff\u00ad\u202e\u2066\ufe0f"
    "😀👍🏽👨\u200d👩\u200d👧🇻🇳ｋｉｌｌ ｍｙｓｅｌｆﬁﬂ"
    "ăâđêôơưáàảãạếềểễệốồổỗộớờởỡợứừửữựĐƯƠ"
    "ßİıſΣσςдияب漢字日本語\r\n\t \u00a0\u2028.,;:!?…'’‘ʼ`´\"“”«»-—_()[]{}|*/\\0123456789"
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
FRAGMENTS = [
    "kill myself", "I want to die", "not", "never", "don't", "dont", "want", "to", "my", "friend", "says",
    "muốn chết", "tự tử", "tu tu", "từ từ", "không muốn sống nữa", "killing me", "suicidal", "I'm not",
    "overdose", "chest pain and I can't breathe", "hits me", "my dad", "...", ". ", "\r\n", "  ",
]
texts = st.one_of(
    st.text(alphabet=st.sampled_from(ATTACK), max_size=300),
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet=st.sampled_from(ATTACK), max_size=6)),
             max_size=40).map(" ".join),
)
CRISIS = [
    ("I want to kill myself", "self_harm"),
    ("I don't want to be alive anymore", "self_harm"),
    ("everyone would be better off without me", "self_harm"),
    ("tôi muốn chết", "self_harm"),
    ("khong muon song nua", "self_harm"),
    ("Tôi muốn kết thúc cuộc đời", "self_harm"),
    ("I'm going to hurt someone", "harm_to_others"),
    ("my husband hits me", "abuse"),
    ("I took an overdose", "medical_emergency"),
    ("I have chest pain and I can't breathe", "medical_emergency"),
    ("my friend says she wants to kill herself", "concern_for_other"),
]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@SETTINGS
@given(text=texts)
def test_every_evidence_span_is_in_range_and_hashes_what_it_covers(config, text):
    for flag in screen(text, config):
        assert flag.label in config.labels and 0.0 < flag.confidence <= 1.0 and flag.evidence
        for evidence in flag.evidence:
            assert 0 <= evidence.start < evidence.end <= len(text)
            assert evidence.sha256 == _sha(text[evidence.start:evidence.end])
            assert evidence.matches(text)


@SETTINGS
@given(before=texts, after=texts, crisis=st.sampled_from(CRISIS))
def test_a_crisis_phrase_inserted_into_any_text_is_flagged_with_evidence_on_it(config, before, after, crisis):
    phrase, label = crisis
    text = before + "\n" + phrase + "\n" + after
    start = len(before) + 1
    end = start + len(phrase)
    flags = {f.label: f for f in screen(text, config)}
    assert label in flags, (text, flags)
    inside = [e for e in flags[label].evidence if start <= e.start and e.end <= end]
    assert inside, (text, flags[label])
    for evidence in inside:
        assert evidence.matches(text)


@SETTINGS
@given(text=texts)
def test_tokens_point_into_the_original_text(config, text):
    tokenized = tokenize(text)
    for fold, (start, end) in zip(tokenized.folds, tokenized.spans):
        assert 0 <= start < end <= len(text) and fold and " " not in fold
    assert tokenized.joined.startswith(" ") and tokenized.joined.endswith(" ")


@SETTINGS
@given(text=texts, data=st.data())
def test_a_snippet_of_the_text_is_located_where_it_occurs_first(text, data):
    if not text:
        return
    i = data.draw(st.integers(0, len(text) - 1))
    j = data.draw(st.integers(i + 1, len(text)))
    snippet = text[i:j]
    evidence = locate_evidence(text, snippet)
    whole = not unicodedata.combining(text[i]) and (j == len(text) or not unicodedata.combining(text[j]))
    if not snippet.strip() or not whole:  # blank, or a letter cut from its marks: nothing honest to point at
        assert evidence is None or evidence.matches(text)
        return
    assert evidence is not None and evidence.matches(text)
    assert evidence.start <= i  # the first occurrence
    if snippet.strip() == snippet and evidence.snippet(text) == snippet:
        assert text.find(snippet) <= evidence.start


@SETTINGS
@given(text=texts, snippet=texts)
def test_a_located_snippet_is_always_a_valid_span(text, snippet):
    for candidate in (snippet, snippet.upper(), " ".join(snippet.split())):
        evidence = locate_evidence(text, candidate)
        if evidence is not None:
            assert 0 <= evidence.start < evidence.end <= len(text) and evidence.matches(text)


def test_very_long_input_is_screened_whole(config):
    text = ("I love the breathing lesson. 😀 " * 4000) + "I want to die." + (" ok" * 1000)
    flags = screen(text, config)
    assert [f.label for f in flags] == ["self_harm"]
    assert flags[0].evidence[0].snippet(text) == "want to die"
