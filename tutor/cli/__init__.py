"""`tutor` command line: one subcommand per file in this package, each with `register()`."""

from __future__ import annotations

import argparse
import sys

from tutor.cli import chat_cmd, db_cmd, eval_cmd, modules_cmd, parse_cmd, safety_cmd
from tutor.cli import learners_cmd, prepare_cmd, review_cmd
from tutor.cli import teach_cmd
from tutor.cli import users_cmd


class Parser(argparse.ArgumentParser):
    """No abbreviated options: `--module` is an error, not `--modules-dir`. Subcommands'
    parsers are made of the same class (argparse gives them their parent's type)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="tutor", description="Tutor: structured chat tutoring")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (parse_cmd, modules_cmd, chat_cmd, db_cmd, prepare_cmd, eval_cmd, review_cmd, teach_cmd, safety_cmd,
                    learners_cmd, users_cmd):
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
