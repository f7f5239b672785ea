#!/usr/bin/env python3
"""Each run bounded (docs/security.md): a member's run cannot take the box
from the others by memory, processes, points, log bytes or disk. Real Unix accounts
(alice and bob, ddpdt-ROLE-PID, made and removed by the test), the server as root,
bob's run the attacker; in each case alice's run, started before the attack, is
released after it and must succeed untouched, and the server must answer all along.
Every case needs root (CI runs as root); without it a case says why and is skipped
(exit 77).

  memory         bob's command run asks for more memory than his --max-memory-gb:
                 refused (403) naming the limit and who sets it; his run of 2 ranks
                 with resources.memory_gb 0.25 has its cgroup's limit (memory and
                 memory+swap) at 256 MiB, rank 1 allocates 1 GiB: the kernel kills it
                 (only it), and the run fails saying it ran out of its memory limit,
                 naming the limit, where it comes from and the rank
  fork_loop      a fork loop in bob's run (--max-run-processes 64) stops at pids.max:
                 his processes, counted all along, never pass it
  points_flood   bob's script calls ddpd.log_step in a loop past --max-points-per-run
                 500: the store keeps exactly 500 points and the run fails naming the
                 cap and its flag
  points_through_the_journal  the same 5000 points written into bob's journal, then
                 his hello again (a reconnection): the catch-up's replay counts them,
                 the store keeps 500 and the run fails naming the cap
  log_cap        bob's run prints 400 KB past --max-log-bytes-per-run 4096: trainer.log
                 and ranks/rank-0.log stop at the cap with one line saying so, and the
                 run's reason says it; a built-in run's own log (the trainer's lines) too
  disk_quota     bob (--max-disk-gb 0.0005) leaves in his run directory a symlink to
                 alice's 64 MB file, a hard link, a FIFO and a sparse file of 10 GiB:
                 his usage is what his directory holds, not what those name (and the
                 server did not hang on the FIFO); his built-in run is stopped at its
                 first checkpoint with a reason naming the usage and the quota, his next
                 submission is refused (403) with both and what to do, and once the
                 quota is raised the run resumes from that checkpoint to its end
  runs_dir       --runs-dir on a directory apart: the runs' files land there and the
                 database stays in the state dir; a run canceled after a checkpoint, the
                 server started again, the run resumed: it ends succeeded there
  check          ddpd check says the runs dir, the limits this host can hold runs to,
                 and each user's disk use against its quota

Usage: test_server_bounds.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH --runner PATH"""
import contextlib, glob, hashlib, json, os, pwd, shutil, sqlite3, stat, subprocess, sys, tempfile, threading, time

from ddpd_harness import (Server, Accounts, check, cases_in, wait_until, args_for, main, fmnist_config, user,  # noqa: E402
                          add_user, bearer, needs_trainer)

SKIP = 77
GIB = 1 << 30


def needs_root(a):
    if os.geteuid() != 0:
        print(f"{a.case}: skipped: it makes Unix accounts and starts the server as root; run it as root (CI does)")
        sys.exit(SKIP)


def command(script, *args, world_size=1, name="bounds", **over):
    cfg = {"name": name, "command": ["/usr/bin/python3", "-c", script, *args], "distributed": {"world_size": world_size}}
    cfg.update(over)
    return cfg


def submit_as(s, token, cfg, want=201):
    """The new run's id (want 201), else the answer."""
    r = s.post("/runs", cfg, headers=bearer(token))
    check(r.status == want, f"POST /runs -> {want}, got {r.status}: {r.body[:600]!r}")
    return r.json().get("id") if r.status == 201 and want == 201 else r


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cgroup_name(state_dir, rid):
    """The run's part's cgroup, as the server names it (executor_local.c)."""
    real = os.path.realpath(state_dir)
    return f"{hashlib.sha256(real.encode()).hexdigest()[:12]}-run-{rid}-0"


def procs_of(uid):
    """The live processes of an account."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    n += 1
        except OSError:
            pass
    return n


# ---- the shared box: alice beside bob ----

ALICE_WAITS = r"""
import os, sys, time
big = int(sys.argv[1])
if big:
    with open('alice-big.bin', 'wb') as f:  # her own big file (disk_quota: bob links to it)
        f.write(b'a' * big)
print('ALICE', 'STARTED', flush=True)  # as two words: the command line, in the log too, is not it
while not os.path.exists('release'):
    time.sleep(0.05)
print('ALICE', 'DONE', flush=True)
"""


@contextlib.contextmanager
def shared_box(a, extra=(), bob=(), slots=3):
    """A root server with alice and bob mapped to accounts of their own, command runs on;
    yields (server, accounts, alice's token, bob's token, state dir)."""
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        state = tempfile.mkdtemp(prefix="ddpd-bounds-")
        tok_file = os.path.join(tempfile.mkdtemp(prefix="ddpd-bounds-tok-"), "token")
        with open(tok_file, "w") as f:
            f.write(hashlib.sha256(os.urandom(16)).hexdigest() + "\n")
        os.chmod(tok_file, 0o600)
        alice = add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
        bob_tok = add_user(a.ddpd, state, "bob", "--unix-user", acc["bob"], *bob)
        try:
            with Server(a.ddpd, a.trainer, slots=slots, state_dir=state,
                        extra_args=["--allow-commands", "--runner", a.runner, "--token-file", tok_file, *extra]) as s:
                s.read_headers = bearer(alice)
                yield s, acc, alice, bob_tok, state
        finally:
            shutil.rmtree(os.path.dirname(tok_file), ignore_errors=True)
            shutil.rmtree(state, ignore_errors=True)


def users_of(s, token):
    r = s.get("/users", headers=bearer(token))
    return {u["name"]: u for u in r.json()["users"]} if r.status == 200 else {}


@contextlib.contextmanager
def alice_beside(s, alice, big=0):
    """Alice's run, started before the attack and released after it: it must succeed,
    its log whole, and the users be as they were (limits, tokens)."""
    rid = submit_as(s, alice, command(ALICE_WAITS, str(big), name="alice"))
    log = os.path.join(s.run_dir(rid), "trainer.log")
    wait_until(lambda: "ALICE STARTED" in read(log), "alice's run to start", timeout=120)
    before = {n: {k: v for k, v in u.items() if k != "disk_used_bytes"} for n, u in users_of(s, alice).items()}
    yield rid
    check(s.get("/healthz").status == 200, "the server answers after the attack")
    with open(os.path.join(s.run_dir(rid), "release"), "w"):
        pass
    run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=120)
    check(run and run["status"] == "succeeded", f"alice's run succeeds, untouched: {run and run['status']} "
          f"{run and run.get('reason')}")
    check("ALICE DONE" in read(log), "her run did all it had to")
    after = {n: {k: v for k, v in u.items() if k != "disk_used_bytes"} for n, u in users_of(s, alice).items()}
    check(after == before, f"the users are as they were: {after} vs {before}")


# ---- memory ----

EAT = r"""
import os, sys, time
rank = int(os.environ['RANK'])
print(f'rank {rank} up', flush=True)
if rank == 1:
    while not os.path.exists('go'):
        time.sleep(0.05)
    chunks = []
    for i in range(64):  # 1 GiB in 16 MiB pieces, every page written
        chunks.append(b'm' * (16 << 20))
        print(f'rank 1 holds {(i + 1) * 16} MiB', flush=True)
    print('RANK 1', 'SURVIVED', flush=True)
while True:
    time.sleep(1)
"""


def case_memory(a):
    with shared_box(a, bob=("--max-memory-gb", "1")) as (s, acc, alice, bob, state):
        r = submit_as(s, bob, command(EAT, world_size=2, resources={"memory_gb": 2}), want=403)
        body = r.json() if r.status == 403 else {}
        check("/resources/memory_gb" in r.body.decode() and "--max-memory-gb" in body.get("detail", "")
              and "admin" in body.get("detail", "") and "1 GiB" in body.get("detail", ""),
              f"more memory than bob's maximum is refused, naming the limit and who sets it: {body}")
        with alice_beside(s, alice):
            rid = submit_as(s, bob, command(EAT, world_size=2, resources={"memory_gb": 0.25}))
            run_dir = s.run_dir(rid)
            wait_until(lambda: "rank 1 up" in read(os.path.join(run_dir, "trainer.log")), "bob's ranks to start")
            cg = f"/sys/fs/cgroup/memory/ddpd/{cgroup_name(state, rid)}"
            limit = read(f"{cg}/memory.limit_in_bytes").strip()
            check(limit == str(256 << 20), f"bob's run's cgroup holds it to 256 MiB: {cg}: {limit!r}")
            if os.path.exists(f"{cg}/memory.memsw.limit_in_bytes"):
                memsw = read(f"{cg}/memory.memsw.limit_in_bytes").strip()
                check(memsw == str(256 << 20), f"memory and swap together too: {memsw!r}")
            with open(os.path.join(run_dir, "go"), "w"):
                pass
            run = s.wait_status(rid, ("failed", "succeeded", "canceled"), timeout=120)
            reason = (run or {}).get("reason") or ""
            print(f"bob's run {rid}: {run and run['status']}: {reason}", flush=True)
            check(run and run["status"] == "failed", f"bob's run fails: {run and run['status']}: {reason}")
            check("out of memory" in reason and "256 MiB" in reason and "resources.memory_gb" in reason,
                  f"its reason says it ran out of its memory limit, naming the limit and where it comes from: {reason}")
            check("rank 1" in reason, f"and the rank that died: {reason}")
            check("RANK 1 SURVIVED" not in read(os.path.join(run_dir, "trainer.log")),
                  "rank 1 never held its 1 GiB")
            check(not os.path.exists(cg), f"its cgroup is gone with it: {cg}")


# ---- fork_loop ----

FORK_LOOP = r"""
import os, time
kids, refused, first = 0, 0, None
deadline = time.time() + 6
while time.time() < deadline and kids < 2000:
    try:
        pid = os.fork()
    except OSError as e:
        refused += 1
        if first is None:
            first = kids
            print('FORK', f'REFUSED after {kids} children: {e}', flush=True)
        time.sleep(0.01)
        continue
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    kids += 1
print(f'FORKS {kids} refused {refused}', flush=True)
"""


def case_fork_loop(a):
    with shared_box(a, extra=["--max-run-processes", "64"]) as (s, acc, alice, bob, state):
        with alice_beside(s, alice):
            rid = submit_as(s, bob, command(FORK_LOOP))
            cg = f"/sys/fs/cgroup/pids/ddpd/{cgroup_name(state, rid)}"
            most, answered = 0, True
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                most = max(most, procs_of(acc.uid("bob")))
                run = s.run(rid)
                if run and run["status"] in ("succeeded", "failed", "canceled"):
                    break
                answered &= s.get("/healthz").status == 200
                time.sleep(0.02)
            check(answered, "the server answered all along")
            log = read(os.path.join(s.run_dir(rid), "trainer.log"))
            check("FORK REFUSED" in log, f"bob's fork loop was refused a fork: {log[-600:]}")
            check(0 < most <= 64, f"bob's processes never passed pids.max 64: at most {most} seen")
            wait_until(lambda: procs_of(acc.uid("bob")) == 0, "none of bob's processes left once his run ended")
            check(not os.path.exists(cg), f"its cgroup is gone with it: {cg}")


# ---- points_flood ----

FLOOD = r"""
import ddpd, time
for i in range(1, 5001):
    ddpd.log_step(i, loss=1.0 / i)
print('FLOODED', flush=True)
time.sleep(300)
"""


def case_points_flood(a):
    with shared_box(a, extra=["--max-points-per-run", "500"]) as (s, acc, alice, bob, state):
        with alice_beside(s, alice):
            rid = submit_as(s, bob, command(FLOOD))
            run = s.wait_status(rid, ("failed", "succeeded", "canceled"), timeout=120)
            reason = (run or {}).get("reason") or ""
            check(run and run["status"] == "failed", f"bob's flooding run fails: {run and run['status']} {reason}")
            check("500 points" in reason and "--max-points-per-run" in reason and "runaway" in reason,
                  f"its reason names the cap and its flag: {reason}")
            db = sqlite3.connect(os.path.join(state, "ddpd.db"))
            stored = db.execute("SELECT count(*) FROM steps WHERE run_id = ?", (rid,)).fetchone()[0]
            series = db.execute("SELECT count(*) FROM series WHERE run_id = ?", (rid,)).fetchone()[0]
            db.close()
            check(stored == 500 and series == 0, f"the store kept exactly the cap's 500 points: {stored} steps, "
                  f"{series} series values")
            r = s.get(f"/runs/{rid}/metrics?key=loss&max_points=100000", headers=bearer(bob))
            pts = r.json().get("points", []) if r.status == 200 else []
            check(len(pts) == 500, f"and serves them: {r.status} {len(pts)}")


# The same flood written straight into bob's journal, then a reconnection with his
# hello: ingest's catch-up replays the journal, and each replayed point counts.
JOURNAL_FLOOD = r"""
import json, os, socket, time
env = os.environ
hello = {"run": env["DDPD_RUN_ID"], "rank": int(env.get("RANK", "0")), "seq": 0, "t": int(time.time() * 1000),
         "type": "hello", "pid": os.getpid(), "host": "bob", "device": "cpu", "world_size": 1}
line = (json.dumps(dict(hello, secret=env["DDPD_RUN_SECRET"])) + "\n").encode()
s1 = socket.socket(socket.AF_UNIX); s1.connect(env["DDPD_EVENTS_SOCKET"]); s1.sendall(line)
time.sleep(1); s1.close()
with open(env.get("DDPD_EVENTS_JOURNAL") or "events.jsonl", "a") as j:
    j.write(json.dumps(hello) + "\n")
    for i in range(1, 5001):
        j.write(json.dumps({"run": env["DDPD_RUN_ID"], "rank": hello["rank"], "seq": i, "t": hello["t"] + i,
                            "type": "step", "epoch": 0, "step": i - 1, "global_step": i, "loss": 1.0 / i,
                            "lr": 0.1, "samples_per_s": 1.0}) + "\n")
s2 = socket.socket(socket.AF_UNIX); s2.connect(env["DDPD_EVENTS_SOCKET"]); s2.sendall(line)
print('FLOODED THROUGH THE JOURNAL', flush=True)
time.sleep(300)
"""


def case_points_through_the_journal(a):
    with shared_box(a, extra=["--max-points-per-run", "500"]) as (s, acc, alice, bob, state):
        with alice_beside(s, alice):
            rid = submit_as(s, bob, command(JOURNAL_FLOOD))
            run = s.wait_status(rid, ("failed", "succeeded", "canceled"), timeout=120)
            reason = (run or {}).get("reason") or ""
            check(run and run["status"] == "failed" and "500 points" in reason and "--max-points-per-run" in reason,
                  f"bob's run, whose journal brought 5000 points at a reconnection, fails naming the cap: "
                  f"{run and run['status']} {reason}")
            db = sqlite3.connect(os.path.join(state, "ddpd.db"))
            stored = db.execute("SELECT count(*) FROM steps WHERE run_id = ?", (rid,)).fetchone()[0]
            db.close()
            check(stored == 500, f"the store kept the cap's 500 points of the journal's 5000: {stored}")


# ---- log_cap ----

CHATTY = r"""
for i in range(4000):
    print(f'line {i:05d} ' + 'x' * 90, flush=(i % 100 == 0))
"""
NOTICE = "ddpd: this log reached its cap of 4 KiB (ddpd serve --max-log-bytes-per-run"


def case_log_cap(a):
    needs_trainer(a)
    with shared_box(a, extra=["--max-log-bytes-per-run", "4096"]) as (s, acc, alice, bob, state):
        with alice_beside(s, alice):
            rid = submit_as(s, bob, command(CHATTY))
            run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=120)
            reason = (run or {}).get("reason") or ""
            check(run and run["status"] == "succeeded", f"bob's chatty run ends as it would: {run and run['status']}")
            check("its log reached its cap of 4 KiB" in reason and "--max-log-bytes-per-run" in reason,
                  f"its record says its log reached the cap: {reason}")
            for name in ("trainer.log", "ranks/rank-0.log"):
                path = os.path.join(s.run_dir(rid), name)
                text = read(path)
                size = os.path.getsize(path)
                check(size <= 4096, f"{name} stops at the cap: {size} bytes")
                lines = text.splitlines()
                check(lines and NOTICE in lines[-1] and sum(NOTICE in ln for ln in lines) == 1,
                      f"{name}'s last line, once, says so: {lines[-2:]}")
                check("line 03999" not in text, f"{name}: what came past the cap is not there")
            r = s.get(f"/runs/{rid}/logs", headers=bearer(bob))
            check(r.status == 200 and NOTICE in r.body.decode(errors="replace"), f"the log as served says it: {r.status}")
            # the built-in trainer's own lines (its launcher and ranks, trainer/run_io/log.c)
            bid = submit_as(s, bob, fmnist_config(**{"name": "builtin", "data.limit": 512, "data.test_limit": 256,
                                                      "train.epochs": 40, "distributed.world_size": 1}))
            run = s.wait_status(bid, ("succeeded", "failed", "canceled"), timeout=300)
            path = os.path.join(s.run_dir(bid), "trainer.log")
            lines = read(path).splitlines()
            check(run and run["status"] == "succeeded" and os.path.getsize(path) <= 4096 and lines and
                  NOTICE in lines[-1], f"the built-in trainer's log stops at the cap too: {run and run['status']} "
                  f"{os.path.getsize(path)} {lines[-1:]}")
            check("its log reached its cap" in ((run or {}).get("reason") or ""), f"and says so: {run and run.get('reason')}")


# ---- disk_quota ----

HOSTILE_DIR = r"""
import os, sys
alice_big = sys.argv[1]
os.symlink(alice_big, 'to-alice-big')          # another user's big file, by a link
with open('mine.bin', 'wb') as f:
    f.write(b'b' * (100 << 10))
os.link('mine.bin', 'mine-again.bin')           # the same file twice
os.mkfifo('fifo')                               # a walk that opened it would hang
with open('sparse.bin', 'wb') as f:             # 10 GiB of size, one page of blocks
    f.truncate(10 << 30)
    f.seek(5 << 30)
    f.write(b's' * 4096)
print('HOSTILE', 'DIR MADE', flush=True)
"""


def case_disk_quota(a):
    needs_trainer(a)
    with shared_box(a, bob=("--max-disk-gb", "0.0005")) as (s, acc, alice, bob, state):
        quota = int(0.0005 * GIB)
        with alice_beside(s, alice, big=64 << 20) as alice_rid:
            alice_big = os.path.join(s.run_dir(alice_rid), "alice-big.bin")
            hid = submit_as(s, bob, command(HOSTILE_DIR, alice_big))
            run = s.wait_status(hid, ("succeeded", "failed", "canceled"), timeout=120)
            check(run and run["status"] == "succeeded", f"bob's run made its links: {run and run.get('reason')}")

            def bob_used():
                u = users_of(s, bob).get("bob", {})
                return u if u.get("disk_used_bytes") is not None and u["disk_used_bytes"] > 100 << 10 else None
            u = wait_until(bob_used, "bob's disk use, measured at his run's end") or {}
            used = u.get("disk_used_bytes") or 0
            check((100 << 10) <= used < (1 << 20), f"his usage is what his directories hold (the file once, the "
                  f"sparse file by its blocks, not alice's file): {used} bytes")
            check(u.get("max_disk_gb") == 0.0005, f"GET /users says his quota: {u}")
            check(s.get("/healthz").status == 200, "the server answers (the FIFO was not opened)")

            cfg = fmnist_config(**{"name": "fills", "model.hidden": [256, 128], "data.limit": 2000,
                                   "data.test_limit": 500, "train.epochs": 40, "distributed.world_size": 1,
                                   "checkpoint.every_epochs": 1, "checkpoint.keep": 2})
            rid = submit_as(s, bob, cfg)
            run = s.wait_status(rid, ("failed", "succeeded", "canceled"), timeout=300)
            reason = (run or {}).get("reason") or ""
            check(run and run["status"] == "failed", f"bob's run fails once past his quota: {run and run['status']}")
            check("past the quota of 524 KiB" in reason and "bob's runs hold" in reason and "--max-disk-gb" in reason,
                  f"its reason names the usage and the quota: {reason}")
            check("stopped at its checkpoint epoch-" in reason and f"POST /runs/{rid}/resume" in reason,
                  f"and where it stopped, resumable: {reason}")
            epochs_done = len(s.get(f"/runs/{rid}/epochs", headers=bearer(bob)).json().get("epochs", []))
            check(0 < epochs_done < 10, f"it was stopped at its first checkpoints, not run to its end: {epochs_done}")
            newest = max((c.get("epoch", -1) for c in (run or {}).get("checkpoints") or []), default=None)
            check(newest is not None and newest >= 0, f"its checkpoints are on record: {(run or {}).get('checkpoints')}")
            r = submit_as(s, bob, command("print(1)"), want=403)
            detail = r.json().get("detail", "") if r.status == 403 else ""
            check("past the quota of 524 KiB" in detail and "bob's runs hold" in detail and "delete runs" in detail
                  and detail.startswith("bob may not submit this run: bob's runs hold"),
                  f"his next run is refused with his usage, his quota and what to do: {detail}")
            code, out, err = user(a.ddpd, state, "list")
            line = next((ln for ln in out.splitlines() if ln.startswith("bob ")), "")
            check("0.0005" in line and "MiB" in line, f"ddpd user list shows his quota and his usage: {line!r}")
        # the quota raised (alice's run done: the users change on purpose now): the run
        # resumes from its newest checkpoint, to its end
        code, out, err = user(a.ddpd, state, "set", "bob", "--max-disk-gb", "none")
        check(code == 0 and "no quota" in out, f"ddpd user set --max-disk-gb none: {code} {out} {err}")
        r = s.post(f"/runs/{rid}/resume", headers=bearer(bob))
        check(r.status == 202, f"the run resumes: {r.status} {r.body[:300]!r}")
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=400)
        check(run and run["status"] == "succeeded", f"and ends: {run and run['status']} {run and run.get('reason')}")
        resumes = (run or {}).get("resumes") or [{}]
        check(resumes[-1].get("from_epoch") == newest, f"from its newest checkpoint (epoch {newest}): {resumes}")


# ---- runs_dir ----

def case_runs_dir(a):
    needs_trainer(a)
    state = tempfile.mkdtemp(prefix="ddpd-bounds-state-")
    runs = os.path.join(tempfile.mkdtemp(prefix="ddpd-bounds-runs-"), "runs")
    try:
        extra = ["--runs-dir", runs]
        cfg = fmnist_config(**{"name": "apart", "data.limit": 2000, "data.test_limit": 500, "train.epochs": 30,
                               "distributed.world_size": 1, "checkpoint.every_epochs": 1})
        with Server(a.ddpd, a.trainer, state_dir=state, extra_args=extra) as s:
            rid = s.submit(cfg)
            run_dir = os.path.join(runs, str(rid))
            wait_until(lambda: (s.run(rid) or {}).get("checkpoints"), "a checkpoint of the run", timeout=180)
            r = s.post(f"/runs/{rid}/cancel")
            check(r.status in (200, 202), f"canceled: {r.status}")
            s.wait_status(rid, "canceled", timeout=120)
            check(os.path.isfile(os.path.join(run_dir, "config.json")) and os.path.isfile(os.path.join(run_dir, "trainer.log"))
                  and os.listdir(os.path.join(run_dir, "checkpoints")), f"the run's files are in --runs-dir: {os.listdir(run_dir)}")
            check(not os.path.exists(os.path.join(state, "runs", str(rid))), "and not in the state dir")
            check(os.path.isfile(os.path.join(state, "ddpd.db")) and not os.path.exists(os.path.join(runs, "ddpd.db")),
                  "the database stays in the state dir")
            check(stat.S_IMODE(os.stat(runs).st_mode) == 0o700, f"the runs dir is the server's only: {oct(os.stat(runs).st_mode)}")
            run = s.run(rid)
            paths = [c.get("path", "") for c in (run or {}).get("checkpoints", [])]
            check(paths and all(p.startswith(f"<runs-dir>/{rid}/checkpoints/") for p in paths),
                  f"answers name it by its root: {paths}")
            # a second server on the same runs dir is refused
            other = tempfile.mkdtemp(prefix="ddpd-bounds-state2-")
            p = subprocess.run([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", other, "--runs-dir", runs,
                                "--gpus", "none"], capture_output=True, text=True, timeout=60)
            check(p.returncode != 0 and runs in p.stderr, f"a second server on the same runs dir is refused: "
                  f"{p.returncode} {p.stderr[-300:]}")
            shutil.rmtree(other, ignore_errors=True)
        with Server(a.ddpd, a.trainer, state_dir=state, extra_args=extra) as s:
            r = s.post(f"/runs/{rid}/resume")
            check(r.status == 202, f"started again, the server resumes the run from --runs-dir: {r.status} {r.body[:300]!r}")
            run = s.wait_status(rid, "succeeded", timeout=400)
            check(run and run["status"] == "succeeded", f"and it ends: {run and run.get('reason')}")
            check((run or {}).get("resumes") and run["resumes"][-1].get("from_epoch") is not None,
                  f"from its checkpoint: {(run or {}).get('resumes')}")
            r = s.get(f"/runs/{rid}/logs")
            check(r.status == 200 and len(r.body) > 0, "its log is served from there")
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(os.path.dirname(runs), ignore_errors=True)


# ---- check ----

def case_check(a):
    needs_root(a)
    state = tempfile.mkdtemp(prefix="ddpd-bounds-")
    runs = os.path.join(tempfile.mkdtemp(prefix="ddpd-bounds-runs-"), "runs")
    try:
        add_user(a.ddpd, state, "alice", "--max-disk-gb", "2")
        add_user(a.ddpd, state, "bob")
        code, out, err = user(a.ddpd, state, "set", "bob", "--max-memory-gb", "4")
        check(code == 0 and "max-memory-gb 4" in out, f"ddpd user set --max-memory-gb: {code} {out} {err}")
        p = subprocess.run([a.ddpd, "check", "--state-dir", state, "--runs-dir", runs, "--gpus", "none", "--slots", "2",
                            "--data-root", "/usr/share/datasets", "--trainer", a.trainer or a.fake_trainer,
                            "--max-points-per-run", "1000", "--max-log-bytes-per-run", "10M",
                            "--run-memory-per-slot", "3"], capture_output=True, text=True, timeout=120)
        lines = {ln[6:18].strip(): (ln[:5].strip(), ln[18:]) for ln in p.stdout.splitlines()
                 if ln[:5].strip() in ("ok", "warn", "FAIL")}
        check(lines.get("runs dir", ("",))[0] == "ok" and runs in lines["runs dir"][1], f"the runs dir: {lines.get('runs dir')}")
        lim = lines.get("limits", ("", ""))
        check(lim[0] == "ok" and "memory 3 GiB per device (--run-memory-per-slot)" in lim[1] and "1000 points" in lim[1]
              and "10 MiB a log" in lim[1] and "cgroup v1" in lim[1], f"the limits this host holds runs to: {lim}")
        du = lines.get("disk use", ("", ""))
        check(du[0] == "ok" and "alice nothing measured of 2 GiB" in du[1] and "bob nothing measured (no quota)" in du[1],
              f"each user's disk use and quota: {du}\n{p.stdout}")
        code, out, err = user(a.ddpd, state, "list")
        check("MAX-MEMORY-GB" in out and "MAX-DISK-GB" in out and "DISK-USED" in out, f"ddpd user list's columns: {out}")
        bob = next((ln.split() for ln in out.splitlines() if ln.startswith("bob ")), [])
        alice = next((ln.split() for ln in out.splitlines() if ln.startswith("alice ")), [])
        check(bob[4:6] == ["4", "none"] and alice[4:6] == ["none", "2"], f"their limits: {bob} {alice}")
        code, out, err = user(a.ddpd, state, "set", "bob", "--max-memory-gb", "-1")
        check(code == 2 and "--max-memory-gb needs a number of GiB" in err, f"a bad limit is refused naming it: {err}")
        code, out, err = user(a.ddpd, state, "set", "bob")
        check(code == 2 and "--max-disk-gb" in err, f"set without a change names what it takes: {err}")
        p = subprocess.run([a.ddpd, "check", "--state-dir", state, "--gpus", "none", "--max-log-bytes-per-run", "12q"],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 1 and "--max-log-bytes-per-run \"12q\": a size is needed" in p.stdout,
              f"a bad cap is a failed config, naming it: {p.stdout[:400]}")
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(os.path.dirname(runs), ignore_errors=True)


if __name__ == "__main__":
    cases = cases_in(globals())
    main(cases, args_for(cases, ["--runner"]))
