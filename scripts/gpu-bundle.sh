#!/usr/bin/env bash
# The GPU check, prepared here and run there: builds with the CUDA 13 toolkit (sm_90
# and its PTX) and collects into DIR everything the check needs on a machine that has
# only an NVIDIA driver, the CUDA runtime libraries (cudart, cuBLAS; NCCL may be only
# the nvidia-nccl wheel's libnccl.so.2) and a Python with PyTorch: the executables,
# the shared libraries they load besides CUDA's and the C library's (copied from
# this machine's Debian packages, named in DIR/MANIFEST.json), Fashion-MNIST, the GPU
# tests and the benchmark. DIR/run.sh OUTDIR then runs the check there
# (scripts/gpu-bundle-run.sh says how).
#   scripts/gpu-bundle.sh [--from-build BUILD] DIR
# --from-build BUILD collects from a CUDA build that is already made (ctest's bundle
# test does), else build-gpu (BUILD_DIR overrides) is configured and built. DATA is
# the Fashion-MNIST directory. The libraries' archive is kept in DIR and made again
# only when a library changed. Fails when DIR would exceed 60 MiB.
set -euo pipefail
caller=$(pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
absolute() { [[ "$1" == /* ]] && echo "$1" || echo "$caller/$1"; } # (a path as the caller meant it)
usage() { echo "usage: scripts/gpu-bundle.sh [--from-build BUILD] DIR" >&2; exit 2; }
from_build=
if [[ "${1:-}" == "--from-build" ]]; then
  [[ $# -ge 2 ]] || usage
  from_build=$2
  shift 2
fi
[[ $# -eq 1 ]] || usage
dir=$1
data=$(absolute "${DATA:-/usr/share/datasets/fashion-mnist}")
max_bytes=$((60 * 1024 * 1024))
programs=(ddp-trainer ddp-trainer-nccl ddpd test_gpu_kernels test_gpu_engine bench_gpu_step optim_replay_nccl gpu_preflight)
say() { echo "gpu-bundle: $*"; }
die() { echo "gpu-bundle: $*" >&2; exit 1; }

if [[ -n "$from_build" ]]; then
  build=$(cd "$(absolute "$from_build")" && pwd)
else
  build=$root/${BUILD_DIR:-build-gpu}
  say "configuring and building $build (Release, CUDA)"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
grep -q "DDPD_HAVE_CUDA 1" "$build/generated/ddpd_build_config.h" 2>/dev/null ||
  die "$build is not a CUDA build: CMake found no CUDA 13 toolkit with cuBLAS and NCCL (see /usr/local/cuda)"
if [[ -z "$from_build" ]]; then
  cmake --build "$build" -j"$(nproc)" --target "${programs[@]}" 2>&1 | { grep -vE '^\[ *[0-9]+%\]|^gmake|^make' || true; }
  [[ "${PIPESTATUS[0]}" -eq 0 ]] || die "the build failed (the compiler's messages are above)"
fi
for p in "${programs[@]}"; do
  [[ -x "$build/bin/$p" ]] || die "$build/bin/$p is missing: build it (cmake --build $build --target $p)"
done
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [[ -f "$data/$f" ]] || die "Fashion-MNIST is not in $data ($f): install dataset-fashion-mnist, or set DATA"
done

dir=$(absolute "$dir")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rm -rf "$dir/bin" "$dir/libexec" "$dir/tests" "$dir/bench" "$dir/scripts" "$dir/data"
mkdir -p "$dir/bin" "$dir/libexec" "$dir/tests/support" "$dir/tests/integration/gpu" "$dir/tests/integration/trainer" \
         "$dir/bench/gpu" \
         "$dir/scripts" "$dir/data/fashion-mnist"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rpath_remove=$work/rpath_remove.cmake # (CMake edits ELF files; the build has no patchelf)
echo 'file(RPATH_REMOVE FILE "${FILE}")' > "$rpath_remove"

# The executables, without the build's search path (CUDA's libraries are found by
# run.sh on the target, not where they were here), each behind a wrapper that runs it
# with the libraries run.sh found.
for p in "${programs[@]}"; do
  cp "$build/bin/$p" "$dir/libexec/$p"
  strip --strip-debug "$dir/libexec/$p"
  cmake -DFILE="$dir/libexec/$p" -P "$rpath_remove" >/dev/null
  cat > "$dir/bin/$p" <<SH
#!/bin/sh
# $p of the GPU bundle, with the libraries run.sh found (DDPD_BUNDLE_LIBRARY_PATH).
here=\$(cd "\$(dirname "\$0")/.." && pwd)
if [ -z "\${DDPD_BUNDLE_LIBRARY_PATH:-}" ]; then
  echo "\$0: run it through \$here/run.sh, which finds the CUDA libraries and unpacks the bundle's" >&2
  exit 2
fi
LD_LIBRARY_PATH=\$DDPD_BUNDLE_LIBRARY_PATH exec "\$here/libexec/$p" "\$@"
SH
  chmod +x "$dir/bin/$p"
done

# The libraries they load, less the C library's (the target's own, checked by
# run.sh) and CUDA's (the target's runtime): what ldd resolves here, from Debian 12.
is_system() { [[ "$1" =~ ^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so) ]]; }
is_cuda() { [[ "$1" =~ ^(libcuda\.so|libcudart|libcublas|libcublasLt|libnccl|libnvidia|libnvrtc|libnvJitLink) ]]; }
mapfile -t libs < <(for p in "${programs[@]}"; do ldd "$build/bin/$p"; done |
                    awk '$2 == "=>" && $3 ~ /^\// {print $1 " " $3}' | sort -u)
missing=$(for p in "${programs[@]}"; do ldd "$build/bin/$p"; done | grep "not found" || true)
[[ -z "$missing" ]] || die "a library the executables need is not found here: $missing"
keys=() bundled=() manifest_libs=()
for entry in "${libs[@]}"; do
  name=${entry%% *} path=${entry#* }
  is_system "$name" || is_cuda "$name" && continue
  real=$(readlink -f "$path")
  keys+=("$name $(stat -c '%s %Y' "$real")")
  bundled+=("$name=$real")
  package=$(dpkg -S "$real" 2>/dev/null | head -1 | cut -d: -f1 || true)
  [[ -z "$package" ]] && package=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1 || true)
  version=$( [[ -n "$package" ]] && dpkg-query -W -f='${Version}' "$package" 2>/dev/null || true)
  manifest_libs+=("{\"name\": \"$name\", \"package\": \"${package:-?}\", \"version\": \"${version:-?}\"}")
done
key=$(printf '%s\n' "${keys[@]}" | sha256sum | cut -c1-16)
if [[ -f "$dir/lib.tar.xz" && "$(cat "$dir/lib.key" 2>/dev/null)" == "$key" ]]; then
  say "the ${#bundled[@]} libraries are unchanged: lib.tar.xz kept"
else
  say "packing ${#bundled[@]} libraries into lib.tar.xz"
  stage=$work/lib
  mkdir -p "$stage"
  for b in "${bundled[@]}"; do cp -L "${b#*=}" "$stage/${b%%=*}"; done
  tar -C "$stage" -cf - . | xz -6 -T"$(nproc)" > "$dir/lib.tar.xz.new"
  mv "$dir/lib.tar.xz.new" "$dir/lib.tar.xz"
  echo "$key" > "$dir/lib.key"
fi

# The newest C library any of it needs (the target's must be as new).
glibc=$( { for p in "${programs[@]}"; do objdump -T "$dir/libexec/$p"; done
           for b in "${bundled[@]}"; do objdump -T "${b#*=}"; done; } 2>/dev/null |
         grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)

cp "$data"/*-ubyte.gz "$dir/data/fashion-mnist/"
cp tests/support/checks.py tests/support/ddpd_harness.py "$dir/tests/support/"
cp tests/integration/gpu/test_gpu_e2e.py "$dir/tests/integration/gpu/"
cp tests/integration/trainer/test_optim_torch.py "$dir/tests/integration/trainer/"
cp bench/gpu/torch_mlp_ddp.py "$dir/bench/gpu/"
cp scripts/gpu_check_steps.py "$dir/scripts/"
cp scripts/gpu-bundle-run.sh "$dir/run.sh"
chmod +x "$dir/run.sh"

cuda=$(sed -n 's/^#define CUDART_VERSION \([0-9]*\)/\1/p' /usr/local/cuda/include/cuda_runtime_api.h 2>/dev/null | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
libs_json=$(IFS=,; echo "${manifest_libs[*]}")
cat > "$dir/MANIFEST.json" <<JSON
{"built": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "commit": "$commit", "cuda_runtime": ${cuda:-0},
 "needs": {"glibc": "$glibc", "cuda_libraries": ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2"]},
 "gpu_code": "sm_90 and compute_90 PTX", "programs": [$(printf '"%s",' "${programs[@]}" | sed 's/,$//')],
 "libraries": [$libs_json]}
JSON

bytes=$(du -sb "$dir" | cut -f1)
say "$dir: $((bytes / 1024 / 1024)) MiB ($bytes bytes): ${#programs[@]} programs, ${#bundled[@]} libraries (lib.tar.xz), Fashion-MNIST; needs glibc >= $glibc and CUDA 13's runtime libraries"
[[ $bytes -le $max_bytes ]] || die "the bundle is $bytes bytes, more than 60 MiB"
say "run it on the GPU machine: $dir/run.sh OUTDIR"
