#!/usr/bin/env bash
# Configures and builds the sanitizer build: clang, -fsanitize=address,undefined
# (any report fatal), CUDA off, the libFuzzer harnesses of fuzz/ on, in
# build-sanitize/ (or $SAN_BUILD_DIR). scripts/test.sh runs its tests, scripts/fuzz.sh
# its fuzzers. Arguments are build targets (default: everything). DDPD_TESTS_TRAINER
# (a path; tests/support.cmake) is the ddp-trainer its server tests use: empty, its own.
#   scripts/build-sanitize.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${SAN_BUILD_DIR:-build-sanitize}
command -v clang >/dev/null || { echo "build-sanitize.sh: no clang (scripts/install-deps.sh installs it)" >&2; exit 2; }
cmake -S . -B "$build_dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPD_SANITIZE=ON \
  -DDDPD_WITH_CUDA=OFF -DDDPD_TESTS_TRAINER="${DDPD_TESTS_TRAINER:-}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
status=0
cmake --build "$build_dir" -j"$(nproc)" "${targets[@]}" 2>&1 | { grep -vE '^\[ *[0-9]+%\]|^gmake|^make' || true; } || status=$?
if [ "$status" -ne 0 ]; then
    echo "build-sanitize.sh: the sanitizer build failed (status $status); the compiler's messages are above" >&2
    exit "$status"
fi
