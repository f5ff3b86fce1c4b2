"""`tutor modules list|check|schema`: what authors run while writing a module."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tutor.content.modules import (
    check_file,
    load_library,
    module_files,
    modules_dir,
    schema_json,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("modules", help="list, check or describe learning modules")
    p.add_argument("--dir", type=Path, help="modules directory (default: TUTOR_MODULES_DIR or ./modules)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    actions.add_parser("list", help="print the id of every servable module, one per line").set_defaults(func=run_list)

    check = actions.add_parser("check", help="check module files; exit 1 with file:line: messages on problems")
    check.add_argument("files", nargs="*", type=Path, help="module files (default: every module in the directory)")
    check.set_defaults(func=run_check)

    schema = actions.add_parser("schema", help="write the module format's JSON Schema")
    schema.add_argument("--output", type=Path, help="where to write it (default: <modules dir>/module.schema.json)")
    schema.add_argument("--stdout", action="store_true", help="print it instead of writing a file")
    schema.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    schema.set_defaults(func=run_schema)


def run_list(args: argparse.Namespace) -> int:
    library = load_library(args.dir, semantic=False)
    for module_id in library.modules:
        print(module_id)
    for source in library.problems:
        print(f"{source}: not servable; run `tutor modules check` to see why", file=sys.stderr)
    return 0


def run_check(args: argparse.Namespace) -> int:
    files = args.files or module_files(args.dir or modules_dir())
    if not files:
        print(f"no module files found in {args.dir or modules_dir()}", file=sys.stderr)
        return 1
    failed = 0
    for path in files:
        result = check_file(path, str(path) if args.files else None)
        for problem in result.problems:
            print(problem)
        failed += not result.ok
    if failed:
        print(f"{failed} of {len(files)} module file(s) failed the check", file=sys.stderr)
        return 1
    print(f"{len(files)} module file(s) ok", file=sys.stderr)
    return 0


def run_schema(args: argparse.Namespace) -> int:
    text = schema_json()
    if args.stdout:
        sys.stdout.write(text)
        return 0
    target = args.output or (args.dir or modules_dir()) / "module.schema.json"
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            print(f"{target} is out of date; run `tutor modules schema`", file=sys.stderr)
            return 1
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
    return 0
