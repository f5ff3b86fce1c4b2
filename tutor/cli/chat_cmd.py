"""`tutor chat --module ID [--json] [--learner NAME]`: a module conversation in the terminal.

For authors: try a module against the configured backend (TUTOR_LLM_*; the built-in tutor
when none is set) and database (TUTOR_DATABASE_URL), exactly as the web app runs it.

The tutor speaks first. Then each stdin line is one learner turn:

- plain text: ``How does breathing help?``
- a JSON object: ``{"text": "..."}`` or ``{"form": "FORM_ID", "values": {"field": "value"}}``
- (readable mode only) a number picks that suggestion of the last reply.

Blank lines are skipped. ``--json`` prints exactly one JSON line per turn on stdout:
``{"turn", "outcome", "flags", "response", "progress"}`` (``raw`` too when the reply could
not be read as JSON), or ``{"turn", "error"}`` when the input was refused; refused input is
not stored and the conversation goes on. Turn 0 is the tutor's opening; turn N answers the
Nth input line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, TextIO

from tutor.content.modules import ModuleNotServable, add_semantic, load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import ConfigError, LLMSettings
from tutor.render.plain import content_lines

BAR_WIDTH = 10


class LineError(ValueError):
    """An input line that is not a learner turn."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="talk to the tutor in the terminal (one learner turn per line)")
    p.add_argument("--module", required=True, help="module id (see `tutor modules list`)")
    p.add_argument("--json", action="store_true", help="print one JSON line per turn")
    p.add_argument("--learner", default="author", help="learner name; the conversation starts over")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tutor.storage.dbfaults import DatabaseUnavailable, startup_message

    try:
        return asyncio.run(_chat(args.module, args.learner, args.json, sys.stdin, sys.stdout))
    except (ConfigError, ModuleNotServable) as exc:
        print(f"tutor chat: {exc}", file=sys.stderr)
        return 2
    except DatabaseUnavailable as fault:
        print(f"tutor chat: {startup_message(fault)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


async def _chat(module_id: str, learner: str, as_json: bool, stdin: TextIO, out: TextIO) -> int:
    # Imported here: the database and backends are only needed by this command.
    from tutor.llm.factory import make_provider
    from tutor.risk.turn import SafetySettings
    from tutor.storage.dbfaults import open_database
    from tutor.turns.engine import Engine, InputError

    settings = LLMSettings.from_env()
    # A broken module is refused before the database is touched and before the safety
    # screen's semantic layer is trained for these modules.
    library = load_library(semantic=False)
    library.get(module_id)
    add_semantic(library)
    store = open_database()  # DatabaseUnavailable names TUTOR_DATABASE_URL
    provider = make_provider(settings)
    engine = Engine(store, provider, library, settings, SafetySettings.from_env())
    try:
        view = await engine.open(f"cli:{learner}", module_id, new=True)
        last = view.messages[-1]
        _emit(out, as_json, 0, last, view.progress)
        turn = 0
        interactive = stdin.isatty() and not as_json
        while True:
            if interactive:
                out.write("> ")
                out.flush()
            line = stdin.readline()
            if not line:
                return 0
            if not line.strip():
                continue
            turn += 1
            try:
                learner_input = parse_line(line, None if as_json else _suggestions(last.response))
                result = await engine.send(view.id, learner_input)
            except (LineError, InputError) as exc:
                _emit_error(out, as_json, turn, getattr(exc, "message", None) or str(exc))
                continue
            last = result.reply
            _emit(out, as_json, turn, last, result.progress, result.risks)
    finally:
        await provider.aclose()
        store.dispose()


def parse_line(line: str, suggestions: list[str] | None = None) -> LearnerInput:
    """One stdin line -> the learner's input (see the module docstring)."""
    text = line.strip()
    if suggestions and text.isdigit() and 1 <= int(text) <= len(suggestions):
        return LearnerInput(text=suggestions[int(text) - 1])
    if not text.startswith("{"):
        return LearnerInput(text=text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return LearnerInput(text=text)  # prose that happens to start with a brace
    if not isinstance(data, dict):
        return LearnerInput(text=text)
    if "form" in data:
        values = data.get("values", {})
        if not isinstance(data["form"], str) or not isinstance(values, dict):
            raise LineError('a form line reads {"form": "FORM_ID", "values": {"field_id": value}}')
        return LearnerInput(form_id=data["form"], answers=values)
    if isinstance(data.get("text"), str):
        return LearnerInput(text=data["text"])
    raise LineError('a JSON line needs "text" or "form" (e.g. {"text": "hello"})')


def _suggestions(response: dict[str, Any] | None) -> list[str]:
    next_step = (response or {}).get("content", {}).get("next_step") or {}
    return list(next_step.get("suggestions") or [])


def _progress_dict(progress: Any) -> dict[str, Any]:
    return {"percentage": progress.percentage, "covered": list(progress.covered), "milestone": progress.milestone,
            "mastered": list(progress.mastered), "complete": progress.complete, "milestones": list(progress.milestones)}


def _emit(out: TextIO, as_json: bool, turn: int, reply: Any, progress: Any, risks: list | None = None) -> None:
    if as_json:
        record = {
            "turn": turn,
            "outcome": reply.outcome,
            "flags": list(reply.flags),
            "response": reply.response,
            "progress": _progress_dict(progress),
        }
        if reply.response is None:
            record["raw"] = reply.raw
        if risks:
            record["risk"] = risks  # label, confidence, source, evidence offsets + SHA-256
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        out.write(render_text(reply.response, reply.raw, reply.outcome, progress) + "\n")
    out.flush()


def _emit_error(out: TextIO, as_json: bool, turn: int, message: str) -> None:
    if as_json:
        out.write(json.dumps({"turn": turn, "error": message}, ensure_ascii=False) + "\n")
    else:
        out.write(f"(not sent: {message})\n")
    out.flush()


# --- readable rendering -------------------------------------------------------------------


def render_text(response: dict[str, Any] | None, raw: str | None, outcome: str | None, progress: Any) -> str:
    lines = ["", "── tutor " + "─" * 40]
    if response is None:
        lines += ["(The reply could not be read as a structured lesson; here is the raw text.)", raw or ""]
    else:
        content = response.get("content")
        lines += content_lines(content if isinstance(content, dict) else {}, _render_form)
    if outcome and outcome != "valid":
        lines.append(f"(reply {outcome})")
    lines.append(progress_bar(progress.percentage, len(progress.covered), progress.total, progress.milestone))
    return "\n".join(lines)


def _render_form(form: dict[str, Any]) -> list[str]:
    optional = " (optional)" if form.get("optional") is not False else ""
    lines = [f"Form {form['id']}: {form.get('title') or ''}{optional}".rstrip()]
    if form.get("description"):
        lines.append(f"  {form['description']}")
    example: dict[str, Any] = {}
    for field in form.get("fields", []):
        required = ", required" if field.get("required") else ""
        lines.append(f"  - {field['id']} ({field['type']}{required}): {field['label']}")
        options = field.get("options") or []
        for option in options:
            lines.append(f"      {option['value']} = {option['label']}")
        if options:
            example[field["id"]] = [options[0]["value"]] if field["type"] == "checkbox" else options[0]["value"]
    lines.append("  answer with: " + json.dumps({"form": form["id"], "values": example}, ensure_ascii=False))
    lines.append("")
    return lines


def progress_bar(percentage: float, covered: int, total: int, milestone: str | None = None) -> str:
    filled = min(BAR_WIDTH, int(percentage * BAR_WIDTH // 100))
    bar = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {percentage:g}% ({covered}/{total} topics)"
    return bar + (f"  milestone reached: {milestone}" if milestone else "")
