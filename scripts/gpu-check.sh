#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU (about 5 minutes on
# one H200): builds with CUDA into build-gpu, runs the GPU tests (ctest -R gpu),
# a whole ddp-trainer run on the GPU (backend nccl, world size 1, 3 epochs of
# Fashion-MNIST), the same run through the REST server when build-gpu/bin/ddpd
# exists, and the benchmarks: samples/s of the MLP 784-4096-4096-10 at per-rank
# batch 1024 and 8192, and of the default CNN (model.type "cnn") at per-rank batch
# 256 and 2048, each beside PyTorch's eager DDP (when python3 has torch with
# CUDA), and the step's FLOP rate against the GPU's measured SGEMM peak.
#   scripts/gpu-check.sh            exit status: 0 when every GPU test and run passed
# BUILD_DIR overrides build-gpu; DATA the Fashion-MNIST directory; SERVER_RUN_TIMEOUT
# how long the server's run may take (300 s).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD_DIR:-build-gpu}
data=${DATA:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
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
figures() { # the figures the GPU tests print (not the stand-in's), by test
  python3 - "$log" "$1" <<'PY'
import re, sys
names, pat = {}, re.compile(sys.argv[2])
lines = open(sys.argv[1], errors="replace").read().splitlines()
for l in lines:
    m = re.search(r"Test +#(\d+): (\S+)", l)
    if m:
        names[m.group(1)] = m.group(2)
for l in lines:
    m = re.match(r"(\d+): (.*)", l)
    if m and pat.search(m.group(2)) and "fake" not in names.get(m.group(1), "fake"):
        print(f"  {names[m.group(1)]}: {m.group(2).strip()}")
PY
}
figures "largest relative error|bit-identical|refusal:|test accuracy gpu|cnn: test accuracy|cnn, 2 GPUs|step losses identical|ended after|devices"
if [ "$gpus" -gt 0 ]; then
  # On a GPU, only the tests that need two GPUs may skip (on a one-GPU machine).
  for t in test_gpu_kernels test_gpu_engine gpu_e2e_losses_follow_cpu gpu_e2e_deterministic gpu_e2e_memory_refused \
           gpu_e2e_resume gpu_e2e_one_gpu_two_ranks gpu_e2e_cnn; do
    grep -E "Test +#[0-9]+: $t .*Skipped" "$log" >/dev/null && fail "$t was skipped on a host with a GPU"
  done
else
  echo "no GPU here: the GPU tests skipped, and the rest of this check needs a GPU"
  printf '  FAILED: %s\n' "${failures[@]}" "no GPU on this host"
  exit 1
fi

section "a whole run on the GPU: ddp-trainer, backend nccl, world size 1, 3 epochs of Fashion-MNIST"
run_config() { # images-prefix
  cat <<JSON
{"name": "gpu-check", "seed": 42, "model": {"hidden": [1024, 512], "activation": "relu"},
 "data": {"train": {"images": "$1/train-images-idx3-ubyte.gz", "labels": "$1/train-labels-idx1-ubyte.gz"},
          "test": {"images": "$1/t10k-images-idx3-ubyte.gz", "labels": "$1/t10k-labels-idx1-ubyte.gz"}},
 "train": {"epochs": 3, "batch_size": 256, "optimizer": {"type": "adam", "lr": 0.001}},
 "distributed": {"world_size": 1, "backend": "nccl"}, "checkpoint": {"every_epochs": 1, "keep": 1}}
JSON
}
summarize_events() { # events.jsonl
  python3 - "$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for e in ev:
    if e["type"] == "hello" and e["rank"] >= 0:
        print(f"  rank {e['rank']} on {e['device']}")
for e in ev:
    if e["type"] == "epoch":
        print(f"  epoch {e['epoch']}: train loss {e['train_loss']:.4f}, test loss {e['test_loss']:.4f}, "
              f"test accuracy {e['test_acc']:.4f}, {e['seconds']:.1f} s, {e['samples_per_s']:.0f} samples/s")
beats = [e for e in ev if e["type"] == "heartbeat" and "gpu_mem_used_bytes" in e]
if beats:
    print(f"  GPU memory in use (last heartbeat): {beats[-1]['gpu_mem_used_bytes'] / 2**30:.2f} GiB")
end = [e for e in ev if e["type"] == "end"]
acc = [e["test_acc"] for e in ev if e["type"] == "epoch"]
print(f"  end: {end[-1]['status'] if end else '?'} {end[-1]['reason'] if end else ''}")
sys.exit(0 if end and end[-1]["status"] == "succeeded" and acc and acc[-1] >= 0.80 else 1)
PY
}
run_config "$data" > "$work/run.json"
t0=$(date +%s)
"$bin/ddp-trainer" --config "$work/run.json" --run-dir "$work/run" 2> "$work/run.stderr"
rc=$?
echo "  exit code $rc after $(( $(date +%s) - t0 )) s"
summarize_events "$work/run/events.jsonl" || fail "the GPU run did not succeed with test accuracy >= 0.80"
[ $rc -eq 0 ] || { tail -5 "$work/run.stderr"; fail "ddp-trainer on the GPU exited $rc"; }

section "the same run through the server (ddpd)"
ddpd=
for candidate in "$bin/ddpd" "$root/build/bin/ddpd"; do [ -x "$candidate" ] && { ddpd=$candidate; break; }; done
if [ -z "$ddpd" ]; then
  echo "SKIPPED: no ddpd binary (build-gpu/bin/ddpd or build/bin/ddpd): the server part is not built yet"
else
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$ddpd" serve --listen "127.0.0.1:$port" --state-dir "$work/state" --data-root "$(dirname "$data")" \
      > "$work/ddpd.log" 2>&1 &
  server_pid=$!
  run_config "$(basename "$data")" > "$work/server-run.json"
  python3 - "$port" "$work/server-run.json" "${SERVER_RUN_TIMEOUT:-300}" <<'PY' || fail "the run through ddpd did not succeed"
import json, sys, time, urllib.request, urllib.error
base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/healthz", timeout=2)
        break
    except OSError:
        time.sleep(0.1)
req = urllib.request.Request(base + "/runs", data=open(sys.argv[2], "rb").read(),
                             headers={"Content-Type": "application/json"}, method="POST")
try:
    resp = urllib.request.urlopen(req, timeout=10)
except urllib.error.HTTPError as e:
    print(f"  POST /runs: {e.code} {e.read().decode()[:500]}")
    sys.exit(1)
body = json.loads(resp.read() or b"{}")
location = resp.headers.get("Location") or f"/runs/{body.get('id')}"
print(f"  POST /runs: {resp.status}, {location}")
deadline, run = time.time() + float(sys.argv[3]), {}
while time.time() < deadline:
    run = json.loads(urllib.request.urlopen(base + location, timeout=10).read())
    if run.get("status") in ("succeeded", "failed", "canceled"):
        break
    time.sleep(1)
p = run.get("progress") or {}
print(f"  status {run.get('status')}, reason {run.get('reason')!r}, devices {run.get('devices')}, "
      f"epoch {p.get('epoch')}/{p.get('epochs')}, loss {p.get('loss')}, samples/s {p.get('samples_per_s')}")
sys.exit(0 if run.get("status") == "succeeded" else 1)
PY
  kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=
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
  python3 - "$work/ours-$model.txt" "$work/torch-$model.txt" "$target" <<'PY'
import json, sys
def rows(path, tag):
    try:
        return {r["batch"]: r for r in (json.loads(l.split(": ", 1)[1]) for l in open(path) if l.startswith(tag))}
    except OSError:
        return {}
ours, torch = rows(sys.argv[1], "bench_gpu_step:"), rows(sys.argv[2], "torch_mlp_ddp:")
target = float(sys.argv[3]) if sys.argv[3] else None
print()
print(f"{'batch':>6} {'ddp-trainer':>14} {'PyTorch DDP':>14} {'ratio':>7} {'TFLOP/s':>8} {'of SGEMM peak':>14}")
for b in sorted(ours):
    o, t = ours[b], torch.get(b)
    theirs = f"{t['samples_per_s']:.0f}/s" if t else "n/a"
    ratio = o["samples_per_s"] / t["samples_per_s"] if t else None
    ratio_s = f"{ratio:.2f}x" if ratio else "n/a"
    print(f"{b:>6} {o['samples_per_s']:>12.0f}/s {theirs:>14} {ratio_s:>7} {o['tflops']:>8.1f} "
          f"{100 * o['efficiency']:>13.0f}%")
    if ratio and target:
        print(f"       target: at least {target}x PyTorch's samples/s: {'met' if ratio >= target else 'MISSED'}")
if ours:
    print(f"SGEMM peak (cuBLAS 8192^3, FP32): {next(iter(ours.values()))['sgemm_peak_tflops']:.1f} TFLOP/s")
PY
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
