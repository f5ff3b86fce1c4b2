"""`tutor parse [FILE]`: run the reply contract on raw model text and print the result."""

from __future__ import annotations

import argparse
import json
import sys

from tutor.contract import parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("parse", help="parse a raw model reply (stdin when no FILE)")
    p.add_argument("file", nargs="?", help="file with the raw reply; stdin when omitted")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raw = _read(args.file)
    print(json.dumps(parse(raw).to_json_dict(), ensure_ascii=False))
    return 0


def _read(path: str | None) -> str:
    if not path or path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()
