"""A model's evidence snippets mapped to offsets of the learner's text (seed 003):
verbatim first, then ignoring case and whitespace; never a span that is not there."""

from __future__ import annotations

import unicodedata

from tutor.risk import locate_evidence
from tutor.risk.screen import span_hash

TEXT = "Hi.  Honestly   I DON’T want\nto be alive anymore. Tự tử?"


def test_a_verbatim_snippet_maps_to_its_first_occurrence():
    evidence = locate_evidence("die, die, die", "die")
    assert (evidence.start, evidence.end) == (0, 3) and evidence.sha256 == span_hash("die")


def test_case_whitespace_and_quote_variants_are_forgiven_and_mapped_to_the_original():
    evidence = locate_evidence(TEXT, "i don't want to be alive")
    assert evidence.snippet(TEXT) == "I DON’T want\nto be alive"
    assert evidence.matches(TEXT)
    assert locate_evidence(TEXT, "  honestly i  ").snippet(TEXT) == "Honestly   I"


def test_composed_and_decomposed_vietnamese_are_the_same_snippet():
    decomposed = unicodedata.normalize("NFD", TEXT)
    evidence = locate_evidence(decomposed, "Tự tử")
    assert evidence is not None and unicodedata.normalize("NFC", evidence.snippet(decomposed)) == "Tự tử"


def test_a_snippet_that_is_not_in_the_text_is_none():
    assert locate_evidence(TEXT, "I want to die") is None
    assert locate_evidence(TEXT, "tu tu") is None  # diacritics are not folded: not what the learner wrote
    assert locate_evidence(TEXT, "") is None and locate_evidence("", "x") is None
    assert locate_evidence(TEXT, "   ") is None


def test_a_match_never_splits_a_character():
    # "u" is the start of the decomposed "ự", but not a character of the text on its own
    assert locate_evidence(unicodedata.normalize("NFD", "Tự"), "tu") is None
    assert locate_evidence("Straße", "STRASSE").snippet("Straße") == "Straße"
