"""Retrieval over a module's sources and topic content."""

from __future__ import annotations

import time

from tests.teach.helpers import write_mini
from tutor.content.modules import load_library
from tutor.teach import Index, Passage, retrieve
from tutor.teach.retrieval import tokens, warm


def test_search_returns_passages_with_their_source_section_and_topic(sample):
    [best, *_] = retrieve(sample, "Why does my heart race when I'm nervous?", k=3)
    assert isinstance(best, Passage)
    assert best.topic_id == "physical_level"
    assert best.source_id in sample.loaded_sources or best.source_id == "module"
    assert best.section_title and best.source_title and best.score > 0
    assert best.header.startswith(f'[Source: "{best.source_title}" (id: {best.source_id}), Section: ')


def test_results_are_spread_over_topics_unless_asked_otherwise(sample):
    index = Index.build(sample)
    spread = index.search("how do I do slow breathing", k=3)
    assert len({p.topic_id for p in spread}) == 3
    deep = index.search("how do I do slow breathing", k=3, per_topic=None)
    assert [p.topic_id for p in deep].count("slow_breathing") >= 2


def test_vietnamese_questions_find_the_english_material_through_aliases(sample):
    assert retrieve(sample, "Tại sao tim tôi đập nhanh?", k=1)[0].topic_id == "physical_level"
    assert retrieve(sample, "tai sao tim toi dap nhanh", k=1)[0].topic_id == "physical_level"  # typed without marks
    assert retrieve(sample, "Sợ hãi khác lo âu thế nào?", k=1)[0].topic_id == "anxiety_vs_fear"


def test_queries_with_nothing_to_match_return_nothing(sample):
    index = Index.build(sample)
    for query in ["", "   ", "?!", "the and of", "zzzqqq xylophone", "\u200b"]:
        assert index.search(query) == []
    assert index.search("anxiety", k=0) == []


def test_very_long_and_odd_queries_are_fast_and_safe(sample):
    index = Index.build(sample)
    start = time.perf_counter()
    index.search("breathing " * 50_000, k=3)
    index.search("{" * 10_000 + "}" * 10_000)
    index.search("\x00\ud800 lo âu 🙂" * 500)
    assert time.perf_counter() - start < 2.0


def test_the_index_is_built_once_per_module_object(sample, tmp_path):
    assert Index.build(sample) is Index.build(sample)
    write_mini(tmp_path)
    mini = load_library(tmp_path).get("mini")
    index = Index.build(mini)
    assert index is not Index.build(sample)
    assert {p.source_id for p in index.passages} == {"guide", "module"}
    [hit] = index.search("stand down", k=1)
    assert (hit.source_id, hit.section_id, hit.topic_id) == ("guide", "slow_breathing", "breathing")


def test_tokens_fold_accents_drop_stop_words_and_keep_pairs():
    assert tokens("Breathing SLOWLY") == ["breath", "slowli", "breath_slowli"]
    assert "lo_au" in tokens("lo âu là gì") and "lo" in tokens("Lo âu")
    assert "so" in tokens("sợ hãi") and "so" not in tokens("so what")  # Vietnamese "sợ" is not English "so"
    assert tokens("catastrophising")[0] == tokens("catastrophizing")[0]


def test_questions_off_the_module_get_no_passages(sample):
    for question in ["Can you say that again?", "What is the capital of France?", "How are you?",
                     "Who will win the football tonight?", "What's the weather like?"]:
        assert retrieve(sample, question, on_topic_only=True) == [], question
    assert retrieve(sample, "Why does my heart race?", on_topic_only=True)


def test_warming_builds_each_index_ahead_so_the_first_question_finds_it_ready():
    library = load_library()
    modules = list(library.modules.values())
    assert modules and not any(Index.is_built(m) for m in modules)  # a fresh load: none built
    warm(modules)
    assert all(Index.is_built(m) for m in modules)
    started = time.perf_counter()
    for module in modules:
        retrieve(module, "What does anxiety do in the body?")
    assert time.perf_counter() - started < 0.05 * len(modules)  # building one takes ~0.1 s
