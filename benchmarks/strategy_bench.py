"""Strategies on a real small model: `python -m benchmarks.strategy_bench [--runs 2] [--max-tokens 500]`.

Starts llama.cpp's `llama-server` with Gemma 3 270M on 127.0.0.1 (built once by
scripts/install-llama.sh; see tests/real/llama.py), then plays a small eval suite
(tests/real/suite_small.yaml by default) through the real engine for each strategy, with
streaming off and on, and prints one row per strategy and mode:

    strategy | stream | valid | repaired | invalid | usable | p50 per turn | p95 | x base | tokens out p50 | flags seen

valid / repaired / invalid count the replies the learner was shown (after any re-ask);
invalid ones failed closed. usable counts the turns that showed the model's lesson with
text worth showing, by the content gate (tutor.llm.usable: no placeholders such as "...",
no echo of the learner or the prompt, no template markers, no loops), as "x/n (share)". Tokens out are per turn, re-asks included. The machines are
shared and noisy, so the run first measures a baseline in the same run: the time the server
takes to write `--max-tokens` tokens unconstrained. "x base" is p50 per turn divided by it
(2.0 means a turn costs two full-length generations: a reply that ran to the limit, then a
re-ask that did too).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.real.llama import LlamaServer, LlamaUnavailable
from tutor.content.modules import load_library
from tutor.llm.config import STRATEGIES
from tutor.turns.eval_suite import Suite
from tutor.turns.evals import TurnRecord, percentile, run_suite

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SUITE = REPO / "tests" / "real" / "suite_small.yaml"


@dataclass
class BenchRow:
    strategy: str
    stream: bool
    records: list[TurnRecord]

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.records if r.outcome == outcome)

    @property
    def usable(self) -> int:
        return sum(1 for r in self.records if r.usable)

    @property
    def latencies_s(self) -> list[float]:
        return [r.latency_ms / 1000 for r in self.records if r.error is None]

    @property
    def tokens_out(self) -> list[int]:
        return [sum(a.tokens_out for a in r.calls) for r in self.records if r.error is None]

    def flags(self) -> Counter[str]:
        """Every flag on a shown reply or on any model call of the turn, counted once per turn."""
        seen: Counter[str] = Counter()
        for r in self.records:
            seen.update(set(r.flags) | {f for a in r.attempts for f in a.flags})
        return seen


def baseline_seconds(llama: LlamaServer, tokens: int) -> float:
    """Seconds for `tokens` unconstrained tokens (the server's own /completion, EOS ignored)."""
    llama.post("/completion", {"prompt": "Once upon a time", "n_predict": 8})  # warm up
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        status, body = llama.post("/completion", {"prompt": "Once upon a time", "n_predict": tokens,
                                                  "ignore_eos": True, "temperature": 0.7}, timeout=600)
        assert status == 200, body
        best = min(best, time.perf_counter() - started)
    return best


def format_rows(rows: list[BenchRow], base_s: float) -> str:
    header = ("| strategy | stream | valid | repaired | invalid | usable | p50 per turn | p95 | x base "
              "| tokens out p50 | flags seen |")
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for row in rows:
        lat, toks = row.latencies_s, row.tokens_out
        p50 = percentile(lat, 50)
        flags = ", ".join(f"{name} {n}" for name, n in sorted(row.flags().items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(
            f"| {row.strategy} | {'on' if row.stream else 'off'} | {row.count('valid')} | {row.count('repaired')} "
            f"| {row.count('invalid')} | {row.usable}/{len(row.records)} ({row.usable / max(1, len(row.records)):.0%}) "
            f"| {p50:.1f} s | {percentile(lat, 95):.1f} s | {p50 / base_s:.2f} "
            f"| {percentile(toks, 50):.0f} | {flags or '-'} |"
        )
    return "\n".join(lines)


async def play(llama: LlamaServer, suite: Suite, library, strategy: str, stream: bool, runs: int,
               max_tokens: int, temperature: float) -> BenchRow:
    settings = llama.settings(strategy=strategy, stream=stream, max_tokens=max_tokens, temperature=temperature)

    def progress(record: TurnRecord) -> None:
        mark = "!" if record.error or record.fallback else "."
        print(mark, end="", file=sys.stderr, flush=True)

    records = await run_suite(suite, settings, library, strategies=[strategy], runs=runs, on_turn=progress)
    return BenchRow(strategy, stream, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=str(DEFAULT_SUITE), help="eval suite (default: %(default)s)")
    parser.add_argument("--runs", type=int, default=2, help="plays of the suite per strategy and mode (default 2)")
    parser.add_argument("--max-tokens", type=int, default=500, help="TUTOR_LLM_MAX_TOKENS (default 500)")
    parser.add_argument("--temperature", type=float, default=0.7, help="TUTOR_LLM_TEMPERATURE (default 0.7)")
    parser.add_argument("--strategy", action="append", choices=STRATEGIES,
                        help="strategy to measure (repeatable; default: all three)")
    parser.add_argument("--stream", choices=("off", "on", "both"), default="both", help="default: both")
    args = parser.parse_args(argv)
    suite = Suite.load(args.suite)
    library = load_library(REPO / "modules")
    strategies = args.strategy or list(STRATEGIES)
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.stream]
    try:
        llama = LlamaServer.start()
    except LlamaUnavailable as exc:
        print(f"strategy_bench: {exc}", file=sys.stderr)
        return 2
    with llama:
        base_s = baseline_seconds(llama, args.max_tokens)
        print(f"llama-server {llama.root}, model {llama.installation.model.name}; suite {suite.name}: "
              f"{suite.turn_count} turns x {args.runs} run(s) per row; max_tokens {args.max_tokens}, "
              f"temperature {args.temperature}")
        print(f"baseline: {args.max_tokens} unconstrained tokens in {base_s:.1f} s "
              f"({args.max_tokens / base_s:.0f} tokens/s)", flush=True)
        rows = []
        started = time.perf_counter()
        for strategy in strategies:
            for stream in modes:
                rows.append(asyncio.run(play(llama, suite, library, strategy, stream, args.runs,
                                             args.max_tokens, args.temperature)))
        print(file=sys.stderr)
        print(format_rows(rows, base_s))
        print(f"\n{sum(len(r.records) for r in rows)} turns in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
