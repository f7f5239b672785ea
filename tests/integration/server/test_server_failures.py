#!/usr/bin/env python3
"""Failures told apart before a restart (docs/failures.md), on real processes: bob's
command runs (his own Unix account, /usr/bin/python3 and Debian's python3-torch) beside
alice's on a root server, each failed attempt classified in GET /runs/{id} and
answered by its class:
  script_error   `import no_such_module` with max_restarts 2: one attempt, class
                 script_error with the traceback's line as evidence, not restarted
  segv_once      a script that dies by SIGSEGV on attempt 0: class crash, restarted,
                 the run succeeds on attempt 1
  crash_loop     a script that fails at step 37 every time, max_restarts 10,
                 crash_loop {failures 3}: ended after 3 failures without progress
                 (3 attempts: the first one's steps are no progress over an earlier one),
                 "crash loop: 3 attempts failed at step 37 with no progress (exit)"
  progress_resets  a script that fails 5 times but checkpoints further each time:
                 with restart_policy.max_restarts 2 and reset_on_progress it succeeds
                 on attempt 5; without reset_on_progress it fails after 3 attempts
  oom            a torch script allocating past resources.memory_gb 0.5: the kernel
                 kills it in its cgroup, class oom with the limit in the evidence and
                 the reason, not restarted; alice's run beside it finishes
  bad_policy     a restart_policy that cannot be right is refused at submission (400)
                 naming the field
  server_restart_backoff  a rank that hangs on attempt 0 (the server's hang watch ends
                 it, so the server restarts it, not its launcher): class hang, queued
                 again with pending reason restart_backoff in GET /runs/{id} and GET
                 /queue, its estimated start the backoff's end; then it succeeds
  server_restart_class_fail  the same hang with restart_policy.on.hang "fail": the
                 server does not restart it, and the reason says why
Each case prints its run's attempts as `ddpctl show` prints them. Root is needed (real
accounts, the cgroup's memory limit): without it a case says why and is skipped (77).

Usage: test_server_failures.py CASE --ddpd PATH --fake-trainer PATH --runner PATH --ddpctl PATH"""
import subprocess

from ddpd_harness import check, cases_in, wait_until, args_for, main, bearer, iso_seconds  # noqa: E402

from test_server_bounds import shared_box, alice_beside, submit_as, command  # noqa: E402

FINAL = ("succeeded", "failed", "canceled")
NO_PAUSE = {"initial_s": 0, "max_s": 0}


def show(a, s, token, rid):
    """`ddpctl show RID` as bob sees it: printed for the record, returned."""
    p = subprocess.run([a.ddpctl, "--server", f"http://127.0.0.1:{s.port}", "--token", token, "show", str(rid)],
                       capture_output=True, text=True, timeout=60)
    print(f"--- ddpctl show {rid}\n{p.stdout}{p.stderr}", flush=True)
    return p.stdout


def finished(s, token, rid, timeout=180):
    run = s.wait_status(rid, FINAL, timeout=timeout)
    r = s.get(f"/runs/{rid}", headers=bearer(token))
    return r.json() if r.status == 200 else run or {}


def failures(run):
    return [(x["attempt"], x["status"], (x.get("failure") or {}).get("class")) for x in run.get("attempts", [])]


def case_script_error(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        rid = submit_as(s, bob, command("import no_such_module\n", name="no-module", world_size=2,
                                        distributed={"world_size": 2, "max_restarts": 2}))
        run = finished(s, bob, rid)
        shown = show(a, s, bob, rid)
        check(run.get("status") == "failed" and failures(run) == [(0, "failed", "script_error")],
              f"one attempt, script_error, not restarted: {failures(run)} {run.get('reason')}")
        f = run["attempts"][0]["failure"]
        check(f["evidence"] == "ModuleNotFoundError: No module named 'no_such_module'" and f["rank"] in (0, 1) and
              f["exit_code"] == 1 and f["signal"] is None and f["node"],
              f"the traceback's last line is the evidence, with the rank, its status and the node: {f}")
        check("failure: script_error" in run["reason"] and
              "not restarted: distributed.restart_policy.on.script_error is fail (its default)" in run["reason"],
              f"the run's reason names the class and why it was not restarted: {run['reason']}")
        check("script_error: rank" in shown, f"ddpctl show names the class: {shown}")


SEGV_ONCE = r"""
import ctypes, os, time
k = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
print(f"rank {os.environ['RANK']} on attempt {k}", flush=True)
if k == 0 and os.environ['RANK'] == '0':
    ctypes.string_at(0)
time.sleep(0.2)
"""


def case_segv_once(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        rid = submit_as(s, bob, command(SEGV_ONCE, name="segv-once", distributed={
            "world_size": 2, "max_restarts": 2, "restart_policy": {"backoff": NO_PAUSE}}))
        run = finished(s, bob, rid)
        show(a, s, bob, rid)
        check(run.get("status") == "succeeded" and failures(run) == [(0, "failed", "crash"), (1, "succeeded", None)],
              f"attempt 0 crashed, attempt 1 succeeded: {failures(run)} {run.get('reason')}")
        f = run["attempts"][0]["failure"] if run.get("attempts") else {}
        check(f.get("signal") == 11 and f.get("rank") == 0 and "SIGSEGV" in (f.get("evidence") or ""),
              f"rank 0 killed by SIGSEGV: {f}")


# Steps 1..37 every attempt, from nothing (no checkpoint): then a ValueError.
SAME_STEP = r"""
import os, sys, ddpd
for step in range(1, 38):
    if os.environ['RANK'] == '0':
        ddpd.log_step(step, loss=1.0 / step)
ddpd.flush()
if os.environ['RANK'] == '0':
    raise ValueError('loss is nan at step 37')
import time; time.sleep(30)
"""


def case_crash_loop(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        policy = {"backoff": NO_PAUSE, "crash_loop": {"failures": 3, "window_s": 600}}
        rid = submit_as(s, bob, command(SAME_STEP, name="same-step", distributed={
            "world_size": 2, "max_restarts": 10, "restart_policy": policy}))
        run = finished(s, bob, rid, timeout=300)
        show(a, s, bob, rid)
        reason = run.get("reason") or ""
        check(run.get("status") == "failed" and reason.startswith(
              "crash loop: 3 attempts failed at step 37 with no progress (exit)"),
              f"stopped as a crash loop, naming the step and the class: {run.get('status')}: {reason}")
        # the first attempt's step 37 is no progress: there was no earlier attempt to pass
        # (it once was, and a fourth attempt ran)
        check(failures(run) == [(k, "failed", "exit") for k in range(3)],
              f"attempts 0 to 2 all stopped at step 37: stopped there, not at 10: {failures(run)}")


# Each attempt carries on from its own checkpoint (a file), makes 3 steps, saves and
# fails; attempt 5 succeeds.
PROGRESS = r"""
import os, sys, ddpd
k = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
rank = os.environ['RANK']
start = int(open('ckpt').read()) if os.path.exists('ckpt') else 0
for step in range(start + 1, start + 4):
    if rank == '0':
        ddpd.log_step(step, loss=1.0 / step)
if rank == '0':
    with open('ckpt.tmp', 'w') as f:
        f.write(str(start + 3))
    os.replace('ckpt.tmp', 'ckpt')
    ddpd.checkpoint_saved(start + 3)
    ddpd.flush()
    if k < 5:
        sys.exit(1)
"""


def case_progress_resets(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        rid = submit_as(s, bob, command(PROGRESS, name="progress", distributed={
            "world_size": 2, "restart_policy": {"max_restarts": 2, "reset_on_progress": True, "backoff": NO_PAUSE}}))
        run = finished(s, bob, rid, timeout=300)
        show(a, s, bob, rid)
        check(run.get("status") == "succeeded" and
              failures(run) == [(k, "failed", "exit") for k in range(5)] + [(5, "succeeded", None)],
              f"5 failures with progress, none used a restart up: succeeded on attempt 5: {failures(run)} "
              f"{run.get('reason')}")
        # the same without reset_on_progress: max_restarts 2 means 3 attempts
        rid = submit_as(s, bob, command(PROGRESS, name="counted", distributed={
            "world_size": 2, "restart_policy": {"max_restarts": 2, "reset_on_progress": False, "backoff": NO_PAUSE}}))
        run = finished(s, bob, rid, timeout=300)
        show(a, s, bob, rid)
        check(run.get("status") == "failed" and len(run.get("attempts", [])) == 3 and
              (run.get("reason") or "").startswith("all 3 attempts failed (distributed.restart_policy.max_restarts is 2)"),
              f"every failure counted: 3 attempts: {failures(run)} {run.get('reason')}")


EAT_TORCH = r"""
import os, time, torch
rank = int(os.environ['RANK'])
print(f'rank {rank} up', flush=True)
if rank == 1:
    x = torch.ones(1 << 29)  # 2 GiB of float32, every page written
    print('RANK 1', 'SURVIVED', flush=True)
time.sleep(600)
"""


def case_oom(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        with alice_beside(s, alice):
            rid = submit_as(s, bob, command(EAT_TORCH, name="eats", resources={"memory_gb": 0.5}, distributed={
                "world_size": 2, "max_restarts": 2}))
            run = finished(s, bob, rid, timeout=240)
            shown = show(a, s, bob, rid)
            reason = run.get("reason") or ""
            check(run.get("status") == "failed" and failures(run) == [(0, "failed", "oom")],
                  f"bob's run: one attempt, oom, not restarted: {failures(run)} {reason}")
            f = run["attempts"][0].get("failure") or {} if run.get("attempts") else {}
            check(f.get("rank") == 1 and f.get("signal") == 9 and "OOM kill" in (f.get("evidence") or "") and
                  "512 MiB" in (f.get("evidence") or ""),
                  f"rank 1, killed by the kernel, the cgroup's count and the limit as evidence: {f}")
            check("failure: oom" in reason and "512 MiB" in reason and "rank 1" in reason and
                  "not restarted" in reason, f"the run's reason names the class, the rank and the limit: {reason}")
            check("oom: rank 1" in shown, f"ddpd show names it: {shown}")


HANGS_ONCE = r"""
import os, signal, time, ddpd
rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])
for step in range(1, 8 if k else 100000):
    ddpd.log_step(step, loss=1.0 / step)
    if rank == 1 and step == 3 and k == 0:
        print('rank 1 stops here', flush=True)
        ddpd.flush()
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(0.05)
"""


def case_server_restart_backoff(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        rid = submit_as(s, bob, command(HANGS_ONCE, name="hangs-once", distributed={
            "world_size": 2, "hang_timeout_s": 3,
            "restart_policy": {"max_restarts": 1, "backoff": {"initial_s": 8, "max_s": 8}}}))
        seen = {}

        def backing_off():
            run = s.get(f"/runs/{rid}", headers=bearer(bob)).json()
            seen["run"] = run
            p = run.get("pending") or {}
            return run if run.get("status") == "queued" and p.get("reason") == "restart_backoff" else None
        run = wait_until(backing_off, "the hung run queued again, waiting out its backoff", 120)
        if not check(run is not None, f"queued with pending restart_backoff: {seen.get('run')}"):
            return
        p = run["pending"]
        ended = [x for x in run["attempts"] if x["attempt"] == 0 and x.get("ended_at")]
        check(ended and ended[0]["failure"]["class"] == "hang", f"attempt 0 ended, class hang: {run['attempts']}")
        if ended and p.get("estimated_start"):
            end_s, start_s = iso_seconds(ended[0]["ended_at"]), iso_seconds(p["estimated_start"])
            check(end_s + 6 <= start_s <= end_s + 10,
                  f"its estimated start is the backoff's end, 8 s after attempt 0 ended: {ended[0]['ended_at']} -> "
                  f"{p['estimated_start']}")
        else:
            check(False, f"an estimated start: {p}")
        check("distributed.restart_policy.backoff" in (p.get("detail") or "") and p.get("blocked_by") == [],
              f"the detail names the backoff, and no run blocks it: {p}")
        queued = [q for q in s.get("/queue").json()["runs"] if q["id"] == rid]
        check(queued and (queued[0].get("pending") or {}).get("reason") == "restart_backoff",
              f"GET /queue says the same: {queued}")
        run = finished(s, bob, rid, timeout=120)
        show(a, s, bob, rid)
        check(run.get("status") == "succeeded" and failures(run) == [(0, "failed", "hang"), (1, "succeeded", None)],
              f"after its backoff, attempt 1 succeeds: {failures(run)} {run.get('reason')}")


def case_server_restart_class_fail(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        rid = submit_as(s, bob, command(HANGS_ONCE, name="hang-fails", distributed={
            "world_size": 2, "hang_timeout_s": 3, "restart_policy": {"max_restarts": 2, "on": {"hang": "fail"}}}))
        run = finished(s, bob, rid, timeout=120)
        show(a, s, bob, rid)
        reason = run.get("reason") or ""
        check(run.get("status") == "failed" and failures(run) == [(0, "failed", "hang")] and
              "failure: hang; not restarted: distributed.restart_policy.on.hang is fail" in reason,
              f"the server did not restart it, and says why: {failures(run)} {reason}")


def case_bad_policy(a):
    with shared_box(a) as (s, acc, alice, bob, state):
        for policy, where in (({"on": {"segfault": "retry"}}, "/distributed/restart_policy/on"),
                              ({"on": {"oom": "sometimes"}}, "/distributed/restart_policy/on/oom"),
                              ({"backoff": {"initial_s": 30, "max_s": 5}}, "/distributed/restart_policy/backoff/max_s"),
                              ({"crash_loop": {"failures": -1}}, "/distributed/restart_policy/crash_loop/failures")):
            r = submit_as(s, bob, command("pass\n", distributed={"world_size": 1, "restart_policy": policy}), want=400)
            check(where in r.body.decode(), f"{policy} refused naming {where}: {r.body[:400]!r}")


if __name__ == "__main__":
    cases = cases_in(globals())
    main(cases, args_for(cases, ["--runner", "--ddpctl"]))
