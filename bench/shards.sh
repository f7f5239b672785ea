#!/usr/bin/env bash
# The cost of summing batch shards in shard order (docs/training.md), side by side in
# one run: ddp-trainer on 2 ranks, MLP 784-512-256-10, batch 128, Adam, one thread per
# rank, Fashion-MNIST, with
#   rank order    DDPD_CPU_REDUCE=ranks: one shard per rank reduced by the rank-order
#                 reduce-scatter, as before batch shards (the same bits)
#   shard order   the default: reduce_scatter_parts_f32_ex and the shard-order totals
#   width 4       distributed.world_size 4 on 2 ranks (--ranks 2): two shards of 32 a
#                 rank, each computed on its own (another run: its own numbers)
# REPS (3) repetitions of each, interleaved so that a noisy minute hits all alike; the
# per-step time of each is its epoch's seconds over its steps (epoch 0 of LIMIT
# examples, 30000 by default), reported as min / median / max with the load average
# beside it, then the ratio of the medians. Needs a build (scripts/build.sh).
#   bench/shards.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/${BUILD_DIR:-build}/bin
reps=${REPS:-3}
limit=${LIMIT:-30000}
data=/usr/share/datasets/fashion-mnist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
config() { # WIDTH
  cat <<JSON
{"name": "bench", "model": {"hidden": [512, 256]},
 "data": {"train": {"images": "$data/train-images-idx3-ubyte.gz", "labels": "$data/train-labels-idx1-ubyte.gz"},
          "test": {"images": "$data/t10k-images-idx3-ubyte.gz", "labels": "$data/t10k-labels-idx1-ubyte.gz"},
          "limit": $limit, "test_limit": 1000},
 "train": {"epochs": 1, "batch_size": 128, "optimizer": {"type": "adam", "lr": 0.001}},
 "distributed": {"world_size": $1, "min_world_size": 2, "threads_per_rank": 1}, "checkpoint": {"every_epochs": 0}}
JSON
}
config 2 > "$work/w2.json"
config 4 > "$work/w4.json"
: > "$work/results.txt"
measure() { # NAME CONFIG ENV...
  local name=$1 cfg=$2; shift 2
  local dir="$work/run-$RANDOM$RANDOM" load
  load=$(cut -d' ' -f1 /proc/loadavg)
  env "$@" "$bin/ddp-trainer" --config "$cfg" --run-dir "$dir" --ranks 2 > /dev/null 2>&1
  python3 - "$dir/events.jsonl" "$name" "$load" "$(cut -d' ' -f1 /proc/loadavg)" >> "$work/results.txt" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
hello = next(e for e in events if e["type"] == "hello" and e["rank"] == 0)
epoch = next(e for e in events if e["type"] == "epoch")
print(json.dumps({"name": sys.argv[2], "ms": epoch["seconds"] / hello["steps_per_epoch"] * 1e3,
                  "load": [float(sys.argv[3]), float(sys.argv[4])]}))
PY
  tail -1 "$work/results.txt"
}
echo "== 2 ranks, MLP 784-512-256-10, batch 128, Adam; $limit examples a run, $reps repetitions (load now: $(cut -d' ' -f1-3 /proc/loadavg))"
for rep in $(seq "$reps"); do
  measure "rank order" "$work/w2.json" DDPD_CPU_REDUCE=ranks
  measure "shard order" "$work/w2.json"
  measure "width 4 on 2 ranks" "$work/w4.json"
done
python3 - "$work/results.txt" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for name in dict.fromkeys(r["name"] for r in rows):
    ms = sorted(r["ms"] for r in rows if r["name"] == name)
    loads = [x for r in rows if r["name"] == name for x in r["load"]]
    med[name] = statistics.median(ms)
    print(f"{name:20s} ms/step min {ms[0]:.3f}  median {med[name]:.3f}  max {ms[-1]:.3f}   (load {min(loads):.2f}-{max(loads):.2f})")
print(f"shard order / rank order (medians): {med['shard order'] / med['rank order']:.3f} (goal <= 1.05)")
print(f"width 4 on 2 ranks / width 2 (medians): {med['width 4 on 2 ranks'] / med['rank order']:.3f}")
PY
