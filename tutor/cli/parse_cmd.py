"""`tutor parse [FILE]`: run the reply contract on raw model text and print the result.

`tutor parse --jsonl [FILE]` reads one `{"id", "raw", "finish_reason"?}` object per line
and writes one result per line, so a whole capture of model replies can be checked in one
go. A bad input line becomes an `invalid` output line with an "error"; the command itself
always exits 0 (the outcome is in the data, not in the exit status).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from tutor.contract import parse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "parse",
        help="parse a raw model reply (stdin when no FILE)",
        description="Run the reply contract on raw model text; print outcome, flags, response, errors.",
    )
    p.add_argument("file", nargs="?", help="file with the raw reply; stdin when omitted or '-'")
    p.add_argument(
        "--jsonl",
        action="store_true",
        help='input is JSON lines {"id", "raw", "finish_reason"?}; output is one result per line',
    )
    p.add_argument("--finish-reason", default=None, help="the provider's finish_reason (e.g. length)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _utf8(sys.stdin, sys.stdout)  # replies are multilingual whatever the locale says
    out = sys.stdout
    if args.jsonl:
        with _open(args.file) as lines:
            for result in parse_jsonl(lines):
                out.write(json.dumps(result, ensure_ascii=False) + "\n")
        out.flush()
        return 0
    with _open(args.file) as fh:
        raw = fh.read()
    out.write(json.dumps(parse(raw, finish_reason=args.finish_reason).to_json_dict(), ensure_ascii=False) + "\n")
    return 0


def parse_jsonl(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """One result per non-blank input line; bad lines yield an error record, never raise."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            yield _bad_line(None, f"line {number}: not JSON ({exc.msg})")
            continue
        if not isinstance(record, dict):
            yield _bad_line(None, f"line {number}: expected an object with id and raw")
            continue
        rid = record.get("id")
        raw = record.get("raw")
        if not isinstance(raw, str):
            yield _bad_line(rid, f"line {number}: missing string field 'raw'")
            continue
        finish = record.get("finish_reason")
        result = parse(raw, finish_reason=finish if isinstance(finish, str) else None)
        yield {"id": rid, **result.to_json_dict()}


def _utf8(*streams: Any) -> None:
    for stream in streams:
        try:
            stream.reconfigure(encoding="utf-8")
        except (AttributeError, ValueError, OSError):
            pass  # not a text stream we can change (already read from, or replaced)


def _bad_line(rid: Any, error: str) -> dict[str, Any]:
    return {"id": rid, "outcome": "invalid", "flags": ["invalid_json"], "response": None,
            "errors": [error], "error": error}


class _open:
    """The named file, or stdin for None / '-', as a context manager (stdin is not closed)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.fh = None

    def __enter__(self):
        if not self.path or self.path == "-":
            return sys.stdin
        self.fh = open(self.path, encoding="utf-8", newline="")  # noqa: SIM115 - closed in __exit__
        return self.fh

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            self.fh.close()
