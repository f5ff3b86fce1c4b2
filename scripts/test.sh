#!/usr/bin/env bash
# Install what the tests need (Debian's chromium for the browser tests) and run them all.
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
source scripts/env.sh
exec .venv/bin/python -m pytest "$@"
