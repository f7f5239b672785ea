#!/usr/bin/env bash
# One fuzz test: FUZZER WORK_DIR SEEDS_DIR REGRESSIONS_DIR SECONDS. Fuzzes for
# SECONDS from the seeds (new inputs go to WORK_DIR, not the source tree), then
# replays every regression input once. A crash, leak or timeout fails the test and
# leaves its input in WORK_DIR/artifacts: copy it into REGRESSIONS_DIR and fix.
set -euo pipefail
fuzzer=$1 work=$2 seeds=$3 regressions=$4 seconds=$5
mkdir -p "$work/corpus" "$work/artifacts"
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds"
shopt -s nullglob
inputs=("$regressions"/*)
if [[ ${#inputs[@]} -gt 0 ]]; then
  "$fuzzer" -timeout=10 -rss_limit_mb=2048 "${inputs[@]}"
fi
echo "fuzz $(basename "$fuzzer"): ${seconds} s clean, ${#inputs[@]} regression inputs replayed"
