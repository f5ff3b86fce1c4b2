#!/usr/bin/env bash
# Install and serve Tutor on http://127.0.0.1:${TUTOR_PORT:-3000} (built-in tutor, SQLite).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
source scripts/env.sh
.venv/bin/tutor db migrate
exec reflex run --env prod --single-port "$@"
