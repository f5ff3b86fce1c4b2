"""Quote verification: verbatim in one section of the cited source (whitespace, case and
markdown emphasis aside), nothing else."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tutor.teach import Citation, module_sources, verify_quote
from tutor.teach.quotes import MAX_QUOTE_CHARS, MIN_QUOTE_WORDS, normalize_quote

WORD = re.compile(r"\S+")


@pytest.fixture(scope="module")
def sources(sample):
    return module_sources(sample)


def _sections(sources):
    return [(source, section) for source in sources.values() for section in source.sections if section.text]


def test_a_quote_is_found_with_its_source_section_and_exact_original_span(sources):
    quote = "the SAME wiring,   so they can\nfeel alike"
    verified = verify_quote(sources, Citation(source_id="how_anxiety_works", quote=quote))
    assert verified.source_title == "How the body's alarm system works"
    assert verified.section_id == "fear_and_anxiety"
    assert verified.section_title == "Fear and anxiety are close relatives"
    assert verified.quote == "the same wiring, so they can feel alike"
    section = sources["how_anxiety_works"].section("fear_and_anxiety")
    assert section.text[verified.start:verified.end] == verified.quote


def test_topic_content_is_citable_as_the_module_source_with_markdown_emphasis_ignored(sources):
    verified = verify_quote(sources, Citation(source_id="module", quote="Fear reacts to danger that is here right now"))
    assert verified.section_id == "anxiety_vs_fear" and verified.source_title == "Understanding anxiety"
    assert verified.quote.startswith("Fear** reacts")  # the author's text, as written


def test_the_location_is_a_hint_not_a_requirement(sources):
    citation = Citation(source_id="calming_skills", quote="count backwards from one hundred in sevens",
                        location="Skills for calming anxiety > Grounding in the present moment")
    assert verify_quote(sources, citation).section_id == "grounding_in_the_present_moment"
    wrong_hint = citation.model_copy(update={"location": "thought_records"})
    assert verify_quote(sources, wrong_hint).section_id == "grounding_in_the_present_moment"


@pytest.mark.parametrize("quote", [
    "", " ", "\n\t ", "...", "— ! ?", "**", "anxiety", "anxiety is",  # nothing or too little to quote
    "Fear is fast, sharp and usually short. Fear is fast, sharp and always short.",  # changed word
    "x" * 10_000, ("fear " * 2000).strip(),  # far too long to be a quote
])
def test_attack_and_degenerate_quotes_do_not_verify(sources, quote):
    assert verify_quote(sources, Citation.model_construct(source_id="how_anxiety_works", quote=quote, location=None)) is None


def test_quotes_spanning_two_sections_or_naming_the_wrong_source_do_not_verify(sources):
    body = sources["how_anxiety_works"]
    first, second = body.sections[1], body.sections[2]
    spanning = " ".join(first.text.split()[-6:] + second.text.split()[:6])
    assert verify_quote(sources, Citation(source_id="how_anxiety_works", quote=spanning)) is None
    inside = " ".join(first.text.split()[:8])
    assert verify_quote(sources, Citation(source_id="calming_skills", quote=inside)) is None
    assert verify_quote(sources, Citation(source_id="nope", quote=inside)) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_run_of_words_from_a_section_verifies(sources, data):
    source, section = data.draw(st.sampled_from(_sections(sources)))
    words = WORD.findall(section.text)
    assume(len(words) >= MIN_QUOTE_WORDS)
    n = data.draw(st.integers(MIN_QUOTE_WORDS, min(len(words), 60)))
    start = data.draw(st.integers(0, len(words) - n))
    spacing = data.draw(st.sampled_from([" ", "  ", "\n", " \t "]))
    quote = spacing.join(words[start:start + n])
    assume(len(re.findall(r"[^\W_]+", quote)) >= MIN_QUOTE_WORDS)  # list markers are not words
    if data.draw(st.booleans()):
        quote = quote.upper()
    verified = verify_quote(sources, Citation(source_id=source.id, quote=quote))
    assert verified is not None
    assert normalize_quote(verified.quote) == normalize_quote(quote)
    # The same words may also sit in an earlier section: the span is from the section found.
    assert verified.quote in source.section(verified.section_id).text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_changing_one_word_breaks_verification(sources, data):
    source, section = data.draw(st.sampled_from(_sections(sources)))
    words = WORD.findall(section.text)
    assume(len(words) >= 8)
    n = data.draw(st.integers(MIN_QUOTE_WORDS + 2, min(len(words), 40)))
    start = data.draw(st.integers(0, len(words) - n))
    quote = words[start:start + n]
    at = data.draw(st.integers(0, n - 1))
    quote[at] = data.draw(st.sampled_from(["zqxv", "banana", "Nope", "42x"]))
    assert verify_quote(sources, Citation(source_id=source.id, quote=" ".join(quote))) is None


def test_every_retrieved_passage_is_quotable_as_it_stands(sample, sources):
    from tutor.teach import Index
    for passage in Index.from_module(sample).passages:
        quote = passage.text if len(passage.text) <= MAX_QUOTE_CHARS else passage.text[:MAX_QUOTE_CHARS // 2]
        verified = verify_quote(sources, Citation(source_id=passage.source_id, quote=quote))
        assert verified is not None and verified.section_id == passage.section_id
