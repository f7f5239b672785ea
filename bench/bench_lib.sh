# Shared by bench/trainer.sh and bench/cnn.sh (sourced, not run): building, a run
# config, and one measurement each of ddp-trainer, PyTorch's DDP (the anchor script)
# and a ceiling (a program run in one process, or two side by side), each appended
# to "$results" as one JSON line that bench/summarize.py reads. Each line carries the
# load average before and after, so a figure taken on a busy machine shows as such.
#
# Set before sourcing: nothing. After: $root, $bin, $work (removed on exit), $results,
# $anchor, $data.

set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh
bin=$root/${BUILD_DIR:-build}/bin
scripts/install-deps.sh --bench
anchor="${ANCHORS:-$root/../shared/anchors}/torch_ddp_fmnist.py"
data=/usr/share/datasets/fashion-mnist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.jsonl
: > "$results"

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# bench_config MODEL_JSON WORLD EPOCHS LIMIT -> a run config on stdout
bench_config() {
  cat <<JSON
{"name": "bench", "model": $1,
 "data": {"train": {"images": "$data/train-images-idx3-ubyte.gz", "labels": "$data/train-labels-idx1-ubyte.gz"},
          "test": {"images": "$data/t10k-images-idx3-ubyte.gz", "labels": "$data/t10k-labels-idx1-ubyte.gz"},
          "limit": $4, "test_limit": 2000},
 "train": {"epochs": $3, "batch_size": 128, "optimizer": {"type": "adam", "lr": 0.001}},
 "distributed": {"world_size": $2, "threads_per_rank": 1}, "checkpoint": {"every_epochs": 0}}
JSON
}

# record WHAT REP LOAD_BEFORE JSON_FIELDS: one line of results, echoed for the reader
record() {
  python3 - "$1" "$2" "$3" "$(loadavg)" "$4" "$results" <<'PY'
import json, sys
what, rep, before, after, fields, path = sys.argv[1:]
row = {"what": what, "rep": int(rep), "load_before": before, "load_after": after, **json.loads(fields)}
with open(path, "a") as f:
    f.write(json.dumps(row) + "\n")
sps = row.get("samples_per_s")
print(f"  {what:<24} rep {rep}: {'n/a' if sps is None else f'{sps:9.0f} samples/s'}   load {before} -> {after}",
      flush=True)
PY
}

# measure_ddpd WHAT REP MODEL_JSON WORLD EPOCHS LIMIT: samples/s over the training
# epochs (their own clock), and each rank's step profile (ms per step by phase).
measure_ddpd() {
  local what=$1 rep=$2 before
  bench_config "$3" "$4" "$5" "$6" > "$work/$what.json"
  rm -rf "$work/$what.run"
  before=$(loadavg)
  "$bin/ddp-trainer" --config "$work/$what.json" --run-dir "$work/$what.run" > /dev/null 2>&1 ||
    { echo "bench: ddp-trainer failed, see $work/$what.run/trainer.log" >&2; tail -5 "$work/$what.run/trainer.log" >&2; exit 1; }
  record "$what" "$rep" "$before" "$(python3 - "$work/$what.run" <<'PY'
import json, re, sys
run = sys.argv[1]
ev = [json.loads(l) for l in open(f"{run}/events.jsonl")]
ep = [e for e in ev if e["type"] == "epoch"]
secs = sum(e["seconds"] for e in ep)
samples = sum(e["samples_per_s"] * e["seconds"] for e in ep)
profile = {}
for line in open(f"{run}/trainer.log"):
    m = re.search(r"rank (\d+): epoch \d+ steps: ([0-9.]+) ms/step over (\d+) steps, ([0-9.]+) synchronisations/step: (.*)", line)
    if not m:
        continue
    rank = profile.setdefault(m.group(1), {"steps": 0, "phases": {}})
    n = int(m.group(3))
    rank["steps"] += n
    phases = {"step": float(m.group(2)), "syncs": float(m.group(4))}
    for part in m.group(5).split(","):
        pm = re.fullmatch(r"\s*(.+?) ([0-9.]+)\s*", part)
        if pm:
            phases[pm.group(1)] = float(pm.group(2))
    for k, v in phases.items():
        rank["phases"][k] = rank["phases"].get(k, 0.0) + v * n
for rank in profile.values():
    rank["phases"] = {k: v / rank["steps"] for k, v in rank["phases"].items()}
print(json.dumps({"samples_per_s": samples / secs if secs else None, "test_acc": ep[-1]["test_acc"],
                  "profile": profile}))
PY
)"
}

# measure_torch WHAT REP MODEL WORLD EPOCHS LIMIT (MODEL: mlp or cnn for the anchor)
measure_torch() {
  local what=$1 rep=$2 before out
  if [[ ! -f "$anchor" ]] || ! /usr/bin/python3 -c 'import torch' 2> /dev/null; then
    record "$what" "$rep" "$(loadavg)" '{"samples_per_s": null, "missing": "PyTorch or the anchor script"}'
    return
  fi
  before=$(loadavg)
  out=$(/usr/bin/python3 "$anchor" --model "$3" --world "$4" --epochs "$5" --limit "$6" --threads 1 \
          --port $((29600 + RANDOM % 300)) 2> "$work/torch.err" | tail -1) ||
    { echo "bench: the PyTorch anchor failed:" >&2; tail -5 "$work/torch.err" >&2; exit 1; }
  record "$what" "$rep" "$before" "$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print(json.dumps({"samples_per_s": d["samples_per_s"], "test_acc": d["test_acc"]}))' "$out")"
}

# measure_ceiling WHAT REP PROCS FIELD COMMAND...: COMMAND's samples/s (its JSON field
# FIELD), run once, or PROCS (2) times side by side and summed: the two-process ceiling.
measure_ceiling() {
  local what=$1 rep=$2 procs=$3 field=$4 before
  shift 4
  before=$(loadavg)
  for p in $(seq "$procs"); do "$@" > "$work/ceiling.$p" & done
  wait
  record "$what" "$rep" "$before" "$(python3 - "$field" "$work"/ceiling.* <<'PY'
import json, sys
field, files = sys.argv[1], sys.argv[2:]
each = [json.load(open(f))[field] for f in files]
print(json.dumps({"samples_per_s": sum(each), "each": each}))
PY
)"
  rm -f "$work"/ceiling.*
}
