"""The operator console's core on real databases (SQLite and PostgreSQL): the review list
with raw replies, audit attempts and review marks; backend health with configuration
hints, scrubbed; per-module numbers; the progress export; deleting one learner's data.
Rows are made by real turns through the engine (the built-in tutor, and a loopback model
server that rejects the key) plus a few stored directly where a turn would take long."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from contextlib import redirect_stdout
from datetime import timedelta

import pytest
import sqlalchemy
from sqlmodel import SQLModel, func, select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import error
from tutor.cli import main as cli
from tutor.console.console import backend_health, find_learner, percentile
from tutor.console.console_modules import csv_cell, module_stats, progress_csv
from tutor.console.learner_data import delete_learner
from tutor.console.reviews import mark_reviewed, mark_turn_reviewed, review_list
from tutor.console.transcript import review_transcript
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import (
    TABLES,
    Account,
    AuditEvent,
    AuthSession,
    Conversation,
    Learner,
    Message,
    RiskEvent,
    Store,
    TurnReview,
    utcnow,
)
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"
LIBRARY = load_library()
SAMPLE = LIBRARY.get(MODULE)
NUTSHELL = SAMPLE.find_check("anxiety_in_a_nutshell")[1]
SECRET = "sk-live-console-test-0123456789abcdef"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def store(store_on_each_database: Store) -> Store:
    """Each test on SQLite and on PostgreSQL (tests/conftest.py)."""
    return store_on_each_database


class World:
    """ann (no account): a mastered check and a form answer; bob (account "bob"): a safety
    flag and a session; cat: a turn that failed closed because the endpoint refused the key."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        builtin = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())
        self.ann = run(builtin.open("ann-key-0123456789", MODULE))
        run(builtin.send(self.ann.id, LearnerInput(text="Continue")))
        # typed while the check is open, but a question, not an answer: not judged
        run(builtin.send(self.ann.id, LearnerInput(text="Why does anxiety make my heart race?")))
        run(builtin.send(self.ann.id, LearnerInput(text=NUTSHELL.example_answer)))
        with store.session() as s:
            bob = Learner(key="bob-key-abcdefghij")
            s.add(bob)
            s.flush()
            account = Account(username="bob", learner_id=bob.id or 0, role="learner")
            s.add(account)
            s.flush()
            s.add(AuthSession(token_hash="f" * 64, account_id=account.id or 0,
                              expires_at=utcnow() + timedelta(days=1)))
            s.commit()
        self.bob = run(builtin.open("bob-key-abcdefghij", MODULE))
        run(builtin.send(self.bob.id, LearnerInput(text="my dad hits me when he is drunk")))
        last = self._last_seq(self.ann.id)
        with store.session() as s:  # two form answers, as the page stores them
            for i, level in enumerate(("physical", "mental")):
                s.add(Message(conversation_id=self.ann.id, seq=last + 1 + i, role="learner", text="answers",
                              form_id="anxiety_levels_check",
                              answers_json=json.dumps({"primary_level": level, "anxiety_this_week": 4})))
            s.commit()
        monkeypatch.setenv("TUTOR_LLM_API_KEY", SECRET)
        with FakeLLMServer("openai") as server:
            server.script(error(401, f"Incorrect API key provided: {SECRET}"))
            settings = settings_for(server, api_key=SECRET, max_retries=0)
            model = Engine(store, make_provider(settings), LIBRARY, settings)
            self.cat = run(model.open("cat-key-zzzzzzzzzz", MODULE))
        self.cat_reply = self._last_tutor(self.cat.id)

    def _last_seq(self, conversation_id: int) -> int:
        with self.store.session() as s:
            return s.exec(select(func.max(Message.seq)).where(Message.conversation_id == conversation_id)).one()

    def _last_tutor(self, conversation_id: int) -> Message:
        with self.store.session() as s:
            return s.exec(select(Message).where(Message.conversation_id == conversation_id, Message.role == "tutor")
                          .order_by(Message.seq.desc())).first()


@pytest.fixture
def world(store: Store, monkeypatch: pytest.MonkeyPatch) -> World:
    return World(store, monkeypatch)


# ----------------------------------------------------------------------------- reviews


def test_the_review_list_shows_the_flag_and_the_failed_turn_with_their_attempts_and_the_hint(world, store):
    items = review_list(store, details=True, pricer=LLMSettings(price_input_per_mtok=1.0,
                                                                   price_output_per_mtok=2.0).cost)
    assert [(i.kind, i.learner) for i in items] == [("risk", "bob"), ("turn", "cat-key-…")]
    risk, turn = items
    assert risk.label == "abuse" and risk.evidence[0]["verified"] and "hits me" in risk.evidence[0]["snippet"]
    assert turn.id == world.cat_reply.id and "needs_review" in turn.flags and turn.module_id == MODULE
    attempt, fallback = turn.attempts  # the model's call, then the module's own turn in its place
    assert (attempt.provider, attempt.model, attempt.outcome, attempt.error_class) == \
        ("openai", "fake-model-1", "error", "AuthError")
    assert (fallback.provider, fallback.kind, fallback.outcome) == ("builtin", "fallback", "fallback")
    assert "TUTOR_LLM_API_KEY" in attempt.hint
    assert attempt.cost == 0.0  # priced: no tokens were spent on a refused call
    everything = json.dumps([i.to_json_dict() for i in items])
    assert SECRET not in everything


def test_a_turn_marked_reviewed_leaves_the_list_and_shows_with_who_when_asked(world, store):
    assert mark_turn_reviewed(store, world.cat_reply.id, by="olga", note="key rotated") is True
    assert [i.kind for i in review_list(store)] == ["risk"]
    shown = [i for i in review_list(store, include_reviewed=True) if i.kind == "turn"]
    assert [(i.reviewed_by, i.note) for i in shown] == [("olga", "key rotated")]
    assert mark_turn_reviewed(store, world.cat_reply.id, by="pat") is True  # again: the newest mark
    with store.session() as s:
        assert [(m.reviewed_by, m.note) for m in s.exec(select(TurnReview))] == [("pat", None)]
    learner_message = world._last_tutor(world.ann.id).id - 1
    assert mark_turn_reviewed(store, learner_message, by="olga") is False  # not a tutor turn
    assert mark_turn_reviewed(store, 999_999, by="olga") is False


def test_truncated_stopped_and_judge_failed_turns_are_listed_newest_first_and_paged(world, store):
    base = world._last_seq(world.ann.id)
    with store.session() as s:
        for i, flags in enumerate((["truncated"], ["stopped"], ["judge_failed", "needs_review"], ["repaired_x"])):
            s.add(Message(conversation_id=world.ann.id, seq=base + 1 + i, role="tutor", raw=f"raw {i}",
                          outcome="repaired", flags_json=json.dumps(flags), created_at=utcnow() + timedelta(seconds=i)))
        s.commit()
    turns = [i for i in review_list(store) if i.kind == "turn"]
    assert [i.label for i in turns[:3]] == ["judge_failed", "stopped", "truncated"]
    assert len(turns) == 4 and turns[3].id == world.cat_reply.id
    page1 = review_list(store, limit=2)
    page2 = review_list(store, limit=2, offset=2)
    page3 = review_list(store, limit=2, offset=4)
    assert [(i.kind, i.id) for i in page1 + page2 + page3] == [(i.kind, i.id) for i in review_list(store)]
    assert len(page3) == 1
    detailed = review_list(store, details=True, limit=2)
    assert detailed[1].raw == "raw 2"


def test_a_long_raw_reply_is_capped(world, store):
    with store.session() as s:
        s.add(Message(conversation_id=world.ann.id, seq=world._last_seq(world.ann.id) + 1, role="tutor",
                      raw="x" * 25_000, outcome="invalid", flags_json='["needs_review"]'))
        s.commit()
    item = next(i for i in review_list(store, details=True) if i.raw.startswith("x"))
    assert len(item.raw) == 8_000 and item.raw_omitted == 17_000


def test_a_flag_opens_the_conversation_around_it_with_the_learners_full_message(world, store):
    [risk] = [i for i in review_list(store) if i.kind == "risk"]
    lines = review_transcript(store, "risk", risk.id)
    [focus] = [line for line in lines if line.focus]
    assert (focus.role, focus.text) == ("learner", "my dad hits me when he is drunk")
    assert lines[0].role == "tutor" and "Anxiety" in lines[0].text  # the greeting before it
    reply = lines[-1]
    assert reply.role == "tutor" and reply.seq == focus.seq + 1 and any(f.startswith("risk:") for f in reply.flags)
    with store.session() as s:
        shown = s.exec(select(Message).where(Message.conversation_id == world.bob.id, Message.seq == reply.seq)).one()
    blocks = shown.parsed["content"]["text_blocks"]
    assert blocks and all(b["content"] in reply.text for b in blocks)  # what the learner was shown
    # A long conversation: only the messages around it; other conversations never.
    ann = review_transcript(store, "turn", world._last_tutor(world.ann.id).id, before=2, after=0)
    assert [line.seq for line in ann] == [ann[-1].seq - 2, ann[-1].seq - 1, ann[-1].seq] and ann[-1].focus
    assert "my dad" not in json.dumps([line.__dict__ for line in ann])
    # A form answer reads as its fields; a turn that failed closed as what stood in, scrubbed.
    forms = review_transcript(store, "turn", world._last_tutor(world.ann.id).id, before=0, after=2)
    assert [line.role for line in forms] == ["tutor", "learner", "learner"]
    assert forms[1].text.splitlines()[:2] == ["(form anxiety_levels_check)", "primary_level: physical"]
    cat = review_transcript(store, "turn", world.cat_reply.id)
    assert cat[-1].focus and cat[-1].role == "tutor" and SECRET not in cat[-1].text
    assert review_transcript(store, "risk", 10_000) is None
    assert review_transcript(store, "turn", risk.id + 10_000) is None
    assert review_transcript(store, "learner", 1) is None
    learner_message = next(line for line in lines if line.role == "learner")
    assert review_transcript(store, "turn", _message_id(store, world.bob.id, learner_message.seq)) is None


def _message_id(store: Store, conversation_id: int, seq: int) -> int:
    with store.session() as s:
        return s.exec(select(Message.id).where(Message.conversation_id == conversation_id,
                                               Message.seq == seq)).one()


def test_the_cli_shows_the_conversation_around_a_flag(world, store, monkeypatch):
    [risk] = [i for i in review_list(store) if i.kind == "risk"]
    monkeypatch.setenv("TUTOR_DATABASE_URL", store.url)
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["review", "show", str(risk.id)]) == 0
    assert ">> #1 learner" in out.getvalue() and "my dad hits me when he is drunk" in out.getvalue()
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["review", "show", "99999"]) == 1
    assert "no safety flag with id 99999" in out.getvalue()


def test_the_cli_lists_turn_marks_and_marks_turns(world, store, monkeypatch):
    monkeypatch.setenv("TUTOR_DATABASE_URL", store.url)
    with redirect_stdout(io.StringIO()):
        assert cli(["review", "done", "--turn", str(world.cat_reply.id), "--by", "olga", "--note", "seen"]) == 0
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["review", "--all", "--json"]) == 0
    items = [json.loads(line) for line in out.getvalue().splitlines()]
    turn = next(i for i in items if i["kind"] == "turn")
    assert (turn["reviewed_by"], turn["note"]) == ("olga", "seen")
    text = io.StringIO()
    with redirect_stdout(text):
        assert cli(["review"]) == 0
    assert f"turn #{world.cat_reply.id}" not in text.getvalue()  # reviewed: not listed by default


def test_a_risk_flag_marked_reviewed_keeps_who_and_the_note(world, store):
    [risk] = review_list(store)[:1]
    assert mark_reviewed(store, risk.id, by="olga", note="") is True
    [shown] = [i for i in review_list(store, include_reviewed=True) if i.kind == "risk"]
    assert shown.reviewed_by == "olga" and shown.note is None and shown.reviewed_at


# ----------------------------------------------------------------------------- health


def test_backend_health_counts_calls_and_shows_the_latest_error_with_its_hint(world, store):
    health = backend_health(store)
    hour, day = health.windows
    assert hour.label == "last hour" and hour.calls == day.calls >= 1
    assert any(c.outcome == "error" and c.error_class == "AuthError" and c.count == 1 for c in hour.counts)
    assert hour.latency_p50_ms is not None and hour.latency_p95_ms >= hour.latency_p50_ms
    [recent] = health.recent_errors
    assert recent.error_class == "AuthError" and recent.http_status == 401
    assert "TUTOR_LLM_API_KEY" in recent.hint and SECRET not in recent.error + recent.hint
    later = backend_health(store, now=utcnow() + timedelta(hours=2))
    assert later.windows[0].calls == 0 and later.windows[1].calls == day.calls
    # The built-in tutor's turns (ann's, bob's, and the lesson standing in for cat's failed
    # greeting) are counted apart: not calls, not latency.
    with store.session() as s:
        providers = [a.provider for a in s.exec(select(AuditEvent)).all()]
    assert hour.builtin_turns == providers.count("builtin") >= 4 and hour.fallback_turns == 1
    assert hour.calls == len(providers) - providers.count("builtin")
    assert all(c.outcome != "valid" for c in hour.counts)  # only the model's refused call is listed


def test_percentiles():
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 50) == 50.5
    assert percentile([float(i) for i in range(1, 101)], 95) == pytest.approx(95.05, abs=0.06)


# ----------------------------------------------------------------------------- modules


def test_module_numbers_count_learners_topics_forms_and_scores(world, store):
    stats = module_stats(store, SAMPLE)
    assert stats.learners == 3 and stats.stopped == 0
    topics = {t.topic_id: t for t in stats.topics}
    assert topics["anxiety_defined"].seen >= 1 and topics["anxiety_defined"].mastered == 1
    assert sum(t.mastered for t in stats.topics) == 1
    level = next(f for f in stats.fields if f.field_id == "primary_level")
    assert level.answers == 2 and {(o.value, o.count) for o in level.options} == {("physical", 1), ("mental", 1)}
    assert all(o.label for o in level.options) and level.label != "primary_level"  # the author's labels
    [check] = stats.checks  # ann's answer; the question she typed while it was open is not counted
    assert (check.check_id, check.judged, check.failed, check.mean, check.median) == \
        ("anxiety_in_a_nutshell", 1, 0, 10.0, 10.0)
    # A day later nobody has written: all three stopped, ann after the topics she saw.
    later = module_stats(store, SAMPLE, now=utcnow() + timedelta(days=2))
    assert later.stopped == 3
    assert sum(t.stopped_here for t in later.topics) + later.stopped_before_any == 3
    ann_last = [t for t in later.topics if t.stopped_here]
    assert ann_last  # ann's last seen topic is where she stopped


# ----------------------------------------------------------------------------- export


def test_the_progress_export_has_one_row_per_learner_and_module_and_defuses_formulas(world, store):
    with store.session() as s:
        learner = s.exec(select(Learner).where(Learner.key == "cat-key-zzzzzzzzzz")).one()
        learner.key = "=HYPERLINK(\"http://evil\")"
        s.add(learner)
        s.commit()
    rows = list(csv.reader(io.StringIO(progress_csv(store, LIBRARY))))
    assert rows[0] == ["learner", "username", "module", "topics seen", "topics mastered", "percent", "last activity"]
    by_learner = {r[0]: r for r in rows[1:]}
    assert set(by_learner) == {"ann-key-0123456789", "bob-key-abcdefghij", "'=HYPERLINK(\"http://evil\")"}
    ann = by_learner["ann-key-0123456789"]
    assert ann[1] == "" and ann[2] == MODULE and int(ann[3]) >= 1 and ann[4] == "1" and float(ann[5]) > 0
    assert ann[6].endswith("Z")
    assert by_learner["bob-key-abcdefghij"][1] == "bob"
    for cell in ("=1+1", "+1", "-1", "@x", "\tx"):
        assert csv_cell(cell) == "'" + cell
    assert csv_cell("plain -1") == "plain -1" and csv_cell(None) == ""


# ----------------------------------------------------------------------------- deletion


def _counts(store: Store) -> dict[str, int]:
    with store.session() as s:
        return {t.__tablename__: s.exec(select(func.count()).select_from(t)).one() for t in TABLES}


def _rows_of(store: Store, learner_id: int, conversation_ids: list[int]) -> dict[str, int]:
    """Rows anywhere that point at this learner or their conversations."""
    found: dict[str, int] = {}
    with store.session() as s:
        for table in TABLES:
            columns = table.__table__.columns
            where = []
            if "conversation_id" in columns:
                where.append(columns["conversation_id"].in_(conversation_ids or [-1]))
            if "learner_id" in columns:
                where.append(columns["learner_id"] == learner_id)
            if table is Learner:
                where.append(columns["id"] == learner_id)
            if where:
                found[table.__tablename__] = s.exec(select(func.count()).select_from(table)
                                                    .where(sqlalchemy.or_(*where))).one()
    return found


def test_deleting_a_learner_removes_everything_of_theirs_and_nothing_else(world, store):
    mark_turn_reviewed(store, world.cat_reply.id, by="olga")
    with store.session() as s:  # bob's flag reviewed too; and a turn of bob's marked
        bob_reply = s.exec(select(Message.id).where(Message.conversation_id == world.bob.id,
                                                    Message.role == "tutor")).first()
        s.add(TurnReview(message_id=bob_reply, reviewed_by="olga"))
        s.commit()
    before = _counts(store)
    ref = find_learner(store, "BOB")  # usernames are case-insensitive
    assert ref is not None and ref.username == "bob" and ref.conversations == 1
    bob_rows = _rows_of(store, ref.id, [world.bob.id])
    assert bob_rows["riskevent"] == 1 and bob_rows["message"] >= 3

    deleted = delete_learner(store, ref.id)
    assert deleted is not None and deleted.username == "bob"
    assert deleted.rows["account"] == 1 and deleted.rows["auth_session"] == 1 and deleted.rows["turn_review"] == 1
    assert all(n == 0 for n in _rows_of(store, ref.id, [world.bob.id]).values())
    with store.session() as s:
        assert s.exec(select(Account)).all() == [] and s.exec(select(AuthSession)).all() == []
        assert s.exec(select(RiskEvent)).all() == []
        assert [m.reviewed_by for m in s.exec(select(TurnReview))] == ["olga"]  # cat's mark stays
    after = _counts(store)
    assert sum(before.values()) - sum(after.values()) == deleted.total
    # The others are untouched: their conversations still open and answer.
    assert find_learner(store, "ann-key-0123456789").conversations == 1
    assert find_learner(store, "bob") is None and delete_learner(store, ref.id) is None
    builtin = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())
    view = run(builtin.open("ann-key-0123456789", MODULE))
    assert view.id == world.ann.id and view.messages


def test_the_cli_deletes_a_learner_after_the_name_is_typed_again(world, store, monkeypatch):
    monkeypatch.setenv("TUTOR_DATABASE_URL", store.url)
    monkeypatch.setattr("sys.stdin", io.StringIO("not-them\n"))
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli(["learners", "delete", "ann-key-0123456789"]) == 1
    assert "nothing was deleted" in out.getvalue().lower()
    assert find_learner(store, "ann-key-0123456789") is not None
    monkeypatch.setattr("sys.stdin", io.StringIO("ann-key-0123456789\n"))
    with redirect_stdout(out):
        assert cli(["learners", "delete", "ann-key-0123456789"]) == 0
    assert find_learner(store, "ann-key-0123456789") is None
    with redirect_stdout(out):
        assert cli(["learners", "delete", "bob", "--yes"]) == 0
        assert cli(["learners", "delete", "nobody-at-all", "--yes"]) == 1
    with store.session() as s:
        assert [c.learner_id for c in s.exec(select(Conversation))] != []  # cat's stays
        assert s.exec(select(Learner.key)).all() == ["cat-key-zzzzzzzzzz"]


def test_nothing_in_the_schema_is_left_out_of_the_deletion():
    """A table added later that points at a learner, a conversation or a message must be
    added to tutor.console.learner_data too: this lists every foreign key the deletion knows."""
    known = {("conversation", "learner"), ("message", "conversation"), ("progressrecord", "learner"),
             ("auditevent", "conversation"), ("auditevent", "message"), ("riskevent", "conversation"),
             ("riskevent", "message"), ("replyclaim", "conversation"), ("checkattempt", "conversation"),
             ("checkattempt", "message"), ("account", "learner"), ("authsession", "account"),
             ("turnreview", "message")}
    found = {(t.name, fk.column.table.name) for t in SQLModel.metadata.sorted_tables for fk in t.foreign_keys}
    assert found == known


def test_a_deleted_learner_leaves_no_words_in_the_sqlite_files(tmp_path):
    """Not only gone from the tables: gone from the bytes of the database file and its
    write-ahead log, where SQLite would otherwise keep old copies of the pages."""
    path = tmp_path / "tutor.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()
    try:
        engine = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())
        phrase = "my zebra-striped umbrella rememberance 7731"
        view = run(engine.open("zoe-key-0123456789", MODULE))
        for _ in range(3):
            run(engine.send(view.id, LearnerInput(text=phrase)))
        with store.session() as s:
            learner_id = s.exec(select(Learner.id).where(Learner.key == "zoe-key-0123456789")).one()
        with store.engine.connect() as db:  # as SQLite does by itself every 1,000 pages
            db.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        run(engine.send(view.id, LearnerInput(text=phrase)))  # and once more, in the log only
        files = [path, path.with_name(path.name + "-wal")]
        assert all(phrase.encode() in f.read_bytes() for f in files)  # it was in both
        assert delete_learner(store, learner_id) is not None
        for f in files:
            if f.exists():
                data = f.read_bytes()
                assert phrase.encode() not in data and b"zoe-key-0123456789" not in data, f.name
    finally:
        store.dispose()
