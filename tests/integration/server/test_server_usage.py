#!/usr/bin/env python3
"""Usage and goodput, end to end: a real ddpd on a loopback port, the stand-in trainer
and the real ddp-trainer on a Fashion-MNIST subset.

  phases_add_up     runs of two users (steps, a run that reports no step, one canceled
                    before its first step): GET /usage by run, user and day; each run's
                    phases add up to its device time held within 1%, and that to its
                    devices times its start-to-end (GET /runs/{id}) within 1%; a built-in
                    run with no step is all startup; productive is most of a run that
                    steps; goodput per user and for the box; /metrics'
                    ddpd_device_seconds_total; `ddpctl usage` prints the table; bad
                    arguments are a 400 naming them
  lost_after_kill   a rank of a built-in run is SIGKILLed mid-epoch, after a checkpoint;
                    the launcher starts its ranks again from it: `lost_steps` is the steps
                    thrown away (the last step before the kill less the checkpoint's, from
                    the run's own journal), and `lost` the time those steps took (from the
                    checkpoint to the last step, at least; to the restart's first step, at
                    most); the phases still add up; the ledger survives a SIGKILL of the
                    server

Usage: test_server_usage.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import os, shutil, signal, subprocess, sys, tempfile
from datetime import datetime

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, add_user, bearer, needs_trainer, iso_seconds  # noqa: E402
from test_server_resume import CONFIG, FINAL, journal, of_type, rank_pids, wait_journal  # noqa: E402

DEVICE_PHASES = ("startup", "productive", "checkpoint", "lost", "idle", "unknown")


def usage(s, query=""):
    r = s.get("/usage" + query)
    check(r.status == 200, f"GET /usage{query}: {r.status} {r.body[:300]!r}")
    return r.json() if r.status == 200 else {"groups": [], "box": {}}


def by_run(s):
    return {g["run"]: g for g in usage(s, "?by=run")["groups"]}


def adds_up(g, what):
    total = sum(g["phases"][p] for p in DEVICE_PHASES)
    return check(abs(total - g["held_device_s"]) <= 0.01 * max(g["held_device_s"], 0.001),
                 f"{what}: the phases add up to the device time held: {total:.3f} vs {g['held_device_s']:.3f} {g['phases']}")


def held_by_api(s, rid):
    run = s.run(rid)
    return (iso_seconds(run["finished_at"]) - iso_seconds(run["started_at"])) * run["world_size"]


def case_phases_add_up(a):
    state = tempfile.mkdtemp(prefix="ddpd-usage-")
    try:
        alice = add_user(a.ddpd, state, "alice")
        bob = add_user(a.ddpd, state, "bob")
        with Server(a.ddpd, a.fake_trainer, slots=3, state_dir=state) as s:
            s.read_headers = bearer(alice)
            steps = s.post("/runs", {"name": "steps-3000", "distributed": {"world_size": 2}}, headers=bearer(alice)).json()["id"]
            quiet = s.post("/runs", {"name": "hold"}, headers=bearer(bob)).json()["id"]
            s.wait_status(quiet, "running", timeout=30)
            s.wait_status(steps, "succeeded", timeout=60)
            s.post(f"/runs/{quiet}/cancel", headers=bearer(bob))
            s.wait_status(quiet, "canceled", timeout=30)
            runs = by_run(s)
            for rid in (steps, quiet):
                g = runs.get(rid)
                if not check(g is not None, f"run {rid} has its usage: {list(runs)}"):
                    return
                adds_up(g, f"run {rid}")
                api = held_by_api(s, rid)
                check(abs(g["held_device_s"] - api) <= 0.01 * api + 0.002,
                      f"run {rid}: held {g['held_device_s']:.3f} device-s, its devices times its start to end {api:.3f}")
                check(g["phases"]["queue"] >= 0 and g["user"] == ("alice" if rid == steps else "bob"), f"its user: {g}")
            g = runs[steps]
            check(g["phases"]["productive"] > 0 and g["phases"]["startup"] > 0 and g["phases"]["lost"] == 0 and
                  g["lost_steps"] == 0, f"a run that steps: startup, then productive; nothing lost: {g['phases']}")
            check(0 < g["goodput"] <= 1 and abs(g["goodput"] - g["phases"]["productive"] / g["held_device_s"]) < 1e-9,
                  f"its goodput is productive / held: {g['goodput']}")
            q = runs[quiet]
            check(q["phases"]["startup"] == q["held_device_s"] and q["goodput"] == 0,
                  f"a built-in run that never stepped: all startup, goodput 0: {q['phases']}")
            users = {u["user"]: u for u in usage(s)["groups"]}
            check(set(users) == {"alice", "bob"} and abs(users["alice"]["held_device_s"] - g["held_device_s"]) < 1e-6,
                  f"by user: {users}")
            box = usage(s)["box"]
            check(abs(box["held_device_s"] - g["held_device_s"] - q["held_device_s"]) < 1e-6 and
                  abs(box["goodput"] - g["phases"]["productive"] / box["held_device_s"]) < 1e-9,
                  f"the box: every run's, its goodput: {box}")
            days = usage(s, "?by=day")["groups"]
            today = datetime.utcnow().strftime("%Y-%m-%d")
            check(days and all(d["day"] in (today, s.run(steps)["created_at"][:10]) for d in days), f"by day: {days}")
            check(usage(s, "?from=2000-01-01&to=2000-01-02")["groups"] == [], "an empty range: nothing")
            for bad in ("?by=week", "?from=someday"):
                r = s.get("/usage" + bad)
                check(r.status == 400 and bad[1:].split("=")[0] in r.json().get("detail", ""),
                      f"GET /usage{bad}: 400 naming it: {r.body[:200]!r}")
            text = s.get("/metrics").body.decode()
            line = f'ddpd_device_seconds_total{{user="alice",phase="productive"}} '
            got = [l for l in text.splitlines() if l.startswith(line)]
            check(got and abs(float(got[0].split()[-1]) - g["phases"]["productive"]) < 1e-3,
                  f"/metrics: {line}...: {got}")
            check(any(l.startswith("ddpd_goodput_ratio ") for l in text.splitlines()), "/metrics: the box's goodput")
            ddpctl = os.path.join(os.path.dirname(a.ddpd), "ddpctl")
            p = subprocess.run([ddpctl, "--server", f"http://127.0.0.1:{s.port}", "--token", alice, "usage"],
                               capture_output=True, text=True, timeout=30)
            print(p.stdout)
            lines = p.stdout.splitlines()
            check(p.returncode == 0 and lines and lines[0].split()[:3] == ["USER", "HELD", "STARTUP"] and
                  any(l.split()[0] == "alice" for l in lines) and any(l.split()[0] == "(box)" for l in lines),
                  f"ddpctl usage: {p.returncode} {p.stdout!r} {p.stderr!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


RESTARTING = dict(CONFIG, name="usage-restarting", distributed=dict(CONFIG["distributed"], max_restarts=1))


def case_lost_after_kill(a):
    needs_trainer(a)
    state = tempfile.mkdtemp(prefix="ddpd-usage-")
    try:
        # (its journal read after the run ends: kept whole, not compacted)
        s = Server(a.ddpd, a.trainer, slots=2, state_dir=state, env={"DDPD_RESTART_BACKOFF_S": "0.2"},
                   extra_args=["--keep-journals"])
        s.start()
        rid = s.submit(RESTARTING)
        # after the checkpoint of epoch 1 (every_epochs 2), a few steps into epoch 2
        ok = wait_journal(s, rid, lambda ev: of_type(ev, "checkpoint") and len(rank_pids(ev)) == 2 and
                          max((e["global_step"] for e in of_type(ev, "step")), default=0) >=
                          of_type(ev, "checkpoint")[0]["global_step"] + 10, "steps past the first checkpoint")
        if not check(ok and s.run(rid)["status"] == "running", "running, past its first checkpoint"):
            s.stop()
            return
        os.kill(rank_pids(journal(s, rid))[1], signal.SIGKILL)
        run = s.wait_status(rid, FINAL, timeout=300)
        check(run and run["status"] == "succeeded" and run["restart_count"] == 1,
              f"restarted from its checkpoint, it succeeds: {run and (run['status'], run['reason'], run['restart_count'])}")
        ev = journal(s, rid)
        restart_at = next((i for i, e in enumerate(ev) if e["type"] == "attempt" and e.get("phase") == "started"
                           and e.get("attempt") == 1), None)
        if not check(restart_at is not None, "the journal has the second attempt's start"):
            s.stop()
            return
        before = [e for e in ev[:restart_at] if e["type"] == "step" and e["rank"] == 0]
        after = [e for e in ev[restart_at:] if e["type"] == "step" and e["rank"] == 0]
        ckpt = [e for e in ev[:restart_at] if e["type"] == "checkpoint"][-1]
        last = max(before, key=lambda e: e["global_step"])
        thrown = last["global_step"] - (after[0]["global_step"] - 1)
        check(after[0]["global_step"] - 1 == ckpt["global_step"], f"it went on from its checkpoint: {ckpt['global_step']}")
        # the server dies; its successor reads the ledger back
        s.kill()
        s.stop()
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state) as s2:
            g = by_run(s2).get(rid)
            if not check(g is not None, "the run's usage after the server's SIGKILL"):
                return
            print(f"run {rid}: {thrown} steps thrown away (steps {ckpt['global_step'] + 1}..{last['global_step']}); "
                  f"usage: {g}")
            check(g["lost_steps"] == thrown, f"lost_steps is the steps thrown away: {g['lost_steps']} vs {thrown}")
            ws = run["world_size"]
            low = (last["t"] - ckpt["t"]) / 1000 * ws
            high = (after[0]["t"] - ckpt["t"]) / 1000 * ws
            check(low * 0.99 - 0.01 <= g["phases"]["lost"] <= high * 1.01 + 0.01,
                  f"lost is the time those steps took: {g['phases']['lost']:.3f} device-s, within "
                  f"[{low:.3f}, {high:.3f}]")
            adds_up(g, f"run {rid}")
            api = held_by_api(s2, rid)
            check(abs(g["held_device_s"] - api) <= 0.01 * api, f"held {g['held_device_s']:.3f} vs {api:.3f}")
            check(g["phases"]["checkpoint"] > 0 and g["goodput"] < 1, f"its checkpoints, its goodput: {g}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
