"""`tutor learners`: a learner's data on request.

    tutor learners delete KEY_OR_USERNAME [--yes]   delete the learner and everything of theirs

Without --yes the command shows what it found and asks for the learner's name (or key)
to be typed again; anything else deletes nothing.
"""

from __future__ import annotations

import argparse
import sys

from tutor.console.learner_data import delete_learner, find_learner
from tutor.storage.store import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("learners", help="a learner's data: delete it on request")
    actions = p.add_subparsers(dest="learners_command", metavar="ACTION", required=True)
    delete = actions.add_parser("delete", help="delete one learner and all their data (cannot be undone)")
    delete.add_argument("who", metavar="KEY_OR_USERNAME")
    delete.add_argument("--yes", action="store_true", help="do not ask to type the name again")
    delete.set_defaults(func=run_delete)


def run_delete(args: argparse.Namespace) -> int:
    store = Store()
    store.migrate()
    try:
        ref = find_learner(store, args.who)
        if ref is None:
            print(f"no learner with the username or key {args.who!r}")
            return 1
        name = ref.username or ref.key
        print(f"learner {ref.key}" + (f" (account {ref.username})" if ref.username else "")
              + f": {ref.conversations} conversation(s)")
        if not args.yes:
            print(f"This deletes the learner and all their data and cannot be undone. Type {name!r} to confirm:",
                  flush=True)
            typed = sys.stdin.readline().strip()
            if typed != name and not (ref.username and typed.lower() == ref.username):
                print("The name did not match: nothing was deleted.")
                return 1
        deleted = delete_learner(store, ref.id)
    finally:
        store.dispose()
    if deleted is None:
        print("The learner was already gone: nothing was deleted.")
        return 1
    parts = ", ".join(f"{n} {table}" for table, n in deleted.rows.items() if n)
    print(f"deleted learner {deleted.learner_key}: {parts}")
    return 0
