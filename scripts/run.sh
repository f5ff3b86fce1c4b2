#!/usr/bin/env bash
# Install and serve Tutor on http://127.0.0.1:${TUTOR_PORT:-3000} (built-in tutor, SQLite).
# TUTOR_HOST=0.0.0.0 serves other machines too.
set -euo pipefail
cd "$(dirname "$0")/.."
PIP_QUIET=2 scripts/install.sh  # errors still show; pip's notes about local indexes do not
source scripts/env.sh
# npm's own registry setting, so the first build does not probe mirrors (and log each miss).
NPM_CONFIG_REGISTRY="${NPM_CONFIG_REGISTRY:-$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)}"
export NPM_CONFIG_REGISTRY
# The database's schema, then the semantic layer (safety screen and teaching), in one
# process: its vectors are computed once (3-5 minutes on 2 cores) and kept in ~/.cache/tutor;
# later starts read them in a few seconds.
.venv/bin/tutor prepare
exec reflex run --env prod --single-port "$@"
