#!/usr/bin/env bash
# Trainer benchmark, side by side in one run, on the MLP 784-512-256-10, batch 128,
# Adam, one thread per rank, Fashion-MNIST:
#   the ceiling   the step's GEMMs alone (bench_step_gemms): one process at batch 128,
#                 and two side by side at 64 each (what two ranks could do at most);
#                 and the whole step alone (bench_step_compute: GEMMs and all, no
#                 collectives, no data) at 128
#   ddpd          ddp-trainer with 1 and 2 ranks
#   PyTorch       DDP over gloo, the anchor script (../shared/anchors; ANCHORS
#                 overrides), Debian's python3-torch with 1 and 2 ranks
# REPS (3) repetitions of each, interleaved so that a noisy minute hits all alike;
# then min / median / max of each, the ratios against the targets, and where ddpd's
# steps spent their time; last (not in --quick), test accuracy after 10 epochs.
#   bench/trainer.sh [--quick]   (--quick: 1 epoch of 30000 examples a measurement,
#                                 1.5 s ceilings, no 10-epoch run: a few minutes)
# EPOCHS (2) and LIMIT (0: all 60000) set ddpd's and PyTorch's measurements. The
# figures mean something only on a quiet machine: the load average is printed beside
# each one.
source "$(dirname "$0")/bench_lib.sh"
quick=${1:-}
reps=${REPS:-3}
epochs=${EPOCHS:-2}
limit=${LIMIT:-0}
seconds=3
if [[ "$quick" == "--quick" ]]; then
  epochs=${EPOCHS:-1} limit=${LIMIT:-30000} seconds=1.5
fi
mlp='{"hidden": [512, 256]}'
bench_config "$mlp" 1 1 0 > "$work/step.json"

echo "== MLP 784-512-256-10, batch 128, Adam, 1 thread per rank; $epochs epoch(s) of $([[ $limit -gt 0 ]] && echo "$limit" || echo 60000) examples a run, $reps repetitions (load now: $(loadavg))"
for rep in $(seq "$reps"); do
  measure_ceiling "GEMMs alone, 1 process" "$rep" 1 gemm_only_samples_per_s \
    "$bin/bench_step_gemms" --seconds "$seconds" 128 784 512 256 10
  measure_ceiling "GEMMs alone, 2 processes" "$rep" 2 gemm_only_samples_per_s \
    "$bin/bench_step_gemms" --seconds "$seconds" 64 784 512 256 10
  measure_ceiling "step alone, 1 process" "$rep" 1 samples_per_s "$bin/bench_step_compute" "$work/step.json" 128 "$seconds"
  measure_ddpd "ddpd, 1 rank" "$rep" "$mlp" 1 "$epochs" "$limit"
  measure_ddpd "ddpd, 2 ranks" "$rep" "$mlp" 2 "$epochs" "$limit"
  measure_torch "PyTorch DDP, 1 rank" "$rep" mlp 1 "$epochs" "$limit"
  measure_torch "PyTorch DDP, 2 ranks" "$rep" mlp 2 "$epochs" "$limit"
done
echo
python3 "$root/bench/summarize.py" "$results" \
  --ratio "ddpd 2 ranks / 1 rank=ddpd, 2 ranks/ddpd, 1 rank>=1.8" \
  --ratio "ddpd 2 ranks / two-process GEMM ceiling=ddpd, 2 ranks/GEMMs alone, 2 processes>=0.9" \
  --ratio "ddpd 1 rank / its GEMMs alone=ddpd, 1 rank/GEMMs alone, 1 process>=0.9" \
  --ratio "ddpd 1 rank / its whole step alone=ddpd, 1 rank/step alone, 1 process" \
  --ratio "two-process GEMM ceiling / one process=GEMMs alone, 2 processes/GEMMs alone, 1 process" \
  --ratio "ddpd / PyTorch DDP, 1 rank=ddpd, 1 rank/PyTorch DDP, 1 rank" \
  --ratio "ddpd / PyTorch DDP, 2 ranks=ddpd, 2 ranks/PyTorch DDP, 2 ranks"

if [[ "$quick" != "--quick" ]]; then
  echo
  echo "== quality: 10 epochs, 2 ranks, all 60000 examples"
  bench_config "$mlp" 2 10 0 | python3 -c 'import json,sys; c=json.load(sys.stdin); c["data"]["test_limit"]=0; print(json.dumps(c))' > "$work/q.json"
  t0=$(date +%s.%N)
  "$bin/ddp-trainer" --config "$work/q.json" --run-dir "$work/q" > /dev/null 2>&1
  t1=$(date +%s.%N)
  python3 - "$work/q/events.jsonl" "$t0" "$t1" <<'PY'
import json, sys
ep = [e for e in map(json.loads, open(sys.argv[1])) if e["type"] == "epoch"]
secs = sum(e["seconds"] for e in ep)
print(f"ddpd: test accuracy {ep[-1]['test_acc']:.4f} after {len(ep)} epochs; {secs:.1f} s training, "
      f"{float(sys.argv[3]) - float(sys.argv[2]):.1f} s wall in all")
PY
fi
