"""`tutor eval --suite FILE [--strategy S ...|all] [--runs N] [--json | --json-file PATH]`: seed 001's table.

Plays every conversation of the suite against the configured backend (TUTOR_LLM_*; the
built-in tutor when none is set), once per strategy and run, through the real engine on a
throwaway database, then prints one column per strategy: JSON parse rate, schema
compliance, repaired and fallback rates, retries per turn, latency p50/p95, tokens per
turn, and cost when TUTOR_PRICE_*_PER_MTOK are set. `--json` prints one JSON document with
the rows and every turn's audit records instead; `--json-file PATH` writes that document to
PATH and prints the table as usual (one run gives a person the table and a script the data).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from tutor.llm.config import STRATEGIES, ConfigError, LLMSettings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure a backend and strategy on a suite of learner turns")
    p.add_argument("--suite", required=True, help="suite file, e.g. evals/understanding_anxiety.yaml")
    p.add_argument("--strategy", action="append", choices=[*STRATEGIES, "all"],
                   help="strategy to measure (repeatable; 'all' = prompt, json_object, json_schema); "
                        "default: TUTOR_LLM_STRATEGY")
    p.add_argument("--runs", type=int, default=1, help="times to play the suite per strategy (default 1)")
    p.add_argument("--json", action="store_true", help="print a JSON report instead of the table")
    p.add_argument("--json-file", metavar="PATH", help="also write the JSON report to PATH (the table is printed too)")
    p.add_argument("--modules-dir", help="where modules live (default: TUTOR_MODULES_DIR or ./modules)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tutor.content.modules import ModuleNotServable
    from tutor.turns.eval_suite import Suite, SuiteError

    if args.runs < 1:
        print("tutor eval: --runs must be at least 1", file=sys.stderr)
        return 2
    try:
        settings = LLMSettings.from_env()
        suite = Suite.load(args.suite)
        return asyncio.run(_eval(suite, settings, args))
    except (ConfigError, SuiteError, ModuleNotServable) as exc:
        print(f"tutor eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


async def _eval(suite, settings: LLMSettings, args: argparse.Namespace) -> int:
    from tutor.content.modules import load_library
    from tutor.turns.evals import (
        TurnRecord,
        format_table,
        report_json,
        run_suite,
        strategies_from_args,
        summarize,
    )

    json_file = None
    if args.json_file:  # opened before the run, so a wrong path costs no model calls
        try:
            json_file = open(args.json_file, "w", encoding="utf-8")  # noqa: SIM115 (written at the end)
        except OSError as exc:
            print(f"tutor eval: cannot write --json-file: {exc}", file=sys.stderr)
            return 2
    library = load_library(args.modules_dir) if args.modules_dir else load_library()
    strategies = strategies_from_args(args.strategy, settings.strategy)
    total = suite.turn_count * args.runs * len(strategies)
    done = 0

    def progress(record: TurnRecord) -> None:  # on stderr, so stdout stays clean for --json
        nonlocal done
        done += 1
        mark = "!" if record.error or record.fallback else "."
        end = "\n" if done == total or done % 60 == 0 else ""
        print(mark, end=end, file=sys.stderr, flush=True)

    print(f"eval {suite.name}: {settings.describe()}; strategies {', '.join(strategies)}; "
          f"{suite.turn_count} turns x {args.runs} run(s)", file=sys.stderr)
    records = await run_suite(suite, settings, library, strategies=strategies, runs=args.runs, on_turn=progress)
    rows = summarize(records, settings)
    if args.json or json_file:
        document = json.dumps(report_json(suite, settings, rows, records, args.runs), ensure_ascii=False)
        if json_file:
            json_file.write(document)
            json_file.close()
        if args.json:
            print(document)
            return 0
    print(f"Suite {suite.name} (module {suite.module_id}), {settings.provider} model {settings.model}, "
          f"{args.runs} run(s)\n")
    print(format_table(rows))
    if any("tokens_estimated" in a.flags for r in records for a in r.attempts):
        print("\nTokens are estimated (4 characters per token) where the backend reported no usage.")
    refused = [r for r in records if r.error]
    for r in refused[:10]:
        print(f"\nrefused: {r.strategy} {r.conversation} turn {r.index}: {r.error}")
    return 0
