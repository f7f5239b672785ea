#!/usr/bin/env bash
# All-reduce benchmark, side by side in one run: ddpd's cpu all-reduce (2 ranks,
# float32, from arena memory and from plain memory) against a memcpy of the same
# buffer, and against PyTorch's gloo all-reduce (the anchor script in
# ../shared/anchors, run with Debian's python3-torch) when it is there. On a shared
# machine only ratios taken in one run mean anything. Prints the JSON lines, then a
# table with the ratios.
#   bench/allreduce.sh            (BUILD_DIR=... to pick the build tree, ITERS=N)
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
build=${BUILD_DIR:-$root/build}
iters=${ITERS:-20}
anchor="$root/../shared/anchors/torch_allreduce.py"
sizes=(524288 16777216) # 2 MiB and 64 MiB of float32

build_ours() {
  local log
  log=$(mktemp)
  if ! { [[ -f "$build/CMakeCache.txt" ]] || cmake -S "$root" -B "$build"; } >"$log" 2>&1 ||
     ! cmake --build "$build" --target bench_allreduce -j2 >>"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "allreduce.sh: building bench_allreduce failed" >&2
    exit 1
  fi
  rm -f "$log"
}

# Pull a number out of a JSON line: field LINE NAME
field() { sed -E "s/.*\"$2\": ?([-0-9.eE+]+).*/\1/" <<<"$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

build_ours
echo "== ddpd cpu all-reduce, 2 ranks (median of $iters after warm-up)"
ours=$("$build/bin/bench_allreduce" --iters "$iters" 16 "${sizes[@]}")
echo "$ours"

declare -A gloo
if [[ ! -f "$anchor" ]]; then
  echo "== gloo: skipped (no anchor script at $anchor)"
elif ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "== gloo: skipped (/usr/bin/python3 cannot import torch)"
else
  echo "== PyTorch gloo all-reduce, 2 ranks"
  for n in "${sizes[@]}"; do
    gloo[$n]=$(/usr/bin/python3 "$anchor" "$n" 2>/dev/null | tail -1 || true)
    echo "${gloo[$n]:-gloo run for n=$n failed}"
  done
fi

echo
printf '%-8s %-6s %12s %10s %9s %10s %12s %10s\n' size source allreduce_ms memcpy_ms vs_memcpy gloo_ms gloo/memcpy ours_vs_gloo
for n in "${sizes[@]}"; do
  g=${gloo[$n]:-}
  g_ms=n/a g_ratio=n/a
  if [[ -n "$g" ]]; then
    g_ms=$(awk -v x="$(field "$g" allreduce_ms)" 'BEGIN { printf "%.3f", x }')
    g_ratio=$(ratio "$g_ms" "$(field "$g" memcpy_ms)")
  fi
  for src in arena plain; do
    line=$(grep "\"n\":$n,.*\"src\":\"$src\"" <<<"$ours")
    ar=$(field "$line" allreduce_ms) mc=$(field "$line" memcpy_ms)
    speedup=n/a
    [[ $g_ms == n/a ]] || speedup="$(ratio "$g_ms" "$ar")x"
    printf '%-8s %-6s %12.3f %10.3f %9s %10s %12s %10s\n' "$((n * 4 / 1048576))MiB" "$src" "$ar" "$mc" \
      "$(ratio "$ar" "$mc")" "$g_ms" "$g_ratio" "$speedup"
  done
done
echo "(vs_memcpy: our all-reduce / a memcpy of the buffer; ours_vs_gloo: how many times faster than gloo)"
