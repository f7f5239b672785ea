#!/usr/bin/env bash
# The suite's stress mode: runs the tests most exposed to timing (command runs and their
# attempts, sharing and preemption, each run's bounds, the attacks on the wall between
# members and on the gates, ddp-run, runs across nodes, Slurm) over and over with
# a CPU hog busy on every core, so that a race which CI's load trips one run in twenty
# shows up here first. Each test runs until it fails or has passed N times.
#   scripts/stress-tests.sh [-n N] [-R REGEX] [--no-hog] [CTEST_ARGS...]
# -n N (default 20) is ctest's --repeat until-fail:N; -R replaces the default selection;
# --no-hog runs without the busy loops. Needs a build (scripts/build.sh); BUILD_DIR
# overrides build/. Prints ctest's summary and how long it took; exits with ctest's status.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=20
regex='^(command_|server_attempts_|server_sharing_|server_bounds_|server_wall_files_|server_gates_|sweep_gates_|ddp_run_|nodes_|slurm_)'
hog=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) repeat=$2; shift 2 ;;
    -R) regex=$2; shift 2 ;;
    --no-hog) hog=0; shift ;;
    *) break ;;
  esac
done
build_dir=${BUILD_DIR:-build}
[[ -x "$build_dir/bin/ddpd" ]] || { echo "stress-tests.sh: no build in $build_dir/ (run scripts/build.sh first)" >&2; exit 2; }

hogs=()
stop_hogs() { [[ ${#hogs[@]} -eq 0 ]] || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
if [[ $hog == 1 ]]; then
  for _ in $(seq "$(nproc)"); do
    # a plain busy loop at the tests' own priority: every core is contended the whole time
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
  echo "stress-tests.sh: ${#hogs[@]} busy loops (one per core) while the tests run" >&2
fi
t0=$(date +%s)
status=0
(cd "$build_dir" && ctest -R "$regex" --repeat "until-fail:$repeat" -j"$(nproc)" --output-on-failure "$@") || status=$?
echo "stress-tests.sh: until-fail:$repeat of '$regex' took $(($(date +%s) - t0)) s, ctest's status $status" >&2
exit "$status"
