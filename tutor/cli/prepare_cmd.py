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
    from tutor.cli.safety_cmd import screen_ready
    from tutor.cli.teach_cmd import teaching_ready
    from tutor.content.modules import load_library

    started = time.perf_counter()
    library = load_library()
    if not screen_ready(library, started, "tutor prepare"):
        return 1
    return 0 if teaching_ready(list(library.modules.values()), time.perf_counter(), "tutor prepare") else 1
