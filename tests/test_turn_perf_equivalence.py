"""Shortcuts taken for speed on every turn give what the plain code gave: the attempt audit
record, the module's derived topic lists after copies with other phases, the cached parts
of the system prompt, the progress measures and the repetition watcher's verdicts."""

from __future__ import annotations

import copy
import logging
import random
from dataclasses import asdict, fields

import pytest

from tutor.content.modules import load_library
from tutor.contract import ModuleState
from tutor.llm.policy import AttemptRecord
from tutor.progress import (
    ProgressState,
    checked_count,
    covered_ids,
    done_count,
    module_state,
    percentage,
)
from tutor.text import words
from tutor.topic_mentions import detect_text, topic_phrases
from tutor.turns.prompts import PromptError, learner_place, module_context, stable_prompt, system_prompt

LIBRARY = load_library()
ANXIETY = LIBRARY.get("understanding_anxiety")


# --- AttemptRecord.to_json_dict ---------------------------------------------------------------


def test_attempt_record_json_is_asdict_with_every_field_in_order():
    record = AttemptRecord(2, "openai", "m", "json_schema", 12.5, 100, 200, "repaired", ["a", "b"], "X", "reask",
                           0.0, "stop", 200, False, "short", "do this")
    data = record.to_json_dict()
    assert data == asdict(record)
    assert list(data) == [f.name for f in fields(AttemptRecord)]
    assert data["flags"] is not record.flags
    assert AttemptRecord(1, "p", "m", "s", 1.0).to_json_dict() == asdict(AttemptRecord(1, "p", "m", "s", 1.0))


# --- Module.topics / topic_ids / sections -----------------------------------------------------


def _plain(module):
    sections = tuple(s for p in module.phases for s in p.sections)
    topics = tuple(t for s in sections for t in s.topics)
    return sections, topics, tuple(t.id for t in topics)


def _derived(module):
    return module.sections, module.topics, module.topic_ids


def test_module_lists_follow_a_copy_with_other_phases():
    module = ANXIETY.model_copy()
    assert _derived(module) == _plain(module)
    fewer = module.model_copy(update={"phases": module.phases[:1]})
    assert _derived(fewer) == _plain(fewer)
    assert len(fewer.topics) < len(module.topics)
    # The original, read again after the copy, still has its own.
    assert _derived(module) == _plain(module)
    assert _derived(fewer) == _plain(fewer)


def test_module_lists_follow_phases_assigned_and_deep_copies():
    module = ANXIETY.model_copy()
    before = module.topic_ids
    module.phases = list(reversed(module.phases))
    assert module.topic_ids == _plain(module)[2] != before
    deep = module.model_copy(deep=True)
    assert _derived(deep) == _plain(deep)
    assert all(a is b for a, b in zip(deep.topics, _plain(deep)[1]))  # the copy's own topics
    clone = copy.deepcopy(module)
    assert all(a is b for a, b in zip(clone.topics, _plain(clone)[1]))


# --- retrieval scores -----------------------------------------------------------------------


def test_retrieval_scores_are_bm25s_scores_bit_for_bit():
    from tutor.teach.retrieval import Index

    index = Index.build(ANXIETY)
    rnd = random.Random(7)
    for bm25, scorer in ((index._bm25, index._scorer), (index._topic_bm25, index._topic_scorer)):
        vocab = [t for t in bm25.vocab_dict if t]
        for _ in range(300):
            query = [rnd.choice(vocab) for _ in range(rnd.randint(1, 20))] + ["not_a_token"]
            query += query[: rnd.randint(0, len(query))]  # repeated tokens count again
            expected, got = bm25.get_scores(query), scorer.scores(query)
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


# --- the system prompt's module part ----------------------------------------------------------


def _plain_module_context(module):
    """module_context written out plainly, as if nothing were cached."""
    lines = [
        f"## Module: {module.title} (id: {module.id})", module.description.strip(),
        f"Teach in the module's language ({module.language}) unless the learner writes in another one.",
        f"Milestones: {', '.join(f'{m}%' for m in module.milestones)} of the topics covered "
        "(celebrate each once, when the app's progress reaches it).", "",
        "Topics in teaching order. In meta.progress use these ids exactly:",
    ]
    for phase in module.phases:
        lines.append(f"Phase: {phase.title}")
        for section in phase.sections:
            lines.append(f"  Section: {section.title}")
            lines += [f"  - {topic.id}: {topic.title}" for topic in section.topics]
    return "\n".join(lines)


def _plain_learner_place(module, state):
    """learner_place written out plainly."""
    from tutor.progress import coverage_count, mastered_ids, module_state

    checked = sum(1 for t in module.topics if t.checks)
    mastered = mastered_ids(module, state)
    where = module_state(module, state)
    lines = ["## Where the learner is (counted by the app)",
             f"Progress: {coverage_count(module, state)} of {len(module.topic_ids)} topics covered.",
             f"Covered: {', '.join(t for t in module.topic_ids if t in state.covered) or 'none yet'}."]
    if checked:
        lines.append(f"Mastered: {len(mastered)} of {checked} topics with checks ({', '.join(mastered) or 'none yet'}); "
                     "the app asks and judges checks: never claim mastery or give scores yourself.")
    lines += [f"Milestones already celebrated: {', '.join(state.milestones) or 'none yet'}.",
              f"Current place: {where.current_phase} / {where.current_section}."]
    return "\n".join(lines)


def _random_state(module, rnd):
    ids = [*module.topic_ids, "removed_topic"]
    return ProgressState(tuple(rnd.sample(ids, rnd.randint(0, len(ids)))), ("25%",) if rnd.random() < 0.5 else (),
                         tuple(rnd.sample(ids, rnd.randint(0, len(ids)))))


def test_the_prompt_parts_are_the_plain_text_for_any_state_and_after_copies():
    rnd = random.Random(3)
    fewer = ANXIETY.model_copy(update={"phases": ANXIETY.phases[:1], "title": "Shorter"})
    for module in (ANXIETY, fewer, ANXIETY, fewer.model_copy(update={"milestones": [50]})):
        for _ in range(50):
            state = _random_state(module, rnd)
            assert module_context(module) == _plain_module_context(module)
            assert learner_place(module, state) == _plain_learner_place(module, state)
            assert system_prompt(module, state).startswith(stable_prompt(module))


def test_system_prompt_follows_a_module_changed_in_place():
    module = ANXIETY.model_copy()
    state = ProgressState(module.topic_ids[:2])
    system_prompt(module, state)
    module.instructions, module.title = "Be brief, {{learner_name}}.", "Renamed"
    module.phases = module.phases[:1]
    prompt = system_prompt(module, state)
    assert "Be brief, the learner." in prompt and "## Module: Renamed" in prompt
    assert module_context(module) == _plain_module_context(module)
    assert system_prompt(module, state).startswith(stable_prompt(module)) and "Be brief" in stable_prompt(module)


def test_instructions_rendered_with_defaults_equal_those_passed_explicitly(caplog):
    module = ANXIETY.model_copy(update={"instructions": "Hi {{learner_name}} in a {{tone}} way."})
    state = ProgressState()
    defaults = {name: var.default for name, var in module.variables.items()}
    assert system_prompt(module, state) == system_prompt(module, state, variables=defaults)
    assert system_prompt(module, state) == system_prompt(module, state, variables={})
    assert "Hi Ann" in system_prompt(module, state, variables={"learner_name": "Ann"})
    drafty = module.model_copy(update={"instructions": "Hi {{nobody}}."})
    for _ in range(2):  # a draft's unresolved variable is logged on every prompt, as before
        with caplog.at_level(logging.WARNING, logger="tutor.turns.prompts"):
            caplog.clear()
            assert "Hi {{nobody}}." in system_prompt(drafty, state, strict=False)
        assert "unresolved" in caplog.text
    with pytest.raises(PromptError):
        system_prompt(drafty, state)


# --- progress measures ----------------------------------------------------------------------


def _plain_done(topic, seen, mastered):
    return topic.id in mastered if topic.checks else topic.id in seen


def test_progress_measures_are_the_plain_definitions_after_copies():
    rnd = random.Random(11)
    fewer = ANXIETY.model_copy(update={"phases": ANXIETY.phases[1:]})
    for module in (ANXIETY, fewer, ANXIETY):
        for _ in range(100):
            state = _random_state(module, rnd)
            seen, mastered = set(state.covered), set(state.mastered)
            units = sum(2 if _plain_done(t, seen, mastered) else 1 if t.id in seen else 0 for t in module.topics)
            assert percentage(module, state) == round(units * 100 / (2 * len(module.topics)), 1)
            assert done_count(module, state) == sum(_plain_done(t, seen, mastered) for t in module.topics)
            assert covered_ids(module, state) == [t for t in state.covered if t in module.topic_ids]
            assert checked_count(module) == sum(1 for t in module.topics if t.checks)
            sections = module.sections
            current = next((s for s in sections if any(t.id not in seen for t in s.topics)),
                           next((s for s in sections if any(not _plain_done(t, seen, mastered) for t in s.topics)),
                                sections[-1]))
            assert module_state(module, state) == ModuleState(
                current_phase=module.phase_of(current.id).title, current_section=current.title,
                sections_completed=sum(1 for s in sections
                                       if s.topics and all(_plain_done(t, seen, mastered) for t in s.topics)),
                total_sections=len(sections))


def test_detect_text_is_the_plain_phrase_search():
    rnd = random.Random(5)
    phrases = topic_phrases(ANXIETY)
    pool = [p for ps in phrases.values() for p in ps] + ["the", "and", "heart", "racing", "what if", "Continue"]
    for _ in range(300):
        text = rnd.choice([" ", ". ", "\n"]).join(rnd.sample(pool, rnd.randint(0, 6)))
        text = text.upper() if rnd.random() < 0.3 else text
        haystack = f" {' '.join(words(text))} "
        expected = {t for t, ps in phrases.items() if any(f" {p} " in haystack for p in ps)} if text else set()
        assert detect_text(ANXIETY, text) == expected, text
