#!/usr/bin/env bash
# Builds ddp-trainer and trains the Fashion-MNIST MLP (784-512-256-10) with 2 ranks
# on the CPU backend, showing its progress; the run directory is printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
data=/usr/share/datasets/fashion-mnist
run_dir=${RUN_DIR:-runs/demo-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$run_dir"
cat > "$run_dir/config.json" <<JSON
{
  "name": "fmnist-mlp",
  "data": {"train": {"images": "$data/train-images-idx3-ubyte.gz", "labels": "$data/train-labels-idx1-ubyte.gz"},
           "test":  {"images": "$data/t10k-images-idx3-ubyte.gz",  "labels": "$data/t10k-labels-idx1-ubyte.gz"}},
  "train": {"epochs": ${EPOCHS:-10}, "batch_size": 128},
  "distributed": {"world_size": 2}
}
JSON
build/bin/ddp-trainer --config "$run_dir/config.json" --run-dir "$run_dir"
echo "run directory: $run_dir (trainer.log, events.jsonl, checkpoints/)"
