#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds ddpd into build/.
# Used by the README's commands, by CI and by the Docker image's build stage;
# BUILD_DIR overrides the directory, and arguments go to CMake's configure step
# (the image: scripts/build.sh -DDDPD_BUILD_TESTS=OFF).
# Exits non-zero when configuring or compiling fails (make's progress lines are
# filtered out; its status is the script's).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
status=0
cmake --build "$build_dir" -j"$(nproc)" 2>&1 | { grep -vE '^\[ *[0-9]+%\]|^gmake|^make' || true; } || status=$?
# (under pipefail the pipeline's status is cmake's: grep's "nothing left" is not a failure)
if [ "$status" -ne 0 ]; then
    echo "build.sh: the build failed (status $status); the compiler's messages are above" >&2
    exit "$status"
fi
