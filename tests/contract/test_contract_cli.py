"""`tutor parse` as a user runs it: a real subprocess, files and stdin, both modes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
REPLY = {"content": {"text_blocks": [{"type": "paragraph", "content": "Xin chào 👋"}]},
         "meta": {"response_type": "conversational"}}


def tutor(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    python = str(PYTHON) if PYTHON.exists() else sys.executable
    return subprocess.run(
        [python, "-m", "tutor.cli", "parse", *args],
        input=stdin, capture_output=True, text=True, encoding="utf-8", cwd=ROOT, timeout=60,
    )


def test_parse_file_prints_one_json_object(tmp_path):
    raw = "```json\n" + json.dumps(REPLY, ensure_ascii=False) + "\n```"
    path = tmp_path / "reply.txt"
    path.write_text(raw, encoding="utf-8")
    done = tutor(str(path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"outcome", "flags", "response", "errors"}
    assert result["outcome"] == "repaired"
    assert result["flags"] == ["fence"]
    assert result["response"] == REPLY


def test_parse_stdin_valid_and_invalid():
    done = tutor(stdin=json.dumps(REPLY))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"outcome": "valid", "flags": [], "response": REPLY, "errors": []}

    done = tutor(stdin="Sorry, I can't answer that.")
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert result["outcome"] == "invalid" and result["response"] is None
    assert result["flags"] == ["invalid_json"] and result["errors"]


def test_parse_finish_reason_option_flags_truncation():
    done = tutor("--finish-reason", "length", stdin='{"content": {"text_blocks": [{"type": "paragraph", "content": "Cut')
    result = json.loads(done.stdout)
    assert result["outcome"] == "repaired"
    assert "truncated" in result["flags"]
    assert result["response"]["content"]["text_blocks"][0]["content"] == "Cut"


def test_parse_jsonl_one_line_per_record_and_bad_lines_do_not_crash(tmp_path):
    lines = [
        json.dumps({"id": "ok", "raw": json.dumps(REPLY)}),
        "",
        "this line is not JSON",
        json.dumps({"id": 7, "raw": '{"content": {"text_blocks": [{"type": "paragraph", "content": "Cu',
                    "finish_reason": "length"}),
        json.dumps({"id": "no-raw"}),
        "   ",
        json.dumps({"id": "prose", "raw": "Just prose."}),
    ]
    path = tmp_path / "replies.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for done in (tutor("--jsonl", str(path)), tutor("--jsonl", stdin=path.read_text(encoding="utf-8"))):
        assert done.returncode == 0, done.stderr
        out = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(out) == 5  # blank lines skipped
        ok, bad_json, cut, no_raw, prose = out
        assert ok == {"id": "ok", "outcome": "valid", "flags": [], "response": REPLY, "errors": []}
        assert bad_json["outcome"] == "invalid" and bad_json["response"] is None
        assert "line 3" in bad_json["error"] and "not JSON" in bad_json["error"]
        assert cut["id"] == 7 and cut["outcome"] == "repaired" and "truncated" in cut["flags"]
        assert no_raw["id"] == "no-raw" and no_raw["outcome"] == "invalid" and "raw" in no_raw["error"]
        assert prose == {"id": "prose", "outcome": "invalid", "flags": ["invalid_json"], "response": None,
                         "errors": prose["errors"]}
        assert prose["errors"]
