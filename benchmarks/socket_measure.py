"""What benchmarks/socket_bench.py reads besides the socket: the app's processes (CPU and
memory, with psutil), the database (lost and duplicated turns) and the model's own time to
the first text a page can show."""

from __future__ import annotations

import dataclasses
from typing import Any

import psutil

from benchmarks.loopback_model import tutor_reply


class AppProcesses:
    """The app's processes, the server and every worker (found again at each reading: a
    worker may be replaced, and the CPU of one that ended is then not counted): CPU seconds
    so far, resident memory now."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)

    def processes(self) -> list[psutil.Process]:
        return [self.root, *self.root.children(recursive=True)]

    def cpu(self) -> float:
        total = 0.0
        for p in self.processes():
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:  # ended meanwhile
                pass
        return total

    def rss_mb(self) -> float:
        total = 0
        for p in self.processes():
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20


def shows_text(name: str, value: Any) -> bool:
    """Whether a delta's variable puts reply text on the chat page: a complete block in a
    stream slot, or a growing block's tail."""
    if name.startswith("stream_block_"):
        return isinstance(value, dict) and bool(value.get("html"))
    return name.startswith("stream_tail_") and name[12:].isdigit() and bool(value)


def model_first_text(delay: float, chunks: int) -> float:
    """When the loopback model's stream first holds text the page would show, read as the
    app's own preview reads it (tutor.turns.live.StreamFeed)."""
    from tutor.turns.live import StreamFeed

    reply = tutor_reply()
    size = -(-len(reply) // max(1, chunks))
    pieces = range(size, len(reply) + size, size)
    for i, end in enumerate(pieces, 1):
        updates = StreamFeed().push(reply[:end], force=True)
        plain = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in updates.items()}
        if any(shows_text(k, v) for k, v in plain.items()):
            return delay * i / len(pieces)
    return delay


def check_database(db_url: str, sent: list[str], tag: str) -> dict[str, int]:
    """Lost and duplicated turns, from the database: every message a learner sent must be
    stored once and answered once; every conversation opened has one opening turn. `sent`:
    the client ids of the messages sent (each `tag-...`)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as c:
            learner = c.execute(sqlalchemy.text(
                "select client_id, conversation_id, seq from message"
                " where role = 'learner' and client_id like :t"),
                {"t": f"{tag}-%"}).all()
            conversations = sorted({row[1] for row in learner})
            tutor = c.execute(sqlalchemy.text(
                "select conversation_id, reply_to_seq from message where role = 'tutor' and conversation_id in "
                "(select conversation_id from message where client_id like :t)"), {"t": f"{tag}-%"}).all()
    finally:
        engine.dispose()
    stored: dict[str, list[tuple[int, int]]] = {}
    for client_id, conversation, seq in learner:
        stored.setdefault(client_id, []).append((conversation, seq))
    answers: dict[tuple[int, int | None], int] = {}
    for conversation, reply_to in tutor:
        answers[(conversation, reply_to)] = answers.get((conversation, reply_to), 0) + 1
    out = {"sent": len(sent), "not_stored": sum(1 for c in sent if c not in stored),
           "stored_twice": sum(1 for rows in stored.values() if len(rows) > 1),
           "not_answered": sum(1 for rows in stored.values() for key in rows[:1] if key not in answers),
           "answered_twice": sum(1 for rows in stored.values() for key in rows[:1] if answers.get(key, 0) > 1),
           "openings_missing": sum(1 for c in conversations if (c, None) not in answers),
           "openings_twice": sum(1 for c in conversations if answers.get((c, None), 0) > 1)}
    out["lost"] = out["not_stored"] + out["not_answered"] + out["openings_missing"]
    out["duplicated"] = out["stored_twice"] + out["answered_twice"] + out["openings_twice"]
    return out
