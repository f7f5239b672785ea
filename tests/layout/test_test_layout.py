#!/usr/bin/env python3
"""The tests' own layout (tests/README.md, "Where a test goes"): tests/unit/AREA/ and
tests/integration/AREA/ each registered by the .cmake file beside the folder and named
for it (tests/unit/server/ by tests/unit/server.cmake), no folder without its file nor
file without its folder; every test_* file of a folder named by its folder's .cmake,
which names no file of another folder; and tests/support/ imported as it is: no Python
file under tests/ edits sys.path, no C file climbs out of its folder with "../" in an
#include. The planted case writes one fault of each kind into a copy of tests/ and
holds that each is named, and only they.

Usage: test_test_layout.py CASE --source REPO"""
import argparse, os, re, shutil, tempfile

import checks
from checks import check, cases_in

KINDS = ("unit", "integration")
LISTED = re.compile(r"\$\{CMAKE_CURRENT_LIST_DIR\}/((?:[\w./-]|\$\{\w+\})+)")
PATH_EDIT = re.compile(r"\bsys\s*\.\s*path\s*(\.\s*(insert|append|extend)\s*\(|\[[^\]]*\]\s*=|\s*[+]?=)")
CLIMBING_INCLUDE = re.compile(r'^\s*#\s*include\s*"\.\./', re.M)


def layout_faults(tests):
    """'what is wrong' for each departure from the layout, in the tests/ folder `tests`."""
    out = []
    for kind in KINDS:
        root = os.path.join(tests, kind)
        folders = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and d != "__pycache__"}
        files = {f[:-len(".cmake")] for f in os.listdir(root) if f.endswith(".cmake")}
        out += [f"{kind}/{d}/ has no {kind}/{d}.cmake beside it" for d in sorted(folders - files)]
        out += [f"{kind}/{f}.cmake has no folder {kind}/{f}/" for f in sorted(files - folders)]
        for area in sorted(folders & files):
            with open(os.path.join(root, area + ".cmake")) as f:
                listed = LISTED.findall(f.read())
            for rel in listed:
                if not rel.startswith(area + "/"):
                    out.append(f"{kind}/{area}.cmake names {rel}, outside its folder")
                elif "${" not in rel and not os.path.exists(os.path.join(root, rel)):
                    out.append(f"{kind}/{area}.cmake names {rel}, which does not exist")
            named = {os.path.basename(rel) for rel in listed}
            for name in sorted(os.listdir(os.path.join(root, area))):
                if name.startswith("test_") and name.endswith((".c", ".py")) and name not in named:
                    # a C test's name is also its target's, registered in a loop over names
                    stem = name.rsplit(".", 1)[0]
                    with open(os.path.join(root, area + ".cmake")) as f:
                        if not (name.endswith(".c") and re.search(rf"\b{stem}\b", f.read())):
                            out.append(f"{kind}/{area}/{name} is not registered by {kind}/{area}.cmake")
    for dirpath, dirnames, names in os.walk(tests):
        dirnames[:] = sorted(d for d in dirnames if d not in ("node_modules", "__pycache__"))
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, tests)
            if name.endswith(".py") and rel != os.path.join("layout", "test_test_layout.py"):
                with open(path, errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        if PATH_EDIT.search(line.split("#", 1)[0]):
                            out.append(f"{rel}:{n} edits sys.path (tests/support is on PYTHONPATH)")
            elif name.endswith((".c", ".h")):
                with open(path, errors="replace") as f:
                    if CLIMBING_INCLUDE.search(f.read()):
                        out.append(f"{rel} includes with ../ (the support folder is on the include path)")
    return out


def case_tests_follow_their_folders(a):
    tests = os.path.join(a.source, "tests")
    for kind in KINDS:
        areas = [d for d in os.listdir(os.path.join(tests, kind)) if os.path.isdir(os.path.join(tests, kind, d))]
        check(len(areas) >= (6 if kind == "unit" else 10), f"tests/{kind}/ holds its areas: {sorted(areas)}")
    faults = layout_faults(tests)
    check(not faults, f"the tests follow their folders ({len(faults)} faults): " + "; ".join(faults[:30]))


def case_finds_planted_faults(a):
    with tempfile.TemporaryDirectory(prefix="ddpd-test-layout-") as d:
        tests = os.path.join(d, "tests")
        shutil.copytree(os.path.join(a.source, "tests"), tests,
                        ignore=shutil.ignore_patterns("node_modules", "__pycache__"))
        before = set(layout_faults(tests))
        os.makedirs(os.path.join(tests, "integration", "planted"))                     # a folder with no .cmake
        with open(os.path.join(tests, "unit", "stray.cmake"), "w") as f:                 # a .cmake with no folder
            f.write("")
        with open(os.path.join(tests, "unit", "sweeps.cmake"), "a") as f:                # another folder's file
            f.write("ddpd_c_test(planted ${CMAKE_CURRENT_LIST_DIR}/server/test_store.c)\n")
        with open(os.path.join(tests, "unit", "schema", "test_unlisted.c"), "w") as f:   # a test nobody registers
            f.write("int main(void) { return 0; }\n")
        with open(os.path.join(tests, "integration", "server", "test_server_api.py"), "a") as f:
            f.write("sys.path.insert(0, '..')\n")                                        # a sys.path edit
        with open(os.path.join(tests, "unit", "server", "test_store.c"), "a") as f:
            f.write('#include "../support/check.h"\n')                                   # a climbing include
        after = set(layout_faults(tests)) - before
        with open(os.path.join(tests, "integration", "server", "test_server_api.py")) as f:
            line = sum(1 for _ in f)
        want = {"integration/planted/ has no integration/planted.cmake beside it",
                "unit/stray.cmake has no folder unit/stray/",
                "unit/sweeps.cmake names server/test_store.c, outside its folder",
                "unit/schema/test_unlisted.c is not registered by unit/schema.cmake",
                f"integration/server/test_server_api.py:{line} edits sys.path (tests/support is on PYTHONPATH)",
                "unit/server/test_store.c includes with ../ (the support folder is on the include path)"}
        check(after == want, f"each planted fault is named, and only they: missing {sorted(want - after)}, "
                             f"extra {sorted(after - want)}")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    CASES[args.case](args)
    checks.finish(f"test_layout {args.case}")
