#!/usr/bin/env python3
"""No include cycle in base/, server/, trainer/, runner/, schema/, client/ or spawn/,
and no include upward across the libraries below the trainer.

A module is a source file's stem in its folder (feed.c and feed.h are the module
server/feed/feed); module A depends on module B when a file of A includes B's
header with #include "...". The test finds every strongly connected set of modules
(Tarjan) and fails on any with more than one module, or a module that depends on
itself, naming one cycle through it, file by file. A quoted include that names no
header of these trees fails too: it would hide a dependency.

The layers: each folder of BELOW includes only from the folders it lists (the
server's own layers, store to cmd, are SERVER_LAYERS; tests/layout/test_layer_calls.py
holds the same table against the calls in the built libraries) (the run's
I/O, the checkpoint files and the model plan are libraries below the trainer, which
ddp-run and the server link; spawn/, what a forked child does first, is below all
three; base/, the monotonic clock, allocation and die, is below every program, and schema/, the contracts, below the run's I/O too; the server and ddp-run see nothing of the trainer proper). Their include directories already make an upward include fail to compile;
this holds the layering itself, whatever the build's flags.

Usage: test_include_cycles.py CASE --source REPO"""
import argparse, os, re, sys

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402

TREES = ("base", "server", "trainer", "runner", "schema", "client", "spawn")
SOURCES = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root):
    """{relative path of a file: its module}, and {header path: module}."""
    files = {}
    for tree in TREES:
        for d, _, names in os.walk(os.path.join(root, tree)):
            for n in names:
                if n.endswith(SOURCES):
                    rel = os.path.relpath(os.path.join(d, n), root)
                    files[rel] = os.path.splitext(rel)[0]
    return files


def resolve(root, files, src, name):
    """The file a quoted include names: beside the includer, else beneath the
    includer's tree, else in any tree (the layers give each folder as an include
    directory); None when no such header exists."""
    here = os.path.normpath(os.path.join(os.path.dirname(src), name))
    if here in files:
        return here
    tree = src.split(os.sep)[0]
    for first in (True, False):
        hits = sorted(f for f in files if f.endswith(os.sep + name) and (f.split(os.sep)[0] == tree) == first)
        if hits:
            return hits[0]
    return None


def graph(root):
    files = modules(root)
    edges, unknown = {}, []
    for src, mod in files.items():
        with open(os.path.join(root, src), errors="replace") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            target = resolve(root, files, src, name)
            if target is None:
                # generated at configure time into the build tree (ddpd_build_config.h)
                if not name.endswith("build_config.h"):
                    unknown.append(f"{src}: #include \"{name}\"")
                continue
            if files[target] != mod:
                edges.setdefault(mod, {}).setdefault(files[target], (src, name))
    return set(files.values()), edges, unknown


# folder: the folders its files may include from (a folder's subfolders are its own)
BELOW = {
    "base": ("base",),
    "schema": ("schema",),
    "spawn": ("spawn",),
    "trainer/run_io": ("trainer/run_io", "schema", "base"),
    "trainer/ckpt_files": ("trainer/ckpt_files", "trainer/run_io"),
    "trainer/model_plan": ("trainer/model_plan", "schema"),
    "runner": ("runner", "trainer/run_io", "schema", "spawn", "base"),
    "client": ("client", "base"),
    "server": ("server", "schema", "spawn", "trainer/ckpt_files", "trainer/model_plan", "base"),
}
# The server's own layers (server/CMakeLists.txt), bottom to top; each folder is a static
# library. Scheduling is one component: the rest of the server sees sched/include/ only.
OUTSIDE_SERVER = ("schema", "spawn", "trainer/ckpt_files", "trainer/model_plan", "base")
SERVER_LAYERS = {
    "server/base": (),
    "server/lib": ("server/base",),
    "server/proc": ("server/lib", "server/base"),
    "server/host": ("server/proc", "server/lib", "server/base"),
    "server/store": ("server/host", "server/proc", "server/lib", "server/base"),
    "server/feed": ("server/store", "server/host", "server/proc", "server/lib", "server/base"),
    "server/exec": ("server/store", "server/host", "server/proc", "server/lib", "server/base"),
    "server/sched": ("server/exec", "server/store", "server/host", "server/proc", "server/lib", "server/base"),
    "server/sweep": ("server/sched/include", "server/feed", "server/exec", "server/store", "server/host", "server/proc",
                     "server/lib", "server/base"),
    "server/api": ("server/sweep", "server/sched/include", "server/feed", "server/exec", "server/store", "server/host",
                   "server/proc", "server/lib", "server/base"),
    "server/cmd": ("server/api", "server/agent", "server/sweep", "server/sched/include", "server/feed", "server/exec",
                   "server/store", "server/host", "server/proc", "server/lib", "server/base"),
    "server/agent": ("server/host", "server/proc", "server/lib", "server/base"),
}
for _folder, _below in SERVER_LAYERS.items():
    BELOW[_folder] = (_folder,) + _below + OUTSIDE_SERVER


def within(path, folder):
    return path == folder or path.startswith(folder + os.sep)


def upward_includes(root):
    """'file includes "h" (folder/h.h), above it' for each include that leaves the
    folders its layer may use."""
    files = modules(root)
    out = []
    for src in sorted(files):
        layer = max((f for f in BELOW if within(os.path.dirname(src), f)), key=len, default=None)
        if layer is None:
            continue
        with open(os.path.join(root, src), errors="replace") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            target = resolve(root, files, src, name)
            if target and not any(within(os.path.dirname(target), ok) for ok in BELOW[layer]):
                out.append(f"{src} includes \"{name}\" ({target}), outside {', '.join(BELOW[layer])}")
    return out


def strongly_connected(nodes, edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def one_cycle(comp, edges):
    """A cycle inside a strongly connected set, as 'file includes "h"' steps."""
    members = set(comp)
    start = sorted(comp)[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in edges.get(path[-1], {}) if w in members)
        back = [w for w in nxt if w in path]
        if back:
            cyc = path[path.index(back[0]):] + [back[0]]
            break
        w = next(w for w in nxt if w not in seen)
        seen.add(w)
        path.append(w)
    return [f"{edges[a][b][0]} includes \"{edges[a][b][1]}\"" for a, b in zip(cyc, cyc[1:])]


def find_cycles(root):
    nodes, edges, unknown = graph(root)
    return [c for c in strongly_connected(nodes, edges) if len(c) > 1], edges, unknown, nodes


def case_no_cycles(a):
    cycles, edges, unknown, nodes = find_cycles(a.source)
    check(len(nodes) > 50 and sum(len(v) for v in edges.values()) > 100,
          f"the include graph was read: {len(nodes)} modules, {sum(len(v) for v in edges.values())} edges")
    check(not unknown, "every quoted include names a header of the trees: " + "; ".join(unknown))
    for comp in cycles:
        check(False, f"an include cycle among {len(comp)} modules: " + " -> ".join(one_cycle(comp, edges)))
    check(not cycles, f"no include cycle ({len(cycles)} found)")


def case_finds_a_planted_cycle(a):
    # The detector itself, on a copy of one layer's folder with one upward include
    # planted: the cycle it makes is found and named.
    import shutil, tempfile
    with tempfile.TemporaryDirectory(prefix="ddpd-cycles-") as d:
        shutil.copytree(os.path.join(a.source, "server"), os.path.join(d, "server"))
        victim = os.path.join(d, "server", "base", "clock.c")
        with open(victim, "a") as f:
            f.write('\n#include "store.h"\n')
        cycles, edges, _, _ = find_cycles(d)
        named = [" -> ".join(one_cycle(c, edges)) for c in cycles]
        check(len(cycles) == 1 and "server/base/clock.c includes \"store.h\"" in named[0],
              f"the planted include makes one cycle, and it is named: {named}")


def case_layers(a):
    files = modules(a.source)
    for layer in BELOW:
        check(any(within(os.path.dirname(f), layer) for f in files), f"the layer {layer}/ has files")
    up = upward_includes(a.source)
    check(not up, "no include upward out of a layer: " + "; ".join(up))


def plant_and_find(a, plants, found_in):
    """On a copy of the trees, each of `plants` (file: header) appended as an include:
    each is named, as a header under `found_in`, and nothing else is."""
    import shutil, tempfile
    with tempfile.TemporaryDirectory(prefix="ddpd-layers-") as d:
        for tree in TREES:
            shutil.copytree(os.path.join(a.source, tree), os.path.join(d, tree))
        check(not upward_includes(d), "the copy has no upward include before the plants")
        for victim, header in plants.items():
            with open(os.path.join(d, victim), "a") as f:
                f.write(f'\n#include "{header}"\n')
        up = upward_includes(d)
        for victim, header in plants.items():
            check(any(u.startswith(f'{victim} includes "{header}" ({found_in}{os.sep}') for u in up),
                  f"{victim}'s planted include of {header} is named: {up}")
        check(len(up) == len(plants), f"only the planted includes are named: {up}")


def case_finds_a_planted_upward_include(a):
    # One upward include planted in each library below the trainer: a kernel header
    # into the model plan, the trainer's model into the checkpoint files, the
    # collectives into the run's I/O.
    plant_and_find(a, {os.path.join("trainer", "model_plan", "host_plan.c"): "cnn_kernels.h",
                       os.path.join("trainer", "ckpt_files", "ckpt_files.c"): "model.h",
                       os.path.join("trainer", "run_io", "events.c"): "collectives.h"}, "trainer")


def case_finds_an_upward_include_in_the_server(a):
    # The server's layers: the store including the scheduler's public header, an executor
    # including the scheduling component's private one, and the API including it too
    # (the rest of the server sees sched/include/ only).
    plant_and_find(a, {os.path.join("server", "store", "store.c"): "scheduler.h",
                       os.path.join("server", "exec", "nodes.c"): "sched_state.h",
                       os.path.join("server", "api", "sse.c"): "queue_policy.h"}, os.path.join("server", "sched"))


def case_finds_an_include_out_of_base(a):
    # base/ (the clock, allocation, die) is below every program: one of its files
    # including a server header is named.
    import shutil, tempfile
    victim = os.path.join("base", "monotonic.c")
    with tempfile.TemporaryDirectory(prefix="ddpd-base-") as d:
        for tree in TREES:
            shutil.copytree(os.path.join(a.source, tree), os.path.join(d, tree))
        with open(os.path.join(d, victim), "a") as f:
            f.write('\n#include "buf.h"\n')
        up = upward_includes(d)
        check(len(up) == 1 and up[0].startswith(f'{victim} includes "buf.h" (server{os.sep}base{os.sep}buf.h)'),
              f"base/'s planted include of a server header is named, and only it: {up}")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    CASES[args.case](args)
    checks.finish(f"include_cycles {args.case}")
