#!/usr/bin/env python3
"""No call upward across the server's layers, read from the built static libraries.

Includes are held by test_include_cycles.py; a call needs no include (a stray
`extern`, a prototype written by hand), so this test reads each library's symbols
with nm: every symbol a library uses and does not define itself must not be defined
by a library above it, or beside it, in SERVER_LAYERS (the same table the include
check holds). A unit test that links only the lowest library of its subject fails to
link on such a call too, but only for the objects it pulls in; this reads them all.

Usage: test_layer_calls.py CASE --source REPO --nm NM --cc CC --lib FOLDER=LIBRARY.a ..."""
import argparse, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402
from test_include_cycles import SERVER_LAYERS  # noqa: E402


def symbols(nm, archive):
    """(defined, used) global symbols of a static library."""
    defined, used = set(), set()
    out = subprocess.run([nm, "-g", archive], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def upward_calls(nm, libs):
    """'folder uses SYMBOL of folder' for each symbol a library takes from a library its
    layer may not call (above it, or a sibling such as feed beside exec)."""
    table = {folder: symbols(nm, path) for folder, path in libs.items()}
    out = []
    for folder, (defined, used) in sorted(table.items()):
        allowed = set(SERVER_LAYERS[folder]) | {folder}
        for sym in sorted(used - defined):
            for other, (their, _) in sorted(table.items()):
                if sym in their and not any(other == a or other.startswith(a + "/") or a.startswith(other + "/")
                                            for a in allowed):
                    out.append(f"{folder} uses {sym} of {other}")
    return out


def case_no_upward_call(a):
    check(set(a.libs) == set(SERVER_LAYERS), f"every server layer's library was given: {sorted(a.libs)}")
    sizes = {f: len(symbols(a.nm, p)[0]) for f, p in a.libs.items()}
    check(all(n > 0 for n in sizes.values()), f"each library defines symbols: {sizes}")
    up = upward_calls(a.nm, a.libs)
    check(not up, "no call upward across the server's layers: " + "; ".join(up))


def case_finds_a_planted_upward_call(a):
    # One object that calls a function of the scheduling component, added to a copy of
    # the store's library: the call is named, and only it.
    sched_defined, _ = symbols(a.nm, a.libs["server/sched"])
    target = sorted(s for s in sched_defined if not s.startswith("_"))[0]
    with tempfile.TemporaryDirectory(prefix="ddpd-calls-") as d:
        src, obj, lib = (os.path.join(d, n) for n in ("planted.c", "planted.o", "libstore_copy.a"))
        with open(src, "w") as f:
            f.write(f"extern void {target}(void);\nvoid planted_upward_call(void) {{ {target}(); }}\n")
        subprocess.run([a.cc, "-c", src, "-o", obj], check=True)
        with open(a.libs["server/store"], "rb") as f, open(lib, "wb") as g:
            g.write(f.read())
        subprocess.run(["ar", "rs", lib, obj], check=True, capture_output=True)
        libs = dict(a.libs, **{"server/store": lib})
        up = upward_calls(a.nm, libs)
        check(up == [f"server/store uses {target} of server/sched"], f"the planted call is named, and only it: {up}")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    for tool in ("--source", "--nm", "--cc"):  # the tree, and the build's nm and C compiler
        ap.add_argument(tool, required=True)
    ap.add_argument("--lib", action="append", default=[], help="FOLDER=LIBRARY.a, e.g. server/store=libddpd_store.a")
    args = ap.parse_args()
    args.libs = dict(item.split("=", 1) for item in args.lib)
    CASES[args.case](args)
    checks.finish(f"layer_calls {args.case}")
