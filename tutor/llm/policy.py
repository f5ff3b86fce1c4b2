"""Turn policy (seeds 003 and 004): call, parse, re-ask once, then fail closed.

1. Attempt 1 at the configured temperature. Timeouts, connection faults, 429 and 5xx are
   retried with bounded exponential backoff (Retry-After honoured, capped); 401/403/404 and
   other rejections are not, and leave a message for the operator.
2. A reply that is invalid, a refusal, empty, cut off unusably, or parsed but not worth
   showing (placeholders, echoes, template markers alone, loops: tutor.llm.usable) earns ONE
   re-ask at temperature 0 with shortened history, the errors and the failed output.
3. Still nothing usable: fail closed with `needs_review`. The learner sees the raw text as
   markdown when there is some, else a calm apology (`fallback_apology`) and can go on.
Every provider call leaves an AttemptRecord for the audit log.

With streaming on (the default for HTTP backends), each attempt is read by
`streaming.read_stream`: a listener sees the text grow, a repetition watcher cuts a looping
reply early (treated like a reply cut at the token limit: `repetition`, then the re-ask),
and the learner's Stop ends the turn at once with what had arrived (`stopped`, no re-ask).

The turn has ONE deadline, `TUTOR_LLM_DEADLINE` seconds from the start of `run_turn`:
every provider call gets what is left of it (streamed reads race it like Stop, a whole
reply is awaited under `asyncio.timeout_at`), and a retry whose backoff would end past it
is not made. When it passes, the call in flight is cancelled (the HTTP stream closes), the
audit row says outcome `deadline`, and the turn ends at once, never re-asked:

- what the learner already saw is kept, as for Stop: a reply the contract's ladder can
  recover, else its complete text blocks (`partial`), flagged `deadline`. Nothing needs an
  operator there (like a `truncated` reply that was repaired), so no `needs_review`;
- with nothing to keep, it fails closed like a transport failure: the raw text of a failed
  first reply when it is worth showing, else the calm `DEADLINE_TEXT` apology; flags
  `deadline`, `needs_review` (and `fallback_apology`).

A stream that breaks after some text arrived (the connection drops, the server falls silent
or sends an error event: `streaming.read_stream`) ends the turn the same way, never tried
again or re-asked: what arrived is kept as for the deadline, flagged `interrupted`; the
audit row says outcome `interrupted` with the error and the operator's hint. With nothing
readable to keep it fails closed as a transport failure (`transport_error`).

What a turn cut short keeps, and failing closed, are `tutor.llm.fail_closed`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from tutor.contract import ParsedReply
from tutor.llm.base import Completion, CompletionRequest, Provider
from tutor.llm.budget import BudgetCheck, check_budget, estimate_text_tokens, estimate_tokens, trim_harder
from tutor.llm.context import context_window, learn
from tutor.llm.config import LLMSettings
from tutor.llm.errors import ContextOverflow, DeadlineExceeded, LLMError, ProviderFailure, RateLimited
from tutor.llm.fail_closed import cut, cut_short, fallback, repeated, truncated, with_flags
from tutor.llm.reask import Tried, build_reask, classify
from tutor.llm.redact import scrub
from tutor.llm.replies import BUDGET_TEXT, apology_response, looks_like_refusal
from tutor.llm.streaming import TurnListener, read_stream
from tutor.llm.usable import Sent

__all__ = [
    "AttemptRecord",
    "PolicyResult",
    "apology_response",
    "backoff_delay",
    "build_reask",
    "check_budget",
    "looks_like_refusal",
    "run_turn",
]

log = logging.getLogger("tutor.llm")


@dataclass
class AttemptRecord:
    attempt: int  # 1-based count of provider calls in this turn
    provider: str
    model: str
    strategy: str
    latency_ms: float
    tokens_in: int = 0
    tokens_out: int = 0
    # valid | repaired | invalid | error (no completion) | skipped (budget) | deadline (cut off)
    # | interrupted (the stream broke after some text)
    outcome: str = "invalid"
    flags: list[str] = field(default_factory=list)
    error_class: str | None = None
    kind: str = "first"  # first | retry (same request after a transport fault) | reask
    temperature: float | None = None
    finish_reason: str | None = None
    http_status: int | None = None
    strict_json: bool | None = None  # the raw text was one JSON object as sent (seed 001)
    error: str | None = None  # short, for the audit log; never the learner's text
    hint: str | None = None  # what an operator should do about it (LLMError.operator_hint, scrubbed)
    tokens_cached: int | None = None  # of tokens_in, read from the server's prompt cache (None: not said)

    def to_json_dict(self) -> dict:
        # What dataclasses.asdict gives (the field order, a copy of the list), built directly:
        # asdict's generic recursion cost ~20 us for each attempt of every turn.
        return {
            "attempt": self.attempt, "provider": self.provider, "model": self.model, "strategy": self.strategy,
            "latency_ms": self.latency_ms, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
            "outcome": self.outcome, "flags": list(self.flags), "error_class": self.error_class, "kind": self.kind,
            "temperature": self.temperature, "finish_reason": self.finish_reason, "http_status": self.http_status,
            "strict_json": self.strict_json, "error": self.error, "hint": self.hint,
            "tokens_cached": self.tokens_cached,
        }


@dataclass
class PolicyResult:
    parsed: ParsedReply
    attempts: list[AttemptRecord]
    flags: list[str]
    completion: Completion | None
    operator_message: str | None = None
    tokens_used: int = 0  # add to the conversation's running total (budgets)
    cost: float | None = None  # at the configured prices; None when none are set


def backoff_delay(settings: LLMSettings, retry_index: int, error: LLMError, rng=random.random) -> float:
    """Seconds before retry number `retry_index` (0-based): Retry-After, else doubling + jitter."""
    if isinstance(error, RateLimited) and error.retry_after is not None:
        return min(error.retry_after, settings.retry_max_delay_s)
    delay = min(settings.retry_max_delay_s, settings.retry_base_delay_s * (2**retry_index))
    return delay * (0.5 + rng() / 2)


def _strict_json(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


class _Turn:
    def __init__(self, provider: Provider, settings: LLMSettings, sleep: Callable[[float], Awaitable],
                 listener: TurnListener | None = None, stop: asyncio.Event | None = None):
        self.provider = provider
        self.settings = settings
        self.sleep = sleep
        self.listener = listener
        self.stop = stop
        self.trimmed = False  # a context overflow made us cut the history
        self.records: list[AttemptRecord] = []
        self.tokens_used = 0
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.deadline = self.started + settings.deadline_s  # event-loop (monotonic) time
        self.late: DeadlineExceeded | None = None  # set once the deadline has cut the turn
        self.sent: Sent | None = None  # what a usable reply must not hand back (tutor.llm.usable)

    def _deadline_passed(self, after: LLMError | None = None) -> DeadlineExceeded:
        self.late = DeadlineExceeded(self.settings.deadline_s, self.loop.time() - self.started, after=after)
        return self.late

    def _record(self, request: CompletionRequest, kind: str, latency_ms: float, **kw) -> AttemptRecord:
        kw.setdefault("model", self.provider.model)
        record = AttemptRecord(
            attempt=len(self.records) + 1,
            provider=self.provider.name,
            strategy=request.strategy,
            latency_ms=round(latency_ms, 1),
            kind=kind,
            temperature=request.temperature,
            **kw,
        )
        self.records.append(record)
        return record

    def skip(self, request: CompletionRequest, check: BudgetCheck, kind: str) -> None:
        self._record(request, kind, 0.0, outcome="skipped", flags=[check.flag or "budget"],
                     error_class="BudgetExceeded", error=check.message)

    async def attempt(self, request: CompletionRequest, kind: str) -> Tried:
        result = await self._attempt(request, kind)
        error = result.error
        if isinstance(error, ContextOverflow):
            # The server counted more tokens than we estimated: remember its window, keep
            # only the system text and the last turn, and try once more.
            learn(self.settings, error.context_window)
            self.trimmed = True
            smaller = trim_harder(request, context_window=error.context_window, prompt_tokens=error.prompt_tokens)
            result = await self._attempt(smaller, "retry")
        return result

    async def _attempt(self, request: CompletionRequest, kind: str) -> Tried:
        for retry in range(self.settings.max_retries + 1):
            started = time.perf_counter()
            try:
                completion = await self._call(request)
            except LLMError as exc:
                error = exc
            except Exception as exc:  # a provider bug must not reach the learner
                log.exception("provider %s raised", self.provider.name)
                error = ProviderFailure(f"{type(exc).__name__}: {exc}",
                                        operator_hint=f"The {self.provider.name} provider failed: {exc!r}")
            else:
                return self._finish(request, kind if retry == 0 else "retry", started, completion)
            late = isinstance(error, DeadlineExceeded)
            record = self._record(request, kind if retry == 0 else "retry", (time.perf_counter() - started) * 1000,
                                  outcome="deadline" if late else "error", flags=["deadline"] if late else [],
                                  error_class=type(error).__name__, http_status=error.status,
                                  error=error.message[:300], hint=error.operator_hint)
            if not error.retryable or retry == self.settings.max_retries:
                return Tried(error=error)
            delay = backoff_delay(self.settings, retry, error)
            if self.loop.time() + delay >= self.deadline:
                # No time for another try: end the turn now rather than sleep to no purpose.
                record.flags.append("deadline")
                return Tried(error=self._deadline_passed(after=error))
            await self.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, request: CompletionRequest) -> Completion:
        if self.settings.stream and hasattr(self.provider, "stream"):
            return await read_stream(self.provider, request, listener=self.listener, stop=self.stop,
                                     deadline=self.deadline)
        timeout = asyncio.timeout_at(self.deadline)
        try:
            async with timeout:
                return await self.provider.complete(request)
        except TimeoutError:
            if not timeout.expired():
                raise
            raise self._deadline_passed() from None

    def _finish(self, request: CompletionRequest, kind: str, started: float, completion: Completion) -> Tried:
        latency = (time.perf_counter() - started) * 1000
        # Everything the model writes is untrusted: a key or token it echoes (a leaked prompt,
        # a poisoned source) is replaced before the reply is parsed, shown, stored or audited.
        clean = scrub(completion.text)
        scrubbed = clean != completion.text
        if scrubbed:
            completion = replace(completion, text=clean)
        result = classify(completion, self.sent)
        if result.usable and _past_the_bound(self.provider, request, completion):
            result = replace(result, problem="truncated")
        tokens_in, tokens_out, flags = completion.tokens_in, completion.tokens_out, []
        if not tokens_in and not tokens_out:  # no usage: a local server, or a stream we cut
            # The estimate is deliberately high, but a server never writes past max_tokens.
            tokens_out = min(estimate_text_tokens(completion.text), request.max_tokens)
            tokens_in = estimate_tokens(request.messages)
            flags.append("tokens_estimated")
        self.tokens_used += tokens_in + tokens_out
        parsed = result.parsed
        if scrubbed and parsed is not None:  # valid means untouched: this one was changed
            outcome = "repaired" if parsed.outcome == "valid" else parsed.outcome
            parsed = replace(parsed, outcome=outcome, flags=[*parsed.flags, "secret_scrubbed"])
            result = replace(result, parsed=parsed)
        flags += [f for f in (parsed.flags if parsed else []) if f not in flags]
        if completion.finish_reason == "length" and "truncated" not in flags:
            flags.append("truncated")
        if completion.finish_reason in ("repetition", "stopped", "deadline", "interrupted"):
            flags.append(completion.finish_reason)
        if result.problem == "refusal" and "refusal" not in flags:
            flags.append("refusal")
        problem_class = {"refusal": "Refusal", "empty": "EmptyReply", "invalid": "InvalidReply",
                         "truncated": "TruncatedReply", "unusable": "UnusableReply"}
        # An unusable reply keeps its parse outcome (it may be schema-valid); its error class says why not.
        outcome = parsed.outcome if result.problem == "unusable" else "invalid" if result.problem else parsed.outcome
        error_class, error, hint = problem_class.get(result.problem or ""), None, None
        if completion.finish_reason == "deadline":
            outcome, error_class = "deadline", DeadlineExceeded.__name__
            error = self._deadline_passed().message[:300]
        elif completion.finish_reason == "interrupted":
            outcome, error_class = "interrupted", completion.extra.get("error_class")
            error, hint = (completion.extra.get("error") or "")[:300], completion.extra.get("hint")
        self._record(
            request, kind, latency,
            model=completion.model or self.provider.model,
            tokens_in=tokens_in, tokens_out=tokens_out, tokens_cached=completion.tokens_cached,
            outcome=outcome, flags=flags, error_class=error_class, error=error, hint=hint,
            finish_reason=completion.finish_reason, strict_json=_strict_json(completion.text),
        )
        return result

    def result(self, parsed: ParsedReply, completion: Completion | None, operator_message: str | None = None):
        cost = self.settings.cost(sum(r.tokens_in for r in self.records), sum(r.tokens_out for r in self.records))
        if operator_message:
            log.warning("%s", operator_message)
        return PolicyResult(parsed, self.records, list(parsed.flags), completion, operator_message,
                            self.tokens_used, cost)


async def run_turn(
    provider: Provider,
    request: CompletionRequest,
    settings: LLMSettings,
    *,
    fallback_suggestion: str | None = None,
    conversation_tokens_used: int = 0,
    sleep: Callable[[float], Awaitable] = asyncio.sleep,
    listener: TurnListener | None = None,
    stop: asyncio.Event | None = None,
) -> PolicyResult:
    """One tutor turn's model work. Never raises for model or transport trouble.

    `listener` hears the reply grow (streaming) and the re-ask; setting `stop` ends the
    turn at once with what had arrived, flagged `stopped`. All of it ends by
    `settings.deadline_s` (see the module's docstring)."""
    turn = _Turn(provider, settings, sleep, listener, stop)
    window = await context_window(settings, getattr(provider, "client", None))
    check = check_budget(request, settings, conversation_tokens_used=conversation_tokens_used,
                         context_window=window)
    if not check.ok:
        turn.skip(check.request, check, "first")
        apology = ParsedReply("invalid", apology_response(BUDGET_TEXT), [], [check.message or ""], "")
        return turn.result(with_flags(apology, check.flag, "needs_review", "fallback_apology"), None, check.message)
    extra = [f for f in check.flags if f in ("history_trimmed", "max_tokens_lowered")]
    turn.sent = Sent.of(request)

    first = await turn.attempt(check.request, "first")
    if turn.trimmed and "history_trimmed" not in extra:
        extra.append("history_trimmed")
    if cut_short(first):
        return turn.result(cut(first, [first], fallback_suggestion, *extra, sent=turn.sent), first.completion,
                           _late(turn))
    if first.usable:
        return turn.result(with_flags(first.parsed, *extra, *truncated(first)), first.completion)
    if first.error is not None:
        hint = first.error.operator_message
        if first.error.retryable:
            hint += f" (gave up after {settings.max_retries + 1} tries)"
        fault = "deadline" if turn.late else "transport_error"
        return turn.result(fallback([first], fallback_suggestion, *extra, fault), None, hint)

    tries = [first]
    operator_message = None
    reask = build_reask(check.request, first, settings)
    used = conversation_tokens_used + turn.tokens_used
    check2 = check_budget(reask, settings, conversation_tokens_used=used, context_window=window)
    if check2.ok:
        if listener is not None:
            await listener.status("reasking")
        second = await turn.attempt(check2.request, "reask")
        if cut_short(second):
            return turn.result(cut(second, [second, first], fallback_suggestion, *extra, *repeated(first),
                                    "reasked", sent=turn.sent), second.completion, _late(turn))
        if second.usable:
            return turn.result(with_flags(second.parsed, *extra, *truncated(second), *repeated(first),
                                           "reasked"), second.completion)
        tries.insert(0, second)
        extra += [*repeated(first), "reasked", *(["deadline"] if turn.late else [])]
        if second.error is not None:
            operator_message = second.error.operator_message
    else:  # no room for a re-ask: fail closed with what attempt 1 gave
        turn.skip(check2.request, check2, "reask")
        operator_message = check2.message
        extra.append(check2.flag or "budget")
    completion = next((t.completion for t in tries if t.completion is not None), None)
    return turn.result(fallback(tries, fallback_suggestion, *extra), completion, operator_message)


def _past_the_bound(provider: Provider, request: CompletionRequest, completion: Completion) -> bool:
    """A reply that reached max_tokens under a schema bounded to fit it (the provider's
    `bounds_reply`: json_schema on an OpenAI-compatible server, tutor.llm.schema). Every
    reply of real text fits, so this one wrote what the bound does not price (runs of
    escapes, whitespace, one character or digits). However well it repairs, it is not a
    lesson: it is re-asked, like a reply cut for looping, and fails closed if the re-ask is
    no better."""
    bounds = getattr(provider, "bounds_reply", None)
    return completion.finish_reason == "length" and bounds is not None and bool(bounds(request))


def _late(turn: _Turn) -> str | None:
    """What the operator should know about a turn cut short: the deadline, or the broken
    stream's hint."""
    if turn.late is not None:
        return turn.late.operator_message
    broken = turn.records[-1] if turn.records and turn.records[-1].outcome == "interrupted" else None
    return (broken.hint or broken.error) if broken is not None else None
