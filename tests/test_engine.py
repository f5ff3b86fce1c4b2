"""One turn end to end: real SQLite database with migrations, the built-in tutor, and a
loopback OpenAI-compatible server standing in for a misbehaving model."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import error, openai_reply, tutor_reply
from tutor.content.modules import ModuleNotServable, load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import AuditEvent, Conversation, Message, ProgressRecord, Store
from tutor.turns.engine import Engine, InputError

MODULE = "understanding_anxiety"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def engine(store: Store) -> Engine:
    settings = LLMSettings()
    return Engine(store, make_provider(settings), load_library(), settings)


def model_engine(store: Store, server: FakeLLMServer, **overrides) -> Engine:
    settings = settings_for(server, **overrides)
    return Engine(store, make_provider(settings), load_library(), settings)


def rows(store: Store, conversation_id: int) -> list[Message]:
    with store.session() as s:
        return list(
            s.exec(select(Message).where(Message.conversation_id == conversation_id).order_by("seq"))
        )


def test_opening_turn_is_stored_with_raw_text_outcome_and_server_progress(engine, store):
    view = run(engine.open("ann", MODULE))
    [opening] = rows(store, view.id)
    assert opening.role == "tutor" and opening.outcome == "valid"
    assert json.loads(opening.raw)["content"]["text_blocks"]  # the raw text is the model's JSON
    shown = opening.parsed
    assert shown["meta"]["progress"]["remaining_topics"] == view.progress.remaining == 25  # nothing done yet
    assert shown["meta"]["progress"]["percentage"] == view.progress.percentage
    assert view.progress.module_state["total_sections"] == 6


def test_reopening_resumes_and_start_over_archives_and_resets(engine, store):
    first = run(engine.open("ann", MODULE))
    run(engine.send(first.id, LearnerInput(text="What is the fight or flight response?")))
    again = run(engine.open("ann", MODULE))
    assert again.id == first.id and len(again.messages) == 3
    fresh = run(engine.open("ann", MODULE, new=True))
    assert fresh.id != first.id and len(fresh.messages) == 1
    assert len(fresh.progress.covered) <= 1  # only what the new opening turn taught
    with store.session() as s:
        assert s.get(Conversation, first.id).status == "archived"
    summaries = {c.id: c for c in engine.conversations("ann")}
    assert summaries[first.id].turns == 1 and summaries[first.id].status == "archived"
    assert summaries[fresh.id].turns == 0 and summaries[fresh.id].status == "active"


def test_refused_text_stores_nothing(engine, store):
    view = run(engine.open("ann", MODULE))
    for text in ["", "   \n ", "x" * 4001]:
        with pytest.raises(InputError) as err:
            run(engine.send(view.id, LearnerInput(text=text)))
        assert err.value.message
    assert len(rows(store, view.id)) == 1


def test_unknown_module_is_refused_with_a_message(engine):
    with pytest.raises(ModuleNotServable):
        run(engine.open("ann", "no_such_module"))


def _walk_to_a_form(engine: Engine, conversation_id: int) -> tuple[Message, dict]:
    for _ in range(30):
        last = engine.history(conversation_id)[-1]
        forms = (last.response or {}).get("content", {}).get("forms") or []
        forms = [f for f in forms if not f["id"].startswith("check-")]  # the module's own forms
        if forms:
            return last, forms[0]
        run(engine.send(conversation_id, LearnerInput(text="Continue")))
    raise AssertionError("the sample module offers no form in its first 30 turns")


def _answers_for(form: dict) -> dict:
    answers = {}
    for field in form["fields"]:
        if field["type"] in ("radio", "select"):
            answers[field["id"]] = field["options"][0]["value"]
        elif field["type"] == "checkbox":
            answers[field["id"]] = [field["options"][0]["value"]]
        elif field["type"] == "number":
            answers[field["id"]] = field.get("min", 0) or 0
        else:
            answers[field["id"]] = "Mostly before meetings"
    return answers


def test_form_answers_are_checked_stored_as_summary_and_close_the_form(engine, store):
    view = run(engine.open("ann", MODULE))
    offered, form = _walk_to_a_form(engine, view.id)
    count = len(rows(store, view.id))

    with pytest.raises(InputError):  # unknown field
        run(engine.send(view.id, LearnerInput(form_id=form["id"], answers={"evil": "x"})))
    choice = next((f for f in form["fields"] if f.get("options")), None)
    if choice is not None:
        with pytest.raises(InputError):  # value outside the options
            run(engine.send(view.id, LearnerInput(form_id=form["id"], answers={choice["id"]: "nope"})))
    with pytest.raises(InputError):  # a form nobody offered
        run(engine.send(view.id, LearnerInput(form_id="made_up", answers={})))
    assert len(rows(store, view.id)) == count  # nothing invalid stored

    result = run(engine.send(view.id, LearnerInput(form_id=form["id"], answers=_answers_for(form))))
    learner = result.learner
    assert learner.form_id == form["id"] and learner.answers
    assert learner.text.startswith("My answers to")
    states = {m.id: m.form_states for m in engine.history(view.id)}
    assert states[offered.id][form["id"]]["status"] == "submitted"
    with pytest.raises(InputError):  # answered forms can't be submitted twice
        run(engine.send(view.id, LearnerInput(form_id=form["id"], answers=_answers_for(form))))


def test_typing_instead_of_answering_marks_the_open_form_skipped(engine):
    view = run(engine.open("ann", MODULE))
    offered, form = _walk_to_a_form(engine, view.id)
    run(engine.send(view.id, LearnerInput(text="I'd rather just talk, thanks")))
    states = {m.id: m.form_states for m in engine.history(view.id)}
    assert states[offered.id][form["id"]]["status"] == "skipped"


def test_learner_message_is_stored_before_the_model_is_asked(store):
    with FakeLLMServer("openai") as server:
        eng = model_engine(store, server)
        conv = run(eng.open("bo", MODULE, defer_opening=True))
        server.script(*[error(503)] * 10)
        pending = run(eng.accept(conv.id, LearnerInput(text="Why does my heart race?")))
        assert [m.role for m in rows(store, conv.id)] == ["learner"]  # stored, no reply yet
        result = run(eng.respond(pending))
    stored = rows(store, conv.id)
    assert [m.role for m in stored] == ["learner", "tutor"]
    assert stored[0].text == "Why does my heart race?"
    assert any("review" in f or "apology" in f for f in stored[1].flags)
    assert result.reply.response is not None  # the module's own lesson turn (tests/test_fallback_lesson.py)
    with store.session() as s:
        audits = list(s.exec(select(AuditEvent).where(AuditEvent.conversation_id == conv.id,
                                                      AuditEvent.provider == "openai")))
    assert audits and all(a.error_class for a in audits)
    details = [json.loads(a.detail_json) for a in audits]
    assert all(d.get("http_status") == 503 for d in details)
    assert {d.get("kind") for d in details} >= {"first", "retry"}


def test_invalid_reply_is_kept_raw_and_flagged(store):
    prose = "Sure! Anxiety is a normal response. I'll skip the JSON this time."
    with FakeLLMServer("openai") as server:
        server.script(openai_reply(prose), openai_reply(prose))
        eng = model_engine(store, server)
        conv = run(eng.open("cy", MODULE))
    [reply] = rows(store, conv.id)
    assert reply.outcome == "invalid" and reply.parsed is None
    assert reply.raw == prose
    assert "invalid_json" in reply.flags and any("review" in f for f in reply.flags)


def test_model_progress_claims_are_checked_against_canonical_ids(store):
    claim = tutor_reply(
        "Let's talk about fear.",
        progress={"percentage": 90, "covered_topics": ["anxiety_vs_fear", "Everything", "Panic"],
                  "milestone": "75%"},
    )
    with FakeLLMServer("openai") as server:
        server.script(openai_reply(json.dumps(claim)))
        eng = model_engine(store, server)
        conv = run(eng.open("di", MODULE))
    [reply] = rows(store, conv.id)
    progress = reply.parsed["meta"]["progress"]
    assert progress["covered_topics"] == ["anxiety_vs_fear"]
    assert progress["percentage"] == 2.0 and progress.get("milestone") is None  # seen, not mastered
    assert json.loads(reply.raw)["meta"]["progress"]["percentage"] == 90  # the claim stays raw
    with store.session() as s:
        record = s.exec(select(ProgressRecord)).one()
    assert json.loads(record.covered_json) == ["anxiety_vs_fear"]


def test_a_turn_cut_short_is_answered_after_a_restart(store, engine):
    conv = run(engine.open("ed", MODULE))
    run(engine.accept(conv.id, LearnerInput(text="Tell me about avoidance")))
    # A new process (same database) finds the unanswered message and answers it.
    settings = LLMSettings()
    restarted = Engine(store, make_provider(settings), load_library(), settings)
    result = run(restarted.respond_pending(conv.id))
    assert result is not None and result.reply.role == "tutor"
    assert run(restarted.respond_pending(conv.id)) is None  # nothing left to answer


def test_a_message_sent_while_the_tutor_answers_gets_its_own_reply(engine, store):
    conv = run(engine.open("fay", MODULE))
    first = run(engine.accept(conv.id, LearnerInput(text="What is the fight or flight response?")))
    second = run(engine.accept(conv.id, LearnerInput(text="And what about avoidance?")))
    run(engine.respond(first))  # stored after the second message
    later = run(engine.respond_pending(conv.id))
    assert later is not None and later.learner.seq == second.learner.seq
    assert run(engine.respond_pending(conv.id)) is None
    replies = [m for m in rows(store, conv.id) if m.role == "tutor"]
    assert [r.reply_to_seq for r in replies] == [None, first.learner.seq, second.learner.seq]


def test_a_tab_behind_the_conversation_gets_it_and_a_tab_up_to_date_gets_nothing(engine, store):
    conv = run(engine.open("hal", MODULE))
    seen = max(m.id for m in rows(store, conv.id))
    assert run(engine.view_if_newer(conv.id, seen)) is None  # up to date: one small query, no view
    run(engine.send(conv.id, LearnerInput(text="Continue")))  # another tab moves the conversation on
    caught_up = run(engine.view_if_newer(conv.id, seen))
    assert caught_up is not None and max(m.id for m in caught_up.messages) > seen
    assert run(engine.view_if_newer(10**6, 0)) is None  # no such conversation: nothing newer


def test_reopening_sees_a_reply_still_owed_even_when_it_is_not_the_last_message(engine):
    conv = run(engine.open("gus", MODULE))
    assert not run(engine.open("gus", MODULE)).awaiting_reply
    first = run(engine.accept(conv.id, LearnerInput(text="What is the fight or flight response?")))
    run(engine.accept(conv.id, LearnerInput(text="And what about avoidance?")))
    run(engine.respond(first))  # the last message is now a reply, yet one is still owed
    assert run(engine.open("gus", MODULE)).awaiting_reply
    run(engine.respond_pending(conv.id))
    assert not run(engine.open("gus", MODULE)).awaiting_reply


def test_migration_links_existing_replies_to_the_message_they_answer(tmp_path):
    from alembic.config import Config

    from alembic import command
    from tutor.storage.store import ALEMBIC_INI, REPO_ROOT

    store = Store(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config(str(ALEMBIC_INI))
    config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
    config.attributes["configure_logger"] = False
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "408c2b590cb3")  # the schema before reply_to_seq
        connection.exec_driver_sql("INSERT INTO learner (id, key, created_at) VALUES (1, 'k', '2026-01-01')")
        connection.exec_driver_sql(
            "INSERT INTO conversation (id, learner_id, module_id, status, created_at, updated_at)"
            " VALUES (1, 1, 'm', 'active', '2026-01-01', '2026-01-01')"
        )
        for seq, role in enumerate(["tutor", "learner", "tutor"]):
            connection.exec_driver_sql(
                "INSERT INTO message (conversation_id, seq, role, text, flags_json, form_states_json,"
                f" created_at) VALUES (1, {seq}, '{role}', '', '[]', '{{}}', '2026-01-01')"
            )
    store.migrate()
    assert [m.reply_to_seq for m in rows(store, 1)] == [None, None, 1]
    store.dispose()


def test_per_conversation_locks_do_not_pile_up(engine: Engine) -> None:
    """Each conversation's turns go one at a time, but a process serving many learners keeps
    a lock only for conversations with a turn in flight (the map once grew by one entry
    per conversation ever served)."""
    import gc

    async def go() -> None:
        views = [await engine.open(f"many-{i}", MODULE) for i in range(30)]
        for view in views:
            await engine.send(view.id, LearnerInput(text="What does anxiety do in the body?"))
        # Two turns of one conversation at once still run one after the other, in the
        # order their messages were stored.
        results = await asyncio.gather(engine.send(views[0].id, LearnerInput(text="first")),
                                       engine.send(views[0].id, LearnerInput(text="second")))
        for result in results:
            assert result.reply.reply_to_seq == result.learner.seq
        first, second = sorted(results, key=lambda r: r.learner.seq)
        assert first.reply.seq < second.reply.seq
    run(go())
    gc.collect()
    assert len(engine._locks) == 0


def test_the_where_line_follows_the_lesson_and_the_counts_agree(engine, store):
    from tutor.render.progress_display import progress_item

    view = run(engine.open("ann", MODULE))
    assert view.progress.module_state["current_section"] == "What anxiety is"
    module = engine.library.get(MODULE)
    section_of = {t.id: s.title for s in module.sections for t in s.topics}
    result = run(engine.send(view.id, LearnerInput(text="How does slow breathing calm my body down?")))
    taught = [t for t in result.progress.covered if section_of[t] != "What anxiety is"]
    assert taught, "the question was answered from a later section"
    # The header says where the lesson went, not where the first unseen topic is...
    assert result.progress.module_state["current_section"] == section_of[taught[-1]]
    # ...and so does the page after a reload.
    again = run(engine.open("ann", MODULE))
    assert again.progress.module_state["current_section"] == section_of[taught[-1]]
    # "to go" counts the same thing as "N of 25 topics".
    item = progress_item(again.progress)
    covered = len(again.progress.covered)
    assert item.count_text == f"{covered} of 25 topics"
    assert item.remaining_text == f"{25 - covered} topics to go"
