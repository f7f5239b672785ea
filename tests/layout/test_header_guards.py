#!/usr/bin/env python3
"""Every header's include guard says where the header is: DDPD_ and its path from the
repository's root, upper-cased, every character that is not a letter or a digit an
underscore (server/lib/run_files.h: DDPD_SERVER_LIB_RUN_FILES_H; trainer/cuda/launch.cuh:
DDPD_TRAINER_CUDA_LAUNCH_CUH). A guard copied with a file to another folder, or left
naming the folder a file moved out of, is found here, and so is one whose #define
differs from its #ifndef (the guard guards nothing). The planted case writes a header
with another folder's guard into a copy of the tree and holds that it is named.

  scripts/header-guards.py --fix rewrites the guards by this rule.

Usage: test_header_guards.py CASE --source REPO"""
import argparse, os, re, shutil, sys, tempfile

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402

TREES = ("base", "server", "trainer", "runner", "schema", "client", "spawn", "reporter", "tests", "fuzz", "bench",
         "cmake")
HEADERS = (".h", ".cuh")
GUARD = re.compile(r"^#ifndef[ \t]+(\w+)[ \t]*\n#define[ \t]+(\w+)[ \t]*$", re.M)


def expected_guard(rel):
    return "DDPD_" + re.sub(r"[^A-Za-z0-9]", "_", rel).upper()


def headers(root):
    for tree in TREES:
        for dirpath, dirnames, files in os.walk(os.path.join(root, tree)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("node_modules",) and not d.startswith("build"))
            for name in sorted(files):
                if name.endswith(HEADERS):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def wrong_guards(root):
    """'path: what is wrong' for each header whose guard is not its path's."""
    out = []
    for rel in headers(root):
        with open(os.path.join(root, rel), errors="replace") as f:
            text = f.read()
        m = GUARD.search(text)
        want = expected_guard(rel)
        if not m:
            out.append(f"{rel}: no #ifndef/#define guard (want {want})")
        elif m.group(1) != m.group(2):
            out.append(f"{rel}: #ifndef {m.group(1)} but #define {m.group(2)}")
        elif m.group(1) != want:
            out.append(f"{rel}: guard {m.group(1)}, want {want}")
    return out


def case_guards_name_their_paths(a):
    found = list(headers(a.source))
    check(len(found) > 150, f"the tree's headers are found: {len(found)}")
    wrong = wrong_guards(a.source)
    check(not wrong, f"every header's guard names its path ({len(wrong)} do not; scripts/header-guards.py --fix): "
          + "; ".join(wrong[:40]))


def case_finds_a_planted_guard(a):
    with tempfile.TemporaryDirectory(prefix="ddpd-guards-") as d:
        for tree in ("server",):
            shutil.copytree(os.path.join(a.source, tree), os.path.join(d, tree),
                            ignore=shutil.ignore_patterns("*.c", "*.txt", "*.md"))
        before = set(wrong_guards(d))
        planted = os.path.join(d, "server", "sched", "planted.h")
        with open(planted, "w") as f:  # copied from the store, its guard left as it was
            f.write("#ifndef DDPD_SERVER_STORE_PLANTED_H\n#define DDPD_SERVER_STORE_PLANTED_H\n#endif\n")
        after = set(wrong_guards(d)) - before
        check(after == {"server/sched/planted.h: guard DDPD_SERVER_STORE_PLANTED_H, want DDPD_SERVER_SCHED_PLANTED_H"},
              f"the planted header's guard is named, and only it: {sorted(after)}")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    CASES[args.case](args)
    checks.finish(f"header_guards {args.case}")
