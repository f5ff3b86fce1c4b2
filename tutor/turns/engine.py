"""One turn, end to end: store the learner's words, ask the tutor, keep what came back.

The order matters: the learner message is committed before any model call, so no fault
downstream can lose it; progress is the server's, computed from evidence, never taken on
the model's word alone. The database half lives in `tutor.turns.conversations`; the model half
in `tutor.turns.model_turn` (the request, the policy called) and `tutor.llm.policy` (streaming,
re-ask, fail closed). A caller may listen to a turn as it is written (`listener`) and stop it
(`Engine.stop`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import weakref

from tutor import progress as progress_mod
from tutor.access.usage import LimitReached, UsageLimits
from tutor.content.modules import Library, Module
from tutor.llm.base import LearnerInput, Provider
from tutor.llm.config import LLMSettings
from tutor.llm.gate import ModelGate, gated, reporting
from tutor.llm.streaming import TurnListener
from tutor.render.views import (
    ConversationSummary,
    ConversationView,
    MessageView,
    ProgressView,
    TurnResult,
)
from tutor.risk.turn import (
    SafetySettings,
    TurnScreen,
    safety_reply,
    screen_offline,
    start_model_screen,
    texts_of,
)
from tutor.settings import REPLY_LEASE_S
from tutor.storage import dbfaults
from tutor.storage.store import Store
from tutor.teach import mastery, teaching
from tutor.topic_mentions import detect_form, detect_text
from tutor.turns import claims, turn_store
from tutor.turns import conversations as db
from tutor.turns.alerts import Alerter
from tutor.turns.conversations import OPENING, InputError, PendingTurn
from tutor.turns.model_turn import call_policy, model_request

__all__ = ["Engine", "InputError", "PendingTurn"]

log = logging.getLogger(__name__)


class Engine:
    def __init__(
        self, store: Store, provider: Provider, library: Library, settings: LLMSettings,
        safety: SafetySettings | None = None, usage: UsageLimits | None = None, alerts: Alerter | None = None,
    ) -> None:
        self.store = store
        self.alerts = alerts  # imminent flags posted to TUTOR_SAFETY_ALERT_URL (tutor.turns.alerts)
        # Usage limits (tutor.access.usage) and the cap on model calls in flight (tutor.llm.gate),
        # which every call of the provider waits for; None: no limits (tools, tests).
        self.usage = usage
        cap = usage.settings.model_calls_in_flight if usage else None
        self.gate = ModelGate.for_backend(cap, settings, provider) if usage else None
        provider = gated(provider, self.gate)
        self.provider = provider
        self.library = library
        self.settings = settings
        self.safety = safety or SafetySettings()
        self.lease_s = REPLY_LEASE_S
        self._holder: str | None = None  # who answers, in reply claims (default: this process)
        # Held only while in use: a conversation's lock goes when no turn holds or awaits it,
        # so the map stays as small as the turns in flight, however many conversations pass.
        self._locks: weakref.WeakValueDictionary[int, asyncio.Lock] = weakref.WeakValueDictionary()
        self._stops: dict[int, asyncio.Event] = {}  # turns being written, by conversation
        self._learner_keys: dict[int, str] = {}  # whose each conversation is (limits count per learner)

    @property
    def holder(self) -> str:
        return self._holder or claims.current_holder()

    @holder.setter
    def holder(self, value: str) -> None:
        self._holder = value

    # ----------------------------------------------------------------- conversations

    async def open(
        self, learner_key: str, module_id: str, *, new: bool = False, defer_opening: bool = False
    ) -> ConversationView:
        """Resume the learner's active conversation in a module, or start one (new=True:
        start over — the old conversation is archived and the module's progress reset).
        A new conversation begins with the tutor's opening turn; with defer_opening the
        caller asks for it later with respond_pending (so a page never waits on a model)."""
        module = self.library.get(module_id)  # raises ModuleNotServable with the check message
        if new and self.usage:  # start over: new conversations per day
            await self._limited(self.usage.admit_conversation(learner_key))
        conversation_id, created = await self.store.run(db.find_or_create, self.store, learner_key, module.id, new)
        self._learner_keys[conversation_id] = learner_key
        if created and not new and self.usage:  # a module's first conversation: counted, never refused
            await self.usage.admit_conversation(learner_key, refusable=False)
        if created and not defer_opening:
            await self.respond_pending(conversation_id)
        return await self.store.run(self._view, conversation_id)

    def conversations(self, learner_key: str) -> list[ConversationSummary]:
        return db.summaries(self.store, learner_key)

    def progress_for(self, learner_key: str, module_id: str) -> ProgressView | None:
        module = self.library.get(module_id)
        state = db.learner_progress(self.store, learner_key, module.id)
        if state is None:
            return None
        return _progress_view(module, mastery.learner_state(self.store, learner_key, module, state), None)

    async def view_if_newer(self, conversation_id: int, latest_id: int) -> ConversationView | None:
        """The conversation, if it holds a message newer than `latest_id` (a page that another
        tab or worker got ahead of catches up); else None, after one small query."""
        newest = await self.store.run(claims.newest_message_id, self.store, conversation_id)
        if newest is None or newest <= latest_id:
            return None
        return await self.store.run(self._view, conversation_id)

    def history(self, conversation_id: int) -> list[MessageView]:
        return db.history(self.store, conversation_id)

    # ------------------------------------------------------------------------- turns

    async def send(self, conversation_id: int, learner_input: LearnerInput) -> TurnResult:
        pending = await self.accept(conversation_id, learner_input)
        return await self.respond(pending)

    async def accept(
        self, conversation_id: int, learner_input: LearnerInput, client_id: str | None = None,
        language: str | None = None,
    ) -> PendingTurn:
        """Check the learner's input and store it. Refused input raises InputError and
        stores nothing. With the browser's `client_id` a resend of the same message returns
        the stored one (`duplicate=True`): no second message, no second reply."""
        # Turns per minute, today's tokens: admitted in the trip that stores the message,
        # once it is found new and valid (a resend is never counted or refused).
        admit = None
        if self.usage:
            admit = functools.partial(self.usage.admit_turn_now, await self._learner_of(conversation_id))
        try:
            # `language`: the page's (the module's), for the form answers' first line.
            return await self.store.run(db.accept, self.store, conversation_id, learner_input, client_id, language,
                                        admit)
        except LimitReached as exc:
            raise InputError(exc.message) from None

    async def skip_form(self, conversation_id: int, form_id: str) -> bool:
        return await self.store.run(db.skip_form, self.store, conversation_id, form_id)

    async def respond(self, pending: PendingTurn, listener: TurnListener | None = None) -> TurnResult:
        async with self._lock(pending.conversation_id), reporting(listener):
            return await self._claimed(
                pending.conversation_id, pending.learner.seq, lambda reads: self._respond_to(pending, listener))

    async def respond_pending(
        self, conversation_id: int, listener: TurnListener | None = None
    ) -> TurnResult | None:
        """Answer the conversation's oldest unanswered learner message (also after a
        restart cut a turn short), or write the opening turn. None when nothing is owed."""
        async with self._lock(conversation_id), reporting(listener):
            start = await self.store.run(turn_store.begin, self.store, conversation_id, self.lease_s, self.holder)
            pending = start.pending
            if pending is None:
                return None
            module = self.library.get(start.module_id)
            if pending is OPENING:
                return await self._claimed(conversation_id, claims.OPENING_SEQ, lambda reads: self._respond(
                    conversation_id, module, None, frozenset(), listener, reads=reads), start)
            return await self._claimed(conversation_id, pending.learner.seq,
                                       lambda reads: self._respond_to(pending, listener, module, reads), start)

    def stop(self, conversation_id: int) -> bool:
        """Stop the reply being written in this conversation, if any (the learner's Stop).
        The turn ends at once with what had arrived, stored with flag `stopped`."""
        event = self._stops.get(conversation_id)
        if event is None or event.is_set():
            return False
        event.set()
        return True

    def writing(self, conversation_id: int) -> bool:
        return conversation_id in self._stops

    async def _limited(self, check) -> None:
        """Await a usage check; a limit reached is refused input, told calmly to the learner."""
        try:
            await check
        except LimitReached as exc:
            raise InputError(exc.message) from None

    async def _learner_of(self, conversation_id: int) -> str:
        key = self._learner_keys.get(conversation_id)
        if key is None:
            key = await self.store.run(db.learner_key, self.store, conversation_id)
            if len(self._learner_keys) >= 100_000:  # a long-running process: forget the oldest
                del self._learner_keys[next(iter(self._learner_keys))]
            self._learner_keys[conversation_id] = key
        return key

    async def _spend(self, conversation_id: int, attempts) -> None:
        """Count a turn's model tokens (every call's, as audited) against the learner's day."""
        tokens = sum(a.tokens_in + a.tokens_out for a in attempts if a.provider != "builtin")
        if self.usage and tokens:
            await self.usage.spend_tokens(await self._learner_of(conversation_id), tokens)

    def _lock(self, conversation_id: int) -> asyncio.Lock:
        # One reply at a time per conversation, in order, in this process; other processes
        # are kept out by the reply claim (tutor.turns.claims).
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        return lock

    # -------------------------------------------------------------------- internals

    async def _claimed(self, conversation_id: int, seq: int, answer,
                       start: turn_store.TurnStart | None = None) -> TurnResult:
        """Answer message `seq` only while holding its claim (tutor.turns.claims.answer_claimed);
        a reply another worker stored meanwhile is returned instead."""
        return await claims.answer_claimed(self.store, conversation_id, seq, self.lease_s, self.holder,
                                           answer, self._stored_result, start)

    async def _keep(self, store_reply, *args, **kwargs) -> MessageView:
        """Store a reply, again while the database is unavailable (tutor.storage.dbfaults), for up to
        the turn deadline: the model's work is not thrown away over a short outage."""
        async def attempt() -> MessageView:
            return await self.store.run(store_reply, *args, **kwargs)

        what = f"conversation {args[1].id}: the tutor's reply"
        return await dbfaults.retry_until(attempt, self.settings.deadline_s, what, log)

    def _stored_result(self, conversation_id: int, reply_id: int) -> TurnResult:
        view = self._view(conversation_id)
        reply = next(m for m in view.messages if m.id == reply_id)
        learner = next((m for m in view.messages if m.seq == reply.reply_to_seq), None)
        return TurnResult(learner=learner, reply=reply, progress=view.progress)

    async def _respond_to(
        self, pending: PendingTurn, listener: TurnListener | None, module: Module | None = None, reads=None,
    ) -> TurnResult:
        if module is None:
            conv = await self.store.run(db.get_conversation, self.store, pending.conversation_id)
            module = self.library.get(conv.module_id)
        learner_input = pending.learner_input
        # The safety screen comes before anything else is done with the learner's words.
        config = self.library.safety_for(module.id)
        screened = await screen_offline(learner_input, pending.learner.text, config, self.library.semantic)
        if screened.answers_with_safety:
            return await self._safety_turn(pending, module, screened, reads)
        # The model screen runs alongside the reply; the reply waits for it before it is kept.
        model_screen = start_model_screen(learner_input, pending.learner.text, config, self.safety, self.provider,
                                          self.settings)
        try:
            detected = detect_text(
                module, "\n".join(text for _, text in texts_of(learner_input, learner_input.text or "")))
            if learner_input.is_form:
                detected |= detect_form(module, learner_input.form_id or "", learner_input.answers or {})
            return await self._respond(pending.conversation_id, module, pending, frozenset(detected), listener,
                                       screened, reads, model_screen)
        finally:
            if model_screen is not None and not model_screen.done():
                model_screen.cancel()

    async def _respond(
        self,
        conversation_id: int,
        module: Module,
        pending: PendingTurn | None,
        detected: frozenset[str],
        listener: TurnListener | None,
        screened: TurnScreen | None = None,
        reads: tuple[turn_store.TurnInputs, mastery.CheckHistory] | None = None,
        model_screen: asyncio.Task[TurnScreen] | None = None,
    ) -> TurnResult:
        # Callers hold self._lock(conversation_id) and the message's claim; `reads`: taken with it.
        # `model_screen`: the model's safety screen of the learner's message, still running.
        upto = pending.learner.seq if pending else None
        inputs, checks = reads or await self.store.run(
            turn_store.turn_reads, self.store, conversation_id, upto)
        # Checks judged, passages found, the check to ask (tutor.teach.teaching); the learner's
        # evidence counted, milestones left for the reply to celebrate.
        plan = await teaching.prepare(self.store, self.provider, self.settings, module, conversation_id,
                                      pending, inputs.progress, detected, history=checks,
                                      recent=[m.content for m in inputs.history[-6:] if m.role == "assistant"],
                                      earlier=next((m.content for m in reversed(inputs.history) if m.role == "user"),
                                                   ""))
        interim = plan.interim
        request = model_request(self.settings, module, plan, inputs, pending, detected)
        stop = self._stops[conversation_id] = asyncio.Event()
        try:
            result = await call_policy(self.provider, self.settings, request, module, interim, inputs.tokens_used,
                                       listener, stop)
        finally:
            self._stops.pop(conversation_id, None)
        if model_screen is not None and pending is not None and screened is not None:
            screened = screened.with_model(await model_screen)
            if screened.answers_with_safety:  # nothing of the lesson's turn is kept or counted
                await self._spend(conversation_id, [*plan.attempts, *result.attempts])
                return await self._safety_turn(pending, module, screened, (inputs, checks))
            if screened.problem:
                log.warning("model safety screen failed in conversation %s (lesson goes on, turn listed for "
                            "review): %s", conversation_id, screened.problem)
        # Quotes verified, topics seen, score first and the check's form last (the server's).
        done = teaching.finish(module, plan, result.parsed)
        update, parsed = done.update, result.parsed
        if update.ignored_claims:
            log.info("topic claims not counted: %s", update.ignored_claims)
        reply = await self._keep(
            turn_store.store_reply, self.store, inputs.conversation, module.id,
            raw=parsed.raw, shown=done.shown, outcome=parsed.outcome,
            flags=list(dict.fromkeys([*parsed.flags, *result.flags, *plan.flags, *done.flags,
                                  *(screened.turn_flags() if screened else ())])),
            attempts=[*(screened.attempts if screened else ()), *plan.attempts, *result.attempts],
            state=update.state, reply_to_seq=upto,
            risks=turn_store.risk_rows(pending, module, screened) if pending and screened else [],
            guard=claims.release_guard(conversation_id, upto, self.holder), checks=plan.rows,
            typed_answer=plan.typed_answer,
        )
        await self._spend(conversation_id,
                          [*(screened.attempts if screened else ()), *plan.attempts, *result.attempts])
        return TurnResult(
            learner=pending.learner if pending else None,
            reply=reply,
            progress=_progress_view(module, update.state, update.milestone, update.at),
            attempts=[*plan.attempts, *result.attempts],
            operator_message=result.operator_message,
            answered=plan.typed_answer,
        )

    async def _safety_turn(self, pending: PendingTurn, module: Module, screened: TurnScreen,
                           reads: tuple[turn_store.TurnInputs, mastery.CheckHistory] | None = None) -> TurnResult:
        """The author's safety reply, at once and with no model call; progress untouched.
        The flags go to the review list with their evidence (offsets and hashes). `reads`:
        the turn's reads, if taken with its claim (turn_store.begin)."""
        if screened.problem:
            log.warning("model safety screen failed in conversation %s: %s", pending.conversation_id,
                        screened.problem)
        log.info("safety reply in conversation %s: %s", pending.conversation_id, screened.turn_flags())
        upto = pending.learner.seq
        inputs, checks = reads or await self.store.run(
            turn_store.turn_reads, self.store, pending.conversation_id, upto)
        update = progress_mod.reconcile(module, mastery.with_scores(module, inputs.progress, checks.scored))
        response = safety_reply(self.library.safety_for(module.id), screened, module.language)
        risks = turn_store.risk_rows(pending, module, screened)
        reply = await self._keep(
            turn_store.store_reply, self.store, inputs.conversation, module.id,
            raw=json.dumps(response.to_json_dict(), ensure_ascii=False),
            shown=_with_server_meta(response, module, update), outcome="valid",
            flags=screened.turn_flags(), attempts=screened.attempts, state=update.state,
            reply_to_seq=upto, risks=risks, guard=claims.release_guard(pending.conversation_id, upto, self.holder),
        )
        await self._spend(pending.conversation_id, screened.attempts)
        if self.alerts is not None and screened.imminent:
            self.alerts.alert_reply(reply.id)
        return TurnResult(
            learner=pending.learner, reply=reply, progress=_progress_view(module, update.state, None),
            attempts=list(screened.attempts), operator_message=screened.problem,
            risks=[{"label": r.label, "confidence": r.confidence, "source": r.source, "severity": r.severity,
                    "evidence": r.evidence} for r in risks],
        )

    def _view(self, conversation_id: int) -> ConversationView:
        conv, learner_key, state, messages, scored = turn_store.view_state(self.store, conversation_id)
        module = self.library.get(conv.module_id)
        state = mastery.with_scores(module, state, scored)
        unanswered = db.first_unanswered((m.seq, m.role, m.reply_to_seq) for m in messages)
        return ConversationView(
            id=conversation_id,
            module_id=conv.module_id,
            learner_key=learner_key,
            messages=messages,
            progress=_progress_view(module, state, None, teaching.lesson_at(
                module, next((m.response for m in reversed(messages) if m.role == "tutor"), None))),
            awaiting_reply=not messages or unanswered is not None,
        )


_with_server_meta = teaching.with_server_meta
_progress_view = teaching.progress_view
