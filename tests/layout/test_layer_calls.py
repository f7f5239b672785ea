#!/usr/bin/env python3
"""No call upward across the server's layers, read from the built static libraries.

Includes are held by test_include_cycles.py; a call needs no include (a stray
`extern`, a prototype written by hand), so this test reads each library's symbols
with nm: every symbol a library uses and does not define itself must not be defined
by a library above it, or beside it, in SERVER_LAYERS (the same table the include
check holds). A unit test that links only the lowest library of its subject fails to
link on such a call too, but only for the objects it pulls in; this reads them all.

Inside the scheduling library, the same holds per object (nm -A): the files of the
scheduler's state machine call only the files below them in SCHED_ORDER (the list
server/sched/sched_state.h gives), the rest of the component enters it through its
front door only (what sched/include/scheduler.h declares), and what sits beside it
calls none of it; a file with no place in these lists fails until it is given one.
And a live run's status is written in one setter (run_life.c's), and where a run is
made (live_runs.c), nowhere else.

Usage: test_layer_calls.py CASE --source REPO --nm NM --cc CC --lib FOLDER=LIBRARY.a ..."""
import argparse, os, re, subprocess, sys, tempfile

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


# ---- inside the scheduling library, per object ----

# The scheduler's state machine, top down (server/sched/sched_state.h): the files that
# share its lock. Each may call only the files after it here.
SCHED_ORDER = ("run_recovery", "scheduler", "run_watch", "run_life", "run_restart", "live_runs")
# Its front door: every function sched/include/scheduler.h declares is defined here.
SCHED_FRONT_DOOR = ("run_recovery", "scheduler")
# The rest of the component that calls the state machine: through the front door only.
SCHED_ENTRANCES = ("runs", "run_resume")
# Beside the state machine: what it calls, which calls none of it (nor an entrance).
SCHED_BESIDE = ("queue_policy", "queue_forecast", "fair_share", "placement", "part_blame", "device_pool", "run_as", "run_limits",
                "run_reads", "users", "disk_use", "suspects")


def objects(nm, archive):
    """{object's stem ("scheduler" for scheduler.c.o): (defined, used)} of each member
    of a static library, read with nm -A."""
    table = {}
    out = subprocess.run([nm, "-A", "-g", archive], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split(":")
        if len(fields) < 3:
            continue
        stem = fields[-2].split(".", 1)[0]
        defined, used = table.setdefault(stem, (set(), set()))
        parts = fields[-1].split()
        if len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return table


def front_door_api(source):
    """The functions sched/include/scheduler.h declares (its comments left out)."""
    with open(os.path.join(source, "server", "sched", "include", "scheduler.h")) as f:
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
    return set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))


def sched_order_breaks(objs, api, order=SCHED_ORDER, front_door=SCHED_FRONT_DOOR, entrances=SCHED_ENTRANCES,
                       beside=SCHED_BESIDE):
    """'A calls SYMBOL of B' for each call between the scheduling library's objects that
    the order forbids, and 'A has no place ...' for an object in none of the lists."""
    rank = {stem: i for i, stem in enumerate(order)}
    where = {}
    for stem, (defined, _) in sorted(objs.items()):
        for sym in defined:
            where.setdefault(sym, stem)
    out = []
    for stem, (defined, used) in sorted(objs.items()):
        if stem not in rank and stem not in entrances and stem not in beside:
            out.append(f"{stem} has no place in the scheduler's order (SCHED_ORDER, SCHED_ENTRANCES or SCHED_BESIDE)")
            continue
        for sym in sorted(used - defined):
            other = where.get(sym)
            if other is None or other == stem:
                continue
            if stem in rank:  # the state machine: downward only, and never out to an entrance (which calls it)
                bad = rank.get(other, -1) < rank[stem] if other in rank else other in entrances
            elif stem in entrances:  # the front door's functions only
                bad = other in rank and not (other in front_door and sym in api)
            else:  # beside: none of the state machine, no entrance
                bad = other in rank or other in entrances
            if bad:
                out.append(f"{stem} calls {sym} of {other}")
    return out


def case_sched_calls_go_down(a):
    objs = objects(a.nm, a.libs["server/sched"])
    check(set(SCHED_ORDER) <= set(objs), f"every file of the state machine is an object of the library: {sorted(objs)}")
    api = front_door_api(a.source)
    missing = sorted(n for n in api if not any(n in objs.get(f, (set(), set()))[0] for f in SCHED_FRONT_DOOR))
    check(len(api) > 20 and not missing,
          f"each of the {len(api)} functions scheduler.h declares is the front door's ({SCHED_FRONT_DOOR}): "
          f"missing {missing}")
    breaks = sched_order_breaks(objs, api)
    check(not breaks, "no call up the scheduler's state machine, nor past its front door: " + "; ".join(breaks))


def case_finds_a_planted_call_up_the_scheduler(a):
    # Three objects added to a copy of the scheduling library: one at the floor that
    # calls the front door's schedule_locked, an entrance that calls run_life.c's
    # finish_locked (beside scheduler_submit, which it may), and one with no place.
    # Each is named, and only they.
    planted = {"planted_floor": ["schedule_locked"], "planted_entrance": ["finish_locked", "scheduler_submit"],
               "planted_stray": ["find_run"]}
    with tempfile.TemporaryDirectory(prefix="ddpd-sched-calls-") as d:
        lib = os.path.join(d, "libsched_copy.a")
        with open(a.libs["server/sched"], "rb") as f, open(lib, "wb") as g:
            g.write(f.read())
        for stem, calls in planted.items():
            src, obj = os.path.join(d, stem + ".c"), os.path.join(d, stem + ".c.o")
            with open(src, "w") as f:
                f.write("".join(f"extern void {c}(void);\n" for c in calls))
                f.write(f"void {stem}_calls(void) {{ " + " ".join(f"{c}();" for c in calls) + " }\n")
            subprocess.run([a.cc, "-c", src, "-o", obj], check=True)
            subprocess.run(["ar", "rs", lib, obj], check=True, capture_output=True)
        objs = objects(a.nm, lib)
        breaks = sched_order_breaks(objs, front_door_api(a.source), order=SCHED_ORDER + ("planted_floor",),
                                    entrances=SCHED_ENTRANCES + ("planted_entrance",))
        check(breaks == ["planted_entrance calls finish_locked of run_life",
                         "planted_floor calls schedule_locked of scheduler",
                         "planted_stray has no place in the scheduler's order (SCHED_ORDER, SCHED_ENTRANCES or "
                         "SCHED_BESIDE)"],
              f"the planted calls and the file with no place are named, and only they: {breaks}")


# ---- a live run's status: one setter ----

STATUS_WRITE = re.compile(r"->\s*status\s*=(?!=)")


def status_writes(texts):
    """'FILE:LINE' of each write of a live run's status (`->status =`) in the scheduling
    files `texts` ({file name: its text}) outside run_life.c's set_status_locked and
    live_runs.c (where a run is made)."""
    out = []
    for name, text in sorted(texts.items()):
        setter = None
        if name == "run_life.c":
            start = text.find("static bool set_status_locked(")
            setter = (start, text.find("\n}\n", start)) if start >= 0 else None
        for m in STATUS_WRITE.finditer(text):
            if name == "live_runs.c" or (setter and setter[0] <= m.start() <= setter[1]):
                continue
            out.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}")
    return out


def sched_texts(source):
    folder = os.path.join(source, "server", "sched")
    texts = {}
    for n in sorted(os.listdir(folder)):
        if n.endswith(".c"):
            with open(os.path.join(folder, n)) as f:
                texts[n] = f.read()
    return texts


def case_one_status_setter(a):
    texts = sched_texts(a.source)
    check("static bool set_status_locked(" in texts.get("run_life.c", ""), "run_life.c has the one status setter")
    writes = status_writes(texts)
    check(not writes, f"a live run's status is written by run_life.c's setter only (and where a run is made): {writes}")


def case_finds_a_planted_status_write(a):
    # A status written by hand in run_watch.c, after its first function, is named.
    texts = sched_texts(a.source)
    text = texts["run_watch.c"]
    at = text.index("\n}\n") + 3
    texts["run_watch.c"] = text[:at] + "static void planted(live_run *r) { r->status = RUN_RUNNING; }\n" + text[at:]
    line = texts["run_watch.c"].count("\n", 0, at) + 1
    check(status_writes(texts) == [f"run_watch.c:{line}"], f"the planted write is named: {status_writes(texts)}")


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
