#!/usr/bin/env python3
"""Nothing in the server reaches a file by its path but run_files and a short list of
places whose paths are not a run's, each with its reason (issue 45: the server never
touches a member's files with its own rights).

A run's directory belongs to its run's account, which can put a link, a FIFO or a hard
link there while the server works in it; server/lib/run_files.c is the one way in
(descriptors, no link followed, FIFOs refused, sizes bounded). This test reads the
built server libraries with nm and lists, per object, every call of a C library or
Jansson function that takes a path (fopen, open, opendir, nftw, unlink, rename, chown,
stat, json_load_file, json_dump_file, ...): each must be in ALLOWED for that object,
with the reason its path is not a run's; and each ALLOWED entry must still be called
(a stale reason is a lie). The planted case adds an object that opens a run's config
with fopen to a copy of the scheduling library, and holds that it is found.

Usage: test_run_paths.py CASE --source REPO --nm NM --cc CC --lib FOLDER=LIBRARY.a ..."""
import argparse, os, subprocess, sys, tempfile

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402

# The calls that reach a file by its path (the descriptor-based ones, openat on a
# directory the caller opened, fchown, unlinkat, are how run_files works).
PATH_CALLS = {
    "fopen", "fopen64", "freopen", "open", "open64", "creat", "opendir", "scandir", "scandir64", "nftw", "nftw64",
    "ftw", "unlink", "remove", "rename", "chown", "lchown", "chmod", "mkdir", "rmdir", "stat", "stat64", "lstat",
    "lstat64", "truncate", "link", "symlink", "readlink", "realpath", "access", "mkfifo", "utime", "utimes",
    "json_load_file", "json_dump_file", "gzopen", "chdir", "statvfs", "mkdtemp", "mkstemp",
    # descriptor-relative, but only run_files may hold a run directory's descriptor
    "openat", "openat64", "mkdirat", "renameat", "renameat2", "unlinkat", "fchownat", "fstatat", "fstatat64",
    "linkat", "symlinkat", "readlinkat", "fchmodat",
}

# object (folder/file.c) -> the path calls it may make, and why they are not into a run's directory.
ALLOWED = {
    "lib/run_files.c": ({"open", "openat", "mkdir", "mkdirat", "rename", "renameat", "unlinkat", "fstatat", "lstat"},
                        "the one way into a run's directory"),
    "lib/dir_usage.c": ({"open", "openat", "fstatat", "lstat"},
                        "measures what a run's directory holds (a user's disk use) as run_files would: by "
                        "descriptors, fstatat never following a link, only subdirectories opened (O_DIRECTORY | "
                        "O_NOFOLLOW), never a file; a walk that streams millions of entries in bounded memory"),
    "base/server_log.c": ({"open", "opendir", "rename", "unlink", "access"},
                          "the server's own log file (--log-file) and its rotated copies"),
    "store/state_lock.c": ({"open"}, "the state directory's lock file, the server's own"),
    "store/state_layout.c": ({"opendir", "nftw", "chmod", "lstat", "stat"},
                             "the state directory's own entries (runs/ listed by name); a run directory of another "
                             "account is skipped, never entered (layout_tighten)"),
    "store/db_inspect.c": ({"stat"}, "the database file"),
    "sched/suspects.c": ({"access", "json_dump_file", "json_load_file", "open", "opendir", "rename", "unlink"},
                         "the state directory's nodes/: the suspect nodes' marks the server keeps, and the clear "
                         "requests `ddpd node clear` leaves there"),
    "store/history_rebuild.c": ({"opendir", "rename", "stat", "access"},
                                "the damaged database renamed aside, and /proc; the run directories are read "
                                "through run_files"),
    "proc/procstat.c": ({"fopen", "opendir"}, "/proc"),
    "sched/scheduler.c": ({"access", "fopen"}, "the tests' hook file (DDPD_TEST_HOLD_DECISION: a decision is held "
                          "while it exists, holding the scheduler's lock when it says so), which the test's "
                          "environment names"),
    "exec/zygotes.c": ({"access", "chmod", "lstat"},
                       "the warm start's zygotes/ in the state directory (made 0711 by the server), the zygote code "
                       "beside the runner, and a zygote's socket, looked at without following a link"),
    "exec/zygote_handoff.c": ({"open", "lstat"},
                              "/proc/PID/status of the trial zygote, the trial's cgroup.procs, and the zygote's "
                              "socket, looked at without following a link"),
    "proc/run_cgroup.c": ({"open", "fopen", "opendir", "mkdir", "rmdir", "stat", "access", "chown", "chmod"},
                          "the cgroup filesystem"),
    "proc/run_cmd.c": ({"open"}, "/dev/null for a command's input"),
    "exec/supervisor.c": ({"open", "chdir"},
                          "/dev/null for a child's input, and the child's chdir into its run directory after it "
                          "became the run's account (it reaches only what the account may)"),
    "exec/executor_local.c": ({"stat"}, "/proc/PID, whose owner is an orphan's account"),
    "exec/executor_slurm.c": ({"mkdir", "chmod"},
                              "--slurm-work-dir, the operator's, and a run's directory made in it (handed to the "
                              "account through run_files)"),
    "feed/ingest.c": ({"unlink", "chmod"}, "the event socket, the state directory's own"),
    "host/datapaths.c": ({"realpath", "stat", "access"},
                         "a submitted path resolved to where it leads, never opened: what it names must lie in a "
                         "root and be the submitter's (run_reads.h); a run's file it names is then read through "
                         "run_files"),
    "host/idx_header.c": ({"open", "stat"}, "a data root's IDX file, already resolved into a data root (stat: "
                          "whether what was read of it still stands)"),
    "lib/beside_self.c": ({"readlink"}, "/proc/self/exe"),
    "lib/disk_space.c": ({"statvfs"}, "the state directory's filesystem"),
    "lib/path_redact.c": ({"realpath"}, "the server's own roots, made canonical at start-up"),
    "api/conn_guard.c": ({"open"}, "/dev/null, the descriptor kept in reserve"),
    "api/routes_static.c": ({"fopen", "readlink", "realpath", "stat"}, "the dashboard's files (web/)"),
    "cmd/check_cmd.c": ({"open", "stat", "access"}, "ddpd check: the log file, the lock, the trainer"),
    "cmd/settings.c": ({"access"}, "a setting's program found on PATH"),
    "agent/agent_main.c": ({"realpath", "unlink"}, "the agent's state directory and its event socket"),
    "agent/agent_streams.c": ({"unlink"}, "the agent's event socket"),
    "agent/agent_parts.c": ({"open", "mkdir", "chmod", "chdir"},
                            "/dev/null for a child, the agent's runs/ and a part's directory made in it (then "
                            "opened through run_files), the child's chdir as the account"),
    "agent/part_main.c": ({"mkdir", "mkdtemp", "rmdir", "unlink"},
                          "a Slurm node's part: its own work and socket directories"),
}


def path_calls(nm, archive):
    """{object: {path calls it makes}} of a static library."""
    out = subprocess.run([nm, "-A", archive], capture_output=True, text=True, check=True).stdout
    calls = {}
    for line in out.splitlines():
        where, _, rest = line.partition(": ")
        parts = rest.split()
        if len(parts) == 2 and parts[0] == "U" and parts[1] in PATH_CALLS:
            obj = where.rsplit(":", 1)[-1]
            calls.setdefault(obj, set()).add(parts[1])
    return calls


def source_of(folder, obj):
    """'exec/supervisor.c' for server/exec's 'supervisor.c.o'."""
    return f"{folder.split('/', 1)[1]}/{obj[:-2] if obj.endswith('.o') else obj}"


def unexplained(nm, libs):
    """(calls not allowed, allowed entries no longer made)."""
    seen, bad = {}, []
    for folder, archive in sorted(libs.items()):
        for obj, calls in sorted(path_calls(nm, archive).items()):
            src = source_of(folder, obj)
            seen[src] = calls
            allowed = ALLOWED.get(src, (set(), ""))[0]
            for c in sorted(calls - allowed):
                bad.append(f"server/{src} calls {c}()")
    stale = [f"server/{src}: {sorted(fns - seen.get(src, set()))}" for src, (fns, _) in sorted(ALLOWED.items())
             if fns - seen.get(src, set())]
    return bad, stale


def case_no_path_call_outside_run_files(a):
    check(len(a.libs) >= 12, f"every server layer's library was given: {sorted(a.libs)}")
    bad, stale = unexplained(a.nm, a.libs)
    check(not bad, "every call that reaches a file by its path is run_files' or has its reason in ALLOWED "
          "(a run's file goes through server/lib/run_files.h): " + "; ".join(bad))
    check(not stale, "every reason in ALLOWED is for a call still made: " + "; ".join(stale))


def case_finds_a_planted_path_call(a):
    # A config read as the old code read it, in a copy of the scheduling library.
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "planted_config_read.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n'
                    'int planted_config_read(const char *run_dir) {\n'
                    '    char path[4096];\n'
                    '    snprintf(path, sizeof path, "%s/config.json", run_dir);\n'
                    '    FILE *f = fopen(path, "r");\n'
                    '    if (!f) return -1;\n'
                    '    return fclose(f);\n'
                    '}\n')
        obj = os.path.join(d, "planted_config_read.c.o")
        subprocess.run([a.cc, "-c", src, "-o", obj], check=True)
        lib = os.path.join(d, "libddpd_sched.a")
        with open(a.libs["server/sched"], "rb") as f, open(lib, "wb") as g:
            g.write(f.read())
        subprocess.run(["ar", "rs", lib, obj], check=True, capture_output=True)
        libs = dict(a.libs, **{"server/sched": lib})
        bad, _ = unexplained(a.nm, libs)
        check(bad == ["server/sched/planted_config_read.c calls fopen()"],
              f"the planted fopen of a run's config is found, and only it: {bad}")


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
    checks.finish(f"run_paths {args.case}")
