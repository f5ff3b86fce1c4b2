"""A streamed reply whose connection breaks keeps what had arrived, as Stop and the deadline
do (tutor.llm.streaming, tutor.llm.policy): shown and stored, flagged `interrupted`, never
tried again or re-asked, the error and the operator's hint on the audit row. Against loopback
servers (tests/fakes) that stream some events and then hang up."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlmodel import select

from tests.fakes import wire
from tests.fakes.servers import Scripted, settings_for
from tests.llm.test_deadline import Listener  # the same recording listener
from tutor.content.modules import load_library
from tutor.llm import ChatMessage, CompletionRequest, make_provider, run_turn
from tutor.llm.base import LearnerInput
from tutor.llm.replies import APOLOGY_TEXT
from tutor.storage.store import AuditEvent, Message, Store
from tutor.turns.engine import Engine

MESSAGES = [ChatMessage("system", "Reply with one JSON object."), ChatMessage("user", "What is anxiety?")]
SECOND = "Your heart beats faster as the body gets ready to act, and then it settles by degrees."




def reply_text() -> str:
    final = wire.tutor_reply("Breathe out slowly.")
    final["content"]["text_blocks"].append({"type": "paragraph", "content": SECOND})
    return json.dumps(final)


def cut_after(kind: str, text: str) -> Scripted:
    """The reply's events up to the middle of its second block, then the server hangs up."""
    head = text[: text.index(SECOND) + 30]
    if kind == "openai":
        chunks = wire.openai_stream_chunks(head, pieces=6, finish_reason=None, tokens=None, done=False)
    else:
        chunks = wire.anthropic_stream_chunks(head, pieces=6, stop=False)[:-2]  # no block stop, no message end
    return Scripted(sse_chunks=chunks, stall_after=len(chunks))


def play(server, listener=None, **overrides):
    settings = settings_for(server, stream=True, strategy="json_object", **overrides)

    async def go():
        provider = make_provider(settings)
        try:
            request = CompletionRequest(MESSAGES, 0.7, settings.max_tokens, "json_object")
            return await run_turn(provider, request, settings, listener=listener)
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_stream_the_server_drops_keeps_what_the_learner_already_saw(kind, request):
    server = request.getfixturevalue(f"{kind}_server")
    server.script(cut_after(kind, reply_text()), wire.openai_stream(wire.tutor_json("never asked for")))
    listener = Listener()
    result = play(server, listener)
    blocks = [b.content for b in result.parsed.response.content.text_blocks]
    assert blocks[0] == "Breathe out slowly." and SECOND.startswith(blocks[1]) and len(blocks[1]) < len(SECOND)
    assert listener.texts[-1].endswith(blocks[1][-10:])  # what is kept is what the learner saw
    assert "interrupted" in result.flags
    assert not {"needs_review", "fallback_apology", "reasked", "deadline"} & set(result.flags)
    assert len(server.requests) == 1  # not tried again (max_retries=2), not re-asked
    (row,) = result.attempts
    assert (row.outcome, row.error_class, row.finish_reason) == ("interrupted", "ConnectionFailed", "interrupted")
    assert "interrupted" in row.flags and row.error and row.tokens_out > 0
    assert result.operator_message == (row.hint or row.error)  # the operator hears why, the learner does not


def test_a_stream_that_breaks_before_any_text_is_tried_again(openai_server):
    role_only = wire.openai_stream_chunks("", pieces=1, finish_reason=None, tokens=None, done=False)[:1]
    openai_server.script(Scripted(sse_chunks=role_only, stall_after=1),
                         wire.openai_stream(wire.tutor_json("Here I am again.")))
    result = play(openai_server)
    assert result.parsed.outcome == "valid" and "interrupted" not in result.flags
    assert [a.outcome for a in result.attempts] == ["error", "valid"]
    assert len(openai_server.requests) == 2


def test_a_broken_stream_with_nothing_readable_fails_closed(openai_server):
    head = '{"content": {"text_blocks": [{"type": "paragraph", "con'
    chunks = wire.openai_stream_chunks(head, pieces=2, finish_reason=None, tokens=None, done=False)
    openai_server.script(Scripted(sse_chunks=chunks, stall_after=len(chunks)))
    result = play(openai_server)
    assert result.parsed.response.content.text_blocks[0].content == APOLOGY_TEXT
    assert {"interrupted", "transport_error", "needs_review", "fallback_apology"} <= set(result.flags)
    assert result.parsed.raw == head  # the operator can still read what arrived
    assert len(openai_server.requests) == 1


def test_an_interrupted_reply_is_stored_with_its_audit_row(openai_server, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'tutor.db'}")
    store.migrate()
    settings = settings_for(openai_server, stream=True, strategy="json_object", timeout_s=5.0)
    engine = Engine(store, make_provider(settings), load_library(), settings)
    openai_server.default = lambda request: cut_after("openai", reply_text())

    async def go():
        view = await engine.open("ann", "understanding_anxiety", defer_opening=True)
        turn = await engine.accept(view.id, LearnerInput(text="What is anxiety?"))
        return await engine.respond(turn)

    try:
        done = asyncio.run(go())
        with store.session() as s:
            stored = s.get(Message, done.reply.id)
            rows = s.exec(select(AuditEvent).where(AuditEvent.message_id == done.reply.id)).all()
    finally:
        store.dispose()
    assert "interrupted" in json.loads(stored.flags_json)
    texts = [b["content"] for b in done.reply.response["content"]["text_blocks"]]
    assert texts[0] == "Breathe out slowly." and SECOND.startswith(texts[1])
    assert ("interrupted", "ConnectionFailed") in [(r.outcome, r.error_class) for r in rows]
