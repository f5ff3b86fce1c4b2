"""`tutor review`: the flagged turns an operator should look at, most urgent first.

    tutor review                 unreviewed safety flags, then turns that need review
    tutor review --all           reviewed flags too
    tutor review --json          one JSON object per line
    tutor review done ID [--note TEXT] [--by NAME]   mark a safety flag reviewed
    tutor review done --turn ID [--note TEXT]        mark a tutor turn reviewed
    tutor review show ID [--turn] [--json]           the conversation around it, read-only
"""

from __future__ import annotations

import argparse
import getpass
import json

from tutor.console.reviews import (
    ReviewItem,
    mark_reviewed,
    mark_turn_reviewed,
    review_list,
)
from tutor.console.transcript import review_transcript
from tutor.storage.store import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("review", help="list turns the safety screen flagged or that need review")
    p.add_argument("--all", action="store_true", help="include flags already reviewed")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--limit", type=int, default=100)
    p.set_defaults(func=run_list)
    actions = p.add_subparsers(dest="review_command", metavar="ACTION")
    done = actions.add_parser("done", help="mark a safety flag (or with --turn a tutor turn) reviewed")
    done.add_argument("id", type=int)
    done.add_argument("--turn", action="store_true", help="ID is a tutor turn (turn #ID in the list)")
    done.add_argument("--note", default=None)
    done.add_argument("--by", default=None, help="who reviewed it (default: your user name)")
    done.set_defaults(func=run_done)
    show = actions.add_parser("show", help="the conversation around a safety flag (or with --turn a tutor turn)")
    show.add_argument("id", type=int)
    show.add_argument("--turn", action="store_true", help="ID is a tutor turn (turn #ID in the list)")
    show.add_argument("--json", action="store_true", help="one JSON object per message")
    show.set_defaults(func=run_show)


def run_list(args: argparse.Namespace) -> int:
    store = Store()
    store.migrate()
    try:
        items = review_list(store, include_reviewed=args.all, limit=max(1, args.limit))
    finally:
        store.dispose()
    if args.json:
        for item in items:
            print(json.dumps(item.to_json_dict(), ensure_ascii=False))
        return 0
    if not items:
        print("Nothing to review.")
        return 0
    for item in items:
        print(_line(item))
    return 0


def run_done(args: argparse.Namespace) -> int:
    store = Store()
    store.migrate()
    try:
        mark = mark_turn_reviewed if args.turn else mark_reviewed
        found = mark(store, args.id, by=args.by or getpass.getuser(), note=args.note)
    finally:
        store.dispose()
    what = "tutor turn" if args.turn else "safety flag"
    if not found:
        print(f"no {what} with id {args.id} (see `tutor review`)")
        return 1
    print(f"{what} {args.id} marked reviewed")
    return 0


def run_show(args: argparse.Namespace) -> int:
    store = Store()
    store.migrate()
    try:
        lines = review_transcript(store, "turn" if args.turn else "risk", args.id)
    finally:
        store.dispose()
    what = "tutor turn" if args.turn else "safety flag"
    if lines is None:
        print(f"no {what} with id {args.id} (see `tutor review`)")
        return 1
    for line in lines:
        if args.json:
            print(json.dumps(line.__dict__, ensure_ascii=False))
            continue
        mark = ">>" if line.focus else "  "
        flags = f"  [{', '.join(line.flags)}]" if line.flags else ""
        print(f"{mark} #{line.seq} {line.role} {line.created_at}{flags}")
        print("\n".join("     " + part for part in line.text.splitlines()) or "     (empty)")
    return 0


def _line(item: ReviewItem) -> str:
    state = f"reviewed by {item.reviewed_by} {item.reviewed_at}" if item.reviewed_at else "OPEN"
    who = f"{item.learner_key}, {item.username}" if item.username else item.learner_key
    if item.kind == "turn":
        note = f"\n    note: {item.note}" if item.note else ""
        return (f"{item.created_at}  turn #{item.id}  {item.module_id}  conversation {item.conversation_id} "
                f"(learner {who})  needs review: {item.label}  {state}{note}")
    severity = f"{item.severity.upper()}  " if item.severity else ""
    head = (f"{item.created_at}  flag #{item.id}  {severity}{item.module_id}  {item.label} "
            f"({item.source} layer, confidence {item.confidence:.2f})  conversation {item.conversation_id} "
            f"(learner {who})  {state}")
    evidence = [
        f"    evidence{' in ' + e['field'] if e['field'] else ''} [{e['start']}:{e['end']}]: "
        f"{json.dumps(e['snippet'], ensure_ascii=False)}{'' if e['verified'] else '  (hash mismatch)'}"
        for e in item.evidence
    ] or ["    (no evidence: the model screen failed; the lesson went on under the offline screen)"]
    note = [f"    note: {item.note}"] if item.note else []
    return "\n".join([head, *evidence, *note])
