#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU and the CUDA toolkit
# (about 5 minutes on one H200): builds with CUDA into build-gpu, runs the GPU tests
# (ctest -R gpu), the fork-safety check, a whole ddp-trainer run on the GPU
# (backend nccl, world size 1, 3 epochs of Fashion-MNIST), the same run through the
# REST server when build-gpu/bin/ddpd exists, and the benchmarks: samples/s of the MLP 784-4096-4096-10 at per-rank
# batch 1024 and 8192, and of the default CNN (model.type "cnn") at per-rank batch
# 256 and 2048, each beside PyTorch's eager DDP (when python3 has torch with
# CUDA), and the step's FLOP rate against the GPU's measured SGEMM peak. A GPU
# machine without the toolkit runs the same checks from a bundle made here instead:
# scripts/gpu-bundle.sh. The steps both take are scripts/gpu_check_steps.py.
#   scripts/gpu-check.sh            exit status: 0 when every GPU test and run passed
# BUILD_DIR overrides build-gpu; DATA the Fashion-MNIST directory; SERVER_RUN_TIMEOUT
# how long the server's run may take (300 s).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD_DIR:-build-gpu}
data=${DATA:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=()
fail() { failures+=("$1"); echo "FAIL: $1"; }
section() { printf '\n=== %s ===\n' "$1"; }
t_start=$(date +%s)

section "GPU"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
else
  echo "nvidia-smi not found"
  gpus=$(ls /proc/driver/nvidia/gpus 2>/dev/null | wc -l)
fi
echo "GPUs visible to the driver: $gpus (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset})"

section "build with CUDA into $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null || { echo "FAIL: cmake"; exit 1; }
if ! grep -q "DDPD_HAVE_CUDA 1" "$build/generated/ddpd_build_config.h"; then
  echo "FAIL: CMake found no CUDA 13 toolkit with cuBLAS and NCCL (see /usr/local/cuda)"
  exit 1
fi
t0=$(date +%s)
cmake --build "$build" -j"$(nproc)" 2>&1 | grep -vE '^\[ *[0-9]+%\]|^gmake|^make'
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "FAIL: build"; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
bin=$root/$build/bin

section "GPU tests (ctest -R gpu)"
log=$root/$build/gpu-check-ctest.log
( cd "$build" && ctest -R gpu -V --timeout 300 ) > "$log" 2>&1
ctest_rc=$?
grep -E "^ *[0-9]+/[0-9]+ Test +#|tests passed|SKIPPED: " "$log" | sed 's/^[0-9]*: //'
[ $ctest_rc -eq 0 ] || { grep -E "FAILED|CHECK\(|REQUIRE" "$log" | head -40; fail "GPU tests failed (ctest -R gpu; full output in $log)"; }
steps=$root/scripts/gpu_check_steps.py # the steps the GPU bundle's run.sh takes too
figures() { python3 "$steps" figures "$log" "$1"; } # the figures the GPU tests print (not the stand-in's)
figures "largest relative error|bit-identical|refusal:|test accuracy gpu|cnn: test accuracy|cnn, 2 GPUs|step losses identical|ended after|devices"
if [ "$gpus" -gt 0 ]; then
  # On a GPU, only the tests that need two GPUs may skip (on a one-GPU machine).
  for t in test_gpu_kernels test_gpu_engine gpu_e2e_losses_follow_cpu gpu_e2e_deterministic gpu_e2e_memory_refused \
           gpu_e2e_resume gpu_e2e_one_gpu_two_ranks gpu_e2e_cnn gpu_e2e_canceled gpu_e2e_single_rank_collectives; do
    grep -E "Test +#[0-9]+: $t .*Skipped" "$log" >/dev/null && fail "$t was skipped on a host with a GPU"
  done
else
  echo "no GPU here: the GPU tests skipped, and the rest of this check needs a GPU"
  printf '  FAILED: %s\n' "${failures[@]}" "no GPU on this host"
  exit 1
fi

section "fork safety: the launcher never holds a CUDA context, its rank does"
python3 "$steps" fork-safety --trainer "$bin/ddp-trainer-nccl" --data "$data" --work "$work/fork" ||
  fail "the launcher holds a CUDA context (it forks the ranks: they could not use the GPU)"

section "a whole run on the GPU: ddp-trainer, backend nccl, world size 1, 3 epochs of Fashion-MNIST"
python3 "$steps" run-config "$data" > "$work/run.json"
t0=$(date +%s)
"$bin/ddp-trainer" --config "$work/run.json" --run-dir "$work/run" 2> "$work/run.stderr"
rc=$?
echo "  exit code $rc after $(( $(date +%s) - t0 )) s"
python3 "$steps" summarize-events "$work/run/events.jsonl" || fail "the GPU run did not succeed with test accuracy >= 0.80"
[ $rc -eq 0 ] || { tail -5 "$work/run.stderr"; fail "ddp-trainer on the GPU exited $rc"; }

section "the same run through the server (ddpd)"
ddpd=
for candidate in "$bin/ddpd" "$root/build/bin/ddpd"; do [ -x "$candidate" ] && { ddpd=$candidate; break; }; done
if [ -z "$ddpd" ]; then
  echo "SKIPPED: no ddpd binary (build-gpu/bin/ddpd or build/bin/ddpd): the server part is not built yet"
else
  python3 "$steps" server-run --ddpd "$ddpd" --data "$data" --work "$work/server" \
      --timeout "${SERVER_RUN_TIMEOUT:-300}" || fail "the run through ddpd did not succeed"
fi

benchmark() { # model target(ratio or "") batch...: ours beside PyTorch's, a table
  local model=$1 target=$2
  shift 2
  local batches=()
  for b in "$@"; do batches+=(--batch "$b"); done
  "$bin/bench_gpu_step" --model "$model" "${batches[@]}" --data "$data" | tee "$work/ours-$model.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "bench_gpu_step --model $model failed"
  if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    python3 bench/gpu/torch_mlp_ddp.py --model "$model" "${batches[@]}" --data "$data" | tee "$work/torch-$model.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail "the PyTorch benchmark (--model $model) failed"
  else
    echo "PyTorch with CUDA is not installed here (python3 -c 'import torch; torch.cuda.is_available()'): no comparison"
  fi
  python3 "$steps" bench-table "$work/ours-$model.txt" "$work/torch-$model.txt" "$target"
}

section "benchmark: MLP 784-4096-4096-10, Adam, per-rank batch 1024 and 8192"
benchmark mlp 1.2 1024 8192

section "benchmark: the default CNN (conv 32, pool, conv 64, pool, fc 1024, fc 10), Adam, per-rank batch 256 and 2048"
benchmark cnn "" 256 2048

section "summary"
figures "largest relative error"
echo "  total time $(( $(date +%s) - t_start )) s"
if [ ${#failures[@]} -gt 0 ]; then
  printf '  FAILED: %s\n' "${failures[@]}"
  exit 1
fi
echo "  every GPU test and run passed"
