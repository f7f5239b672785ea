#!/usr/bin/env python3
"""scripts/install-deps.sh's choices, against a package archive of Debian 12's names or
of Ubuntu 24.04's (what NVIDIA's CUDA images are built on, whose archive cannot be
reached here): dpkg-query, apt-cache, apt-get and npm are stand-ins on PATH that answer
from a list of the archive's packages and of those installed, and write down what they
were asked to do. The real script runs, copied into a temporary tree.

  runtime_ubuntu  --runtime takes the 64-bit time_t names (libcurl4t64,
                  libmicrohttpd12t64) and oneDNN 3 where the archive has them
  runtime_debian  and Debian 12's names (libcurl4, libmicrohttpd12, libdnnl2) there
  build_mode      DDPD_DEPS=build (the image's build stage): what building needs and
                  none of the tests' tools; of npm's packages, the dependencies only
  test_mode       no argument: the build list and the tests' tools; a package the
                  archive lacks and the script marks optional is skipped, saying so
  nothing_to_do   everything installed: no apt-get, no npm, not a word
  bad_mode        an unknown mode, as an argument or in DDPD_DEPS: status 2, naming it

Usage: test_install_deps.py CASE --source REPO"""
import argparse, os, shutil, subprocess, sys, tempfile

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402

COMMON = """build-essential cmake pkg-config libjansson-dev libopenblas-dev zlib1g-dev libdnnl-dev libmicrohttpd-dev
libsqlite3-dev libcurl4-openssl-dev libgloo-dev ca-certificates nodejs npm python3 prometheus python3-jsonschema
python3-yaml python3-torch python3-numpy clang libclang-rt-dev llvm docker.io debootstrap docker-compose man-db slurm-wlm munge
libjansson4 libopenblas0-pthread libopenblas0 zlib1g libgomp1 libsqlite3-0 curl libcap2-bin wrk iperf3""".split()
DEBIAN = COMMON + "libdnnl2 libmicrohttpd12 libcurl4 libgloo0 chromium dataset-fashion-mnist".split()
UBUNTU = COMMON + "libdnnl3 libmicrohttpd12t64 libcurl4t64 libgloo0".split()  # chromium: a snap only
TEST_TOOLS = ("python3-torch", "chromium", "clang", "prometheus", "docker.io", "debootstrap", "dataset-fashion-mnist",
              "slurm-wlm", "munge")

STUBS = {
    "dpkg-query": """#!/bin/sh
# dpkg-query -W -f=... PKG: "installed" for a package in $STUB/installed
for p; do :; done
grep -qx "$p" "$STUB/installed" && printf installed
exit 0
""",
    "apt-cache": """#!/bin/sh
# apt-cache policy PKG
if grep -qx "$2" "$STUB/archive"; then printf '%s:\\n  Installed: (none)\\n  Candidate: 1.0\\n' "$2"
else printf '%s:\\n  Installed: (none)\\n  Candidate: (none)\\n' "$2"; fi
""",
    "apt-get": """#!/bin/sh
echo "apt-get $*" >> "$STUB/log"
""",
    "npm": """#!/bin/sh
echo "npm $*" >> "$STUB/log"
""",
    "sudo": """#!/bin/sh
exec "$@"
""",
}


class Fake:
    def __init__(self, work, archive, installed=(), uplot=False):
        self.work = work
        self.stub = os.path.join(work, "stub")
        os.makedirs(os.path.join(work, "tree", "scripts"))
        os.makedirs(os.path.join(self.stub, "bin"))
        self.script = os.path.join(work, "tree", "scripts", "install-deps.sh")
        shutil.copy(os.path.join(ARGS.source, "scripts", "install-deps.sh"), self.script)
        for name, text in STUBS.items():
            path = os.path.join(self.stub, "bin", name)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o755)
        for name, items in (("archive", archive), ("installed", installed)):
            with open(os.path.join(self.stub, name), "w") as f:
                f.write("".join(p + "\n" for p in items))
        open(os.path.join(self.stub, "log"), "w").close()
        if uplot:  # what npm ci leaves, so that the script has nothing to fetch
            for rel in ("uplot/dist/uPlot.esm.js", "playwright-core/package.json", ".bin/redocly"):
                path = os.path.join(work, "tree", "node_modules", rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write("")
                os.chmod(path, 0o755)

    def run(self, *args, env=None):
        e = {k: v for k, v in os.environ.items() if k != "DDPD_DEPS"}
        e.update(PATH=f"{self.stub}/bin:/usr/bin:/bin", STUB=self.stub, **(env or {}))
        p = subprocess.run(["bash", self.script, *args], capture_output=True, text=True, timeout=120, env=e)
        with open(os.path.join(self.stub, "log")) as f:
            self.log = f.read()
        installs = [line.split()[2:] for line in self.log.splitlines() if line.startswith("apt-get install")]
        self.installed = [w for words in installs for w in words if not w.startswith("-")]
        return p


def case_runtime_ubuntu(work):
    f = Fake(work, UBUNTU)
    p = f.run("--runtime")
    check(p.returncode == 0, f"--runtime exits 0: {p.returncode} {p.stderr[-500:]!r}")
    for name in ("libcurl4t64", "libmicrohttpd12t64", "libdnnl3", "libgloo0", "libopenblas0-pthread", "curl"):
        check(name in f.installed, f"on Ubuntu 24.04 it installs {name}: {f.installed}")
    for name in ("libcurl4", "libmicrohttpd12", "libdnnl2"):
        check(name not in f.installed, f"not Debian's {name}: {f.installed}")
    check("npm" not in f.log, "and runs no npm")


def case_runtime_debian(work):
    f = Fake(work, DEBIAN)
    p = f.run("--runtime")
    check(p.returncode == 0, f"--runtime exits 0: {p.returncode} {p.stderr[-500:]!r}")
    for name in ("libcurl4", "libmicrohttpd12", "libdnnl2", "libgloo0", "libgomp1", "ca-certificates"):
        check(name in f.installed, f"on Debian 12 it installs {name}: {f.installed}")
    check(not any(n.endswith("t64") for n in f.installed), f"no t64 names: {f.installed}")
    check(not any(n.endswith("-dev") for n in f.installed), f"no headers: {f.installed}")


def case_build_mode(work):
    f = Fake(work, UBUNTU)
    p = f.run(env={"DDPD_DEPS": "build"})
    check(p.returncode == 0, f"DDPD_DEPS=build exits 0: {p.returncode} {p.stderr[-500:]!r}")
    for name in ("build-essential", "cmake", "libdnnl-dev", "libgloo-dev", "libcurl4-openssl-dev", "ca-certificates"):
        check(name in f.installed, f"it installs {name}: {f.installed}")
    for name in TEST_TOOLS + ("python3",):
        check(name not in f.installed, f"but not the test tool {name}")
    check("npm ci --omit=dev" in f.log, f"npm installs the dependencies only (uPlot): {f.log!r}")
    same = Fake(os.path.join(work, "arg"), UBUNTU)
    same.run("--build")
    check(same.installed == f.installed, f"--build is the same: {same.installed}")


def case_test_mode(work):
    f = Fake(work, UBUNTU)
    p = f.run()
    check(p.returncode == 0, f"no argument exits 0: {p.returncode} {p.stderr[-500:]!r}")
    for name in ("cmake", "python3-torch", "clang", "prometheus", "docker.io", "debootstrap", "docker-compose",
                 "slurm-wlm", "munge"):
        check(name in f.installed, f"it installs {name}: {f.installed}")
    for name in ("chromium", "dataset-fashion-mnist"):
        check(name not in f.installed and f"{name} is not in this distribution's archive: skipped" in p.stderr,
              f"{name}, not in Ubuntu's archive, is skipped with a note: {p.stderr[-600:]!r}")
    check("npm ci --no-audit" in f.log and "--omit=dev" not in f.log, f"npm installs the test tools too: {f.log!r}")


def case_nothing_to_do(work):
    f = Fake(work, DEBIAN, installed=DEBIAN, uplot=True)
    for args in ((), ("--build",), ("--runtime",), ("--bench",)):
        p = f.run(*args)
        check(p.returncode == 0 and not p.stdout and not p.stderr and not f.log,
              f"{args or 'no argument'}, everything there: nothing run, nothing said: {p.returncode} "
              f"{p.stdout!r} {p.stderr!r} {f.log!r}")


def case_bad_mode(work):
    f = Fake(work, DEBIAN)
    p = f.run("--gpu")
    check(p.returncode == 2 and "unknown mode 'gpu' (from argument --gpu)" in p.stderr,
          f"an unknown argument: status 2, named: {p.returncode} {p.stderr!r}")
    p = f.run(env={"DDPD_DEPS": "tests"})
    check(p.returncode == 2 and "DDPD_DEPS=tests" in p.stderr, f"an unknown DDPD_DEPS too: {p.returncode} {p.stderr!r}")
    check(not f.log, "and nothing was installed")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    ARGS = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddpd-install-deps-") as work:
        CASES[ARGS.case](work)
    checks.finish(f"install_deps {ARGS.case}")
