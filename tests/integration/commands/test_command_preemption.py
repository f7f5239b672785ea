#!/usr/bin/env python3
"""Whom a preemption stops, who pays for it, and how long a run is safe from it: a
real ddpd on a loopback port, its users made with the real `ddpd user`, command runs
of plain Python reporting through `import ddpd` (a checkpoint is a file the script
writes, then ddpd.checkpoint_saved).

  least_lost        two preemptible runs of alice on the two slots: the older one
                    checkpoints at every step, the newer one checkpointed once, long
                    ago; bob's run of a higher priority needs one slot: the one that
                    checkpointed a moment ago is preempted (the rule before took the
                    newer), the other keeps running
  preemptor_pays    alice's run checkpoints once, steps on, and is preempted by bob's
                    run; it restarts from its checkpoint: the steps thrown away and its
                    restart's start-up are in bob's usage as phase `lost` (GET /usage,
                    by user and by run), with who caused it (`charged`), and none of it
                    in alice's
  min_runtime       a preemptible run with min_runtime_s is not preempted before it
                    has run that long: the run of a higher priority waits with pending
                    reason `priority` naming it, then preempts it
  owner_timeout     `ddpd user set alice --max-duration 3` while the server runs:
                    alice's command run (no limit of its own) ends `timeout` after 3 s,
                    its ranks stopped with SIGTERM, its reason naming its owner's limit;
                    bob's run beside it runs on; alice's run, resumed, goes on from its
                    checkpoint
  notice_answered   a preemptible run that asks ddpd.preempt_requested() at every step
                    (a 60 s grace): at the notice it checkpoints at its next step and
                    calls ddpd.checkpoint_saved, and is stopped at once (its attempt's
                    reason says so), losing at most a step: its restart goes on from the
                    step after, and the preemptor is charged next to nothing
  notice_callback   the same through ddpd.on_preempt(fn): fn is called at the first
                    log_step after the real notice, checkpoints and calls
                    checkpoint_saved; the run is stopped at once and goes on from the
                    step after
  notice_c_header   the same from a C program (tests/integration/reporter/notice_c_demo.c)
                    through ddpd_report_preempt_requested() and ddpd_report_checkpoint()
  notice_ignored    a run that listens (preempt_requested) but never answers steps on
                    after the notice and is killed at the grace's end (5 s): its attempt's
                    reason says no checkpoint came
  notice_forged     bob's run, beside alice's noticed run, forges the answer for her: a
                    hello as her run with its own secret (dropped), a checkpoint and a
                    preempt event for her run on its own connection (skipped), SIGUSR1 to
                    her launcher (EPERM): her run is still killed at the grace's end, no
                    forged checkpoint listed

Usage: test_command_preemption.py CASE --ddpd PATH --runner PATH --ddpctl PATH"""
import argparse, os, shutil, sys, tempfile, time

import ddpd_harness  # noqa: E402
from ddpd_harness import Server, check, cases_in, wait_until, add_user, bearer, user, Accounts  # noqa: E402

FINAL = ("succeeded", "failed", "canceled", "timeout")

# A step every 0.1 s; a checkpoint (its step in a file, then ddpd.checkpoint_saved) at
# step FIRST and every EVERY steps (0: never again); a restart goes on from the step
# after its checkpoint for 5 steps and ends.
VICTIM = """import os, time, ddpd
k = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
ckpt = os.path.join({root!r}, {name!r} + '.ckpt')
start = int(open(ckpt).read()) + 1 if k > 0 and os.path.exists(ckpt) else 1
print(f'attempt {{k}} from step {{start}}', flush=True)
for step in range(start, start + (100000 if k == 0 else 5)):
    ddpd.log_step(step, loss=float(step))
    if step == {first} or ({every} and step % {every} == 0):
        with open(ckpt + '.tmp', 'w') as f:
            f.write(str(step))
        os.replace(ckpt + '.tmp', ckpt)
        ddpd.checkpoint_saved(step)
    ddpd.flush()
    time.sleep(0.1)
"""


def victim(root, name, first, every):
    return {"name": name, "preemptible": True, "distributed": {"world_size": 1},
            "command": ["/usr/bin/python3", "-c", VICTIM.format(root=root, name=name, first=first, every=every)]}


def urgent(root):
    """A run of priority 10 that holds its slot until the test creates `go`."""
    go = os.path.join(root, "go")
    waits = f"import os, time\nwhile not os.path.exists({go!r}): time.sleep(0.05)\nprint('urgent done')\n"
    return {"name": "urgent", "priority": 10, "distributed": {"world_size": 1},
            "command": ["/usr/bin/python3", "-c", waits]}, go


class Box:
    """A state dir with alice and bob (bob may give priority 10), a work root, a server."""

    def __init__(self, a, extra=(), grace=5, accounts=None):
        self.a, self.extra, self.grace, self.accounts = a, list(extra), grace, accounts

    def __enter__(self):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-preempt-"))
        self.state = os.path.join(self.root, "state")
        os.mkdir(self.state)
        own = (lambda r: ["--unix-user", self.accounts[r]]) if self.accounts else (lambda r: [])
        self.alice = add_user(self.a.ddpd, self.state, "alice", *own("alice"))
        self.bob = add_user(self.a.ddpd, self.state, "bob", "--max-priority", "10", *own("bob"))
        self.s = Server(self.a.ddpd, None, slots=2, state_dir=self.state,
                        extra_args=["--allow-commands", "--work-root", self.root, "--runner", self.a.runner,
                                    "--preempt-grace", str(self.grace), *self.extra])
        self.s.read_headers = bearer(self.alice)
        self.s.__enter__()
        return self

    def __exit__(self, *exc):
        self.s.__exit__(*exc)
        shutil.rmtree(self.root, ignore_errors=True)
        return True

    def submit(self, token, cfg):
        r = self.s.post("/runs", cfg, headers=bearer(token))
        check(r.status == 201, f"POST /runs -> 201: {r.status} {r.body[:300]!r}")
        return r.json()["id"] if r.status == 201 else None

    def steps(self, rid):
        return self.s.get(f"/runs/{rid}/metrics?key=loss").json()["count"]


def case_least_lost(a):
    with Box(a) as b:
        s = b.s
        steady = b.submit(b.alice, victim(b.root, "steady", 1, 1))  # checkpoints at every step
        wait_until(lambda: s.run(steady)["status"] == "running", "the steady run runs", 60)
        stale = b.submit(b.alice, victim(b.root, "stale", 1, 0))  # once, at step 1
        # the stale run's checkpoint is 3 s old and more: 30 steps of 0.1 s after it
        wait_until(lambda: b.steps(stale) >= 30 and b.steps(steady) >= 5, "both step, the stale run 30 steps", 120)
        check(s.run(steady)["started_at"] < s.run(stale)["started_at"],
              "the steady run started first: the rule before would preempt the stale one, the newer")
        cfg, go = urgent(b.root)
        rush = b.submit(b.bob, cfg)
        run = s.wait_status(steady, "queued", timeout=60)
        check(run and run["preempted_by"] == rush,
              f"the run that checkpointed a moment ago is preempted for run {rush}: "
              f"{run and (run['status'], run['preempted_by'])}")
        other = s.run(stale)
        check(other["status"] == "running" and not other.get("preempted_by") and other.get("preemptions", 0) == 0,
              f"the run that checkpointed long ago keeps running: {other['status']} {other.get('preempted_by')}")
        audit = s.get("/audit").json()
        entries = [e for e in (audit.get("entries", audit) if isinstance(audit, dict) else audit)
                   if e.get("action") == "run.preempt"]
        check([e.get("run") for e in entries] == [steady] and entries[0]["detail"].get("preemptor") == rush,
              f"the audit log has run {steady}'s preemption for run {rush}, none of run {stale}: {entries}")
        open(go, "w").close()
        done = s.wait_status(rush, FINAL, timeout=60)
        check(done and done["status"] == "succeeded", f"the urgent run ran: {done and done['status']}")
        for rid in (steady, stale):
            s.post(f"/runs/{rid}/cancel", headers=bearer(b.alice))
            s.wait_status(rid, FINAL, timeout=60)


def usage(s, query=""):
    r = s.get("/usage" + query)
    check(r.status == 200, f"GET /usage{query}: {r.status} {r.body[:300]!r}")
    return r.json() if r.status == 200 else {"groups": [], "box": {}, "charged": []}


def case_preemptor_pays(a):
    with Box(a) as b:
        s = b.s
        rid = b.submit(b.alice, victim(b.root, "victim", 5, 0))  # one checkpoint, at step 5
        wait_until(lambda: b.steps(rid) >= 35, "30 steps past its checkpoint", 120)
        filler = b.submit(b.alice, dict(victim(b.root, "filler", 1, 1), preemptible=False))  # the other slot
        wait_until(lambda: b.steps(filler) >= 3, "the second slot taken", 60)
        cfg, go = urgent(b.root)
        rush = b.submit(b.bob, cfg)
        run = s.wait_status(rid, "queued", timeout=60)
        if not check(run and run["preempted_by"] == rush, f"alice's run is preempted for bob's: "
                                                         f"{run and (run['status'], run['preempted_by'])}"):
            s.dump_log()
            return
        # fair share: the 3 s and more thrown away are bob's usage now, not alice's
        owners = {o["name"]: o["usage_device_seconds"] for o in s.get("/queue").json()["owners"]}
        check(owners.get("bob", 0) >= 2.5, f"bob's decayed usage carries the lost device-seconds at once: {owners}")
        open(go, "w").close()
        s.wait_status(rush, FINAL, timeout=60)
        done = s.wait_status(rid, FINAL, timeout=120)
        check(done and done["status"] == "succeeded", f"restarted from step 6, it succeeds: {done and done['status']}")
        s.post(f"/runs/{filler}/cancel", headers=bearer(b.alice))
        s.wait_status(filler, FINAL, timeout=60)
        points = [p[0] for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        log = s.get(f"/runs/{rid}/logs?rank=0&offset=0").body.decode()
        check("attempt 1 from step 6\n" in log and points and max(points) == 10,
              f"it went back to step 6 (steps 6 to 10 again): {log[-200:]!r} {points[-3:]}")
        u = usage(s)
        users = {g["user"]: g for g in u["groups"]}
        charged = [c for c in u["charged"] if c["run"] == rid]
        print(f"usage by user: { {k: g['phases'] for k, g in users.items()} }\ncharged: {u['charged']}")
        lost = [c for c in charged if c["phase"] == "lost"]
        start = [c for c in charged if c["phase"] == "startup"]
        check(len(lost) == 1 and lost[0]["by_run"] == rush and lost[0]["by_user"] == "bob" and lost[0]["user"] == "alice"
              and lost[0]["device_s"] >= 2.5,
              f"the 30 steps thrown away (3 s and more) are charged to bob's run {rush}, as alice's run's lost: {charged}")
        check(len(start) == 1 and start[0]["by_run"] == rush and start[0]["device_s"] > 0,
              f"and its restart's start-up: {charged}")
        bob, alice = users.get("bob"), users.get("alice")
        paid = sum(c["device_s"] for c in charged)
        check(bob is not None and bob["phases"]["lost"] >= paid - 0.01,
              f"bob's usage carries it as lost ({paid:.3f} device-s): {bob and bob['phases']}")
        check(alice is not None and alice["phases"]["lost"] == 0,
              f"alice's carries none of it: {alice and alice['phases']}")
        runs = {g["run"]: g for g in usage(s, "?by=run")["groups"]}
        check(runs.get(rush) and runs[rush]["phases"]["lost"] >= paid - 0.01 and runs[rid]["phases"]["lost"] == 0,
              f"by run: bob's run {rush} carries it, alice's run {rid} not: {runs.get(rush)} {runs.get(rid)}")


def case_min_runtime(a):
    with Box(a) as b:
        s = b.s
        guarded = dict(victim(b.root, "guarded", 1, 1), min_runtime_s=12)
        rid = b.submit(b.alice, guarded)
        other = b.submit(b.alice, victim(b.root, "other", 1, 1))
        wait_until(lambda: b.steps(rid) >= 1 and b.steps(other) >= 1, "both run", 60)
        cfg, go = urgent(b.root)
        cfg["distributed"]["world_size"] = 2  # needs both slots: the guarded run's too
        rush = b.submit(b.bob, cfg)
        p = {}

        def pending():
            p.update(s.run(rush).get("pending") or {})
            return p.get("reason") == "priority"
        started = s.run(rid)["started_at"]
        ok = wait_until(pending, "the urgent run waits on priority", 30)
        check(ok and p.get("blocked_by") == [rid] and f"run {rid}" in (p.get("detail") or "") and
              "min_runtime_s" in (p.get("detail") or ""),
              f"pending reason priority, naming run {rid} and its minimum run time: {p}")
        check(s.run(rid)["status"] == "running", "the guarded run runs on")
        # past its 12 s it is preempted (and so is the other, which has none)
        run = s.wait_status(rid, "queued", timeout=90)
        check(run and run["preempted_by"] == rush, f"after its minimum run time, preempted for run {rush}: "
                                                  f"{run and (run['status'], run['preempted_by'])}")
        from datetime import datetime

        def t(x):
            return datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp()
        # the guarantee counts from the devices given (its timeline's `admitted`); started_at is
        # stored once its launcher is spawned, a moment later, and is not the mark (a second of
        # slack for the ms between the two marks; a preemption that ignored it came within 3 s)
        tl = s.get(f"/runs/{rid}/timeline").json()
        tl = tl.get("entries", tl) if isinstance(tl, dict) else tl
        admitted = [e["t"] for e in tl if e.get("kind") == "admitted"]
        check(run and admitted and t(run["preempted_at"]) - t(admitted[0]) >= 12 - 1,
              f"not before 12 s from its devices given: admitted {admitted[:1]}, started {started}, preempted "
              f"{run and run['preempted_at']}")
        open(go, "w").close()
        s.wait_status(rush, FINAL, timeout=60)
        for r in (rid, other):
            s.post(f"/runs/{r}/cancel", headers=bearer(b.alice))
            s.wait_status(r, FINAL, timeout=90)


def case_owner_timeout(a):
    with Box(a) as b:
        s = b.s
        code, out, err = user(a.ddpd, b.state, "set", "alice", "--max-duration", "3")
        check(code == 0 and "max-duration 3 s" in out, f"ddpd user set alice --max-duration 3: {code} {out!r} {err!r}")
        code, out, err = user(a.ddpd, b.state, "list")
        cols = out.splitlines()[0].split() if out else []
        rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[1:]}
        at = cols.index("MAX-DURATION-S") if "MAX-DURATION-S" in cols else -1
        check(at > 0 and rows.get("alice", [])[at:at + 1] == ["3"] and rows.get("bob", [])[at:at + 1] == ["none"],
              f"ddpd user list shows alice's max-duration, and none for bob: {out!r}")
        rid = b.submit(b.alice, dict(victim(b.root, "alices", 1, 1), preemptible=False))
        other = b.submit(b.bob, dict(victim(b.root, "bobs", 1, 1), preemptible=False))
        run = s.wait_status(rid, FINAL, timeout=60)
        if not check(run and run["status"] == "timeout", f"alice's run ends timeout: {run and (run['status'], run['reason'])}"):
            s.dump_log()
            return
        check("its owner's max_duration_s of 3 s" in (run["reason"] or ""), f"its reason names alice's limit: {run['reason']!r}")
        bobs = s.run(other)
        check(bobs["status"] == "running", f"bob's run, started at the same time, runs on: {bobs['status']}")
        r = s.post(f"/runs/{rid}/resume", headers=bearer(b.alice))
        check(r.status in (200, 202), f"alice may resume it: {r.status} {r.body[:300]!r}")
        again = s.wait_status(rid, FINAL, timeout=60)
        log = s.get(f"/runs/{rid}/logs?rank=0&offset=0").body.decode()
        check(again and again["status"] == "succeeded" and "attempt 1 from step " in log and
              "attempt 1 from step 1\n" not in log,
              f"resumed, it goes on from its checkpoint (its 5 more steps): {again and again['status']} {log[-200:]!r}")
        code, out, err = user(a.ddpd, b.state, "set", "alice", "--max-duration", "none")
        check(code == 0 and "no limit" in out, f"--max-duration none: {code} {out!r} {err!r}")
        code, out, err = user(a.ddpd, b.state, "set", "alice", "--max-duration", "soon")
        check(code != 0 and "--max-duration" in err, f"a bad --max-duration is refused naming it: {code} {err!r}")
        s.post(f"/runs/{other}/cancel", headers=bearer(b.bob))
        s.wait_status(other, FINAL, timeout=60)


# A step every 0.1 s, asking ddpd.preempt_requested() at each; at the notice it
# checkpoints there and says so (ANSWER True), or steps on regardless (False). A
# restart goes on from the step after its checkpoint for 5 steps and ends.
LISTENER = """import os, sys, time, ddpd
k = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
ckpt = os.path.join({root!r}, {name!r} + '.ckpt')
start = int(open(ckpt).read()) + 1 if k > 0 and os.path.exists(ckpt) else 1
print(f'attempt {{k}} from step {{start}}', flush=True)
heard = False
for step in range(start, start + (100000 if k == 0 else 5)):
    ddpd.log_step(step, loss=float(step))
    if ddpd.preempt_requested() and not heard:
        heard = True
        print(f'notice heard after step {{step}}', flush=True)
        if {answer}:
            with open(ckpt + '.tmp', 'w') as f:
                f.write(str(step))
            os.replace(ckpt + '.tmp', ckpt)
            print(f'checkpoint saved at step {{step}}', flush=True)  # before ddpd hears of it, and stops it
            ddpd.checkpoint_saved(step, ckpt)
            while True:
                time.sleep(0.1)
    ddpd.flush()
    time.sleep(0.1)
"""


def listener(root, name, answer):
    return {"name": name, "preemptible": True, "distributed": {"world_size": 1},
            "command": ["/usr/bin/python3", "-c", LISTENER.format(root=root, name=name, answer=answer)]}


def attempt_reason(s, rid, n):
    at = [x for x in s.run(rid)["attempts"] if x["attempt"] == n]
    return (at[0].get("reason") or "") if at else ""


def log_of(s, rid):
    return s.get(f"/runs/{rid}/logs?rank=0&offset=0").body.decode()


# The LISTENER's answer through the callback form: on_preempt(fn), fn called at the
# first log_step after the notice (the step it reports done).
CALLBACK = """import os, sys, time, ddpd
k = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
ckpt = os.path.join({root!r}, {name!r} + '.ckpt')
start = int(open(ckpt).read()) + 1 if k > 0 and os.path.exists(ckpt) else 1
print(f'attempt {{k}} from step {{start}}', flush=True)
saved = []
def save(step):
    print(f'notice heard after step {{step}}', flush=True)
    with open(ckpt + '.tmp', 'w') as f:
        f.write(str(step))
    os.replace(ckpt + '.tmp', ckpt)
    print(f'checkpoint saved at step {{step}}', flush=True)
    ddpd.checkpoint_saved(step, ckpt)
    saved.append(step)
ddpd.on_preempt(save)
for step in range(start, start + (100000 if k == 0 else 5)):
    ddpd.log_step(step, loss=float(step))
    while saved:  # ddpd stops it now that it has the checkpoint
        time.sleep(0.1)
    ddpd.flush()
    time.sleep(0.1)
"""


def callback_run(root, name):
    return {"name": name, "preemptible": True, "distributed": {"world_size": 1},
            "command": ["/usr/bin/python3", "-c", CALLBACK.format(root=root, name=name)]}


def c_run(a, root, name):
    """notice_c_demo, copied into the work root (readable by the run's account)."""
    exe = os.path.join(root, "notice_c_demo")
    shutil.copy(a.notice_c, exe)
    os.chmod(exe, 0o755)
    return {"name": name, "preemptible": True, "distributed": {"world_size": 1},
            "command": [exe, os.path.join(root, name + ".ckpt")]}


def case_notice_answered(a):
    notice_answered_by(a, lambda b: listener(b.root, "answers", True))


def case_notice_callback(a):
    notice_answered_by(a, lambda b: callback_run(b.root, "callback"))


def case_notice_c_header(a):
    if not check(a.notice_c and os.path.exists(a.notice_c), f"needs --notice-c: {a.notice_c!r}"):
        return
    notice_answered_by(a, lambda b: c_run(a, b.root, "c-header"))


def notice_answered_by(a, make):
    """A run made by make(box) is preempted for bob's run with a 60 s grace: it answers
    the notice and is stopped at its checkpoint, then goes on from the step after."""
    with Box(a, grace=60) as b:
        s = b.s
        rid = b.submit(b.alice, make(b))
        wait_until(lambda: b.steps(rid) >= 30, "30 steps, no checkpoint yet", 120)
        filler = b.submit(b.alice, dict(victim(b.root, "filler", 1, 1), preemptible=False))
        wait_until(lambda: b.steps(filler) >= 3, "the second slot taken", 60)
        cfg, go = urgent(b.root)
        rush = b.submit(b.bob, cfg)
        # the grace is 60 s: queued again before it ends only if the answer stopped it
        run = s.wait_status(rid, "queued", timeout=45)
        if not check(run and run["preempted_by"] == rush, f"alice's run is preempted for bob's, well inside the "
                     f"60 s grace: {run and (run['status'], run['preempted_by'])}"):
            s.dump_log()
            return
        log = log_of(s, rid)
        print(log[-400:])
        heard = [int(x.split()[-1]) for x in log.splitlines() if x.startswith("notice heard after step")]
        check(heard and f"checkpoint saved at step {heard[0]}" in log, f"it heard the notice and checkpointed: {log[-300:]!r}")
        reason = attempt_reason(s, rid, 0)
        check(reason == f"preempted by run {rush}: stopped once the checkpoint its notice asked for was durable",
              f"its attempt says it was stopped at its checkpoint: {reason!r}")
        said = s.get(f"/runs/{rid}/logs?tail=400").body.decode(errors="replace")
        check("received SIGUSR1 again: ddpd has the checkpoint the notice asked for" in said,
              f"its launcher stopped its ranks on the server's word: {said[-600:]!r}")
        tl = s.get(f"/runs/{rid}/timeline").json()["entries"]
        kinds = [e.get("kind") for e in tl]
        saved = [e["detail"].get("global_step") for e in tl if e.get("kind") == "checkpoint"]
        check("notice" in kinds and "notice_answered" in kinds, f"its timeline has the notice and its answer: {kinds}")
        check(heard and saved and saved[-1] == heard[0], f"its checkpoint_saved({heard[:1]}) is seen: {saved}")
        open(go, "w").close()
        s.wait_status(rush, FINAL, timeout=60)
        done = s.wait_status(rid, FINAL, timeout=120)
        check(done and done["status"] == "succeeded", f"it restarts and succeeds: {done and done['status']}")
        s.post(f"/runs/{filler}/cancel", headers=bearer(b.alice))
        s.wait_status(filler, FINAL, timeout=60)
        log = log_of(s, rid)
        points = sorted({p[0] for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]})
        if heard:
            n = heard[0]
            check(f"attempt 1 from step {n + 1}\n" in log and points == list(range(1, n + 6)),
                  f"it goes on from the step after the notice's checkpoint (step {n + 1}): no step done twice, "
                  f"none lost: {log[-200:]!r} {points[-8:]}")
        lost = [c for c in usage(s)["charged"] if c["run"] == rid and c["phase"] == "lost"]
        got = sum(c["device_s"] for c in lost)
        print(f"lost charged to the preemptor with the notice answered: {got:.3f} device-s ({lost})")
        check(got < 1.0, f"the preemptor is charged next to nothing lost (the run stepped 3 s and more unsaved "
              f"before the notice): {got:.3f} device-s")


def case_notice_ignored(a):
    with Box(a, grace=5) as b:
        s = b.s
        rid = b.submit(b.alice, listener(b.root, "ignores", False))
        wait_until(lambda: b.steps(rid) >= 10, "it steps", 120)
        filler = b.submit(b.alice, dict(victim(b.root, "filler", 1, 1), preemptible=False))
        wait_until(lambda: b.steps(filler) >= 3, "the second slot taken", 60)
        cfg, go = urgent(b.root)
        rush = b.submit(b.bob, cfg)
        run = s.wait_status(rid, "queued", timeout=60)
        if not check(run and run["preempted_by"] == rush, f"preempted for bob's run: {run and run['status']}"):
            s.dump_log()
            return
        log = log_of(s, rid)
        heard = [int(x.split()[-1]) for x in log.splitlines() if x.startswith("notice heard after step")]
        before = [p[0] for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        check(heard and before and max(before) > heard[0] + 5,
              f"it heard the notice and stepped on through the grace: heard after {heard}, last step {max(before or [0])}")
        reason = attempt_reason(s, rid, 0)
        check(reason == f"preempted by run {rush}: its ranks listened for the notice, and no checkpoint came by the "
              "grace's end", f"stopped at the grace's end, saying so: {reason!r}")
        ranks = s.get(f"/runs/{rid}/ranks").json()
        rows = ranks.get("ranks", ranks) if isinstance(ranks, dict) else ranks
        print(f"ranks: {rows}")
        open(go, "w").close()
        s.wait_status(rush, FINAL, timeout=60)
        for r in (rid, filler):
            s.post(f"/runs/{r}/cancel", headers=bearer(b.alice))
            s.wait_status(r, FINAL, timeout=60)


# bob's run: once the test names alice's run (a file), forge her answer three ways and
# print what each got
FORGER = """import json, os, signal, socket, sys, time
want = {target!r}
while not os.path.exists(want):
    time.sleep(0.05)
run, launcher = open(want).read().split()
sock, secret, mine = os.environ['DDPD_EVENTS_SOCKET'], os.environ['DDPD_RUN_SECRET'], os.environ['DDPD_RUN_ID']
def line(**e):
    return (json.dumps(dict(e, seq=line.seq, t=int(time.time() * 1000))) + '\\n').encode()
line.seq = 0
def said(c):
    c.settimeout(3)
    try:
        return 'closed' if c.recv(1) == b'' else 'open'
    except socket.timeout:
        return 'open'
    except OSError as e:
        return 'closed: ' + str(e)
hello = dict(type='hello', rank=0, pid=os.getpid(), host='x', device='cpu', world_size=1, secret=secret)
c = socket.socket(socket.AF_UNIX); c.connect(sock)
c.sendall(line(run=run, **hello) + line(run=run, rank=0, type='checkpoint', global_step=1, path='/forged-a'))
print('as her run:', said(c), flush=True)
c = socket.socket(socket.AF_UNIX); c.connect(sock)
c.sendall(line(run=mine, **hello))
for i in range(20):
    line.seq = i + 1
    c.sendall(line(run=run, rank=0, type='preempt', state='listening') +
              line(run=run, rank=0, type='checkpoint', global_step=1, path='/forged-b'))
print('on its own connection:', said(c), flush=True)
try:
    os.kill(int(launcher), signal.SIGUSR1)
    print('SIGUSR1: sent', flush=True)
except OSError as e:
    print('SIGUSR1:', e.__class__.__name__, flush=True)
print('forged', flush=True)
while True:
    time.sleep(0.1)
"""


def case_notice_forged(a):
    if os.geteuid() != 0:
        print("notice_forged: skipped: it makes Unix accounts for alice and bob; run it as root (CI does)")
        sys.exit(77)
    with Accounts("alice", "bob") as acc, Box(a, grace=20, accounts=acc) as b:
        s = b.s
        os.chmod(b.root, 0o711)  # bob's run reads the file the test names her run in
        rid = b.submit(b.alice, listener(b.root, "target", False))
        wait_until(lambda: b.steps(rid) >= 5, "alice's run steps", 120)
        work = os.path.join(b.root, "forge")
        os.mkdir(work)
        os.chmod(work, 0o755)
        target = os.path.join(work, "target")
        forger = b.submit(b.bob, {"name": "forger", "distributed": {"world_size": 1},
                                  "command": ["/usr/bin/python3", "-c", FORGER.format(target=target)]})
        wait_until(lambda: s.run(forger)["status"] == "running", "bob's run runs beside hers", 60)
        cfg, go = urgent(b.root)
        rush = b.submit(b.bob, cfg)
        wait_until(lambda: "notice heard" in log_of(s, rid), "alice's run heard the notice", 60)
        pid = s.get(f"/runs/{rid}/ranks").json()
        rows = pid.get("ranks", pid) if isinstance(pid, dict) else pid
        rank_pid = rows[0].get("pid")
        launcher = int(open(f"/proc/{rank_pid}/stat").read().rsplit(")", 1)[1].split()[1])
        with open(target + ".tmp", "w") as f:
            f.write(f"{rid} {launcher}")
        os.chmod(target + ".tmp", 0o644)
        os.replace(target + ".tmp", target)
        wait_until(lambda: "forged" in log_of(s, forger), "bob's run tried its forgeries", 30)
        said = log_of(s, forger)
        print(said)
        check("as her run: closed" in said, f"a hello as alice's run with bob's run's secret is dropped: {said!r}")
        check("SIGUSR1: PermissionError" in said, f"SIGUSR1 to alice's launcher is refused: {said!r}")
        run = s.wait_status(rid, "queued", timeout=60)
        check(run and run["preempted_by"] == rush, f"alice's run is preempted: {run and run['status']}")
        reason = attempt_reason(s, rid, 0)
        check("no checkpoint came by the grace's end" in reason,
              f"the forged answers did not stop alice's run: it ran to the grace's end: {reason!r}")
        tl = s.get(f"/runs/{rid}/timeline").json()["entries"]
        check(not [e for e in tl if e.get("kind") in ("checkpoint", "notice_answered")],
              f"no forged checkpoint or answer is hers: {[e.get('kind') for e in tl]}")
        log = open(s.log_path).read()
        check(f"hello for run {rid} rank 0" in log, "the server's log has the refused hello")
        open(go, "w").close()
        s.wait_status(rush, FINAL, timeout=60)
        for r, who in ((rid, b.alice), (forger, b.bob)):
            s.post(f"/runs/{r}/cancel", headers=bearer(who))
            s.wait_status(r, FINAL, timeout=60)


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--ddpd", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--ddpctl", required=True)
    ap.add_argument("--notice-c", default=None)
    args = ap.parse_args()
    args.ddpd, args.runner, args.ddpctl = (os.path.abspath(x) for x in (args.ddpd, args.runner, args.ddpctl))
    args.notice_c = os.path.abspath(args.notice_c) if args.notice_c else None
    ddpd_harness.main(CASES, args)
