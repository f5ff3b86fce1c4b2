"""`tutor safety check [FILE]` and `tutor safety eval [--set FILE] [--json]`: what authors run
while writing the learner-safety configuration (modules/safety/default.yaml).

`check` validates a safety file and prints ``file:line: message`` problems (exit 1 on any).
`eval` screens labelled sets — by default the project's own (evals/safety/messages.yaml),
the development sets it is tuned on (dev.yaml to dev4.yaml) and the held-out sets never
tuned on (holdout.yaml, holdout2.yaml, holdout3.yaml) — and prints for each, per label, language and
kind, recall on crisis messages and the false-positive rate on ordinary ones, with the
screen's CPU per message measured in this run; exit 1 when a set is below the goals
(recall >= 90%, every plan, preparation, means, timing, farewell and attempt caught, false
positives <= 3%), 2 when a file cannot be used.

`prepare` trains the semantic layer now (its exemplar vectors are computed once and kept
on disk): scripts/run.sh runs it, so the first start of the app does not wait for it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("safety", help="check the learner-safety configuration or measure it on a labelled set")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    check = actions.add_parser("check", help="check a safety file; exit 1 with file:line: messages on problems")
    check.add_argument("file", nargs="?", type=Path,
                       help="safety file (default: <modules dir>/safety/default.yaml)")
    check.set_defaults(func=run_check)

    evaluate = actions.add_parser("eval", help="recall and false positives of the offline screen on labelled sets")
    evaluate.add_argument("--set", dest="set_paths", type=Path, action="append",
                          help="labelled set, repeatable (default: evals/safety/messages.yaml, dev.yaml, "
                               "dev2.yaml, dev3.yaml, dev4.yaml, holdout.yaml, holdout2.yaml, holdout3.yaml); "
                               "a .json file is a public list rated 0-8 (user_query, Risk_level): "
                               "from 3 a crisis, 0-1 ordinary")
    evaluate.add_argument("--layers", choices=("both", "phrases", "semantic"), default="both",
                          help="which offline layers screen (default both)")
    evaluate.add_argument("--config", type=Path, help="safety file (default: <modules dir>/safety/default.yaml)")
    evaluate.add_argument("--rounds", type=int, default=1, help="times to screen each message for timing (default 1)")
    evaluate.add_argument("--misses", action="store_true", help="list each missed and falsely flagged message")
    evaluate.add_argument("--json", action="store_true", help="print a JSON report instead of the table")
    evaluate.set_defaults(func=run_eval)

    prepare = actions.add_parser("prepare", help="train the semantic layer now (vectors kept on disk)")
    prepare.set_defaults(func=run_prepare)


def run_check(args: argparse.Namespace) -> int:
    from tutor.risk.config import check_safety_text, default_safety_path

    path = args.file or default_safety_path()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{path}:1: cannot read file: {exc}")
        return 1
    config, problems = check_safety_text(text, str(path))
    for problem in problems:
        print(problem)
    if config is None:
        print(f"{path}: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    from tutor.risk.semantic import BankError, load_bank

    try:
        bank = load_bank(path.parent, list(config.labels))
    except BankError as exc:
        print(exc)
        print(f"{path.parent}: the exemplar bank has problems", file=sys.stderr)
        return 1
    rules = config.matcher().rule_count
    print(f"{path}: ok ({len(config.labels)} labels, {rules} phrases and patterns, "
          f"languages {', '.join(config.languages)}; {len(bank)} exemplars for the semantic layer)", file=sys.stderr)
    return 0


def _screen_for(layers: str, config):
    from tutor.content.modules import load_library
    from tutor.risk.offline import listed, offline_screen, read_by_meaning

    if layers == "phrases":  # the layer that needs no model: listed phrases and emoji alone
        return lambda text: listed(text, config)[0]
    semantic = load_library().semantic  # trained as the app trains it: the bank and the modules' words
    if semantic is None:
        raise SystemExit("tutor safety eval: the semantic layer is not available (see the error above)")
    if layers == "semantic":
        return lambda text: read_by_meaning(text, semantic).flags
    return lambda text: offline_screen(text, config, semantic)


def run_eval(args: argparse.Namespace) -> int:
    from tutor.risk.config import SafetyConfigError, load_safety
    from tutor.risk.evaluate import (
        EVAL_SETS,
        LabelledSetError,
        evaluate,
        format_report,
        load_labelled_set,
        report_json,
    )

    paths = args.set_paths or list(EVAL_SETS)
    try:
        config = load_safety(args.config)
        sets = [(path, load_labelled_set(path, set(config.labels))) for path in paths]
    except (SafetyConfigError, LabelledSetError) as exc:
        print(f"tutor safety eval: {exc}", file=sys.stderr)
        return 2
    empty = [str(path) for path, messages in sets if not messages]
    if empty:
        print(f"tutor safety eval: no messages in {', '.join(empty)}", file=sys.stderr)
        return 2
    screen_with = _screen_for(args.layers, config)
    reports = [evaluate(messages, config, rounds=max(1, args.rounds), screen_with=screen_with,
                        name=f"{path.name} ({args.layers})") for path, messages in sets]
    failed = False
    if args.json:
        print(json.dumps([report_json(r) for r in reports], ensure_ascii=False, indent=2))
    for report in reports:
        failures = report.failures()
        failed = failed or bool(failures)
        if not args.json:
            print(format_report(report, show_misses=args.misses))
            for failure in failures:
                print(f"BELOW GOAL: {failure}")
            print()
    return 1 if failed else 0


def run_prepare(args: argparse.Namespace) -> int:
    import time

    from tutor.content.modules import load_library

    started = time.perf_counter()
    return 0 if screen_ready(load_library(), started, "tutor safety prepare") else 1


def screen_ready(library, started: float, command: str) -> bool:
    """Say on stderr whether the library's safety screen has its semantic layer (loading it
    trained the layer, or read it from disk, since `started`)."""
    import time

    semantic = library.semantic
    if semantic is None:
        print(f"{command}: no semantic layer (see the message above; `tutor safety check` "
              "lists an exemplar bank's problems)", file=sys.stderr)
        return False
    from tutor.understand import embedder

    print(f"safety screen ready: {len(semantic.classifier.classes)} classes, bank {semantic.version}, "
          f"model {embedder().id}, {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return True
