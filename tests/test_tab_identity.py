"""A tab's state belongs to one identity (tutor.access.tab_identity, TutorState.checked_identity,
tutor.web.identity_gate): the Reflex states driven directly, on a real database, with the
socket's headers as a browser would send them. Browser-level: tests/browser/test_accounts.py."""

from __future__ import annotations

import asyncio

import pytest
from reflex.state import State
from reflex_base.event import Event
from sqlmodel import select

from tutor.access import accounts, sessions
from tutor.content.modules import load_library
from tutor.llm import LLMSettings, make_provider
from tutor.storage import dbfaults
from tutor.storage.store import Conversation, Message, RiskEvent
from tutor.turns import runtime
from tutor.turns.engine import Engine
from tutor.web.auth_state import AuthPageState, TutorState
from tutor.web.chat_sending import SIGNED_OUT
from tutor.web.identity_gate import IdentityGate
from tutor.web.operator_state import OperatorState
from tutor.web.state import ChatState

LIBRARY = load_library()
MODULE = "understanding_anxiety"
SITE = "http://testserver"
PASSWORD = "pass-phrase one"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def engine(store, monkeypatch):
    monkeypatch.setenv("TUTOR_AUTH", "accounts")
    accounts.auth_settings.cache_clear()
    built = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())
    monkeypatch.setattr(runtime, "_engine", built)  # the app's engine, as the states find it
    for name, role in [("olga", "operator"), ("ana", "learner"), ("ben", "learner")]:
        accounts.create_account(store, name, PASSWORD, role=role)
    yield built
    accounts.auth_settings.cache_clear()


def signed_in(store, name: str) -> str:
    """A session cookie for `name`, as the sign-in route sets it."""
    token = sessions.create_session(store, accounts.find_account(store, name).id, days=1)
    return f"{sessions.COOKIE_NAME}={token}"


def connect(root: State, cookie: str, path: str = "/", query: dict | None = None) -> None:
    """The tab's socket (re)connects with these headers (a page load)."""
    shown = path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    data = {"headers": {"cookie": cookie, "origin": SITE, "host": "testserver"}, "token": "tab-1", "sid": "s1",
            "ip": "127.0.0.1", "pathname": path, "asPath": shown, "query": query or {}}
    root.router_data = root._update_router_vars(data, root.router_data or {})


def new_tab(cookie: str, path: str = "/") -> State:
    root = State(_reflex_internal_init=True)
    connect(root, cookie, path)
    return root


async def event(root: State, handler: str, payload: dict | None = None) -> None:
    """What Reflex does first with every event of the tab: the gate."""
    await IdentityGate().preprocess(None, root, Event(name=handler, payload=payload or {}))


def hydrate_name() -> str:
    return f"{State.get_full_name()}.hydrate_and_load"


async def open_chat(root: State) -> ChatState:
    chat = await root.get_state(ChatState)
    follow = await ChatState.load.fn(chat)
    assert follow is ChatState.open_conversation
    await ChatState.open_conversation.fn(chat)
    return chat


def texts(store, conversation_id: int) -> list[str]:
    with store.session() as s:
        return [m.text for m in s.exec(select(Message).where(Message.conversation_id == conversation_id))]


# ------------------------------------------------------------------ the learner's tab


def test_after_sign_out_the_next_page_load_gets_nothing_of_the_previous_learners_chat(store, engine):
    cookie = signed_in(store, "ana")
    root = new_tab(cookie, f"/learn?module={MODULE}")
    connect(root, cookie, "/learn", {"module": MODULE})
    chat = run(open_chat(root))
    run(ChatState.send_text.fn(chat, {"message": "my private worry", "client_id": "c1"}))
    assert chat.conversation_id and any("my private worry" in i.plain for i in chat.live_0)
    # Sign-out (the route deletes the row and the cookie); the page that follows is /signin.
    sessions.end_session(store, sessions.cookie_value(cookie))
    connect(root, "", "/signin")
    run(event(root, hydrate_name()))
    snapshot = str(root.dict())  # what the hydrate sends the page
    assert "my private worry" not in snapshot
    assert chat.conversation_id == 0 and chat.history == [] and chat.live_0 == [] and not chat._opening_key


def test_the_next_person_to_sign_in_on_the_tab_writes_only_into_their_own_conversation(store, engine):
    root = new_tab(signed_in(store, "ana"))
    connect(root, root.router.headers.cookie, "/learn", {"module": MODULE})
    chat = run(open_chat(root))
    anas = chat.conversation_id
    # Ben signs in on the same tab: a new cookie on the next connection, at once (no window).
    connect(root, signed_in(store, "ben"), "/learn", {"module": MODULE})
    run(event(root, f"{ChatState.get_full_name()}.send_text"))
    assert chat.conversation_id == 0 and chat.history == []
    run(ChatState.send_text.fn(chat, {"message": "ben writes this", "client_id": "c2"}))
    assert "ben writes this" not in texts(store, anas)
    with store.session() as s:
        bens = s.exec(select(Conversation).where(Conversation.id == chat.conversation_id)).one()
    assert bens.id != anas and "ben writes this" in texts(store, bens.id)


def test_a_send_after_signing_out_elsewhere_is_refused_at_once(store, engine):
    cookie = signed_in(store, "ana")
    root = new_tab(cookie)
    connect(root, cookie, "/learn", {"module": MODULE})
    chat = run(open_chat(root))
    run(ChatState.send_text.fn(chat, {"message": "before", "client_id": "c1"}))
    sessions.end_session(store, sessions.cookie_value(cookie))  # another tab, another worker
    run(ChatState.send_text.fn(chat, {"message": "after sign-out", "client_id": "c2"}))  # the same socket
    assert chat.input_error == SIGNED_OUT and "c2" in chat.refused_ids
    assert "after sign-out" not in texts(store, chat.conversation_id or 0)
    with store.session() as s:
        assert s.exec(select(Message).where(Message.text == "after sign-out")).first() is None


def test_disabling_an_account_stops_its_open_tab_at_the_next_event(store, engine):
    cookie = signed_in(store, "ana")
    root = new_tab(cookie)
    connect(root, cookie, "/learn", {"module": MODULE})
    chat = run(open_chat(root))
    accounts.set_disabled(store, "ana")
    run(event(root, f"{ChatState.get_full_name()}.skip_form"))
    assert chat.conversation_id == 0 and chat.history == []
    assert run(ChatState.skip_form.fn(chat, "1-x")) is None


def test_a_database_fault_clears_the_tab_only_when_the_connection_is_someone_elses(store, engine, monkeypatch):
    cookie = signed_in(store, "ana")
    root = new_tab(cookie)
    connect(root, cookie, "/learn", {"module": MODULE})
    chat = run(open_chat(root))
    shown = chat.conversation_id

    async def down(self, local_key=None):
        raise dbfaults.DatabaseUnavailable("connection refused", "start the database")

    monkeypatch.setattr(TutorState, "identity", down)
    run(event(root, f"{ChatState.get_full_name()}.stop_reply"))
    assert chat.conversation_id == shown  # the same cookie: the learner keeps their page
    connect(root, signed_in(store, "ben"), "/learn", {"module": MODULE})
    run(event(root, hydrate_name()))
    assert chat.conversation_id == 0 and chat.history == []  # who this is cannot be told: nothing shown


def test_anonymous_start_fresh_gives_the_next_person_a_clean_tab(store, engine, monkeypatch):
    monkeypatch.setenv("TUTOR_AUTH", "anonymous")
    accounts.auth_settings.cache_clear()
    root = new_tab("")
    tutor = run(root.get_state(TutorState))
    tutor.learner_key = "kiosk-first"
    connect(root, "", "/learn", {"module": MODULE})
    chat = run(open_chat(root))
    assert chat.conversation_id
    TutorState.forget_me.fn(tutor)
    run(event(root, f"{ChatState.get_full_name()}.load"))
    assert chat.conversation_id == 0 and tutor.learner_key not in ("", "kiosk-first")
    # A hydrate is checked with the key the browser sends, never a key made up here.
    fresh = new_tab("")
    key_var = f"{TutorState.get_full_name()}.learner_key"
    run(event(fresh, hydrate_name(), {"vars": {key_var: "browser-key"}}))
    assert run(fresh.get_state(TutorState))._bound.endswith("|browser-key|learner")


def test_the_gate_leaves_reflexs_own_events_alone_and_the_app_uses_it(store, engine, monkeypatch):
    calls = []

    async def counted(self, *args, **kwargs):
        calls.append(1)
        return None

    monkeypatch.setattr(TutorState, "checked_identity", counted)
    root = new_tab("")
    run(event(root, f"{State.get_full_name()}.update_vars_internal_state.update_vars_internal"))
    assert calls == []
    run(event(root, f"{AuthPageState.get_full_name()}.load"))
    run(event(root, hydrate_name()))
    assert len(calls) == 2
    from tutor.tutor import app

    assert any(isinstance(m, IdentityGate) for m in app._middlewares)


# ------------------------------------------------------------------ the console's role checks


async def console(root: State) -> OperatorState:
    op = await root.get_state(OperatorState)
    follow = await OperatorState.load.fn(op)
    assert follow is OperatorState.refresh
    await OperatorState.refresh.fn(op)
    return op


@pytest.fixture
def flagged(store, engine):
    """A learner's message on the review list (a safety flag)."""
    key = accounts.identity_of(store, accounts.find_account(store, "ana")).learner_key

    async def lesson():
        view = await engine.open(key, MODULE)
        await engine.send(view.id, __import__("tutor.llm.base", fromlist=["LearnerInput"]).LearnerInput(
            text="Continue"))
        return view.id

    conversation_id = run(lesson())
    with store.session() as s:
        message = s.exec(select(Message).where(Message.conversation_id == conversation_id,
                                               Message.role == "learner")).first()
        s.add(RiskEvent(conversation_id=conversation_id, message_id=message.id, module_id=MODULE,
                        label="self_harm", confidence=0.9, source="offline", severity="imminent"))
        s.commit()
    return message.id


def has_console_data(op: OperatorState) -> bool:
    return bool(op.reviews or op.module_ids or op.module_titles or op.module.module_id or op._operator
                or op.transcript)


READS = [
    ("refresh", ()),
    ("toggle_show_reviewed", ()),
    ("next_page", ()),
    ("previous_page", ()),
    ("choose_module", (MODULE,)),
]


@pytest.mark.parametrize(("handler", "args"), READS, ids=[r[0] for r in READS])
@pytest.mark.parametrize("change", ["disabled", "demoted", "signed_out"])
def test_console_reads_check_the_operator_each_time(store, engine, flagged, handler, args, change):
    cookie = signed_in(store, "olga")
    root = new_tab(cookie, "/operator")
    op = run(console(root))
    assert op.access == "operator" and op.reviews and has_console_data(op)
    op.has_more, op.review_page = True, 1  # so paging would go on
    if change == "disabled":
        accounts.set_disabled(store, "olga")
    elif change == "demoted":
        accounts.set_role(store, "olga", "learner")
    else:
        sessions.end_session(store, sessions.cookie_value(cookie))
    # Called directly, as a crafted event would be (the gate's check aside): the handler checks.
    result = run(getattr(OperatorState, handler).fn(op, *args))
    assert result is None
    assert op.access == "denied" and not has_console_data(op)


def test_a_flags_conversation_is_read_for_an_operator_only_and_each_time(store, engine, flagged):
    cookie = signed_in(store, "olga")
    op = run(console(new_tab(cookie, "/operator")))
    key = op.reviews[0].key
    run(OperatorState.toggle_transcript.fn(op, key))
    assert op.transcript_key == key and any(row.focus and row.who == "Learner" for row in op.transcript)
    run(OperatorState.toggle_transcript.fn(op, key))  # closed again
    assert (op.transcript_key, op.transcript) == ("", [])
    run(OperatorState.toggle_transcript.fn(op, "risk-x"))  # not an item: nothing read
    assert op.transcript == []
    accounts.set_role(store, "olga", "learner")
    # Called directly, as a crafted event would be: the handler checks who asks, now.
    run(OperatorState.toggle_transcript.fn(op, key))
    assert op.access == "denied" and op.transcript == [] and not has_console_data(op)


def test_a_learner_signing_in_on_the_operators_tab_sees_no_console_data(store, engine, flagged):
    root = new_tab(signed_in(store, "olga"), "/operator")
    op = run(console(root))
    assert op.reviews
    connect(root, signed_in(store, "ana"), "/operator")
    run(event(root, hydrate_name()))
    assert not has_console_data(op) and op.reviews == [] and "self_harm" not in str(root.dict())
    run(OperatorState.refresh.fn(op))
    assert op.reviews == [] and op.access == "denied"


def test_the_console_refresh_shows_nothing_read_for_an_operator_disabled_meanwhile(store, engine, flagged,
                                                                                   monkeypatch):
    root = new_tab(signed_in(store, "olga"), "/operator")
    op = run(console(root))
    op.reviews = []
    from tutor.console import console_display

    real = console_display.load_console

    def slow_read(*args, **kwargs):
        data = real(*args, **kwargs)
        accounts.set_disabled(store, "olga")  # while the read was under way
        return data

    monkeypatch.setattr("tutor.web.operator_state.load_console", slow_read)
    run(OperatorState.refresh.fn(op))
    assert op.reviews == [] and op.access == "denied"


def test_console_actions_refuse_a_disabled_operator(store, engine, flagged):
    root = new_tab(signed_in(store, "olga"), "/operator")
    op = run(console(root))
    accounts.set_disabled(store, "olga")
    assert run(OperatorState.mark_reviewed.fn(op, {"item": f"risk-{flagged}", "note": "x"})) is None
    assert run(OperatorState.find_learner.fn(op, {"who": "ana"})) is None and op.delete_found == ""
    with store.session() as s:
        assert s.exec(select(RiskEvent)).one().reviewed_at is None


def test_an_operator_made_a_learner_gets_no_console_data_on_the_next_page_load(store, engine, flagged):
    cookie = signed_in(store, "olga")
    root = new_tab(cookie, "/operator")
    op = run(console(root))
    assert op.reviews
    accounts.set_role(store, "olga", "learner")  # the same session, a new role
    connect(root, cookie, "/")
    run(event(root, hydrate_name()))
    assert not has_console_data(op) and "self_harm" not in str(root.dict())


def test_the_disabled_flag_alone_stops_a_session(store, engine):
    """Another tool (or a race with `tutor users disable`) flips the flag before the
    sessions go: the flag is enough."""
    cookie = signed_in(store, "ana")
    with store.session() as s:
        account = s.exec(select(accounts.Account).where(accounts.Account.username == "ana")).one()
        account.disabled = True
        s.add(account)
        s.commit()
    assert sessions.session_account(store, sessions.cookie_value(cookie), days=1) is None
    root = new_tab(cookie)
    assert run(run_checked(root)) is None


async def run_checked(root: State):
    return await (await root.get_state(TutorState)).checked_identity()
