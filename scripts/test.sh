#!/usr/bin/env bash
# The README's test command: installs what is needed, builds everything (the CUDA
# code too, where the toolkit is installed), and runs every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
