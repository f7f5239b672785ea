#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds ddpd into build/.
# Used by the README's commands and by CI; BUILD_DIR overrides the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" -j"$(nproc)" 2>&1 | grep -vE '^\[ *[0-9]+%\]|^gmake|^make' || true
test "${PIPESTATUS[0]}" -eq 0
