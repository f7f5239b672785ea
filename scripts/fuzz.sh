#!/usr/bin/env bash
# Runs the libFuzzer harnesses (fuzz/) for longer than the tests do:
#   scripts/fuzz.sh [SECONDS_EACH] [NAME...]     (default 600 s, every harness)
# Builds the sanitizer build (clang, ASan+UBSan, build-sanitize/ or $SAN_BUILD_DIR)
# first. Inputs that crash land in build-sanitize/fuzz/corpus-NAME/artifacts/: copy
# each into fuzz/regressions/NAME/ (it becomes a test), then fix the bug.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
build_dir=${SAN_BUILD_DIR:-build-sanitize}
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(run_config idx safetensors ingest_line)
for n in "${names[@]}"; do
  [[ -f fuzz/fuzz_$n.c ]] || { echo "fuzz.sh: no harness fuzz/fuzz_$n.c" >&2; exit 2; }
  scripts/build-sanitize.sh "fuzz_$n"
  fuzz/run_fuzz_test.sh "$build_dir/bin/fuzz_$n" "$build_dir/fuzz/corpus-$n" "fuzz/corpus/$n" \
    "fuzz/regressions/$n" "$seconds"
done
