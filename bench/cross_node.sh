#!/usr/bin/env bash
# Across nodes (bench/cross_node.py): the TCP bandwidth between two network
# namespaces (iperf3), a 64 MiB gloo all-reduce between them against it, and a DDP
# MLP command run with 4 ranks across 2 nodes against 2 ranks on one. Needs root.
#   bench/cross_node.sh            (BUILD_DIR=... to pick the build tree)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh
scripts/install-deps.sh --bench
bin=$root/${BUILD_DIR:-build}/bin
[[ $(id -u) -eq 0 ]] || { echo "cross_node.sh: network namespaces need root (run it with sudo)" >&2; exit 2; }
exec python3 bench/cross_node.py --ddpd "$bin/ddpd" --runner "$bin/ddp-run" --trainer "$bin/ddp-trainer"
