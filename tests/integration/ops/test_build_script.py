#!/usr/bin/env python3
"""scripts/build.sh reports a failed build: the very script, copied beside a small
CMake project in a temporary directory (and a scripts/install-deps.sh there that
installs nothing, since this project needs nothing), exits non-zero when a source
file has an error planted in it and says so, and exits 0 with the program built
when the file is fixed; its arguments reach CMake's configure step (how the Docker
image's build stage builds without the tests). (Its grep filter once hid make's
status: `|| true` in the pipeline reset PIPESTATUS, and a broken build went on
through CI, run.sh and the Docker build.)

Usage: test_build_script.py CASE --source REPO"""
import argparse, os, shutil, subprocess, sys, tempfile

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402

CMAKELISTS = ("cmake_minimum_required(VERSION 3.16)\nproject(planted C)\nadd_executable(hello hello.c)\n"
              "option(WITH_SECOND \"a second program\" ON)\nif(WITH_SECOND)\n  add_executable(second hello.c)\nendif()\n")
GOOD = '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n'
PLANTED = '#include <stdio.h>\nint main(void) { puts("hello") return 0; } /* planted: no ";" */\n'


def project(work, source_text):
    os.makedirs(os.path.join(work, "scripts"))
    shutil.copy(os.path.join(ARGS.source, "scripts", "build.sh"), os.path.join(work, "scripts", "build.sh"))
    deps = os.path.join(work, "scripts", "install-deps.sh")
    with open(deps, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(deps, 0o755)
    for name, text in (("CMakeLists.txt", CMAKELISTS), ("hello.c", source_text)):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)


def build(work, *cmake_args):
    env = dict(os.environ, BUILD_DIR=os.path.join(work, "out"))
    return subprocess.run(["bash", os.path.join(work, "scripts", "build.sh"), *cmake_args], env=env,
                          capture_output=True, text=True, timeout=240)


def case_planted_error(work):
    project(work, PLANTED)
    r = build(work)
    check(r.returncode != 0, f"a planted compile error fails the build script (status {r.returncode})")
    out = r.stdout + r.stderr
    check("hello.c" in out and "error" in out, f"the compiler's message is shown: {out[-600:]!r}")
    check("the build failed" in r.stderr, f"the script says the build failed: {r.stderr[-300:]!r}")
    check(not os.path.exists(os.path.join(work, "out", "hello")), "no program was left behind")


def case_clean_build(work):
    project(work, GOOD)
    r = build(work)
    check(r.returncode == 0, f"a clean build exits 0: {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
    exe = os.path.join(work, "out", "hello")
    check(os.access(exe, os.X_OK) and subprocess.run([exe], capture_output=True, text=True).stdout == "hello\n",
          "the program was built and runs")
    check("the build failed" not in r.stderr, f"and nothing says it failed: {r.stderr[-300:]!r}")
    check(os.access(os.path.join(work, "out", "second"), os.X_OK), "by default the option's program is built too")


def case_cmake_arguments(work):
    project(work, GOOD)
    r = build(work, "-DWITH_SECOND=OFF")
    check(r.returncode == 0, f"build.sh -DWITH_SECOND=OFF exits 0: {r.stdout[-300:]!r} {r.stderr[-300:]!r}")
    check(os.access(os.path.join(work, "out", "hello"), os.X_OK), "the program was built")
    check(not os.path.exists(os.path.join(work, "out", "second")),
          "the argument reached CMake: the program the option turns off was not built")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    ARGS = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddpd-build-script-") as work:
        CASES[ARGS.case](work)
    checks.finish(f"build_script {ARGS.case}")
