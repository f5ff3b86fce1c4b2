"""`tutor` command line: one subcommand per file in this package, each with `register()`."""

from __future__ import annotations

import argparse
import sys

from tutor.cli import chat_cmd, db_cmd, eval_cmd, modules_cmd, parse_cmd, safety_cmd
from tutor.cli import learners_cmd, review_cmd
from tutor.cli import teach_cmd
from tutor.cli import users_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tutor", description="Tutor: structured chat tutoring")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (parse_cmd, modules_cmd, chat_cmd, db_cmd, eval_cmd, review_cmd, teach_cmd, safety_cmd, learners_cmd,
                    users_cmd):
        command.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # e.g. `tutor parse ... | head`
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
