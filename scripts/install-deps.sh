#!/usr/bin/env bash
# Installs, from Debian's packages, everything ddpd needs to build and to run its
# tests. Idempotent: when everything is already there it checks and says nothing.
# Used by the README's commands, by CI and by the Dockerfile, so they cannot drift.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libjansson-dev libopenblas-dev zlib1g-dev
  libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev
  dataset-fashion-mnist
  python3
)
# Extra packages for benchmarks only (PyTorch, wrk): `install-deps.sh --bench`.
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch python3-numpy wrk)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
