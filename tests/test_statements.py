"""tutor.storage.statements on SQLite and PostgreSQL: a statement run on the driver's cursor gives
what SQLAlchemy's own execution gives (values converted both ways, datetimes included),
in the connection's transaction, with SQLAlchemy's errors and its statement listeners."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from tutor.storage.statements import Statement
from tutor.storage.store import Conversation, Learner, Store

LEARNERS, CONVERSATIONS = Learner.__table__, Conversation.__table__
ADD_LEARNER = Statement(insert(LEARNERS).returning(LEARNERS.c.id), keys=("key", "created_at"))
BY_KEY = Statement(select(LEARNERS).where(LEARNERS.c.key == bindparam("b_key")))
ACTIVE = Statement(select(CONVERSATIONS.c.id, CONVERSATIONS.c.updated_at)
                   .where(CONVERSATIONS.c.learner_id == bindparam("b_learner"), CONVERSATIONS.c.status == "active")
                   .order_by(CONVERSATIONS.c.id).limit(2))
TOUCH = Statement(update(CONVERSATIONS).where(CONVERSATIONS.c.id == bindparam("b_id"))
                  .values(updated_at=bindparam("b_now")))
WHEN = datetime(2026, 11, 24, 6, 30, 15, 250_000, tzinfo=timezone.utc)


def conversations_of(store: Store, learner_id: int, count: int) -> list[int]:
    with store.connect() as db:
        ids = [db.execute(insert(CONVERSATIONS).values(learner_id=learner_id, module_id="m", status=status,
                                                       created_at=WHEN, updated_at=WHEN)).inserted_primary_key[0]
               for status in ["active"] * count + ["archived"]]
        db.commit()
    return ids


def test_rows_and_values_are_what_sqlalchemy_gives(store_on_each_database: Store) -> None:
    store = store_on_each_database
    with store.connect() as db:
        learner_id = ADD_LEARNER.run(db, {"key": "ada", "created_at": WHEN}).scalar()
        db.commit()
    ids = conversations_of(store, learner_id, 3)
    with store.connect() as db:
        TOUCH.run(db, {"b_id": ids[1], "b_now": WHEN + timedelta(hours=1)})
        db.commit()
    with store.connect(read_only=True) as db:
        fast = ACTIVE.run(db, {"b_learner": learner_id})
        slow = db.execute(ACTIVE.statement, {"b_learner": learner_id}).all()
        learner = BY_KEY.run(db, {"b_key": "ada"}).first()
        assert BY_KEY.run(db, {"b_key": "nobody"}).first() is None
    # The literal ("active") and the LIMIT are the statement's own: two of the three active.
    assert fast.columns == ("id", "updated_at") and fast.rows == [tuple(r) for r in slow]
    assert [r[0] for r in fast.rows] == ids[:2]
    assert isinstance(fast.rows[1][1], datetime) and fast.rows[1][1].replace(tzinfo=None) == datetime(2026, 11, 24, 7, 30, 15, 250_000)
    assert learner is not None and learner["id"] == learner_id and learner["key"] == "ada"


def test_a_write_is_kept_only_when_committed(store_on_each_database: Store) -> None:
    store = store_on_each_database
    with store.connect() as db:
        ADD_LEARNER.run(db, {"key": "gone", "created_at": WHEN})  # no commit: rolled back
    with store.connect() as db:
        ADD_LEARNER.run(db, {"key": "kept", "created_at": WHEN})
        db.commit()
    with store.connect(read_only=True) as db:
        assert BY_KEY.run(db, {"b_key": "gone"}).rows == []
        assert len(BY_KEY.run(db, {"b_key": "kept"}).rows) == 1


def test_driver_errors_are_sqlalchemys_and_the_connection_goes_on(store_on_each_database: Store) -> None:
    store = store_on_each_database
    with store.connect() as db:
        ADD_LEARNER.run(db, {"key": "twin", "created_at": WHEN})
        db.commit()
    with store.connect() as db:
        with pytest.raises(IntegrityError):  # the unique key, as Connection.execute raises it
            ADD_LEARNER.run(db, {"key": "twin", "created_at": WHEN})
        db.rollback()
        ADD_LEARNER.run(db, {"key": "after", "created_at": WHEN})
        db.commit()
    with store.connect(read_only=True) as db:
        assert len(BY_KEY.run(db, {"b_key": "after"}).rows) == 1


def test_listeners_hear_every_statement_and_many_rows_go_in_one_call(store_on_each_database: Store) -> None:
    store = store_on_each_database
    heard: list[tuple[str, bool]] = []
    sqlalchemy.event.listen(store.engine, "before_cursor_execute",
                            lambda conn, cursor, sql, params, context, many: heard.append((sql.split()[0], many)))
    add_many = Statement(insert(LEARNERS), keys=("key", "created_at"))
    with store.connect() as db:
        add_many.run_many(db, [{"key": f"k{i}", "created_at": WHEN} for i in range(3)])
        assert len(BY_KEY.run(db, {"b_key": "k2"}).rows) == 1
        db.commit()
    assert heard == [("INSERT", True), ("SELECT", False)]
    with store.connect() as db, pytest.raises(ValueError, match="RETURNING"):
        ADD_LEARNER.run_many(db, [{"key": "k9", "created_at": WHEN}])


def test_mistakes_in_a_statement_are_told_not_run(store: Store) -> None:
    with store.connect() as db:
        with pytest.raises(KeyError, match="b_key"):  # a parameter without a value
            BY_KEY.run(db, {})
        # An INSERT must give every column: defaults SQLAlchemy computes per execution
        # (created_at's clock) are not computed here.
        with pytest.raises(ValueError, match="give every column"):
            Statement(insert(LEARNERS), keys=("key",)).run(db, {"key": "x"})
