"""`tutor eval` against the real server: a small suite with each strategy, streaming on and
off. The model is tiny and no tutor, so this asserts behaviour, never wording: the command
finishes, every turn left the learner a reply to read (structured, or failed closed and
shown as text or a calm apology), and the table is printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.real.llama import MODEL_ALIAS
from tutor.turns.eval_suite import Suite

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).with_name("suite_small.yaml")
STRATEGIES = ("prompt", "json_object", "json_schema")
MAX_TOKENS = 500
EVAL_TIMEOUT_S = 900
TRANSPORT_FAULTS = ("ConnectionFailed", "RequestTimeout", "BadRequest", "ServerError", "BadResponse")


def tutor_eval(llama, *args: str, stream: bool) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "TUTOR_LLM_PROVIDER": "openai",
        "TUTOR_LLM_BASE_URL": llama.base_url,
        "TUTOR_LLM_MODEL": MODEL_ALIAS,
        "TUTOR_LLM_MAX_TOKENS": str(MAX_TOKENS),
        "TUTOR_LLM_STREAM": "1" if stream else "0",
        "TUTOR_LLM_TIMEOUT": "180",
        "TUTOR_LLM_DEADLINE": "300",
        "TUTOR_MODULES_DIR": str(ROOT / "modules"),
    }
    for name in ("TUTOR_LLM_API_KEY", "TUTOR_LLM_STRATEGY", "TUTOR_LLM_TEMPERATURE"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "tutor.cli", "eval", "--suite", str(SUITE), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=EVAL_TIMEOUT_S)


@pytest.fixture(scope="module", params=[False, True], ids=["whole", "streamed"])
def report(request, llama, tmp_path_factory) -> dict:
    """`tutor eval --strategy all --json-file PATH` on the small suite, once per streaming
    mode: the JSON document, and the table the command printed as "table"."""
    path = tmp_path_factory.mktemp("eval") / "report.json"
    started = time.perf_counter()
    done = tutor_eval(llama, "--strategy", "all", "--json-file", str(path), stream=request.param)
    assert done.returncode == 0, f"{done.stderr[-2000:]}\nserver log:\n{llama.log_tail()}"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["seconds"] = round(time.perf_counter() - started, 1)
    data["stream"] = request.param
    data["table"] = done.stdout
    return data


def calls(turn: dict) -> list[dict]:
    """The turn's model calls: not a skipped one, nor the module's own turn standing in for
    a failed reply (tutor.turns.fallback_lesson: no model was asked)."""
    return [a for a in turn["attempts"] if a["outcome"] not in ("skipped", "fallback")]


def where(turn: dict) -> str:
    """The turn and its calls, as a failure should say them (finish reason, tokens, flags)."""
    attempts = [(a["outcome"], a["finish_reason"], a["tokens_out"], a["flags"]) for a in turn["attempts"]]
    return f"{turn['strategy']} turn {turn['index']}: {turn['outcome']} {turn['flags']}; calls {attempts}"


def test_every_turn_leaves_the_learner_a_reply(report, record_property):
    record_property("eval_seconds", report["seconds"])
    suite = Suite.load(SUITE)
    assert [row["strategy"] for row in report["rows"]] == list(STRATEGIES)
    for row in report["rows"]:
        assert row["turns"] + row["safety"] == suite.turn_count and row["errors"] == 0
    assert len(report["turns"]) == len(STRATEGIES) * suite.turn_count
    for turn in report["turns"]:
        assert turn["error"] is None, where(turn)
        # Structured, or failed closed: raw text as markdown (needs_review) or the apology.
        assert turn["outcome"] in ("valid", "repaired") or (
            turn["outcome"] == "invalid" and "needs_review" in turn["flags"]), where(turn)
        assert 1 <= len(calls(turn)) <= 2, where(turn)  # the first call, at most one re-ask
        for a in calls(turn):
            assert a["error_class"] not in TRANSPORT_FAULTS, where(turn)
            assert a["strategy"] == turn["strategy"]
            # The server reports usage, streamed or not, and honours max_tokens.
            assert a["tokens_in"] > 0 and 0 < a["tokens_out"] <= MAX_TOKENS, where(turn)
            watcher_cut = a["finish_reason"] == "repetition" or "repetition" in a["flags"]
            cut = watcher_cut or a["finish_reason"] == "length"  # by the server, or by our watcher
            # A stream our watcher cut has no usage chunk: only then are tokens estimated.
            assert "tokens_estimated" not in a["flags"] or watcher_cut, (where(turn), a["finish_reason"])
            if turn["strategy"] != "prompt":
                # The server's grammar makes the reply JSON from its first character.
                assert a["strict_json"] or cut, where(turn)


def test_no_junk_is_shown_as_a_lesson(report):
    """Whatever the tiny model writes, the learner is never shown junk as a lesson: every
    turn that shows the model's reply as a lesson passes the content gate again on what was
    stored (no placeholder such as "...", no template marker, no echo of the learner, the
    instructions or the app's own apology, no loop); a reply that failed it was re-asked and
    then failed closed (flagged for review). Structure, not the model's wording."""
    for turn in report["turns"]:
        fell_back = "needs_review" in turn["flags"] or "fallback_apology" in turn["flags"]
        risk = any(flag.startswith("risk:") for flag in turn["flags"])
        if fell_back or risk or turn["outcome"] == "invalid":
            assert turn["outcome"] in ("invalid", "valid", "repaired") and (fell_back or risk), where(turn)
            assert not turn["usable"], where(turn)
            continue
        assert turn["usable"] and turn["junk"] == [], (where(turn), turn["junk"])
        first = calls(turn)[0]
        if first["error_class"] == "UnusableReply":  # junk the first time: re-asked, and the re-ask was usable
            assert "reasked" in turn["flags"] and len(calls(turn)) == 2, where(turn)
    for row in report["rows"]:
        assert 0.0 <= row["usable"] <= row["structured"], row


def test_no_turn_runs_to_max_tokens(report):
    """Runaway decoding is stopped early, not paid for. json_schema's grammar is bounded, so
    its worst case fits max_tokens, streamed or not — for text the model writes at 3 or more
    characters a token (tutor.llm.schema). A reply of what tokenizes shorter (escapes, the
    whitespace a grammar allows between tokens, runs of one character or of digits) is the
    case the bound does not cover: the tiny model, sampling, sometimes writes one, looping or
    not (a non-repeating run is not `repeated_text`). It may reach the limit only saying so
    (`truncated`), and is never shown as a lesson. json_object has no such bound: streamed,
    the repetition watcher cuts a reply that loops (finish_reason "repetition"), but a reply
    that rambles without repeating can still reach the limit — then it must say so (flag
    `truncated`), never pass as complete. The prompt strategy on a base model rambles in prose: not judged here."""
    for turn in report["turns"]:
        if turn["strategy"] == "prompt":
            continue
        for a in calls(turn):
            if turn["strategy"] == "json_schema":
                if a["finish_reason"] == "length":  # only text the bound does not price
                    assert "truncated" in a["flags"], where(turn)
                    assert not (turn["usable"] and a == calls(turn)[-1]), where(turn)
                    continue
                if "tokens_estimated" not in a["flags"]:
                    # Counts the server reported; a stream our watcher cut has only an estimate
                    # (deliberately high, capped at max_tokens), which proves nothing either way.
                    assert a["tokens_out"] < MAX_TOKENS, where(turn)
            elif a["finish_reason"] == "length":
                assert "truncated" in a["flags"], where(turn)


def test_tutor_eval_prints_the_table(report):
    assert "| Metric | prompt | json_object | json_schema |" in report["table"]
    assert "| Turns | 2 | 2 | 2 |" in report["table"]
    if not report["stream"]:
        # Whole replies: the server reports usage for each (a stream the watcher cuts would
        # have estimated tokens instead).
        assert "Tokens are estimated" not in report["table"]
