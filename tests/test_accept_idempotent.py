"""A send is stored once: the id the browser makes for each send (Message.client_id) makes
accepting it idempotent. A double click, a double Enter, a retry after a reconnect or a
second tab sending the same message gets the stored message back, with no second learner
message, no second reply and no progress moved, on SQLite and PostgreSQL, also when the
two accepts race (the unique index decides)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from tests.test_engine import _answers_for, _walk_to_a_form
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import Message, Store
from tutor.turns import conversations as db
from tutor.turns.engine import Engine, InputError

MODULE = "understanding_anxiety"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def store(store_on_each_database: Store) -> Store:
    """A migrated database: a SQLite file, or a fresh PostgreSQL database at 127.0.0.1."""
    return store_on_each_database


@pytest.fixture
def engine(store: Store) -> Engine:
    settings = LLMSettings()
    return Engine(store, make_provider(settings), load_library(), settings)


def rows(store: Store, conversation_id: int) -> list[Message]:
    with store.session() as s:
        return list(s.exec(select(Message).where(Message.conversation_id == conversation_id).order_by("seq")))


def test_the_same_send_twice_stores_one_message_and_gets_one_reply(engine, store):
    view = run(engine.open("ann", MODULE))
    text = LearnerInput(text="What is the fight or flight response?")
    first = run(engine.accept(view.id, text, client_id="c-1"))
    reply = run(engine.respond(first))
    progress = reply.progress.percentage
    assert progress > 0  # the message counted once
    before = rows(store, view.id)

    again = run(engine.accept(view.id, text, client_id="c-1"))  # a double click, a retry
    assert again.duplicate and not first.duplicate
    assert again.learner.id == first.learner.id and again.learner.text == first.learner.text
    repeat = run(engine.respond(again))  # asking for its reply gives the stored one
    assert repeat.reply.id == reply.reply.id
    assert repeat.progress.percentage == progress
    assert [(m.id, m.role) for m in rows(store, view.id)] == [(m.id, m.role) for m in before]
    assert run(engine.respond_pending(view.id)) is None  # nothing is owed

    other = run(engine.accept(view.id, text, client_id="c-2"))  # the same words, sent again on purpose
    assert not other.duplicate and other.learner.seq > reply.reply.seq
    stored = [m for m in rows(store, view.id) if m.role == "learner"]
    assert [m.client_id for m in stored] == ["c-1", "c-2"]


def test_a_duplicate_is_found_even_when_the_text_differs_or_would_be_refused_now(engine, store):
    view = run(engine.open("ann", MODULE))
    first = run(engine.accept(view.id, LearnerInput(text="Hello"), client_id="same"))
    # The id names the send: its stored words win, and no check runs again.
    again = run(engine.accept(view.id, LearnerInput(text="   "), client_id="same"))
    assert again.duplicate and again.learner.id == first.learner.id and again.learner.text == "Hello"
    assert len([m for m in rows(store, view.id) if m.role == "learner"]) == 1


def test_client_ids_are_per_conversation(engine, store):
    a = run(engine.open("ann", MODULE))
    b = run(engine.open("bob", MODULE))
    one = run(engine.accept(a.id, LearnerInput(text="Hi"), client_id="shared"))
    two = run(engine.accept(b.id, LearnerInput(text="Hi"), client_id="shared"))
    assert not one.duplicate and not two.duplicate and one.learner.id != two.learner.id


def test_an_unusable_client_id_is_refused_and_nothing_is_stored(engine, store):
    view = run(engine.open("ann", MODULE))
    count = len(rows(store, view.id))
    for bad in ("x" * 65, "line\nbreak"):
        with pytest.raises(InputError) as refused:
            run(engine.accept(view.id, LearnerInput(text="Hi"), client_id=bad))
        assert "reload the page" in refused.value.message
    assert len(rows(store, view.id)) == count
    # No id (the CLI, older pages) still works, and never counts as a duplicate.
    assert not run(engine.accept(view.id, LearnerInput(text="Hi"))).duplicate
    assert not run(engine.accept(view.id, LearnerInput(text="Hi"))).duplicate


def test_the_unique_index_refuses_a_second_row_with_the_same_client_id(engine, store):
    # What decides a race: both accepts looked before either stored, so both try to insert.
    view = run(engine.open("ann", MODULE))
    first = run(engine.accept(view.id, LearnerInput(text="Hi"), client_id="race"))
    with pytest.raises(IntegrityError), store.session() as s:  # the second, past its own look
        db.new_message(s.connection(), conversation_id=view.id, seq=first.learner.seq + 1, role="learner",
                       text="Hi", client_id="race")
        s.commit()
    assert run(engine.accept(view.id, LearnerInput(text="Hi"), client_id="race")).duplicate


def test_concurrent_accepts_of_one_send_store_it_once(engine, store):
    view = run(engine.open("ann", MODULE))
    tries = 8
    start = threading.Barrier(tries)
    results: list = []
    errors: list = []

    def send() -> None:
        start.wait()
        try:
            results.append(db.accept(store, view.id, LearnerInput(text="Why does my heart race?"), "tab-1"))
        except Exception as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=send) for _ in range(tries)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.learner.id for r in results}) == 1
    assert sum(not r.duplicate for r in results) == 1  # exactly one accept stored it
    learners = [m for m in rows(store, view.id) if m.role == "learner"]
    assert len(learners) == 1 and learners[0].client_id == "tab-1"


def test_concurrent_sends_from_two_tabs_get_one_reply(engine, store):
    view = run(engine.open("ann", MODULE))

    async def both():
        text = LearnerInput(text="Tell me about avoidance")
        pendings = await asyncio.gather(*(engine.accept(view.id, text, client_id="x") for _ in range(2)))
        return await asyncio.gather(*(engine.respond(p) for p in pendings))

    one, two = run(both())
    assert one.reply.id == two.reply.id
    assert [m.role for m in rows(store, view.id)] == ["tutor", "learner", "tutor"]


def test_a_form_resent_with_its_id_is_the_stored_answer_but_a_new_submission_is_refused(engine, store):
    view = run(engine.open("ann", MODULE))
    _offered, form = _walk_to_a_form(engine, view.id)
    answers = LearnerInput(form_id=form["id"], answers=_answers_for(form))
    first = run(engine.accept(view.id, answers, client_id="form-send"))
    run(engine.respond(first))
    again = run(engine.accept(view.id, answers, client_id="form-send"))
    assert again.duplicate and again.learner.id == first.learner.id
    count = len(rows(store, view.id))
    with pytest.raises(InputError) as refused:  # the engine itself, not only the page
        run(engine.accept(view.id, answers, client_id="form-send-2"))
    assert "not open" in refused.value.message
    assert len(rows(store, view.id)) == count


def test_a_single_choice_field_sent_twice_is_refused_not_silently_narrowed():
    from tests.test_display import FORM
    from tutor.contract import Form
    from tutor.render.display import form_values
    from tutor.render.forms import FormInputError, validate_answers

    form = Form.model_validate(FORM)
    for entries in ([("mood", "calm"), ("mood", "tense")], [("mood", "calm"), ("mood", "calm")]):
        with pytest.raises(FormInputError) as refused:
            validate_answers(form, form_values(form, entries))
        assert refused.value.field_id == "mood"
        assert refused.value.message == "Choose only one answer for “Mood”."
    with pytest.raises(FormInputError) as refused:  # a text field sent twice, likewise
        validate_answers(form, form_values(form, [("mood", "calm"), ("note", "a"), ("note", "b")]))
    assert refused.value.field_id == "note"
    # Checkboxes are many choices by nature.
    assert validate_answers(form, form_values(form, [("mood", "calm"), ("signs", "heart"), ("signs", "sweat")])) \
        == {"mood": "calm", "signs": ["heart", "sweat"]}
