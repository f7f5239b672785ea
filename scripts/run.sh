#!/usr/bin/env bash
# The README's first command: installs what is needed, builds, and runs the ddpd
# service on its embedded defaults (http://127.0.0.1:8080, state in
# ~/.local/state/ddpd, data from /usr/share/datasets, one CPU slot per core).
#
#   scripts/run.sh                              serve on 127.0.0.1:8080
#   scripts/run.sh --listen 127.0.0.1:9000      another port (or DDPD_LISTEN=...)
#   scripts/run.sh --help                       every option of `ddpd serve`
#
# Every argument goes to `ddpd serve`. The programs stay in build/bin/ (BUILD_DIR
# overrides it), not on PATH; it says so, and where, before serving.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
bin="$(pwd)/${BUILD_DIR:-build}/bin"
for a in "$@"; do
  if [[ "$a" == "-h" || "$a" == "--help" ]]; then exec "$bin/ddpd" serve --help; fi
done
{
  echo "run.sh: the programs are in $bin (ddpd, ddpctl, ddp-trainer): not on PATH;"
  echo "run.sh:   export PATH=$bin:\$PATH, or install them: sudo cmake --install ${BUILD_DIR:-build}"
  echo "run.sh: another port: scripts/run.sh --listen 127.0.0.1:9000 (or DDPD_LISTEN); every option: scripts/run.sh --help"
} >&2
exec "$bin/ddpd" serve "$@"
