"""An idea stated the wrong way round never reaches mastery, and the learner is told which
part to look at again; answers that keep the direction, in other words, are not touched."""

from __future__ import annotations

import pytest

from tutor.teach.builtin_judge import MISCONCEPTION_CAP, judge_builtin
from tutor.teach.judge_direction import reversed_idea as reversed_in
from tutor.teach.judge_meaning import Clauses


def reversed_idea(check, answer):
    """The judge's reading: the answer's clauses as it splits them."""
    return reversed_in(check, Clauses.read(check, answer))


@pytest.fixture(scope="module")
def sleep(library):
    return library.get("giac_ngu_lanh_manh")


@pytest.mark.parametrize("check_id, answer, part", [
    ("stress_bucket", "Stress empties your bucket bit by bit and rest and hobbies fill it back up, so when it's "
     "almost dry any small thing tips you over.", "Stress empties your bucket bit by bit"),
    ("the_loop", "Something triggers you, you worry, your heart races and you get out of there. Getting out "
     "teaches your brain the situation was harmless, so next time it's easier.",
     "Getting out teaches your brain the situation was harmless"),
    ("alarm_in_the_body", "When the brain senses a threat, your heart beats slower and the breathing calms, "
     "so you feel ready.", "your heart beats slower"),
    # a short clause pairs with the reference's clause about the same thing ("the heart")
    ("alarm_in_the_body", "When the brain senses a threat, the heart slows down and the muscles go loose.",
     "the heart slows down"),
    # the best for the worst, the least useful for the most useful
    ("spot_a_trap", "A habit of unhelpful thinking. Catastrophising, for example, is jumping to the best outcome "
     "and calling it likely.", "jumping to the best outcome"),
    ("grounding_purpose", "You use your senses to come back to the present moment, like 5-4-3-2-1. It is least "
     "useful when you feel overwhelmed or panicky.", "least useful when you feel overwhelmed"),
    # a statement with its negation the other way: denies what the model answer states ("In the
    # right amount it is useful"), or states what it denies ("the fear never gets tested")
    ("anxiety_in_a_nutshell", "Anxiety gets your mind and body ready for trouble later on. In any amount it is "
     "not useful at all, it just wears you out.", "it is not useful at all"),
    ("safety_behaviour_trap", "It's a thing you do to feel protected, like carrying water everywhere. Because "
     "of it the fear always gets tested properly.", "the fear always gets tested properly"),
])
def test_a_relation_turned_round_is_capped_and_the_part_is_quoted(sample, check_id, answer, part):
    check = sample.find_check(check_id)[1]
    turned = reversed_idea(check, answer)
    assert turned is not None and part in turned.answer_clause
    result = judge_builtin(check, answer)
    assert result.score <= MISCONCEPTION_CAP < check.threshold
    assert part in result.feedback and "wrong way round" in result.feedback


def test_a_negated_direction_is_the_opposite_one(sleep):
    check = sleep.find_check("ngu_de_lam_gi")[1]
    turned = reversed_idea(check, "Khi ngủ não vẫn ghi nhớ bài học, nhưng cơ thể thì không hồi phục chút nào.")
    assert turned is not None and "hồi phục" in turned.answer_clause
    # the same idea, said the right way
    assert reversed_idea(check, "Khi ngủ não ghi nhớ bài học, còn cơ thể thì hồi phục.") is None


@pytest.mark.parametrize("check_id, answer", [
    # "nothing bad happens" says what happens; it does not deny "see what really happens"
    ("exposure_ladder", "Make a ladder from easy to hard steps and start with one that is hard but doable. "
     "You stay long enough to see that nothing really happens, and repeat it before the next step."),
    # the same denial as the model answer, in other words
    ("anxious_thoughts", "What-if thoughts and expecting the worst. They aren't facts: an anxious brain "
     "overestimates danger, so a thought feeling true doesn't make it true."),
])
def test_a_negation_where_the_model_answer_has_one_too_or_none_is_meant_is_not_a_reversal(sample, check_id,
                                                                                            answer):
    check = sample.find_check(check_id)[1]
    assert reversed_idea(check, answer) is None


@pytest.mark.parametrize("check_id, answer", [
    ("stress_bucket", "Every worry adds water until the bucket is nearly full, then one tiny thing makes it spill "
     "over. Sleep, walks and talking let some water out."),
    ("the_loop", "You get triggered, panic, and escape. The relief feels good but it teaches your brain the thing "
     "was dangerous, so the fear gets bigger next time."),
    ("alarm_in_the_body", "Your brain spots danger, adrenaline kicks in, your heart beats faster and breathing "
     "speeds up so you can run. Horrible but not dangerous, it passes."),
    # a relation under a condition is another relation ("only if you stay")
    ("the_loop", "The fear shrinks only if you stay; escaping makes it grow."),
    # one shared word is too little to pair on: this "drops" is about staying, not escaping
    ("exposure_ladder", "When you stay, the anxiety drops. Then you go up a step."),
    # a short clause telling of a later moment is another phase, not the relation turned
    ("alarm_in_the_body", "Adrenaline makes the heart race and breathing speed up to get you ready, and the "
     "heart slows down again once the threat has passed."),
    # a denied reversal keeps the right direction
    ("alarm_in_the_body", "The heart doesn't slow down, it beats faster, and breathing speeds up to get you "
     "ready to run from the threat."),
])
def test_answers_that_keep_the_direction_are_not_called_reversed(sample, check_id, answer):
    check = sample.find_check(check_id)[1]
    assert reversed_idea(check, answer) is None
    assert "wrong way round" not in judge_builtin(check, answer).feedback


def test_every_example_answer_agrees_with_itself(library):
    for module in library.modules.values():
        for topic in module.topics:
            for check in topic.checks:
                assert reversed_idea(check, check.example_answer) is None, (module.id, check.id)


def test_vietnamese_words_that_fold_into_other_words_are_not_directions(sleep):
    check = sleep.find_check("ngu_de_lam_gi")[1]
    # "với" folds to "voi" (as "vơi", to ebb) and "quen" is "quên" (to forget) without its accent
    assert reversed_idea(check, "Ngủ giúp não quen với bài mới và ghi nhớ nó, cơ thể thì hồi phục.") is None
