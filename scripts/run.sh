#!/usr/bin/env bash
# The README's first command: installs what is needed, builds, and runs the ddpd
# service on its embedded defaults (http://127.0.0.1:8080, state in
# ~/.local/state/ddpd, data from /usr/share/datasets, one CPU slot per core).
# Extra arguments go to `ddpd serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec "${BUILD_DIR:-build}/bin/ddpd" serve "$@"
