"""Plain Vietnamese given its diacritics back before the model reads it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.understand import embedder, fold_accents
from tutor.understand.accents import restore, restorer


def test_plain_vietnamese_gets_its_diacritics_back():
    assert restore("minh rat met moi") == "mình rất mệt mỏi"
    assert restore("toi khong ngu duoc") == "tôi không ngủ được"


def test_case_punctuation_and_spacing_are_kept():
    restored = restore("Minh khong ngu duoc,  toi nao cung vay!")
    assert restored.startswith("Mình không ngủ được,  ")
    assert restored.endswith("!")


def test_english_text_and_text_with_diacritics_are_left_as_they_are():
    # Short English replies share plain forms with Vietnamese words ("gõ ơn", "mẹ", "sợ", "hì")
    # and must stay as typed.
    for text in ("I want to die", "can you explain the stress bucket again", "to be or not to be", "ok", "",
                 "go on", "Please go on.", "me too", "no thanks", "so sad", "hi tutor", "I am on it", "a bit more"):
        assert not restorer().looks_vietnamese(text)
        assert restore(text) == text
    assert restore("Mình mệt quá") == "Mình mệt quá"


# Restoring only ever adds diacritics: the text folds back to exactly what was typed (a slip
# in the offsets would drop, double or move a character).
_PIECES = st.sampled_from(["minh", "khong", "ngu", "duoc", "toi", "lo", "au", "tim", "dap", "nhanh", "I", "the",
                           "stress", "Minh", "KHONG", "qua", "e", "ko", "2h", "sang", ",", ".", "!", "?", " ", "  ",
                           "\n", "'", "-", "abc", "xyz"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=30))
def test_restoring_only_adds_diacritics_and_loses_nothing(pieces):
    text = " ".join(pieces)
    assert fold_accents(restore(text)) == text


def test_the_model_reads_a_plain_vietnamese_message_as_it_reads_it_written_with_diacritics():
    plain, written, other = embedder().embed(["minh so bi hoang loan giua lop hoc",
                                              "mình sợ bị hoảng loạn giữa lớp học",
                                              "hôm nay trời đẹp, mình đi dạo công viên"])
    assert float(plain @ written) > 0.95
    assert float(plain @ written) > float(plain @ other) + 0.05


def test_a_plain_vietnamese_question_finds_the_passage_its_written_twin_finds():
    """"dien thoai truoc khi ngu co hai gi" read as typed led to the bedtime-routine topic;
    restored, it finds the screens-and-light passage, as "điện thoại … có hại gì" does."""
    import asyncio

    from tutor.content.modules import load_library
    from tutor.teach.understanding import understand_async

    module = load_library().get("giac_ngu_lanh_manh")
    for text in ("dien thoai truoc khi ngu co hai gi", "điện thoại trước khi ngủ có hại gì"):
        read = asyncio.run(understand_async(module, text, None))
        assert read.intent == "question"
        assert read.found.passages[0].topic_id == "man_hinh_anh_sang", text
