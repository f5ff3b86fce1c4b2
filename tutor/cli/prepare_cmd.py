"""`tutor prepare`: everything serving needs, in one process, before the app starts.

It migrates the database (`tutor db migrate`), trains the safety screen's semantic layer
(`tutor safety prepare`) and builds what reading messages by meaning needs (`tutor teach
prepare`), loading the modules and the embedding model once for both. scripts/run.sh runs
it, so the app's first start does not wait minutes for the semantic layer to train; on a
machine where that is already on disk it takes a few seconds. Exits 1 with the first step's
message when a step fails.
"""

from __future__ import annotations

import argparse
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prepare", help="migrate the database and build the semantic layer now (before serving)")
    p.set_defaults(func=run_prepare)


def run_prepare(args: argparse.Namespace) -> int:
    from tutor.cli.db_cmd import run_migrate

    if run_migrate(args):
        return 1
    sys.stdout.flush()  # its line before the next steps' lines on stderr
    from tutor.content.modules import load_library
    from tutor.teach.understanding import warm

    started = time.perf_counter()
    library = load_library()
    semantic = library.semantic
    if semantic is None:
        print("tutor prepare: the safety screen has no semantic layer (see the message above; "
              "`tutor safety check` lists an exemplar bank's problems)", file=sys.stderr)
        return 1
    print(f"safety screen ready: {len(semantic.classifier.classes)} classes, bank {semantic.version}, "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    started = time.perf_counter()
    modules = list(library.modules.values())
    if not warm(modules):
        print("tutor prepare: the semantic layer is not installed (see the message above)", file=sys.stderr)
        return 1
    print(f"teaching ready: {len(modules)} module(s), {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0
