"""A module's `not_covered` questions (look-alikes that share its words): a question that
reads as one of them is not the module's, so the tutor says so instead of quoting a passage;
a real question close by is still answered."""

from __future__ import annotations

import pytest

from tutor.content.modules import load_library
from tutor.teach.meaning import find
from tutor.teach.understanding import understand
from tutor.understand import embedder

SLEEP = load_library().get("giac_ngu_lanh_manh")
BARE = SLEEP.model_copy(update={"not_covered": [], "id": "giac_ngu_lanh_manh_bare"})


def found(module, question):
    return find(module, question, embedder().embed([question])[0])


@pytest.mark.parametrize("question", [
    "how can i keep my computer awake and not sleeping",  # a paraphrase of a listed question
    "Thay màn hình iPhone ở đâu rẻ mà tốt?",  # listed
])
def test_a_look_alike_the_author_listed_is_not_the_modules(question):
    assert found(SLEEP, question).off_topic
    # Without the author's list it was taken for a question about sleep and answered with a quote.
    without = found(BARE, question)
    assert not without.off_topic and without.passages


@pytest.mark.parametrize("question, topic", [
    ("uống cà phê buổi chiều có làm mất ngủ không", "ca_phe_ruou_bia"),
    ("does scrolling my phone in bed keep me awake?", "man_hinh_anh_sang"),
])
def test_a_real_question_beside_the_look_alikes_is_still_answered(question, topic):
    result = found(SLEEP, question)
    assert not result.off_topic
    assert topic in [p.topic_id for p in result.passages]


ANXIETY = load_library().get("understanding_anxiety")


@pytest.mark.parametrize("module, question", [
    (BARE, "my hamster sleeps all day, is he ill"),
    (BARE, "giường tầng cho trẻ em loại nào an toàn"),
    (BARE, "cách cài đặt chế độ ngủ cho máy tính bảng"),
    (BARE, "cách pha trà đào cam sả"),
    (ANXIETY, "my dog is scared of thunder, what do I do"),
])
def test_a_question_about_another_subject_in_the_modules_words_is_not_the_modules(module, question):
    """No author's list needed: the topic reader learns other subjects from
    tutor/understand/elsewhere.yaml (devices, pets, furniture, recipes), and none of these
    questions is in it. The first three were answered with a quote before it."""
    vector = embedder().embed([question])[0]
    assert understand(module, question, vector).intent == "off_topic"


@pytest.mark.parametrize("module, question, topics", [
    (ANXIETY, "how do I feel less anxious", {"slow_breathing", "behavioural_level", "self_compassion", "grounding"}),
    (SLEEP, "how do I sleep better", {"vi_sao_can_ngu", "gio_giac_deu_dan", "lo_nghi_ban_dem", "nghi_thuc_buoi_toi"}),
])
def test_a_plain_question_about_the_module_worded_like_small_talk_is_answered(module, question, topics):
    """The intent reader reads these as small talk (other subjects' "how do I …" questions pull
    them); their best passage is close enough in meaning (understanding.CHAT_ON_TOPIC) that
    they are questions about the module. Both were refused as off topic."""
    vector = embedder().embed([question])[0]
    read = understand(module, question, vector)
    assert read.intent == "question", read
    assert {p.topic_id for p in read.found.passages} & topics
