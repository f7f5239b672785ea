#!/usr/bin/env bash
# run.sh of the GPU bundle (scripts/gpu-bundle.sh makes the bundle and copies this
# file into it): the GPU check on a machine with an NVIDIA driver, the CUDA runtime
# libraries and a Python with PyTorch, nothing else installed.
#   DIR/run.sh OUTDIR
# Everything it writes goes under OUTDIR: run.log (all it prints), a log per phase,
# summary.json, and last "N passed, M failed". Phases, each with a timeout, all
# within 8 minutes:
#   pre-flight    the C library, the CUDA libraries (the toolkit's, or the pip wheels'
#                 under site-packages/nvidia/*/lib), ldd of every program with nothing
#                 missing, the versions of the driver, CUDA, cuBLAS and NCCL, the GPUs;
#                 without a GPU it says so and ends with status 0; with a library
#                 missing it says which in one line and ends with status 3
#   fork safety   the launcher holds no CUDA context, its rank does
#   kernels       each kernel and the engine against the CPU reference, the GPU's
#                 optimizer against torch.optim
#   end to end    losses follow the CPU backend, reruns repeat, resume, a run that does
#                 not fit is refused, the CNN, a cancel, one rank issuing its collectives
#   ddpd          a 3-epoch run of Fashion-MNIST through the server
#   benchmark     samples/s beside PyTorch eager on this GPU, TF32 off on both: the MLP
#                 784-4096-4096-10 at batch 8192, the default CNN at 2048, and the
#                 measured SGEMM peak
# PYTHON names the Python with torch (default python3); DDPD_BUNDLE_CUDA_SEARCH (dirs
# separated by ':') replaces where CUDA's libraries are looked for.
set -uo pipefail
export PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
[[ $# -eq 1 ]] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
bundle=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
exec > >(tee "$out/run.log") 2>&1
python=${PYTHON:-python3}
# Nothing outside OUTDIR: temporary files, the trainer's dataset cache, Python's bytecode.
export TMPDIR=$out/tmp DDPD_CACHE_DIR=$out/dataset-cache PYTHONDONTWRITEBYTECODE=1
mkdir -p "$TMPDIR"
steps=$bundle/scripts/gpu_check_steps.py
data=$bundle/data/fashion-mnist
t_start=$(date +%s)
budget=470 # seconds for every phase together: 8 minutes with room for the summary
: > "$out/phases.tsv"

section() { printf '\n=== %s ===\n' "$1"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$out/phases.tsv"; }
finish() { # the summary and its last line; exit status $1 (or the summary's)
  section "summary"
  echo "total time $(( $(date +%s) - t_start )) s; every phase's log is in $out"
  local rc=1
  if command -v "$python" >/dev/null; then
    "$python" "$steps" summary "$out"
    rc=$?
  else # (no Python for the summary: the count from phases.tsv)
    echo "$(grep -c $'\tpassed\t' "$out/phases.tsv") passed, $(grep -c $'\tfailed\t' "$out/phases.tsv") failed"
  fi
  exec >&- 2>&- # tee (run.log) sees its end,
  wait          # and is waited for
  exit "${1:-$rc}"
}
stop() { # one clear line, and the check ends: status $1
  echo "STOP: $2"
  record pre-flight failed 0 "$2"
  finish "$1"
}
# phase NAME SECONDS CMD...: runs CMD with its output in OUTDIR/NAME.log (and here),
# within SECONDS and what is left of the budget; 77 from CMD is "skipped".
phase() {
  local name=$1 limit=$2 left
  shift 2
  left=$(( budget - ($(date +%s) - t_start) ))
  (( left < limit )) && limit=$left
  section "$name"
  if (( limit < 10 )); then
    echo "skipped: the 8 minutes are spent"
    record "$name" skipped 0 "no time left"
    return
  fi
  local t0=$(date +%s) rc
  if [[ -n "$timeout_cmd" ]]; then
    $timeout_cmd --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  else
    "$@" 2>&1 | tee "$out/$name.log"
  fi
  rc=${PIPESTATUS[0]}
  local took=$(( $(date +%s) - t0 ))
  if (( rc == 0 )); then record "$name" passed "$took"; echo "--- $name: passed ($took s)"
  elif (( rc == 77 )); then record "$name" skipped "$took" "$(grep -m1 SKIPPED "$out/$name.log")"; echo "--- $name: skipped"
  elif (( rc == 124 || rc == 137 )); then record "$name" failed "$took" "timed out after $limit s"; echo "--- $name: FAILED: timed out after $limit s"
  else record "$name" failed "$took" "exit status $rc"; echo "--- $name: FAILED (exit status $rc)"
  fi
}
timeout_cmd=$(command -v timeout || true)

# ---- pre-flight ------------------------------------------------------------------------
section "pre-flight"
echo "bundle: $bundle"
sed -n 's/.*"built": "\([^"]*\)", "commit": "\([^"]*\)".*/built \1 from commit \2/p' "$bundle/MANIFEST.json"
needs_glibc=$(sed -n 's/.*"glibc": "\([0-9.]*\)".*/\1/p' "$bundle/MANIFEST.json")
command -v "$python" >/dev/null || stop 3 "no $python here (PYTHON names the Python with torch)"
echo "python: $(command -v "$python") ($("$python" -c 'import sys; print(sys.version.split()[0])'))"

# The C library: the bundle's libraries come from Debian 12 (glibc 2.36).
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
[[ -n "$glibc" ]] || glibc=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9]\+\.[0-9]\+$')
echo "glibc: ${glibc:-unknown} here; the bundle needs ${needs_glibc} or newer"
if [[ -n "$glibc" && "$(printf '%s\n%s\n' "$needs_glibc" "$glibc" | sort -V | head -1)" != "$needs_glibc" ]]; then
  stop 3 "this machine's glibc $glibc is older than the $needs_glibc the bundle's programs and libraries need"
fi

# The GPU, as the driver sees it.
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv,noheader 2>&1 | sed 's/^/nvidia-smi: /'
else
  echo "nvidia-smi: not found"
fi

# The bundle's own libraries, unpacked under OUTDIR.
lib=$out/bundle-lib
rm -rf "$lib" && mkdir -p "$lib"
if command -v xz >/dev/null; then
  xz -dc "$bundle/lib.tar.xz" | tar -C "$lib" -xf - || stop 3 "cannot unpack $bundle/lib.tar.xz"
else
  "$python" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$bundle/lib.tar.xz" "$lib" || stop 3 "cannot unpack $bundle/lib.tar.xz: no xz here, and $python has no lzma"
fi
echo "the bundle's libraries: $(ls "$lib" | wc -l) unpacked into $lib"

# CUDA's libraries: the toolkit's, the dynamic loader's, or the pip wheels' (nvidia-*).
if [[ -n "${DDPD_BUNDLE_CUDA_SEARCH:-}" ]]; then
  IFS=: read -ra search <<< "$DDPD_BUNDLE_CUDA_SEARCH"
else
  search=()
  for d in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 /usr/local/cuda/lib \
           /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib; do
    [[ -d "$d" ]] && search+=("$d")
  done
  while read -r d; do search+=("$d"); done < <(
    "$python" -c 'import glob, os, site, sys
roots = [p for p in sys.path if p.endswith("-packages")] + site.getsitepackages() + [site.getusersitepackages()]
seen = set()
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        if d not in seen:
            seen.add(d)
            print(d)' 2>/dev/null)
  while read -r d; do search+=("$d"); done < <(ldconfig -p 2>/dev/null | awk '/libcublas|libcudart|libnccl/ {print $NF}' |
                                                xargs -r -n1 dirname | sort -u)
fi
cuda_path=
for need in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=
  for d in "${search[@]}"; do [[ -e "$d/$need" ]] && { found=$d; break; }; done
  if [[ -z "$found" ]]; then
    others=$(for d in "${search[@]}"; do ls "$d" 2>/dev/null | grep -E "^${need%%.so*}\.so\.[0-9]+$" | sed "s|^|$d/|"; done | head -3 | tr '\n' ' ')
    stop 3 "$need is missing (looked in: ${search[*]:-nowhere}${others:+; found only ${others% }}): this bundle was built with CUDA 13; install its runtime libraries (e.g. pip install nvidia-cuda-runtime nvidia-cublas nvidia-nccl-cu13) or name their directory in DDPD_BUNDLE_CUDA_SEARCH"
  fi
  echo "$need: $found"
  [[ ":$cuda_path:" == *":$found:"* ]] || cuda_path=${cuda_path:+$cuda_path:}$found
done
export DDPD_BUNDLE_LIBRARY_PATH=$lib:$cuda_path

# Every program loads with nothing missing, and takes every library that is neither
# the C library's nor CUDA's from the bundle.
for p in "$bundle"/libexec/*; do
  name=$(basename "$p")
  if command -v ldd >/dev/null; then listing=$(LD_LIBRARY_PATH=$DDPD_BUNDLE_LIBRARY_PATH ldd "$p" 2>&1)
  else listing=$(LD_TRACE_LOADED_OBJECTS=1 LD_LIBRARY_PATH=$DDPD_BUNDLE_LIBRARY_PATH "$p" 2>&1); fi
  missing=$(grep "not found" <<< "$listing" | awk '{print $1}' | tr '\n' ' ')
  [[ -z "$missing" ]] || stop 3 "$name cannot load: ${missing% } not found"
  resolved=$(awk '$2 == "=>" && $3 ~ /^\// {print $1 " " $3}' <<< "$listing")
  from_bundle=$(grep -c " $lib/" <<< "$resolved" || true)
  from_cuda=$(grep -E ' /' <<< "$resolved" | grep -v " $lib/" | grep -cE '^(libcuda|libcudart|libcublas|libnccl|libnvidia)' || true)
  outside=$(grep -v " $lib/" <<< "$resolved" | grep -vE '^(libcuda|libcudart|libcublas|libnccl|libnvidia|linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so)' | awk '{print $1 " (" $2 ")"}' | tr '\n' ' ')
  [[ -z "$outside" ]] || stop 3 "$name takes libraries from outside the bundle: ${outside% } (the bundle is incomplete: make it again)"
  echo "ldd $name: all found: $from_bundle from the bundle, $from_cuda CUDA, the rest the C library's"
done

# What CUDA, cuBLAS and NCCL say, through the very libraries found above.
"$bundle/bin/gpu_preflight" > "$out/preflight.json" || stop 3 "gpu_preflight failed: see $out/preflight.json"
"$python" - "$out/preflight.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
print(f"versions: {p['versions']}")
for i, g in enumerate(p["gpus"]):
    print(f"GPU {i}: {g['name']}, {g['memory_bytes'] / 2**30:.1f} GiB, PCI {g['pci']}, sm_{g['major']}{g['minor']}")
PY
no_gpu=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("no_gpu", ""))' "$out/preflight.json")
gpus=$("$python" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$out/preflight.json")
"$python" - "$out/host.json" "$glibc" "$needs_glibc" "$(command -v "$python")" <<'PY'
import json, platform, sys
json.dump({"glibc": sys.argv[2], "needs_glibc": sys.argv[3], "python": sys.argv[4], "kernel": platform.release()},
          open(sys.argv[1], "w"))
PY
record pre-flight passed $(( $(date +%s) - t_start ))
if [[ -n "$no_gpu" || "$gpus" == "0" ]]; then
  echo "no GPU: ${no_gpu:-CUDA sees no device}: the programs and libraries are ready, the GPU phases need a GPU"
  record gpu skipped 0 "no GPU: ${no_gpu:-CUDA sees no device}"
  finish 0
fi

# ---- on the GPU --------------------------------------------------------------------------
bin=$bundle/bin
export PYTHONPATH=$bundle/tests/support # what the bundle's tests import (checks, ddpd_harness)
phase fork-safety 90 "$python" "$steps" fork-safety --trainer "$bin/ddp-trainer-nccl" --data "$data" --work "$out/fork-safety"
phase kernels 150 "$bin/test_gpu_kernels"
phase engine 150 "$bin/test_gpu_engine"
for c in adam adamw sgd; do
  phase "optim-torch-$c" 60 "$python" "$bundle/tests/integration/trainer/test_optim_torch.py" "$c" --replay "$bin/optim_replay_nccl" --gpu
done
for c in losses_follow_cpu deterministic resume memory_refused cnn canceled single_rank_collectives two_ranks width_on_fewer_gpus watchdog; do
  phase "e2e-$c" 150 "$python" "$bundle/tests/integration/gpu/test_gpu_e2e.py" "$c" --trainer "$bin/ddp-trainer-nccl" --data "$data"
done
phase ddpd 180 "$python" "$steps" server-run --ddpd "$bin/ddpd" --data "$data" --work "$out/ddpd-run" --timeout 150
bench() { # model batch: ours, then PyTorch's, then the table (a function timeout runs through bash -c)
  "$bin/bench_gpu_step" --model "$1" --batch "$2" --steps 30 --data "$data" | tee "$out/ours-$1.txt"
  local ours_rc=${PIPESTATUS[0]}
  (( ours_rc == 0 )) || return "$ours_rc"
  "$python" "$bundle/bench/gpu/torch_mlp_ddp.py" --model "$1" --batch "$2" --steps 30 --data "$data" | tee "$out/torch-$1.txt"
  local torch_rc=${PIPESTATUS[0]}
  "$python" "$steps" bench-table "$out/ours-$1.txt" "$out/torch-$1.txt" "$([[ $1 == mlp ]] && echo 1.2)" \
      --json "$out/bench-$1.json" || return 1
  return "$torch_rc"
}
export -f bench
export bin out python data steps bundle
phase bench-mlp 120 bash -c 'bench "$@"' bench mlp 8192
phase bench-cnn 120 bash -c 'bench "$@"' bench cnn 2048
finish
