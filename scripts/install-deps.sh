#!/usr/bin/env bash
# Installs, from Debian's packages (and npm's, for the dashboard), what ddpd needs to
# build, to run its tests, or only to run. Idempotent: when everything is already there
# it checks and says nothing. Used by the README's two commands, by CI and by the
# Dockerfile, so they cannot drift.
#
# It works on Debian 12 and on Ubuntu 24.04 (what NVIDIA's CUDA images are built on):
# a package written "a|b" is whichever of the two is installed, or else the first the
# archive has (Ubuntu 24.04 renamed libraries in its 64-bit time_t transition:
# libcurl4t64 for libcurl4); one written "name?" is installed where the archive has
# it and skipped, with a note, where it does not.
#
#   install-deps.sh            to build and test (the README's commands, CI)
#   install-deps.sh --build    only what building needs (the Docker image's build stage,
#                              through DDPD_DEPS=build, which scripts/build.sh's call
#                              obeys too): no test tools, and of npm's packages uPlot only
#   install-deps.sh --bench    to build and test, and the benchmarks' packages (wrk)
#   install-deps.sh --runtime  only what the installed programs need to run (the Docker
#                              image's runtime stage): no compiler, no npm
# With no argument, DDPD_DEPS (build, test, bench or runtime) names the mode; test is
# the default.
set -euo pipefail

mode=${1:-${DDPD_DEPS:-test}}
mode=${mode#--}
case "$mode" in
  build | test | bench | runtime) ;;
  *)
    if [[ -n "${1:-}" ]]; then from="argument $1"; else from="DDPD_DEPS=$DDPD_DEPS"; fi
    echo "install-deps: unknown mode '$mode' (from $from): use --build, --bench, --runtime or none (to build and test)" >&2
    exit 2
    ;;
esac

# To build: the compiler, CMake and the libraries' headers; node and npm to fetch uPlot
# (over https: ca-certificates).
build_packages=(
  build-essential cmake pkg-config
  libjansson-dev libopenblas-dev zlib1g-dev
  # oneDNN: the CNN's convolutions (2.x on Debian 12, 3.x on Ubuntu 24.04; both work)
  libdnnl-dev
  libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev
  # gloo (the CPU collective library PyTorch's CPU backend uses): the built-in trainer
  # between nodes; without it a built-in run stays on one node
  "libgloo-dev?"
  ca-certificates
)
# A node from elsewhere (NodeSource) brings its own npm, which Debian's would clash with.
command -v node >/dev/null 2>&1 || build_packages+=(nodejs)
command -v npm >/dev/null 2>&1 || build_packages+=(npm)

# To test, besides building.
test_packages=(
  python3 "dataset-fashion-mnist?"
  # promtool checks /metrics; the OpenAPI and Docker tests read JSON Schema and YAML
  prometheus python3-jsonschema python3-yaml
  # command runs launch a real PyTorch DDP script (gloo on the CPU) with /usr/bin/python3
  python3-torch python3-numpy
  # the sanitizer build (scripts/build-sanitize.sh) is clang's; libclang-rt-dev (a
  # recommendation of clang's, which --no-install-recommends leaves out) holds the
  # ASan, UBSan and libFuzzer runtimes, llvm the llvm-symbolizer their reports name lines with
  clang libclang-rt-dev llvm
  # the dashboard's browser tests run Debian's chromium (driven by playwright-core,
  # which never downloads a browser)
  "chromium?" # Ubuntu 24.04 has it only as a snap
  # tests/integration/docker: a Docker engine to build and run the image, debootstrap to make its
  # Debian base (no image registry is needed), and compose to check docker-compose.yml
  docker.io debootstrap docker-compose
  # the manual pages the build writes are read with man (tests/integration/ops/test_doc_samples.py)
  man-db
  # tests/integration/slurm: a real Slurm cluster the test starts on this host (a slurmctld, two
  # slurmd, munged on a socket of its own); the packages start no daemon by themselves
  slurm-wlm munge
)

# To run what `cmake --install` put in place (the runtime stage of the image): the
# libraries the programs link (ldd checks them there), curl for the health check and
# setcap (libcap2-bin: the capabilities ddpd takes to run runs as their users' accounts).
runtime_packages=(
  libjansson4 "libopenblas0-pthread|libopenblas0" zlib1g "libdnnl3|libdnnl2" libgomp1
  "libmicrohttpd12t64|libmicrohttpd12" libsqlite3-0 "libcurl4t64|libcurl4" "libgloo0t64|libgloo0?"
  curl ca-certificates libcap2-bin
)

case "$mode" in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  bench) packages=("${build_packages[@]}" "${test_packages[@]}" wrk iperf3) ;;
  runtime) packages=("${runtime_packages[@]}") ;;
esac

missing=()
installed() { [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == "installed" ]]; }
for spec in "${packages[@]}"; do
  IFS='|' read -ra alternatives <<< "${spec%\?}"
  found=0
  for p in "${alternatives[@]}"; do
    if installed "$p"; then found=1; break; fi
  done
  [[ $found -eq 1 ]] || missing+=("$spec")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  in_archive() { # (not `| grep -q`: with pipefail, grep's early exit fails the pipe)
    local policy
    policy=$(apt-cache policy "$1" 2>/dev/null) || return 1
    [[ "$policy" == *"Candidate: "* && "$policy" != *"Candidate: (none)"* ]]
  }
  install=()
  for spec in "${missing[@]}"; do
    IFS='|' read -ra alternatives <<< "${spec%\?}"
    pick=
    for p in "${alternatives[@]}"; do
      if in_archive "$p"; then pick=$p; break; fi
    done
    if [[ -n "$pick" ]]; then
      install+=("$pick")
    elif [[ "$spec" == *\? ]]; then
      echo "install-deps: ${spec%\?} is not in this distribution's archive: skipped (see docs/operating.md, Installing)" >&2
    else
      install+=("${alternatives[0]}") # apt says why it cannot
    fi
  done
  if [[ ${#install[@]} -gt 0 ]]; then
    echo "install-deps: installing ${install[*]}" >&2
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${install[@]}" >/dev/null
  fi
fi
if [[ "$mode" == runtime ]]; then exit 0; fi

# From npm, as package-lock.json pins them: uPlot (the dashboard's charts, served by
# ddpd at /vendor/uplot/; `cmake --install` puts it in share/ddpd/vendor/uplot), and, to
# test, playwright-core (the browser tests' driver) and @redocly/cli (the OpenAPI linter
# the tests run, offline once installed), which are package.json's devDependencies.
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ "$mode" == build ]]; then
  if [[ ! -f "$root/node_modules/uplot/dist/uPlot.esm.js" ]]; then
    echo "install-deps: npm ci --omit=dev (uplot)" >&2
    (cd "$root" && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
  fi
elif [[ ! -f "$root/node_modules/uplot/dist/uPlot.esm.js" || ! -f "$root/node_modules/playwright-core/package.json" ||
        ! -x "$root/node_modules/.bin/redocly" ]]; then
  echo "install-deps: npm ci (uplot, playwright-core, @redocly/cli)" >&2
  (cd "$root" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
fi
