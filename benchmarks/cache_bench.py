"""Prompt caching on a real model: `python -m benchmarks.cache_bench [--turns 6] [--rounds 1]`.

A learner opens the sample module and sends `--turns` messages, through the real Engine
(SQLite, the safety screen, teaching, the turn policy, streaming) against llama.cpp's server
with Gemma 3 270M (tests/real/llama.py starts it: one slot, 8192 tokens). For each turn:
the time from the learner's send until the first text block of the streamed reply is ready
for the page (what `live_bench` times in a browser as "Enter -> first block"), the whole
turn, the prompt tokens, and how many of them the server read from its prompt cache
(`timings.cache_n`, kept in the attempt's audit detail as `tokens_cached`).

Two prompt layouts, in the same run, each in its own conversation (alternating with
`--rounds 2` and more):

    stable   this release: rules, module, instructions and contract first, the same every
             turn; where the learner is and this turn's notes after them
    old      the previous release's: the learner's place (the topic list with [x] marks)
             right after the rules, this turn's notes and passages before the contract,
             so every turn's prompt differed early

Printed: turn 1 (nothing cached yet) against turns 2.. for each layout, and turns 2..
of the stable layout against the old one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MODULE = "understanding_anxiety"
QUESTIONS = [
    "What does anxiety do in the body?",
    "Why does my heart race before a presentation?",
    "How is worry different from anxiety?",
    "Can you give me an example of avoidance?",
    "What could I try when I notice it starting?",
    "Is it normal to feel anxious every day?",
    "How does slow breathing help?",
]


def old_layout() -> None:
    """Build system messages the previous release's way (for the comparison only)."""
    from tutor.llm.base import ChatMessage
    from tutor.progress import coverage_count, mastered_ids, module_state
    from tutor.turns import prompts

    def module_context(module, state) -> str:
        covered, mastered = set(state.covered), set(mastered_ids(module, state))
        checked = sum(1 for t in module.topics if t.checks)
        mastery = (f" {len(mastered)} of {checked} topics with checks mastered (the app asks and judges checks; "
                   "never claim mastery or give scores yourself)." if checked else "")
        where = module_state(module, state)
        lines = [
            f"## Module: {module.title} (id: {module.id})", module.description.strip(),
            f"Teach in the module's language ({module.language}) unless the learner writes in another one.",
            f"Progress: {coverage_count(module, state)} of {len(module.topic_ids)} topics covered.{mastery} "
            f"Milestones: {', '.join(f'{m}%' for m in module.milestones)} "
            f"(already celebrated: {', '.join(state.milestones) or 'none yet'}).",
            f"Current place: {where.current_phase} / {where.current_section}.", "",
            "Topics in teaching order ([x] covered, [ ] remaining). In meta.progress use these ids exactly:",
        ]
        for phase in module.phases:
            lines.append(f"Phase: {phase.title}")
            for section in phase.sections:
                lines.append(f"  Section: {section.title}")
                for topic in section.topics:
                    note = " (mastered)" if topic.id in mastered else ""
                    lines.append(f"  - [{'x' if topic.id in covered else ' '}] {topic.id}: {topic.title}{note}")
        return "\n".join(lines)

    def system_message(module, state, *, variables: Mapping[str, object] | None = None, strict: bool = True,
                       teaching=None) -> ChatMessage:
        parts = [prompts.GLOBAL_RULES, module_context(module, state)]
        instructions = prompts._instructions(module, variables, strict)
        if instructions:
            parts.append("## Author instructions\n" + instructions)
        notes = prompts.teaching_notes(teaching) if teaching is not None else ""
        if notes:
            parts.append(notes)
        parts.append(prompts.CONTRACT_BLOCK)
        return ChatMessage("system", "\n\n".join(parts))

    prompts.system_message = system_message


class FirstBlock:
    """The page's listener, minus Reflex: notes when the first text block is ready to show."""

    def __init__(self) -> None:
        from tutor.turns.live import StreamFeed

        self.feed = StreamFeed()
        self.at: float | None = None

    async def text(self, raw: str) -> None:
        updates = self.feed.push(raw)
        if self.at is None and any(isinstance(v, (str, list, dict)) and v for v in updates.values()):
            self.at = time.monotonic()

    async def status(self, status: str) -> None:
        self.feed.clear()


async def conversation(engine, learner: str, turns: int) -> list[dict[str, Any]]:
    from tutor.llm.base import LearnerInput

    view = await engine.open(learner, MODULE, defer_opening=True)
    rows = []
    for turn in range(turns + 1):
        listener = FirstBlock()
        started = time.monotonic()
        if turn:
            await engine.accept(view.id, LearnerInput(text=QUESTIONS[(turn - 1) % len(QUESTIONS)]),
                                client_id=f"{learner}-{turn}")
        result = await engine.respond_pending(view.id, listener)
        total = time.monotonic() - started
        tutor_calls = [a for a in result.attempts if a.provider == "openai"]
        rows.append({
            "turn": turn, "first_block_s": (listener.at or time.monotonic()) - started, "total_s": total,
            "tokens_in": sum(a.tokens_in for a in tutor_calls),
            "tokens_cached": sum(a.tokens_cached or 0 for a in tutor_calls),
            "calls": len(tutor_calls), "outcome": result.reply.outcome,
        })
        r = rows[-1]
        print(f"  turn {turn}: first block {r['first_block_s']:.2f} s of {r['total_s']:.2f} s | prompt "
              f"{r['tokens_in']} tokens, {r['tokens_cached']} from the cache | {r['calls']} call(s), "
              f"{r['outcome']}", flush=True)
    return rows


async def bench(args: argparse.Namespace, base_url: str, db_url: str) -> dict[str, list[dict[str, Any]]]:
    from tutor.content.modules import load_library
    from tutor.llm.config import LLMSettings
    from tutor.llm.factory import make_provider
    from tutor.risk.turn import SafetySettings
    from tutor.storage.store import Store
    from tutor.teach import retrieval
    from tutor.turns import prompts
    from tutor.turns.engine import Engine

    env = dict(TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=base_url, TUTOR_LLM_MODEL="gemma-3-270m",
               TUTOR_LLM_STRATEGY=args.strategy, TUTOR_LLM_MAX_TOKENS="600", TUTOR_LLM_STREAM="1")
    settings = LLMSettings.from_env(env)
    store = Store(db_url)
    store.migrate()
    library = load_library()
    await asyncio.to_thread(retrieval.warm, list(library.modules.values()))
    # As the app (auto: the model screen's call beside every turn, on the same server), or
    # --screen off: only the tutor's calls.
    safety = SafetySettings.from_env({"TUTOR_SAFETY_MODEL_SCREEN": args.screen})
    provider = make_provider(settings)
    engine = Engine(store, provider, library, settings, safety=safety)
    stable_message = prompts.system_message
    out: dict[str, list[dict[str, Any]]] = {"stable": [], "old": []}
    try:
        for round_ in range(args.rounds):
            for layout in ("stable", "old"):
                prompts.system_message = stable_message
                if layout == "old":
                    old_layout()
                print(f"[{layout} layout, round {round_ + 1}]", flush=True)
                out[layout] += await conversation(engine, f"cache-{layout}-{round_}-{os.getpid()}", args.turns)
    finally:
        prompts.system_message = stable_message
        await provider.aclose()
        store.dispose()
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    first = [r for r in rows if r["turn"] == 0]
    later = [r for r in rows if r["turn"] > 0]

    def med(rs, key):
        return statistics.median(r[key] for r in rs) if rs else 0.0

    return {
        "turn1_first_block_s": med(first, "first_block_s"), "later_first_block_s": med(later, "first_block_s"),
        "turn1_total_s": med(first, "total_s"), "later_total_s": med(later, "total_s"),
        "later_tokens_in": med(later, "tokens_in"), "later_tokens_cached": med(later, "tokens_cached"),
        "turn1_tokens_cached": med(first, "tokens_cached"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=6, help="learner messages after the opening turn")
    parser.add_argument("--rounds", type=int, default=1, help="conversations per layout, alternating")
    parser.add_argument("--strategy", default="json_schema", choices=("prompt", "json_object", "json_schema"))
    parser.add_argument("--screen", default="auto", choices=("auto", "off"),
                        help="TUTOR_SAFETY_MODEL_SCREEN (auto, as the app: a screen call before each turn)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from tests.real.llama import LlamaServer  # the real server, as the tests start it

    load = os.getloadavg()
    print(f"llama.cpp, Gemma 3 270M, {args.strategy}; {args.turns} turns + opening; model screen {args.screen}; "
          f"load average "
          f"{load[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    server = LlamaServer.start()
    try:
        with tempfile.TemporaryDirectory(prefix="tutor-cache-bench-") as tmp:
            out = asyncio.run(bench(args, server.base_url, f"sqlite:///{Path(tmp) / 'tutor.db'}"))
    finally:
        server.stop()
    s, o = summary(out["stable"]), summary(out["old"])
    for name, x in (("stable", s), ("old", o)):
        print(f"{name:>6}: first block turn 1 {x['turn1_first_block_s']:.2f} s, turns 2.. {x['later_first_block_s']:.2f} s "
              f"(x{x['later_first_block_s'] / max(x['turn1_first_block_s'], 1e-9):.2f} of turn 1) | whole turn "
              f"{x['turn1_total_s']:.2f} -> {x['later_total_s']:.2f} s | turns 2..: prompt {x['later_tokens_in']:.0f} "
              f"tokens, {x['later_tokens_cached']:.0f} from the cache")
    print(f"stable / old, turns 2..: first block x{s['later_first_block_s'] / max(o['later_first_block_s'], 1e-9):.2f}, "
          f"whole turn x{s['later_total_s'] / max(o['later_total_s'], 1e-9):.2f}, cached tokens "
          f"{s['later_tokens_cached']:.0f} vs {o['later_tokens_cached']:.0f}")
    if args.json:
        print(json.dumps({"stable": out["stable"], "old": out["old"], "summary": {"stable": s, "old": o}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
