"""`tutor chat`: the author's terminal conversation, run as a user runs it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tutor.cli.chat_cmd import LineError, parse_line, progress_bar, render_text
from tutor.content.modules import REPO_ROOT, load_library
from tutor.llm.base import LearnerInput

SAMPLE = load_library(REPO_ROOT / "modules").get("understanding_anxiety")
BROKEN = Path(__file__).parent / "fixtures" / "modules" / "broken"


def _chat(
    tmp_path: Path, lines: list[str], *args: str, modules: Path | None = None, **extra: str
) -> subprocess.CompletedProcess:
    env = {
        **extra,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO_ROOT),
        "TUTOR_DATABASE_URL": f"sqlite:///{tmp_path / 'chat.db'}",
        "TUTOR_DATA_DIR": str(tmp_path),
    }
    if modules is not None:
        env["TUTOR_MODULES_DIR"] = str(modules)
    return subprocess.run(
        [sys.executable, "-m", "tutor.cli", "chat", *args],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )


REFLECTION = "anxiety_levels_check"  # the form of the fifth topic, "Body, mind and behaviour"


def _walk_lines() -> tuple[list[str], int]:
    """Lines that walk the sample module to completion with the built-in tutor, answering
    every check with its example answer (by its form, or in words right after it), and
    the index of the reflection form's line, where a few refused lines are tried too.

    The tutor's rhythm: a topic is taught; "Continue" brings its check (a topic without
    checks: the next topic); a mastered answer is followed by the next topic. Answering the
    reflection form ("All three about equally": an option that leads nowhere special)
    takes the place of that topic's "Continue"."""
    lines: list[str] = []
    at = -1
    for n, topic in enumerate(SAMPLE.topics):
        if topic.form is not None and topic.form.id == REFLECTION:
            at = len(lines)
            submit = json.dumps({"form": REFLECTION, "values": {"primary_level": "all"}})
            lines += [submit, submit, json.dumps({"text": ""}), "", '{"colour": "blue"}']
        else:
            lines.append("Continue")
        for check in topic.checks:
            if n % 2:
                lines.append(json.dumps({"form": f"check-{check.id}", "values": {"answer": check.example_answer}}))
            else:
                lines.append(check.example_answer)
    return lines, at


def test_json_chat_walks_the_sample_module_to_completion_answering_every_check(tmp_path):
    lines, k = _walk_lines()
    result = _chat(tmp_path, lines, "--module", "understanding_anxiety", "--json", "--learner", "ana")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["turn"] for r in records] == list(range(len(lines)))  # one line per turn, the blank skipped

    errors = {r["turn"]: r["error"] for r in records if "error" in r}
    assert list(errors) == [k + 2, k + 3, k + 4]
    assert "not open" in errors[k + 2] and "Type a message" in errors[k + 3] and '"text"' in errors[k + 4]

    replies = [r for r in records if "error" not in r]
    assert all(set(r) == {"turn", "outcome", "flags", "response", "progress"} for r in replies)
    assert all(r["outcome"] == "valid" and r["flags"] == [] for r in replies)
    for r in replies:  # the reply shows the server's progress
        assert r["response"]["meta"]["progress"]["percentage"] == r["progress"]["percentage"]
        assert r["response"]["meta"]["progress"]["covered_topics"] == r["progress"]["covered"]
    ack = records[k + 1]["response"]["content"]["text_blocks"]
    assert ack[0]["content"].startswith("Thank you")  # the answers themselves are not repeated
    assert not any("All three about equally" in b["content"] for b in ack)
    # After the reflection, the topic's check comes without a "Continue".
    assert [f["id"] for f in records[k + 1]["response"]["content"]["forms"]] == ["check-three_levels_linked"]

    scored = [r for r in replies if r["response"]["content"]["text_blocks"][0]["content"].startswith("**You scored")]
    assert len(scored) == 24  # every check, each judged once, kindly and mastered
    assert all(r["response"]["content"]["text_blocks"][0]["type"] == "success" for r in scored)
    assert [len(r["progress"]["mastered"]) for r in scored] == list(range(1, 25))

    assert [r["progress"]["milestone"] for r in replies if r["progress"]["milestone"]] == ["25%", "50%", "75%", "100%"]
    final = replies[-1]
    assert final["progress"]["percentage"] == 100 and final["progress"]["complete"]
    assert sorted(final["progress"]["covered"]) == sorted(SAMPLE.topic_ids)
    assert final["response"]["meta"]["response_type"] == "summary"

    with sqlite3.connect(tmp_path / "chat.db") as db:
        stored = db.execute("SELECT text FROM message WHERE role = 'learner' ORDER BY seq").fetchall()
        judged = db.execute("SELECT score, source, reply_id IS NOT NULL FROM checkattempt").fetchall()
    assert len(stored) == len(lines) - 4  # refused and blank lines were not stored
    assert all(text.strip() for (text,) in stored)
    assert len(judged) == 24 and all(row == (10, "builtin", 1) for row in judged)


def test_tell_me_more_to_every_turn_never_completes_the_module(tmp_path):
    lines = ["Tell me more about this please"] * 60
    result = _chat(tmp_path, lines, "--module", "understanding_anxiety", "--json")
    assert result.returncode == 0, result.stderr
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    last = replies[-1]["progress"]
    # "Tell me more" tells more about the topic the learner is on; it never moves the lesson
    # on by itself, and asking for more is not evidence that anything was learnt.
    assert last["covered"] == ["anxiety_defined"] and last["mastered"] == [] and not last["complete"]
    said = [b["content"] for r in replies[1:] for b in r["response"]["content"]["text_blocks"]]
    assert any(s.startswith("Here is more on that") for s in said)
    assert any(s.startswith("That is all this module says about it") for s in said)


def test_readable_chat_renders_blocks_forms_suggestions_and_progress(tmp_path):
    lines = ["1", "Tell me about Body, mind and behaviour", "Continue", '{"text": ""}']
    result = _chat(tmp_path, lines, "--module", "understanding_anxiety")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("── tutor") == 4
    assert "# Understanding anxiety" in out and "## What anxiety is" in out
    assert "  1. " in out and "  2. " in out
    assert f"Form {REFLECTION}: " in out and "(optional)" in out and '"form": "' + REFLECTION in out
    assert "Form check-three_levels_linked: Check your understanding (optional)" in out
    n = len(SAMPLE.topic_ids)
    assert progress_bar(2.0, 1, n) in out  # "[----------] 2% (1/25 topics)": seen, not yet mastered
    assert "(not sent: Type a message first.)" in out
    assert out.count("── tutor") == out.count(f"/{n} topics)")
    # "1" sent the first suggestion of the opening turn.
    with sqlite3.connect(tmp_path / "chat.db") as db:
        (first,) = db.execute("SELECT text FROM message WHERE role = 'learner' ORDER BY seq").fetchone()
    assert first == SAMPLE.topics[0].suggestions[0]


def test_a_broken_module_is_refused_with_the_check_message(tmp_path):
    modules = tmp_path / "modules"
    modules.mkdir()
    shutil.copy(BROKEN / "duplicate_topic.yaml", modules / "duplicate_topic.yaml")
    # An empty cache: a semantic layer made for these modules would be trained into it first
    # (minutes on a new machine) before the author heard what is wrong.
    cache = tmp_path / "cache"
    result = _chat(tmp_path, [], "--module", "duplicate_topic", modules=modules, TUTOR_CACHE_DIR=str(cache))
    assert result.returncode == 2
    assert "duplicate_topic.yaml:18: duplicate topic id 'breathing'" in result.stderr
    unknown = _chat(tmp_path, [], "--module", "nope", modules=modules, TUTOR_CACHE_DIR=str(cache))
    assert unknown.returncode == 2 and "unknown module 'nope'" in unknown.stderr
    assert not (tmp_path / "chat.db").exists()  # refused before touching the database
    assert not cache.exists() or not any(cache.rglob("*"))  # and before reading anything by meaning


def test_a_bad_backend_setting_is_refused_with_the_variable_to_fix(tmp_path):
    result = _chat(tmp_path, [], "--module", "understanding_anxiety", TUTOR_LLM_PROVIDER="bogus")
    assert result.returncode == 2
    assert "TUTOR_LLM_PROVIDER" in result.stderr


# --- pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        ("hello there\n", LearnerInput(text="hello there")),
        ('{"text": "hi {there}"}', LearnerInput(text="hi {there}")),
        ('{"form": "f", "values": {"a": ["x"]}}', LearnerInput(form_id="f", answers={"a": ["x"]})),
        ('{"form": "f"}', LearnerInput(form_id="f", answers={})),
        ("{not json", LearnerInput(text="{not json")),
        ("[1, 2]", LearnerInput(text="[1, 2]")),
        ('{"form": 3}', LineError),
        ('{"form": "f", "values": [1]}', LineError),
        ('{"other": 1}', LineError),
    ],
)
def test_parse_line(line, expected):
    if expected is LineError:
        with pytest.raises(LineError):
            parse_line(line)
    else:
        assert parse_line(line) == expected


def test_numbers_pick_suggestions_only_when_there_is_one():
    assert parse_line("2", ["a", "b"]) == LearnerInput(text="b")
    assert parse_line("3", ["a", "b"]) == LearnerInput(text="3")
    assert parse_line("1") == LearnerInput(text="1")


@pytest.mark.parametrize(
    "pct, covered, total, text",
    [
        (0, 0, 20, "[----------] 0% (0/20 topics)"),
        (50.0, 10, 20, "[#####-----] 50% (10/20 topics)"),
        (96.0, 24, 25, "[#########-] 96% (24/25 topics)"),
        (33.3, 1, 3, "[###-------] 33.3% (1/3 topics)"),
        (100.0, 3, 3, "[##########] 100% (3/3 topics)"),
    ],
)
def test_progress_bar(pct, covered, total, text):
    assert progress_bar(pct, covered, total) == text


def test_an_unreadable_reply_is_shown_as_raw_text():
    class P:
        percentage, covered, total, milestone = 0.0, [], 3, None

    out = render_text(None, "plain words from the model", "invalid", P())
    assert "plain words from the model" in out and "(reply invalid)" in out


def _backend_env(server, provider: str) -> dict[str, str]:
    base = server.base_url.removesuffix("/v1") if provider == "anthropic" else server.base_url
    return {
        "TUTOR_LLM_PROVIDER": provider,
        "TUTOR_LLM_BASE_URL": base,
        "TUTOR_LLM_API_KEY": "test-key",
        "TUTOR_LLM_MODEL": "fake-model-1",
        "TUTOR_LLM_RETRY_BASE_DELAY": "0.001",
        "TUTOR_LLM_RETRY_MAX_DELAY": "0.01",
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_chat_works_unchanged_against_a_model_backend(tmp_path, provider):
    from tests.fakes.servers import FakeLLMServer
    from tests.fakes.wire import anthropic_tool_reply, error, openai_reply, tutor_reply

    def ok(text: str):
        data = tutor_reply(text)
        if provider == "openai":
            return openai_reply(json.dumps(data))
        return anthropic_tool_reply(data)

    broken = "I'd rather answer in plain prose today."
    prose = openai_reply(broken) if provider == "openai" else None
    with FakeLLMServer(provider) as server:
        script = [ok("Welcome to the module."), error(503, kind=provider), ok("Fear is about now.")]
        if prose is not None:  # an unusable reply, twice: the turn fails closed, shown as text
            script += [prose, prose]
        server.script(*script)
        lines = ["What is fear?", "And anxiety?"] if prose is not None else ["What is fear?"]
        # The model's safety screen (on by default with a backend) is off here: this script is
        # the tutor's calls only; the screen beside them is tests/test_safety_turns.py's.
        result = _chat(tmp_path, lines, "--module", "understanding_anxiety", "--json",
                       **_backend_env(server, provider), TUTOR_LLM_STRATEGY="json_schema",
                       TUTOR_SAFETY_MODEL_SCREEN="off")
    assert result.returncode == 0, result.stderr
    turns = [json.loads(line) for line in result.stdout.splitlines()]
    assert turns[0]["outcome"] == "valid"
    assert turns[0]["response"]["content"]["text_blocks"][0]["content"] == "Welcome to the module."
    assert turns[1]["outcome"] == "valid"  # after one retried 503
    assert "Fear is about now." in json.dumps(turns[1]["response"])
    if prose is not None:
        assert turns[2]["outcome"] == "invalid"
        assert any("review" in flag for flag in turns[2]["flags"])
