#!/usr/bin/env bash
# Trainer benchmark, side by side in one run: ddp-trainer against PyTorch's DDP (the
# anchor script in ../shared/anchors, Debian's python3-torch) on the MLP 784-512-256-10,
# batch 128, Adam, one thread per rank, full Fashion-MNIST; plus the GEMMs-alone
# ceiling and the accuracy after 10 epochs. Prints a table with the ratios.
#   bench/trainer.sh [--quick]    (--quick: 1 epoch per measurement, no 10-epoch run)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh
bin=${BUILD_DIR:-build}/bin
scripts/install-deps.sh --bench
anchor="${ANCHORS:-$root/../shared/anchors}/torch_ddp_fmnist.py"
epochs=${EPOCHS:-2}
quick=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=/usr/share/datasets/fashion-mnist

config() { # world epochs
  cat <<JSON
{"name": "bench", "model": {"hidden": [512, 256]},
 "data": {"train": {"images": "$data/train-images-idx3-ubyte.gz", "labels": "$data/train-labels-idx1-ubyte.gz"},
          "test": {"images": "$data/t10k-images-idx3-ubyte.gz", "labels": "$data/t10k-labels-idx1-ubyte.gz"}},
 "train": {"epochs": $2, "batch_size": 128, "optimizer": {"type": "adam", "lr": 0.001}},
 "distributed": {"world_size": $1, "threads_per_rank": 1}, "checkpoint": {"every_epochs": 0}}
JSON
}

ours() { # world epochs -> "samples_per_s train_seconds test_acc"
  config "$1" "$2" > "$work/c$1.json"
  rm -rf "$work/r$1"
  local t0=$(date +%s.%N)
  "$bin/ddp-trainer" --config "$work/c$1.json" --run-dir "$work/r$1" 2>/dev/null
  local t1=$(date +%s.%N)
  python3 - "$work/r$1/events.jsonl" "$t0" "$t1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ep = [e for e in ev if e["type"] == "epoch"]
secs = sum(e["seconds"] for e in ep)
samples = sum(e["samples_per_s"] * e["seconds"] for e in ep)
print(f"{samples / secs:.0f} {secs:.1f} {ep[-1]['test_acc']:.4f} {float(sys.argv[3]) - float(sys.argv[2]):.1f}")
PY
}

theirs() { # world epochs
  if [[ -f "$anchor" ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    /usr/bin/python3 "$anchor" --model mlp --world "$1" --epochs "$2" --threads 1 --port $((29600 + RANDOM % 300)) \
      2>/dev/null | tail -1 > "$work/torch$1.json"
    python3 - "$work/torch$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{d['samples_per_s']:.0f} {d['train_s']:.1f} {d['test_acc']:.4f}")
PY
  else
    echo "n/a n/a n/a"
  fi
}

echo "== GEMMs alone (the step's 8 GEMMs, 1 thread): the ceiling"
"$bin/bench_step_gemms" 128 784 512 256 10 | tee "$work/gemm1.json"
"$bin/bench_step_gemms" 64 784 512 256 10 | tee "$work/gemm2.json"
gemm1=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["gemm_only_samples_per_s"]))' "$work/gemm1.json")

echo "== samples/s, MLP 784-512-256-10, batch 128, Adam, 1 thread per rank, $epochs epoch(s)"
read o1 o1s o1acc o1wall < <(ours 1 "$epochs")
read t1 t1s t1acc < <(theirs 1 "$epochs")
read o2 o2s o2acc o2wall < <(ours 2 "$epochs")
read t2 t2s t2acc < <(theirs 2 "$epochs")
python3 - "$o1" "$t1" "$o2" "$t2" "$gemm1" <<'PY'
import sys
o1, t1, o2, t2, g = [None if v == "n/a" else float(v) for v in sys.argv[1:]]
def r(a, b): return f"{a / b:.2f}x" if a and b else "n/a"
print(f"{'':28}{'ddpd':>10}{'torch DDP':>12}{'ddpd/torch':>12}")
print(f"{'1 rank samples/s':28}{o1:>10.0f}{t1 or 0:>12.0f}{r(o1, t1):>12}")
print(f"{'2 ranks samples/s':28}{o2:>10.0f}{t2 or 0:>12.0f}{r(o2, t2):>12}")
print(f"{'2 ranks / 1 rank':28}{r(o2, o1):>10}{r(t2, t1):>12}")
print(f"1 rank vs GEMMs alone ({g:.0f} samples/s): {o1 / g:.0%}")
PY

if [[ "$quick" != "--quick" ]]; then
  echo "== quality: 10 epochs, 2 ranks, test accuracy and time"
  read q qs qacc qwall < <(ours 2 10)
  echo "ddpd: test accuracy $qacc after 10 epochs; $qs s training, $qwall s wall in all ($q samples/s)"
fi
