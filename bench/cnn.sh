#!/usr/bin/env bash
# CNN benchmark, side by side in one run, on the default CNN (5x5 conv 32, pool,
# 5x5 conv 64, pool, fc 1024, fc 10), batch 128, Adam, one thread per rank:
#   the ceiling   a rank's whole step alone (bench_step_compute: the convolutions on
#                 oneDNN, the pooled backward, the GEMMs, the optimizer; no
#                 collectives, no data loading): one process at batch 128, and two
#                 side by side at 64 each (what two ranks could do at most)
#   ddpd          ddp-trainer with 1 and 2 ranks
#   PyTorch       DDP over gloo, the anchor script's `--model cnn` (../shared/anchors;
#                 ANCHORS overrides), Debian's python3-torch (its convolutions on
#                 oneDNN too), with 1 and 2 ranks
# REPS (3) repetitions of each, interleaved; then min / median / max of each, the
# ratios against the targets, and where ddpd's steps spent their time; last (not in
# --quick), the quality run: 2 ranks until the test accuracy reaches TARGET (0.92;
# the dataset's published table lists 0.916 for this network), with the wall time.
#   bench/cnn.sh [--quick]   (--quick: 6400 examples a measurement, 2 s ceilings, no
#                             quality run: a few minutes)
# LIMIT (25600) sets the examples of each throughput run (1 epoch), ACC_EPOCHS (10)
# the quality run's epochs. The figures mean something only on a quiet machine: the
# load average is printed beside each one.
source "$(dirname "$0")/bench_lib.sh"
quick=${1:-}
reps=${REPS:-3}
limit=${LIMIT:-25600}
acc_epochs=${ACC_EPOCHS:-10}
target=${TARGET:-0.92}
seconds=4
if [[ "$quick" == "--quick" ]]; then
  limit=${LIMIT:-6400} seconds=2
fi
cnn='{"type": "cnn"}'
bench_config "$cnn" 1 1 0 > "$work/step.json"

echo "== default CNN, batch 128, Adam, 1 thread per rank; 1 epoch of $limit examples a run, $reps repetitions (load now: $(loadavg))"
for rep in $(seq "$reps"); do
  measure_ceiling "step alone, 1 process" "$rep" 1 samples_per_s "$bin/bench_step_compute" "$work/step.json" 128 "$seconds"
  measure_ceiling "step alone, 2 processes" "$rep" 2 samples_per_s "$bin/bench_step_compute" "$work/step.json" 64 "$seconds"
  measure_ddpd "ddpd, 1 rank" "$rep" "$cnn" 1 1 "$limit"
  measure_ddpd "ddpd, 2 ranks" "$rep" "$cnn" 2 1 "$limit"
  measure_torch "PyTorch DDP, 1 rank" "$rep" cnn 1 1 "$limit"
  measure_torch "PyTorch DDP, 2 ranks" "$rep" cnn 2 1 "$limit"
done
echo
python3 "$root/bench/summarize.py" "$results" \
  --ratio "ddpd / PyTorch DDP, 1 rank=ddpd, 1 rank/PyTorch DDP, 1 rank>=1.5" \
  --ratio "ddpd / PyTorch DDP, 2 ranks=ddpd, 2 ranks/PyTorch DDP, 2 ranks>=1.5" \
  --ratio "ddpd 2 ranks / two-process ceiling=ddpd, 2 ranks/step alone, 2 processes>=0.9" \
  --ratio "ddpd 1 rank / its step alone=ddpd, 1 rank/step alone, 1 process" \
  --ratio "ddpd 2 ranks / 1 rank=ddpd, 2 ranks/ddpd, 1 rank" \
  --ratio "two-process ceiling / one process=step alone, 2 processes/step alone, 1 process"

if [[ "$quick" != "--quick" ]]; then
  echo
  echo "== quality: the default CNN, 2 ranks, up to $acc_epochs epochs, until the test accuracy reaches $target"
  bench_config "$cnn" 2 "$acc_epochs" 0 |
    python3 -c 'import json,sys; c=json.load(sys.stdin); c["data"]["test_limit"]=0; print(json.dumps(c))' > "$work/acc.json"
  t0=$(date +%s.%N)
  "$bin/ddp-trainer" --config "$work/acc.json" --run-dir "$work/acc" > /dev/null 2>&1
  t1=$(date +%s.%N)
  python3 - "$work/acc/events.jsonl" "$t0" "$t1" "$target" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
t0, t1, target = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
reached = None
for e in (e for e in ev if e["type"] == "epoch"):
    wall = e["t"] / 1000 - t0
    print(f"  epoch {e['epoch']}: lr {e['lr']:.6f}, train loss {e['train_loss']:.4f}, test loss {e['test_loss']:.4f}, "
          f"test accuracy {e['test_acc']:.4f}, {e['seconds']:.1f} s, {e['samples_per_s']:.0f} samples/s; "
          f"{wall:.0f} s since launch")
    if reached is None and e["test_acc"] >= target:
        reached = (e["epoch"], e["test_acc"], wall)
if reached:
    print(f"ddpd: test accuracy {reached[1]:.4f} >= {target} after epoch {reached[0]} "
          f"({reached[0] + 1} epochs), {reached[2]:.0f} s wall time from launch with 2 ranks")
else:
    print(f"ddpd: test accuracy {target} NOT reached in {len([e for e in ev if e['type'] == 'epoch'])} epochs")
print(f"whole run: {t1 - t0:.0f} s wall")
PY
fi
