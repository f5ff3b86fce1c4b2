#!/usr/bin/env bash
# Install Tutor into .venv at the repository root (idempotent). EXTRAS=test adds test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.installed-${EXTRAS:-app}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  if [ -n "${EXTRAS:-}" ]; then
    .venv/bin/python -m pip install --quiet -e ".[${EXTRAS}]"
  else
    .venv/bin/python -m pip install --quiet -e .
  fi
  touch "$stamp"
fi
