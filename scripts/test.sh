#!/usr/bin/env bash
# The README's test command (what CI runs): installs what is needed, builds
# everything (the CUDA code too, where the toolkit is installed) and runs every test
# through ctest; then builds the sanitizer build (scripts/build-sanitize.sh: clang,
# ASan+UBSan, CUDA off, build-sanitize/) and runs there the tests labelled
# `sanitize`: the C unit tests, the bounded fuzz tests, the server's integration
# tests (with the normal build's trainer) and the trainer's end-to-end tests
# (tests/README.md). Both parts run; the
# status is non-zero when either failed. Says how long each part took.
#   scripts/test.sh [--no-sanitize] [CTEST_ARGS...]   (e.g. -R server_e2e_)
# --no-sanitize (or DDPD_TEST_SANITIZE=0) skips the sanitizer part; CTEST_ARGS go
# to both parts (in the second, only the sanitize-labelled tests they match run).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=${DDPD_TEST_SANITIZE:-1}
if [[ "${1:-}" == "--no-sanitize" ]]; then
  sanitize=0
  shift
fi
jobs=$(nproc)
failed=0
took() { echo "test.sh: $1 took $(($(date +%s) - $2)) s" >&2; }

t0=$(date +%s)
scripts/build.sh
took "the build" "$t0"
t=$(date +%s)
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$jobs" "$@") || failed=1
took "the tests" "$t"

if [[ "$sanitize" != 0 ]]; then
  t=$(date +%s)
  # the server's tests there train with the normal build's trainer (tests/support.cmake)
  DDPD_TESTS_TRAINER="$PWD/${BUILD_DIR:-build}/bin/ddp-trainer" scripts/build-sanitize.sh
  took "the sanitizer build" "$t"
  t=$(date +%s)
  (cd "${SAN_BUILD_DIR:-build-sanitize}" && ctest --output-on-failure -j"$jobs" -L sanitize "$@") || failed=1
  took "the sanitizer build's tests" "$t"
fi
took "everything" "$t0"
[[ $failed -eq 0 ]] || echo "test.sh: some tests failed (their output is above)" >&2
exit "$failed"
