"""`tutor safety check [FILE]` and `tutor safety eval [--set FILE] [--json]`: what authors run
while writing the learner-safety configuration (modules/safety/default.yaml).

`check` validates a safety file and prints ``file:line: message`` problems (exit 1 on any).
`eval` screens the labelled set (evals/safety/messages.yaml) and prints, per label and
overall, recall on crisis messages and the false-positive rate on ordinary ones, with the
screen's mean and p99 time per message measured in this run; exit 1 below the goals
(recall >= 95%, false positives <= 3%), 2 when a file cannot be used.
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

    evaluate = actions.add_parser("eval", help="recall and false positives of the offline screen on a labelled set")
    evaluate.add_argument("--set", dest="set_path", type=Path, help="labelled set (default: evals/safety/messages.yaml)")
    evaluate.add_argument("--config", type=Path, help="safety file (default: <modules dir>/safety/default.yaml)")
    evaluate.add_argument("--rounds", type=int, default=5, help="times to screen each message for timing (default 5)")
    evaluate.add_argument("--json", action="store_true", help="print a JSON report instead of the table")
    evaluate.set_defaults(func=run_eval)


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
    rules = config.matcher().rule_count
    print(f"{path}: ok ({len(config.labels)} labels, {rules} phrases and patterns, "
          f"languages {', '.join(config.languages)})", file=sys.stderr)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from tutor.risk.config import SafetyConfigError, load_safety
    from tutor.risk.evaluate import DEFAULT_SET, LabelledSetError, evaluate, format_report, load_labelled_set, report_json

    try:
        config = load_safety(args.config)
        messages = load_labelled_set(args.set_path or DEFAULT_SET, set(config.labels))
    except (SafetyConfigError, LabelledSetError) as exc:
        print(f"tutor safety eval: {exc}", file=sys.stderr)
        return 2
    if not messages:
        print("tutor safety eval: the labelled set has no messages", file=sys.stderr)
        return 2
    report = evaluate(messages, config, rounds=max(1, args.rounds))
    failures = report.failures()
    if args.json:
        print(json.dumps(report_json(report), ensure_ascii=False, indent=2))
    else:
        print(format_report(report))
        for failure in failures:
            print(f"BELOW GOAL: {failure}")
    return 1 if failures else 0
