#!/usr/bin/env bash
# Install what the tests need (Debian's chromium for the browser tests, llama.cpp's server and
# a tiny GGUF for the real-model tests) and run them all.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test scripts/install.sh
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    sudo sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium' >/dev/null
  fi
fi
# The first run on a machine builds llama-server (~20 min on 2 cores) into ~/.cache; later
# runs find it at once. If the build fails the suite still runs, and tests/real fails with
# the reason (TUTOR_LLAMA_ERROR) instead of skipping.
llama_err="$(mktemp)"
if llama_cache="$(scripts/install-llama.sh 2> >(tee "$llama_err" >&2))"; then
  export TUTOR_LLAMA_CACHE="$llama_cache"
else
  status=$?
  sleep 0.2  # let tee finish writing
  export TUTOR_LLAMA_ERROR="scripts/install-llama.sh failed (exit $status): $(grep 'install-llama:' "$llama_err" | tail -n1 || tail -n1 "$llama_err")"
fi
rm -f "$llama_err"
source scripts/env.sh
# The safety screen's semantic layer, trained once into ~/.cache/tutor (a few minutes on a new
# machine, a second after): no test, app start or subprocess waits on it with a timeout.
.venv/bin/tutor safety prepare
.venv/bin/tutor teach prepare
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
# The whole suite in three runs. The real-model tier first, alone: llama-server keeps both
# cores busy. Then the core tier (two processes, pytest-xdist; its tests share no port,
# database, Redis key or file: each makes its own) beside the browser tier, which spends most
# of its time waiting on the app, the page and the network (one process: one app at a time
# builds into .web). The core tier's report is printed when it ends, after the browser tier's
# progress, so the two never interleave. All three always run, so one report shows every
# failure.
status=0
.venv/bin/python -m pytest tests/real || status=$?
core_log="$(mktemp)"
.venv/bin/python -m pytest -n 2 --ignore=tests/browser --ignore=tests/real >"$core_log" 2>&1 &
core_pid=$!
trap 'kill "$core_pid" 2>/dev/null || true' EXIT  # never leave it running if this script is stopped
.venv/bin/python -m pytest tests/browser || status=$?
core_status=0
wait "$core_pid" || core_status=$?
trap - EXIT
echo
echo "=== core tier (run beside the browser tier) ==="
cat "$core_log"
rm -f "$core_log"
[ "$core_status" = 0 ] || status=$core_status
exit "$status"
