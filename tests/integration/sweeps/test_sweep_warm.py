#!/usr/bin/env python3
"""The warm start of a sweep's Python trials (warm_start.imports; docs/sweeps.md,
"Trials that start fast"): a real ddpd as root, real Unix accounts alice and bob, the
real ddp-run, a real 2-rank PyTorch script on gloo (Debian's python3-torch). Root
only: without it a case says why and is skipped (exit 77).

  same_results  alice's sweep of three trials, one at a time, warm and then cold: each
                trial's weights after its steps, its torchrun variables, sys.argv, its
                working directory and its exit are the same both ways; the warm
                sweep's later trials were forked from the zygote (the launcher's log
                says so), their ranks ran as alice, in the trial's own cgroup, with
                no `torch` import left to do; a trial whose script exits 3 fails
                with "exited with status 3" both ways. The overhead (the trial's
                start to its first step) of each is printed, not asserted
  wall          while alice's zygote runs, bob cannot connect to its socket (from
                his own account); bob's warm sweep gets a zygote of his own, never
                alice's (his ranks run as bob); alice's zygote ends once her sweep
                has ended
  signals       a warm trial canceled mid-step: its ranks get SIGTERM and the run
                ends canceled, as a cold one does
  first_warm    the first trial of a warm sweep waits for the zygote the sweep's
                start made and is forked from it (no cold first trial), as is the
                next, from the one zygote; a module of the user's own named in
                imports (trialdata.py beside the script) was imported by the
                zygote, in the working directory, and found by the ranks; the
                second trial's trial zygote was forked ahead (a spare), before
                the first trial ended
  paused_keeps  a warm sweep paused with no trial live for longer than the old
                10 s idle limit keeps its zygote: the trials after the resume are
                forked from the same one; it ends with the sweep
  import_fails  a zygote whose import fails is tried once: the sweep's trials start
                cold and succeed, the server's log says why once; the sweep says so
                where its owner looks (GET /sweeps/{id}'s warm_start failed with the
                import's error, ddpctl sweep show, a `warm start failed` decision on
                the live feed) and each trial's log says it started cold and why;
                bob (a member, not its owner) reads the reason as <hidden>
  at_submit     the zygote starts when the sweep is submitted: while both slots are
                held by another run and the sweep's first trial is queued, alice's
                zygote is there, runs as alice in a cgroup of its own, and the sweep
                says `ready`; once the slots free, the first trial is forked from it
                (one zygote for the sweep)
  cancel_early  a warm sweep canceled before its first trial leaves no zygote behind:
                one canceled once its zygote runs (its process and its directory
                go), one canceled at once after its submission (its spawn, answered
                after the cancel, is killed)

Usage: test_sweep_warm.py CASE --ddpd PATH --runner PATH --ddpctl PATH"""
import argparse, json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, threading, time

from ddpd_harness import Server, Accounts, check, cases_in, wait_until, main, add_user, bearer, iso_seconds  # noqa: E402

SKIP = 77
FINAL = ("succeeded", "failed", "canceled")
IMPORTS = ["torch", "torch.distributed", "torch.nn"]

# A module of the user's own beside the script (a data set loaded at import, say):
# where and by which process it was imported.
USER_MODULE = "import os\nPID = os.getpid()\nCWD = os.getcwd()\n"

# The trial: T0 before its imports (whether trialdata was already imported); 3 DDP steps of a seeded MLP; what it saw and its
# weights' sum written to OUT/trial-RUN-RANK.json; exits EXIT (0 unless set).
TRIAL = r'''
import json, os, sys, time
T0 = time.time()
already = "torch" in sys.modules
user_module = sys.modules.get("trialdata")
user_module = user_module and {"pid": user_module.PID, "cwd": user_module.CWD}
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(int(os.environ["SEED"]))
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(),
                                                                      torch.nn.Linear(8, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + rank)
first = None
for step in range(3):
    x = torch.randn(32, 16, generator=g)
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
    first = first or time.time()
    if os.environ.get("HOLD") and step == 1:
        print("holding", flush=True)
        time.sleep(600)
total = sum(float(p.double().sum()) for p in model.parameters())
if rank == 0:
    import ddpd
    ddpd.log_epoch(0, score=total)
    ddpd.flush()
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SEED",
        "TORCHELASTIC_RESTART_COUNT", "DDPD_RUN_ID", "PYTHONUNBUFFERED", "OMP_NUM_THREADS"]
with open("/proc/self/cgroup") as f:
    cgroup = f.read().strip()
with open(f"/proc/{os.getppid()}/stat") as f:  # the parent's start, in seconds since boot (a trial zygote's, when forked)
    parent_start = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
with open("/proc/uptime") as f:
    end_uptime = float(f.read().split()[0])
with open(os.path.join(os.environ["OUT"], f"trial-{os.environ['DDPD_RUN_ID']}-{rank}.json"), "w") as f:
    json.dump({"sum": total, "env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv, "cwd": os.getcwd(),
               "uid": os.getuid(), "cgroup": cgroup, "t0": T0, "first_step": first, "torch_loaded": already,
               "name": __name__, "user_module": user_module, "parent_start": parent_start,
               "end_uptime": end_uptime}, f)
dist.destroy_process_group()
sys.exit(int(os.environ.get("EXIT", "0")))
'''


def needs_root(a):
    if os.geteuid() != 0:
        print(f"{a.case}: skipped: it makes Unix accounts and starts the server as root; run it as root (CI does)")
        sys.exit(SKIP)


class Team:
    """A root server with alice and bob, each an account of their own; a work root with
    the trial script (proj/) and a directory every account may write results to (out/)."""

    def __init__(self, a, acc):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-sweep-warm-"))
        self.state, self.out, proj = (os.path.join(self.root, d) for d in ("state", "out", "proj"))
        for d in (self.state, self.out, proj):
            os.mkdir(d)
        with open(os.path.join(proj, "trial.py"), "w") as f:
            f.write(TRIAL)
        with open(os.path.join(proj, "trialdata.py"), "w") as f:
            f.write(USER_MODULE)
        os.chmod(self.root, 0o755)
        os.chmod(proj, 0o755)
        os.chmod(self.out, 0o777)
        self.alice = add_user(a.ddpd, self.state, "alice", "--unix-user", acc["alice"])
        self.bob = add_user(a.ddpd, self.state, "bob", "--unix-user", acc["bob"])
        self.server = Server(os.path.abspath(a.ddpd), None, slots=2, state_dir=self.state,
                             extra_args=["--allow-commands", "--runner", os.path.abspath(a.runner),
                                         "--work-root", self.root])

    def __enter__(self):
        self.server.__enter__()
        self.server.read_headers = bearer(self.alice)
        return self

    def __exit__(self, *exc):
        try:
            return self.server.__exit__(*exc)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def sweep(self, token, seeds, warm, extra_env=None, parallel=1, imports=None):
        base = {"command": ["/usr/bin/python3", "trial.py", "--tag", "x y"], "working_dir": "proj",
                "distributed": {"world_size": 2}, "env": {"OUT": self.out, **(extra_env or {})}}
        if warm:
            base["warm_start"] = {"imports": imports or IMPORTS}
        body = {"name": "warm" if warm else "cold", "method": "grid", "parallel": parallel, "base": base,
                "parameters": {"env.SEED": {"values": [str(s) for s in seeds]}},
                "metric": {"key": "score", "goal": "maximize"}}
        r = self.server.post("/sweeps", body, headers=bearer(token))
        check(r.status == 201, f"the sweep is taken: {r.status} {r.body[:400]!r}")
        return r.json()["id"] if r.status == 201 else None

    def wait(self, token, sid, timeout=600):
        if sid is None:
            return None
        def done():
            w = self.server.get(f"/sweeps/{sid}", headers=bearer(token)).json()
            return w if w["status"] in FINAL else None
        return wait_until(done, f"sweep {sid} to end", timeout, interval=0.2)

    def trials(self, token, sid):
        """Each trial: (its run, rank 0's result, rank 1's result) in trial order."""
        w = self.server.get(f"/sweeps/{sid}", headers=bearer(token)).json()
        out = []
        for t in w["trials"]:
            run = self.server.get(f"/runs/{t['run_id']}", headers=bearer(token)).json()
            res = []
            for rank in (0, 1):
                p = os.path.join(self.out, f"trial-{t['run_id']}-{rank}.json")
                res.append(json.load(open(p)) if os.path.exists(p) else None)
            out.append((run, *res))
        return out

    def blocker(self):
        """A run of alice's holding both slots until canceled: its id."""
        r = self.server.post("/runs", {"name": "blocker", "command": ["/bin/sleep", "600"],
                                       "distributed": {"world_size": 2}}, headers=bearer(self.alice))
        check(r.status == 201, f"the blocking run is taken: {r.status} {r.body[:300]!r}")
        rid = r.json()["id"]
        self.server.wait_status(rid, ("running",), timeout=120)
        return rid

    def launcher_log(self, rid):
        with open(os.path.join(self.server.run_dir(rid), "trainer.log"), errors="replace") as f:
            return f.read()

    def server_log(self):
        with open(self.server.log_path, errors="replace") as f:
            return f.read()


def overhead(run, r0):
    return r0["first_step"] - iso_seconds(run["started_at"]) if r0 and run.get("started_at") else float("nan")


def case_same_results(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        seeds = [1, 2]  # the second trial at least is forked (the first too, once the zygote is ready)
        warm_id = t.sweep(t.alice, seeds, warm=True)
        warm = t.wait(t.alice, warm_id)
        cold_id = t.sweep(t.alice, seeds, warm=False)
        cold = t.wait(t.alice, cold_id)
        if not check(warm and cold and warm["status"] == cold["status"] == "succeeded",
                     f"both sweeps succeed: {warm and warm['status']} {cold and cold['status']}"):
            t.server.dump_log()
            return
        W, C = t.trials(t.alice, warm_id), t.trials(t.alice, cold_id)
        forked = [run["id"] for run, _, _ in W if "the ranks are forked from the trial zygote" in t.launcher_log(run["id"])]
        check(len(forked) >= 1, f"a later trial of the warm sweep was forked from its zygote: {forked} of "
                                f"{[run['id'] for run, _, _ in W]}")
        check(not any("trial zygote" in t.launcher_log(run["id"]) for run, _, _ in C),
              "no trial of the cold sweep was")
        uid = acc.uid("alice")
        for (wr, w0, w1), (cr, c0, c1) in zip(W, C):
            if not check(all((w0, w1, c0, c1)), f"every rank wrote its result: {wr['id']} {cr['id']}: "
                                                f"{[bool(x) for x in (w0, w1, c0, c1)]} {wr['status']} {wr.get('reason')} "
                                                f"{t.launcher_log(wr['id'])[-1500:]}"):
                continue
            for rank, (w, c) in enumerate(((w0, c0), (w1, c1))):
                check(w["sum"] == c["sum"], f"trial {w['env']['SEED']} rank {rank}: the same weights warm and cold: "
                                            f"{w['sum']!r} {c['sum']!r}")
                same_env = {k: v for k, v in w["env"].items() if k not in ("MASTER_PORT", "DDPD_RUN_ID")}
                cold_env = {k: v for k, v in c["env"].items() if k not in ("MASTER_PORT", "DDPD_RUN_ID")}
                check(same_env == cold_env and w["env"]["DDPD_RUN_ID"] == str(wr["id"]),
                      f"the same torchrun variables: {w['env']} {c['env']}")
                check(w["argv"] == c["argv"] == ["trial.py", "--tag", "x y"] and w["cwd"] == c["cwd"]
                      and w["name"] == c["name"] == "__main__",
                      f"the same sys.argv, working directory and __name__: {w['argv']} {w['cwd']} {c['argv']} {c['cwd']}")
                check(w["uid"] == c["uid"] == uid, f"both ran as alice (uid {uid}): {w['uid']} {c['uid']}")
                check(f"-run-{wr['id']}-0" in w["cgroup"], f"a warm rank is in its own trial's cgroup: {w['cgroup']}")
            if wr["id"] in forked:
                check(w0["torch_loaded"] and not c0["torch_loaded"],
                      f"a forked rank found torch imported, a cold one did not: {w0['torch_loaded']} {c0['torch_loaded']}")
        for name, rows in (("warm", W), ("cold", C)):
            o = [overhead(run, r0) for run, r0, _ in rows]
            print(f"{name}: trial overhead (start to first step), s: {', '.join(f'{x:.3f}' for x in o)}; "
                  f"median {statistics.median(o):.3f}; load {os.getloadavg()[0]:.1f}")
        # a failing script fails the same way both ways
        fw = t.wait(t.alice, t.sweep(t.alice, [4, 5], warm=True, extra_env={"EXIT": "3"}))
        fc = t.wait(t.alice, t.sweep(t.alice, [4], warm=False, extra_env={"EXIT": "3"}))
        reasons = [r["reason"] for r, _, _ in t.trials(t.alice, fw["id"]) + t.trials(t.alice, fc["id"])]
        check(reasons and all("exited with status 3" in (x or "") for x in reasons),
              f"a trial exiting 3 fails saying so, warm and cold: {reasons}")


def zygote_pids(t):
    """{(sweep, uid): pid} from the server's log."""
    return {(int(m[0]), int(m[1])): int(m[2])
            for m in re.findall(r"the zygote of sweep (\d+) for uid (\d+) is pid (\d+)", t.server_log())}


def connect_as(uid, path):
    """Connects to `path` from a child that became `uid`: 'connected' or the error's name."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.sendall(b'{"op": "fork"}\n')
            s.settimeout(10)
            got = s.recv(200)
            msg = "connected: " + got.decode(errors="replace")
        except OSError as e:
            msg = type(e).__name__
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        return f.read()


def case_wall(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        sid = t.sweep(t.alice, [1, 2, 3], warm=True)  # its zygote lives from its first trial to its end
        ua, ub = acc.uid("alice"), acc.uid("bob")
        z = wait_until(lambda: zygote_pids(t).get((sid, ua)), "alice's zygote", 300)
        path = os.path.join(t.state, "zygotes", f"{sid}-{ua}", "zygote.sock")
        wait_until(lambda: os.path.exists(path), "its socket", 300)
        got = connect_as(ub, path)
        print(f"bob connects to alice's zygote: {got}")
        check(got in ("PermissionError",), f"bob cannot connect to alice's zygote: {got}")
        bsid = t.sweep(t.bob, [7, 8], warm=True)
        bw = t.wait(t.bob, bsid)
        check(bw and bw["status"] == "succeeded", f"bob's warm sweep succeeds: {bw and (bw['status'], bw['reason'])}")
        zs = zygote_pids(t)
        check(zs.get((bsid, ub)) and zs[(bsid, ub)] != z, f"bob's sweep has a zygote of its own: {zs}")
        rows = t.trials(t.bob, bsid)
        check(rows and all(r0 and r1 and r0["uid"] == r1["uid"] == ub for _, r0, r1 in rows),
              f"bob's ranks ran as bob (uid {ub}): {[[(r or {}).get('uid') for r in (r0, r1)] for _, r0, r1 in rows]}")
        aw = t.wait(t.alice, sid)
        check(aw and aw["status"] == "succeeded", f"alice's sweep succeeds: {aw and aw['status']}")
        gone = wait_until(lambda: not os.path.exists(f"/proc/{z}"), "alice's zygote to end after her sweep", 120)
        check(gone, f"alice's zygote (pid {z}) ended with her sweep")


def case_signals(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        first = t.wait(t.alice, t.sweep(t.alice, [1], warm=True))  # its zygote: warm for the next
        check(first and first["status"] == "succeeded", f"a first trial succeeds: {first and first['status']}")
        # the first sweep's zygote is its own: a sweep of two, the second held, is warm from its second trial
        sid = t.sweep(t.alice, [1, 2], warm=True, extra_env={"HOLD": "1"})

        def held():
            w = t.server.get(f"/sweeps/{sid}").json()
            runs = [x["run_id"] for x in w["trials"] if x.get("run_id")]
            for rid in runs:
                log = t.launcher_log(rid) if os.path.exists(os.path.join(t.server.run_dir(rid), "trainer.log")) else ""
                if "forked from the trial zygote" in log and "holding" in log:
                    return rid
            for rid in runs:  # a cold one held: cancel it, the next is warm
                log = t.launcher_log(rid) if os.path.exists(os.path.join(t.server.run_dir(rid), "trainer.log")) else ""
                if "holding" in log and "trial zygote" not in log and t.server.run(rid)["status"] == "running":
                    t.server.post(f"/runs/{rid}/cancel", headers=bearer(t.alice))
            return None
        rid = wait_until(held, "a warm trial holding in its step", 400, interval=0.5)
        if not check(rid, "a warm trial runs and holds"):
            return
        r = t.server.post(f"/runs/{rid}/cancel", headers=bearer(t.alice))
        check(r.status in (200, 202), f"its cancel is taken: {r.status}")
        run = t.server.wait_status(rid, FINAL, timeout=120)
        log = t.launcher_log(rid)
        check(run and run["status"] == "canceled", f"the warm trial ends canceled: {run and run['status']}")
        check("killed by signal 15" in log or "SIGTERM" in log, f"its ranks got SIGTERM: {log[-800:]}")
        t.server.post(f"/sweeps/{sid}/cancel", headers=bearer(t.alice))


def zygote_starts(t, sid):
    """The pids the server's log gave sweep sid's zygotes, in order."""
    return [int(m) for m in re.findall(rf"the zygote of sweep {sid} for uid \d+ is pid (\d+)", t.server_log())]


def forked(t, rid):
    return t.launcher_log(rid).count("the ranks are forked from the trial zygote")


def case_first_warm(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        sid = t.sweep(t.alice, [1, 2], warm=True, imports=IMPORTS + ["trialdata"])
        w = t.wait(t.alice, sid)
        if not check(w and w["status"] == "succeeded", f"the sweep succeeds: {w and (w['status'], w['reason'])}"):
            t.server.dump_log()
            return
        rows = t.trials(t.alice, sid)
        check([forked(t, run["id"]) for run, _, _ in rows] == [1, 1],
              f"both trials, the first too, were forked from the zygote: "
              f"{[(run['id'], forked(t, run['id'])) for run, _, _ in rows]} {t.launcher_log(rows[0][0]['id'])[-1500:]}")
        check(len(zygote_starts(t, sid)) == 1, f"one zygote for the sweep: {zygote_starts(t, sid)}")
        proj = os.path.join(t.root, "proj")
        for run, r0, r1 in rows:
            for r in (r0, r1):
                um = r and r["user_module"]
                check(r and r["torch_loaded"] and um and um["cwd"] == proj and um["pid"] == zygote_starts(t, sid)[0],
                      f"trial {run['id']}: torch and the user's trialdata were imported by the zygote, in the "
                      f"working directory {proj}: {r and (r['torch_loaded'], um)}")
        for run, r0, _ in rows:
            o = overhead(run, r0)
            print(f"trial {run['id']}: overhead (start to first step) {o:.3f} s; load {os.getloadavg()[0]:.1f}")
        # the second trial's trial zygote was forked ahead (a spare, after the first's
        # handoff), not at its own start: it began before the first trial's script ended
        (_, a0, _), (_, b0, _) = rows[0], rows[1]
        check(a0 and b0 and b0["parent_start"] < a0["end_uptime"],
              f"the second trial's trial zygote was forked before the first trial ended: started at "
              f"{b0 and b0['parent_start']} s since boot, the first trial's rank 0 ended at {a0 and a0['end_uptime']}")


def case_paused_keeps(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        sid = t.sweep(t.alice, [1, 2, 3], warm=True)
        first = wait_until(lambda: next((x["run_id"] for x in t.server.get(f"/sweeps/{sid}").json()["trials"]
                                          if x.get("run_id") and t.server.run(x["run_id"])["status"] == "succeeded"),
                                         None), "the sweep's first trial to succeed", 300, interval=0.2)
        r = t.server.post(f"/sweeps/{sid}/pause", headers=bearer(t.alice))
        check(r.status in (200, 202), f"the pause is taken: {r.status} {r.body[:300]!r}")

        def none_live():
            w = t.server.get(f"/sweeps/{sid}").json()
            st = [t.server.run(x["run_id"])["status"] for x in w["trials"] if x.get("run_id")]
            return st if not any(s in ("starting", "running") for s in st) else None
        check(first and wait_until(none_live, "no trial of the paused sweep live", 300, interval=0.2),
              "the paused sweep has no trial live")
        z = zygote_starts(t, sid)
        if not check(len(z) == 1, f"the sweep's zygote started: {z}"):
            return
        time.sleep(12)  # longer than the old idle limit (10 s): the zygote must outlive it
        check(os.path.exists(f"/proc/{z[0]}"), f"the paused sweep's zygote (pid {z[0]}) is still there after 12 s")
        r = t.server.post(f"/sweeps/{sid}/resume", headers=bearer(t.alice))
        check(r.status in (200, 202), f"the resume is taken: {r.status} {r.body[:300]!r}")
        w = t.wait(t.alice, sid)
        check(w and w["status"] == "succeeded", f"the sweep succeeds: {w and (w['status'], w['reason'])}")
        later = [x["run_id"] for x in t.server.get(f"/sweeps/{sid}").json()["trials"] if x["run_id"] != first]
        check(later and all(forked(t, rid) >= 1 for rid in later),
              f"the trials after the resume were forked: {[(rid, forked(t, rid)) for rid in later]}")
        check(zygote_starts(t, sid) == z, f"from the same zygote: {zygote_starts(t, sid)} {z}")
        gone = wait_until(lambda: not os.path.exists(f"/proc/{z[0]}"), "the zygote to end with its sweep", 120)
        check(gone and f"the zygote of sweep {sid} for uid {acc.uid('alice')} ended: its sweep ended" in t.server_log(),
              "the zygote ended with its sweep, saying so")


def case_import_fails(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        sid = t.sweep(t.alice, [1, 2], warm=True, imports=["torch", "ddpd_no_such_module"])
        w = t.wait(t.alice, sid)
        check(w and w["status"] == "succeeded", f"the sweep succeeds, cold: {w and (w['status'], w['reason'])}")
        rows = t.trials(t.alice, sid)
        check(rows and not any(forked(t, run["id"]) for run, _, _ in rows), "no trial was forked")
        check(len(zygote_starts(t, sid)) == 1, f"the zygote was tried once, not at each trial: {zygote_starts(t, sid)}")
        said = re.findall(rf"the zygote of sweep {sid} for uid \d+ ended before it was ready \(([^)]*)\)", t.server_log())
        check(len(said) == 1 and "ddpd_no_such_module" in said[0], f"the server's log says why, once: {said}")
        # where its owner looks: the sweep, ddpctl, the feed's decision, each trial's log
        error = "ModuleNotFoundError: No module named 'ddpd_no_such_module'"
        ws = (w or {}).get("warm_start") or {}
        print(f"GET /sweeps/{sid} warm_start: {ws}")
        check(ws.get("status") == "failed" and error in (ws.get("reason") or ""),
              f"the sweep's warm_start is failed with the import's error: {ws}")
        p = subprocess.run([a.ddpctl, "--server", f"http://127.0.0.1:{t.server.port}", "--token", t.alice, "sweep", "show",
                            str(sid)], capture_output=True, text=True, timeout=60)
        line = [x for x in p.stdout.splitlines() if x.startswith("warm start:")]
        print(f"ddpctl sweep show: {line}")
        check(p.returncode == 0 and line and "failed" in line[0] and error in line[0],
              f"ddpctl sweep show says the warm start failed and why: {p.stdout!r} {p.stderr!r}")
        for run, _, _ in rows:
            log = t.launcher_log(run["id"])
            cold = [x for x in log.splitlines() if "this trial starts cold" in x]
            check(cold and error in cold[0], f"trial run {run['id']}'s log says it starts cold and why: {log[:1500]!r}")
        wb = t.server.get(f"/sweeps/{sid}", headers=bearer(t.bob))
        wbs = wb.json().get("warm_start") if wb.status == 200 else None
        check(wb.status != 200 or (wbs and wbs["reason"] == "<hidden>" and "/warm_start/reason" in wb.json()["hidden"]),
              f"bob, a member, reads the reason hidden: {wb.status} {wbs}")


def zygote_processes(sid, uid):
    """The pids of processes whose command line names sweep sid's zygote of uid."""
    mark = f"/zygotes/{sid}-{uid}/"
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                line = f.read().decode(errors="replace")
        except OSError:
            continue
        if "ddpd_zygote" in line and mark in line:
            found.append(int(d))
    return found


def proc_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(x for x in f if x.startswith("Uid:")).split()[1])


def case_at_submit(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        ua = acc.uid("alice")
        blocker = t.blocker()
        sid = t.sweep(t.alice, [1, 2], warm=True)
        ready = wait_until(lambda: (t.server.get(f"/sweeps/{sid}").json().get("warm_start") or {}).get("status") == "ready",
                           "the sweep's zygote to be ready", 300, interval=0.1)
        w = t.server.get(f"/sweeps/{sid}").json()
        first = w["trials"][0] if w["trials"] else {}
        status = t.server.run(first["run_id"])["status"] if first.get("run_id") else first.get("status")
        z = zygote_starts(t, sid)
        print(f"zygote {z} ready while the first trial is {status}; warm_start {w.get('warm_start')}")
        if not check(ready and len(z) == 1 and status in ("queued", "pending"),
                     f"the zygote is ready while the first trial has not started: {z} {status} {w.get('warm_start')}"):
            print("\n".join(x for x in t.server_log().splitlines() if "/sweeps/" not in x and "GET /runs" not in x))
        if z:
            with open(f"/proc/{z[0]}/cgroup") as f:
                cg = f.read()
            check(proc_uid(z[0]) == ua and f"-zygote-{sid}-{ua}" in cg,
                  f"the zygote runs as alice in a cgroup of its own: uid {proc_uid(z[0])} {cg.strip()}")
        t.server.post(f"/runs/{blocker}/cancel", headers=bearer(t.alice))
        w = t.wait(t.alice, sid)
        check(w and w["status"] == "succeeded", f"the sweep succeeds: {w and (w['status'], w['reason'])}")
        rows = t.trials(t.alice, sid)
        check(rows and forked(t, rows[0][0]["id"]) == 1,
              f"the first trial was forked from the zygote: {rows and t.launcher_log(rows[0][0]['id'])[-1500:]}")
        check(zygote_starts(t, sid) == z, f"one zygote for the sweep: {zygote_starts(t, sid)} {z}")
        for run, r0, _ in rows:
            print(f"trial {run['id']}: overhead (start to first step) {overhead(run, r0):.3f} s; "
                  f"load {os.getloadavg()[0]:.1f}")


def case_cancel_early(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        ua = acc.uid("alice")
        blocker = t.blocker()
        # canceled once its zygote runs
        sid = t.sweep(t.alice, [1, 2], warm=True)
        z = wait_until(lambda: zygote_starts(t, sid), "the sweep's zygote to start", 300, interval=0.1)
        r = t.server.post(f"/sweeps/{sid}/cancel", headers=bearer(t.alice))
        check(r.status in (200, 202), f"the cancel is taken: {r.status} {r.body[:300]!r}")
        zdir = os.path.join(t.state, "zygotes", f"{sid}-{ua}")
        gone = wait_until(lambda: z and not os.path.exists(f"/proc/{z[0]}") and not os.path.exists(zdir)
                          and not zygote_processes(sid, ua), "the canceled sweep's zygote to go", 120, interval=0.1)
        check(gone, f"the zygote (pid {z}) and its directory are gone: {zygote_processes(sid, ua)} "
                    f"{os.path.exists(zdir)}")
        # canceled at once: its cancel sent over and over from another thread while it is
        # submitted (sweep ids follow one another), so that it comes as soon as the sweep
        # exists, most often before its zygote's spawn is answered
        answers = []

        def cancel_next():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                r = t.server.post(f"/sweeps/{sid + 1}/cancel", headers=bearer(t.alice))
                if r.status != 404:
                    answers.append(r.status)
                    return
        th = threading.Thread(target=cancel_next)
        th.start()
        sid2 = t.sweep(t.alice, [1, 2], warm=True)
        th.join()
        check(sid2 == sid + 1 and answers and answers[0] in (200, 202), f"the cancel is taken: {sid2} {answers}")
        t.server.post(f"/runs/{blocker}/cancel", headers=bearer(t.alice))
        # a run spawned after the zygote's (the supervisor spawns in order): by its start, the zygote's spawn is answered
        after = t.blocker()
        gone = wait_until(lambda: not zygote_processes(sid2, ua) and not os.path.exists(
            os.path.join(t.state, "zygotes", f"{sid2}-{ua}")), "the second sweep's zygote to go", 120, interval=0.1)
        check(gone, f"no zygote of the sweep canceled at once is left: {zygote_processes(sid2, ua)}")
        print("the server's log of the second sweep's zygote: " + "; ".join(
            x.split("warm start: ", 1)[-1] for x in t.server_log().splitlines() if f"zygote of sweep {sid2} " in x))
        t.server.post(f"/runs/{after}/cancel", headers=bearer(t.alice))
        w = t.server.get(f"/sweeps/{sid2}").json()
        check(not w["trials"] or all(not x.get("run_id") or t.server.run(x["run_id"])["status"] != "succeeded"
                                     for x in w["trials"]), f"no trial of it ran: {w['trials']}")


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--runner", required=True)
    p.add_argument("--trainer")
    p.add_argument("--ddpctl")
    main(CASES, p.parse_args())
