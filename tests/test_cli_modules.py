"""`tutor modules list|check|schema` as authors run them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tutor.cli import main
from tutor.content.modules import REPO_ROOT, schema_json

FIXTURES = Path(__file__).parent / "fixtures" / "modules"
GOOD, BROKEN = FIXTURES / "good", FIXTURES / "broken"


def _tutor(*args: str, env_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)}
    if env_dir is not None:
        env["TUTOR_MODULES_DIR"] = str(env_dir)
    return subprocess.run(
        [sys.executable, "-c", "import sys; from tutor.cli import main; sys.exit(main())", *args],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=60,
    )


def test_list_prints_one_servable_module_id_per_line(tmp_path, capsys):
    for name in ("mini.yaml", "quick.yaml"):
        shutil.copy(GOOD / name, tmp_path / name)
    shutil.copy(BROKEN / "bad_fields.yaml", tmp_path / "bad_fields.yaml")
    assert main(["modules", "--dir", str(tmp_path), "list"]) == 0
    out, err = capsys.readouterr()
    assert out == "mini\nquick\n"
    assert "bad_fields.yaml: not servable" in err


def test_check_passes_sound_modules(capsys):
    assert main(["modules", "check", str(GOOD / "mini.yaml"), str(GOOD / "quick.yaml")]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "2 module file(s) ok" in err


def test_check_fails_with_file_line_and_value(capsys):
    files = [str(BROKEN / "duplicate_topic.yaml"), str(GOOD / "quick.yaml"), str(BROKEN / "invalid_yaml.yaml")]
    assert main(["modules", "check", *files]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{files[0]}:18: duplicate topic id 'breathing'",
        f"{files[0]}:22: form 'calm_check' covers unknown topic 'relaxation'",
        f"{files[0]}:33: section 'empty_one' has no topics",
        f"{files[2]}:6: invalid YAML: found unexpected end of stream",
    ]
    assert "2 of 3 module file(s) failed the check" in err


def test_check_without_files_checks_the_whole_directory(tmp_path, capsys):
    shutil.copy(GOOD / "quick.yaml", tmp_path / "quick.yaml")
    assert main(["modules", "--dir", str(tmp_path), "check"]) == 0
    shutil.copy(BROKEN / "duplicate_key.yaml", tmp_path / "duplicate_key.yaml")
    assert main(["modules", "--dir", str(tmp_path), "check"]) == 1
    assert "duplicate key 'keywords'" in capsys.readouterr().out


def test_check_of_an_empty_directory_fails(tmp_path, capsys):
    assert main(["modules", "--dir", str(tmp_path), "check"]) == 1
    assert "no module files found" in capsys.readouterr().err


def test_schema_writes_and_checks_the_published_file(tmp_path, capsys):
    target = tmp_path / "module.schema.json"
    assert main(["modules", "schema", "--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == schema_json()
    assert main(["modules", "schema", "--output", str(target), "--check"]) == 0
    target.write_text("{}\n", encoding="utf-8")
    assert main(["modules", "schema", "--output", str(target), "--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert main(["modules", "schema", "--stdout"]) == 0
    assert capsys.readouterr().out == schema_json()


def test_the_command_line_checks_the_repository_modules_by_default():
    listed = _tutor("modules", "list")
    assert listed.returncode == 0, listed.stderr
    assert "understanding_anxiety" in listed.stdout.splitlines()
    checked = _tutor("modules", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert _tutor("modules", "schema", "--check").returncode == 0


def test_the_command_line_reads_the_modules_directory_from_the_environment(tmp_path):
    shutil.copy(BROKEN / "unresolved_variable.yaml", tmp_path / "unresolved_variable.yaml")
    result = _tutor("modules", "check", env_dir=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith(str(tmp_path / "unresolved_variable.yaml") + ":10: unresolved variable")
