""""What can I do …" questions are answered first from a thing to do (a skill, an exercise)
when one is found close enough to the best passage (tutor.teach.meaning.SKILL_WITHIN)."""

from __future__ import annotations

import pytest

from tutor.content.modules import load_library
from tutor.teach import meaning
from tutor.teach.meaning import find
from tutor.understand import embedder

ANXIETY = load_library().get("understanding_anxiety")
DOING = {t.id for phase in ANXIETY.phases if phase.practice for section in phase.sections for t in section.topics}


def first_topic(question: str) -> str | None:
    passages = find(ANXIETY, question, embedder().embed([question])[0]).passages
    return passages[0].topic_id if passages else None


@pytest.mark.parametrize("question", [
    "what can I do at 3am when my mind races",
    "how do I calm down when I panic",
])
def test_a_what_to_do_question_is_answered_first_from_a_skill(question, monkeypatch):
    assert first_topic(question) in DOING
    monkeypatch.setattr(meaning, "SKILL_WITHIN", 2.0)  # no skill put first: a description led
    assert first_topic(question) not in DOING


@pytest.mark.parametrize("question", ["why does my heart race when I'm anxious", "what is the stress bucket"])
def test_a_question_about_how_anxiety_works_keeps_its_best_passage(question):
    before = first_topic(question)
    assert before is not None and before not in DOING
