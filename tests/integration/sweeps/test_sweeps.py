#!/usr/bin/env python3
"""Sweeps end to end (POST /sweeps): a real ddpd on a loopback port, the real
ddp-trainer on Fashion-MNIST subsets, and for command-run sweeps ddp-run with a
small Python script.

  grid_2x2             a 2x2 grid: four trials, every combination once, runs of the
                       sweep's owner carrying sweep_id, trial and params; a best trial
  random_seeded        a random search with a seed gives the same trials twice
                       (and another seed others)
  bad_sweeps           refused before any trial starts, naming what is wrong
  cancel               cancel stops its trials and makes no more
  fair_beside_others   a user's trials are that user's runs: another user's run, submitted
                       while the sweep waits for slots, starts before its next trials
  asha_bit_for_bit     successive halving stops the worst trials at the first rung and
                       promotes the best, whose final weights equal a straight run's
  median_stops         median stopping stops a trial worse than the others' median
  restart_mid_sweep    a server killed mid-sweep carries it on: no trial lost or doubled
  command_sweep        a command-run sweep's parameters reach the program through its
                       environment and a {placeholder} in its command
  timeout_trial        a trial whose run passes max_duration_s (status timeout) is no
                       failed trial: it ends stopped with its last reported metric, and
                       the sweep succeeds with the others
  ddpctl_sweep         ddpctl sweep submit|list|show|cancel

Usage: test_sweeps.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH [--runner PATH] [--ddpctl PATH]"""
import argparse, hashlib, json, os, signal, subprocess, sys, tempfile, shutil

from ddpd_harness import Server, check, cases_in, wait_until, main, fmnist_config, pids_under  # noqa: E402

FINAL = ("succeeded", "failed", "canceled")


def base(**over):
    """A small built-in run: 2000 examples, one rank."""
    return fmnist_config(**{"name": "sw", "data.limit": 2000, "data.test_limit": 500, "train.epochs": 2,
                            "distributed.world_size": 1, "model.hidden": [64, 32], **over})


def submit(s, body, expect=201):
    r = s.post("/sweeps", body)
    if not check(r.status == expect, f"POST /sweeps -> {expect}, got {r.status}: {r.body[:600]!r}"):
        raise RuntimeError("sweep refused")
    return r.json()


def sweep(s, sid):
    r = s.get(f"/sweeps/{sid}")
    return r.json() if r.status == 200 else None


def sweep_succeeded(s, body, timeout):
    """Submits body and waits for the sweep's end: the sweep once it succeeded, else None
    (a failed check saying how it ended)."""
    sid = submit(s, body)["id"]
    w = wait_sweep(s, sid, timeout=timeout)
    return w if check(w and w["status"] == "succeeded", f"the sweep succeeds: {w and (w['status'], w['reason'])}") else None


def wait_sweep(s, sid, statuses=FINAL, timeout=400):
    got = wait_until(lambda: (lambda w: w if w and w["status"] in statuses else None)(sweep(s, sid)),
                     f"sweep {sid} to be {'/'.join(statuses)}", timeout, interval=0.2)
    if not got:
        print(json.dumps(sweep(s, sid), indent=1)[:4000], file=sys.stderr)
        s.dump_log()
    return got


def sweep_events(s, sid, until_action):
    """The live feed's `sweep` events of sweep sid, from the start (last_event_id=0),
    read until one of the sweep's own with action `until_action` has come."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("GET", "/events?last_event_id=0")
    r = conn.getresponse()
    got, event = [], None
    try:
        while True:
            line = r.fp.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "sweep":
                d = json.loads(line[6:])
                if d["sweep"] == sid:
                    got.append(d)
                    if d["trial"] is None and d["action"] == until_action:
                        return got
            elif not line:
                event = None
    finally:
        conn.close()


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def case_grid_2x2(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        body = {"name": "grid", "base": base(), "method": "grid", "parallel": 2,
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.01]},
                               "model.hidden.0": {"values": [32, 64]}},
                "metric": {"key": "test_loss", "goal": "minimize"}}
        made = submit(s, body)
        check(made["status"] == "running" and made["n_trials"] == 4, f"201 with the sweep, 4 trials to make: {made}")
        w = wait_sweep(s, made["id"])
        if not check(w and w["status"] == "succeeded", f"the sweep succeeds: {w and (w['status'], w['reason'])}"):
            return
        trials = w["trials"]
        combos = sorted((t["params"]["train.optimizer.lr"], t["params"]["model.hidden.0"]) for t in trials)
        check(combos == [(0.001, 32), (0.001, 64), (0.01, 32), (0.01, 64)], f"every combination once: {combos}")
        check([t["trial"] for t in trials] == [0, 1, 2, 3], f"trials numbered 0..3: {[t['trial'] for t in trials]}")
        check(all(t["status"] == "succeeded" and t["metric"] is not None for t in trials),
              f"every trial succeeded with a metric: {[(t['status'], t['metric']) for t in trials]}")
        for t in trials:
            run = s.run(t["run_id"])
            cfg = run["config"]
            check(run["sweep_id"] == made["id"] and run["trial"] == t["trial"],
                  f"run {t['run_id']} carries sweep_id and trial: {run.get('sweep_id')} {run.get('trial')}")
            check(cfg["train"]["optimizer"]["lr"] == t["params"]["train.optimizer.lr"]
                  and cfg["model"]["hidden"][0] == t["params"]["model.hidden.0"],
                  f"run {t['run_id']}'s config has its parameters: {cfg['train']['optimizer']} {cfg['model']}")
            epochs = s.get(f"/runs/{t['run_id']}/epochs").json()["epochs"]
            check(t["metric"] == epochs[-1]["test_loss"], f"trial {t['trial']}'s metric is its last test_loss: "
                  f"{t['metric']} vs {epochs[-1]['test_loss']}")
        best = min(trials, key=lambda t: t["metric"])
        check(w["best"] and w["best"]["trial"] == best["trial"], f"the best trial is the lowest test_loss: {w['best']}")
        events = sweep_events(s, made["id"], "succeeded")
        actions = [(e["trial"], e["action"]) for e in events]
        check(actions[0] == (None, "submitted") and actions[-1] == (None, "succeeded"),
              f"the feed has the sweep's submission first and its end last: {actions}")
        for k in range(4):
            mine = [a for t, a in actions if t == k]
            check(mine == ["made", "started", "succeeded"], f"trial {k}'s events: made, started, succeeded: {mine}")
        started = [e for e in events if e["action"] == "started"]
        check(sorted(e["run"] for e in started) == sorted(t["run_id"] for t in trials),
              f"a trial's event names its run: {[(e['trial'], e['run']) for e in started]}")
        listed = s.get("/sweeps").json()["sweeps"]
        check([x["id"] for x in listed] == [made["id"]] and listed[0]["best"]["trial"] == best["trial"],
              f"GET /sweeps lists it with its best: {listed}")


def case_random_seeded(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        def body(seed):
            return {"name": f"rnd{seed}", "base": base(**{"train.epochs": 1, "data.limit": 500}), "method": "random",
                    "seed": seed, "max_trials": 3, "parallel": 2,
                    "parameters": {"train.optimizer.lr": {"min": 1e-4, "max": 1e-1, "log": True},
                                   "model.hidden.0": {"min": 16, "max": 128, "type": "int"},
                                   "train.optimizer.type": {"values": ["adam", "sgd"]}},
                    "metric": {"key": "test_acc", "goal": "maximize"}}
        ids = [submit(s, body(seed))["id"] for seed in (7, 7, 8)]
        done = [wait_sweep(s, i) for i in ids]
        if not check(all(d and d["status"] == "succeeded" for d in done), "the three sweeps succeed"):
            return
        params = [[t["params"] for t in d["trials"]] for d in done]
        check(params[0] == params[1], f"seed 7 twice: the same trials {params[0]} / {params[1]}")
        check(params[0] != params[2], f"seed 8: other trials {params[2]}")
        for p in params[0]:
            check(1e-4 <= p["train.optimizer.lr"] <= 1e-1 and 16 <= p["model.hidden.0"] <= 128
                  and isinstance(p["model.hidden.0"], int) and p["train.optimizer.type"] in ("adam", "sgd"),
                  f"within the ranges, the int an int: {p}")
        best = max(done[0]["trials"], key=lambda t: t["metric"])
        check(done[0]["best"]["trial"] == best["trial"], f"maximize: the best has the highest test_acc: {done[0]['best']}")


def case_bad_sweeps(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        good = {"base": base(), "parameters": {"train.optimizer.lr": {"values": [0.01, 0.1]}},
                "metric": {"key": "test_loss"}}

        def refused(change, *needles):
            body = json.loads(json.dumps(good))
            change(body)
            r = s.post("/sweeps", body)
            detail = r.json().get("detail", "") if r.body else ""
            check(r.status == 400 and all(n in detail for n in needles),
                  f"400 naming {needles}: {r.status} {detail!r}")

        refused(lambda b: b["parameters"].update({"train.optimiser.lr": {"values": [1]}}), "train.optimiser.lr",
                "not a path in the base config")
        refused(lambda b: b["parameters"].update({"train.optimizer.lr": {"values": []}}),
                "/parameters/train.optimizer.lr/values", "must have at least 1 item")
        refused(lambda b: b.update({"early_stoping": {"type": "asha"}}), "/early_stoping", "unknown field")
        refused(lambda b: b["parameters"].update({"train.optimizer.lr": {"valuse": [0.1]}}),
                "/parameters/train.optimizer.lr/values", "is required")
        refused(lambda b: b["parameters"].update({"model.hidden.0": {"min": "<hidden>", "max": 64}}),
                "/parameters/model.hidden.0/min", "hidden from its reader: give the number itself")
        refused(lambda b: b.update({"parallel": 0}), "/parallel", "must be at least 1")
        refused(lambda b: b["parameters"].update({"train.optimizer.lr": {"min": 0.1, "max": 0.01}}),
                "train.optimizer.lr", "range is empty")
        refused(lambda b: b["parameters"].update({"train.epochs": {"values": [1, 0]}}), "train.epochs",
                "invalid run config", "/train/epochs")
        refused(lambda b: b.update({"method": "random", "max_trials": 2,
                                    "parameters": {"train.batch_size": {"min": 0, "max": 64}}}),
                "train.batch_size", "invalid run config")
        refused(lambda b: b["parameters"].update({"train.batch_size": {"values": list(range(1, 40))},
                                                  "model.hidden.0": {"values": list(range(1, 40))}}),
                "grid has 3042 trials", "1000")
        refused(lambda b: b.update({"max_trials": 1}), "grid has 2 trials but max_trials is 1")
        refused(lambda b: b["parameters"].update({"train.optimizer.lr": {"min": 0.01, "max": 0.1}}),
                "train.optimizer.lr", "float range", "grid")
        refused(lambda b: b.update({"metric": {"key": "accuracy"}}), "/metric/key", "accuracy")
        refused(lambda b: b["parameters"].update({"env.LR": {"values": ["1"]}}), "env.LR", "command run")
        refused(lambda b: b.update({"early_stopping": {"type": "asha", "min_resource": 2}}), "min_resource",
                "below train.epochs")
        refused(lambda b: b.update({"base": {"train": {"epochs": 0}}}), "/base/train/epochs")
        r = s.post("/sweeps", "not json", headers={"Content-Type": "application/json"})
        check(r.status == 400, f"a body that is not JSON: 400 ({r.status})")
        check(s.get("/runs").json()["runs"] == [] and s.get("/sweeps").json()["sweeps"] == [],
              "no sweep stored and no trial started")
        check(s.get("/sweeps/99").status == 404 and s.post("/sweeps/99/cancel").status == 404, "no sweep 99: 404")


def case_cancel(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        body = {"name": "long", "base": base(**{"train.epochs": 50, "data.limit": 3000}), "parallel": 1,
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.01, 0.1]}},
                "metric": {"key": "test_loss"}}
        sid = submit(s, body)["id"]
        first = wait_until(lambda: (lambda w: w["trials"][0] if w["trials"] and w["trials"][0]["run_id"]
                                    and s.run(w["trials"][0]["run_id"])["status"] == "running" else None)(sweep(s, sid)),
                           "the first trial running", 120)
        if not check(first, "the first trial runs"):
            return
        r = s.post(f"/sweeps/{sid}/cancel")
        check(r.status == 202 and r.json()["status"] == "canceled", f"cancel: 202, canceled: {r.status} {r.body[:300]!r}")
        run = s.wait_status(first["run_id"], FINAL + ("stopped",), timeout=60)
        check(run and run["status"] == "canceled", f"its running trial's run is canceled: {run and run['status']}")
        w = sweep(s, sid)
        check(len(w["trials"]) == 1 and w["trials"][0]["status"] == "canceled",
              f"no more trials are made, the one there is canceled: {w['trials']}")
        check(s.post(f"/sweeps/{sid}/cancel").status == 409, "a second cancel: 409")
        check(len(s.get("/runs").json()["runs"]) == 1, "one run in all")


def add_user(a, state_dir, name):
    p = subprocess.run([a.ddpd, "user", "add", name, "--state-dir", state_dir], capture_output=True, text=True)
    check(p.returncode == 0, f"ddpd user add {name}: {p.returncode} {p.stderr!r}")
    return {"Authorization": "Bearer " + (p.stdout.strip().splitlines() or [""])[-1]}


def case_fair_beside_others(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        alice, bob = add_user(a, s.state_dir, "alice"), add_user(a, s.state_dir, "bob")
        s.read_headers = alice  # reads need a token once there are users
        # trials of some seconds each (a wider model): on a fast machine a trial of 6,000 small
        # examples ended before bob's run came, and no trial of alice's was left waiting
        body = {"name": "alices", "base": base(**{"train.epochs": 6, "data.limit": 6000, "model.hidden": [256, 128]}),
                "parallel": 4,
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.002, 0.003, 0.004]}},
                "metric": {"key": "test_loss"}}
        r = s.post("/sweeps", body, headers=alice)
        if not check(r.status == 201, f"alice's sweep: {r.status} {r.body[:300]!r}"):
            return
        sid = r.json()["id"]
        w = wait_until(lambda: (lambda w: w if len([t for t in w["trials"] if t["run_id"]]) == 4 else None)(sweep(s, sid)),
                       "all four trials queued", 60, interval=0.05)
        if not check(w, "four trials made at once (parallel 4)"):
            return
        runs = {t["trial"]: s.run(t["run_id"]) for t in w["trials"]}
        check(all(r["owner"] == "alice" for r in runs.values()), f"the trials are alice's runs: {[r['owner'] for r in runs.values()]}")
        # both slots taken by alice's trials first: from then on she has usage and bob none
        wait_until(lambda: sum(s.run(t["run_id"])["status"] == "running" for t in w["trials"]) == 2,
                   "two of alice's trials running", 120, interval=0.05)
        r = s.post("/runs", dict(base(**{"train.epochs": 1}), name="bobs"), headers=bob)
        if not check(r.status == 201, f"bob's run is accepted: {r.status}"):
            return
        bobs = r.json()["id"]
        # the trials the scheduler still holds queued once bob's run is (the store may say
        # queued a moment longer for one it has started: queue_position is the scheduler's)
        waiting = [t["trial"] for t in w["trials"] if s.run(t["run_id"]).get("queue_position", 0) > 0]
        check(waiting, "some of alice's trials wait for slots when bob's run comes")
        done = s.wait_status(bobs, FINAL, timeout=300)
        check(done and done["status"] == "succeeded", "bob's run succeeds")
        w = wait_sweep(s, sid)
        check(w and w["status"] == "succeeded", "alice's sweep succeeds")
        starts = {t["trial"]: s.run(t["run_id"])["started_at"] for t in w["trials"]}
        later = [t for t in waiting if starts[t] > done["started_at"]]
        check(later == waiting, f"bob's run (no usage yet) starts before alice's trials that were waiting (fair "
                                f"share): bob {done['started_at']}, trials {starts}")


def case_asha_bit_for_bit(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        cfg = base(**{"train.epochs": 3, "data.limit": 3000, "model.hidden": [128, 64]})
        body = {"name": "asha", "base": cfg, "parallel": 4,
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.3, 0.003, 1.0]}},
                "metric": {"key": "test_loss", "goal": "minimize"},
                "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 2}}
        w = sweep_succeeded(s, body, 600)
        if not w:
            return
        trials = {t["trial"]: t for t in w["trials"]}
        print(json.dumps(w["trials"], indent=1), file=sys.stderr)
        stopped = sorted(t["trial"] for t in trials.values() if t["status"] == "stopped")
        done = [t for t in trials.values() if t["status"] == "succeeded"]
        check(len(stopped) == 3 and len(done) == 1, f"one trial trains to the end, three are stopped: {w['trials']}")
        rung0 = [t for t in trials.values() if t["rung"] == 0]
        check(len(rung0) == 2 and all(t["status"] == "stopped" for t in rung0),
              f"two stopped at the first rung: {[(t['trial'], t['rung'], t['status']) for t in trials.values()]}")
        for t in rung0:
            run = s.run(t["run_id"])
            check(run["status"] == "stopped" and "rung 0" in (run["reason"] or ""),
                  f"its run ends stopped naming the rung: {run['status']} {run['reason']!r}")
        # the worst at epoch 0 are those stopped at rung 0
        first = {t["trial"]: s.get(f"/runs/{t['run_id']}/epochs").json()["epochs"][0]["test_loss"]
                 for t in trials.values()}
        worst = sorted(first, key=lambda k: first[k])[2:]
        check(sorted(worst) == sorted(t["trial"] for t in rung0), f"the two worst at rung 0 stopped there: {first}")
        if not done:
            return
        best = done[0]
        check(w["best"]["trial"] == best["trial"], f"the best is the one that finished: {w['best']}")
        run = s.run(best["run_id"])
        check(len(run.get("resumes", [])) == 2, f"it was paused at two rungs and went on twice: {run.get('resumes')}")
        # the same trial trained straight through
        straight_cfg = json.loads(json.dumps(cfg))
        straight_cfg["name"] = run["config"]["name"]
        straight_cfg["train"]["optimizer"] = {"lr": best["params"]["train.optimizer.lr"]}
        straight = s.submit(straight_cfg)
        sr = s.wait_status(straight, FINAL, timeout=300)
        check(sr and sr["status"] == "succeeded", "the straight run succeeds")
        last = os.path.join("checkpoints", "epoch-0002.safetensors")
        x, y = os.path.join(s.run_dir(best["run_id"]), last), os.path.join(s.run_dir(straight), last)
        check(os.path.exists(x) and os.path.exists(y) and sha(x) == sha(y),
              "the promoted trial's final checkpoint is byte for byte the straight run's")


# A command trial that reports its epochs: a bad one (LR 5) then waits to be stopped,
# so the rule's decision, not a race with its end, is what the test sees.
MEDIAN_SCRIPT = ("import os, time, ddpd\n"
                 "lr = float(os.environ['LR'])\n"
                 "for e in range(3):\n"
                 "    ddpd.log_epoch(e, test_loss=lr * 10 + 1.0 / (e + 1))\n"
                 "ddpd.flush()\n"
                 "if lr > 1:\n"
                 "    time.sleep(600)\n")


def command_server(a, root, slots=2):
    return Server(a.ddpd, None, slots=slots, extra_args=["--allow-commands", "--work-root", root, "--runner", a.runner])


def work_root(script):
    """A work root holding proj/train.py, readable by the runs' accounts."""
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-sweep-work-"))
    os.mkdir(os.path.join(root, "proj"))
    with open(os.path.join(root, "proj", "train.py"), "w") as f:
        f.write(script)
    os.chmod(root, 0o755)
    return root


def case_median_stops(a):
    if not check(a.runner, "needs --runner"):
        return
    root = work_root(MEDIAN_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "median", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.001, 0.002, 0.003, 5.0]}},
                    "metric": {"key": "test_loss", "goal": "minimize"},
                    "early_stopping": {"type": "median", "min_resource": 1, "min_trials": 3}}
            w = sweep_succeeded(s, body, 300)
            if not w:
                return
            t = w["trials"]
            check([x["status"] for x in t[:3]] == ["succeeded"] * 3, f"the first three run to the end: {t}")
            check(t[3]["status"] == "stopped" and "median" in (t[3]["reason"] or ""),
                  f"the fourth (LR 5) is stopped by the median rule: {t[3]}")
            run = s.wait_status(t[3]["run_id"], FINAL + ("stopped",), timeout=60)
            check(run and run["status"] == "stopped" and "median rule at epoch" in run["reason"],
                  f"its run ends stopped, naming the epoch: {run and (run['status'], run['reason'])}")
            check(w["best"]["trial"] == 0, f"the best is LR 0.001: {w['best']}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def case_restart_mid_sweep(a):
    state = tempfile.mkdtemp(prefix="ddpd-sweep-restart-")
    try:
        body = {"name": "rs", "base": base(**{"train.epochs": 6, "data.limit": 3000}), "parallel": 2,
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.003]}, "model.hidden.0": {"values": [32, 64]}},
                "metric": {"key": "test_loss"},
                "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 2}}
        s = Server(a.ddpd, a.trainer, slots=2, state_dir=state)
        s.start()
        sid = submit(s, body)["id"]
        before = wait_until(lambda: (lambda w: w if len([t for t in w["trials"] if t["run_id"]]) >= 2 and
                                     any(t["metric"] is not None for t in w["trials"]) else None)(sweep(s, sid)),
                            "two trials made and one with an epoch", 180, interval=0.05)
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait()
        check(before and before["status"] == "running", f"the server is killed mid-sweep: {before and before['status']}")
        # a trainer forked as the server was killed holds the lock until it execs: the
        # new server waits for it (state_lock.h)
        s2 = Server(a.ddpd, a.trainer, slots=2, state_dir=state)
        with s2:
            w = wait_sweep(s2, sid, timeout=600)
            check(w and w["status"] == "succeeded", f"the sweep carries on and succeeds: {w and (w['status'], w['reason'])}")
            runs = [r for r in s2.get("/runs?limit=100").json()["runs"] if r.get("sweep_id") == sid]
            by_trial = sorted(r["trial"] for r in runs)
            check(by_trial == [0, 1, 2, 3], f"one run per trial, none lost or doubled: {by_trial}")
            check(sorted(t["run_id"] for t in w["trials"]) == sorted(r["id"] for r in runs),
                  "each trial's run is the one stored")
            check(all(t["status"] in ("succeeded", "stopped") for t in w["trials"]),
                  f"every trial ends succeeded or stopped: {[t['status'] for t in w['trials']]}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


TIMEOUT_SCRIPT = ("import os, time, ddpd\n"
                  "lr = float(os.environ['LR'])\n"
                  "for e in range(3):\n"
                  "    ddpd.log_epoch(e, test_loss=lr * 10 + 1.0 / (e + 1))\n"
                  "ddpd.flush()\n"
                  "if lr > 1:\n"
                  "    time.sleep(600)\n")


def case_timeout_trial(a):
    if not check(a.runner, "needs --runner"):
        return
    root = work_root(TIMEOUT_SCRIPT)
    try:
        with command_server(a, root) as s:
            # the slow trial (LR 5) reports its three epochs, then sleeps past its time limit
            body = {"name": "timeout", "parallel": 3,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}, "max_duration_s": 10},
                    "parameters": {"env.LR": {"values": [0.001, 0.002, 5.0]}},
                    "metric": {"key": "test_loss", "goal": "minimize"}}
            w = sweep_succeeded(s, body, 300)
            if not w:
                return
            t = w["trials"]
            run = s.run(t[2]["run_id"])
            check(run["status"] == "timeout", f"the slow trial's run timed out: {run['status']} {run['reason']!r}")
            check(t[2]["status"] == "stopped" and "timed out" in (t[2]["reason"] or ""),
                  f"the timed-out trial ends stopped, saying it timed out: {t[2]}")
            check(t[2]["metric"] is not None and abs(t[2]["metric"] - (50 + 1 / 3)) < 1e-6,
                  f"with the metric it last reported (epoch 2's): {t[2]['metric']}")
            check(w["trial_counts"]["failed"] == 0 and w["trial_counts"]["stopped"] == 1 and
                  w["trial_counts"]["succeeded"] == 2, f"no trial counts as failed: {w['trial_counts']}")
            check(w["best"]["trial"] == 0, f"the best is LR 0.001: {w['best']}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


SCRIPT = ("import os, sys, ddpd\n"
          "lr = float(os.environ['LR'])\n"
          "width = int(sys.argv[1].split('=')[1])\n"
          "open('seen-%s-%d' % (os.environ['LR'], width), 'w').close()\n"
          "for e in range(2):\n"
          "    ddpd.log_epoch(e, test_loss=abs(lr - 0.01) * 100 + abs(width - 64) + 1.0 / (e + 1))\n"
          "ddpd.flush()\n")


def case_command_sweep(a):
    if not check(a.runner, "needs --runner"):
        return
    root = work_root(SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "cmd", "base": {"command": ["/usr/bin/python3", "train.py", "--width={width}"],
                                            "working_dir": "proj", "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.01, 0.1]}, "{width}": {"values": [32, 64]}},
                    "metric": {"key": "test_loss", "goal": "minimize"}, "parallel": 2}
            w = sweep_succeeded(s, body, 300)
            if not w:
                return
            seen = sorted(f for f in os.listdir(os.path.join(root, "proj")) if f.startswith("seen-"))
            check(seen == ["seen-0.01-32", "seen-0.01-64", "seen-0.1-32", "seen-0.1-64"],
                  f"each trial's program got its LR in the environment and its width in its argv: {seen}")
            check(w["best"]["params"] == {"env.LR": 0.01, "{width}": 64}, f"the best trial: {w['best']}")
            run = s.run(w["best"]["run_id"])
            check(run["config"]["env"]["LR"] == "0.01" and run["config"]["command"][2] == "--width=64",
                  f"its run's config: {run['config'].get('env')} {run['config'].get('command')}")
            bad = dict(body, parameters={"{depth}": {"values": [1]}})
            r = s.post("/sweeps", bad)
            check(r.status == 400 and "{depth}" in r.json()["detail"], f"a placeholder not in the command: {r.body[:300]!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def case_ddpctl_sweep(a):
    if not a.ddpctl:
        check(False, "needs --ddpctl")
        return
    with Server(a.ddpd, a.trainer, slots=2) as s:
        url = f"http://127.0.0.1:{s.port}"
        spec = {"name": "cli", "base": base(**{"train.epochs": 1, "data.limit": 500}),
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.01]}}, "metric": {"key": "test_loss"}}
        path = os.path.join(s.state_dir, "sweep.json")
        with open(path, "w") as f:
            json.dump(spec, f)

        def ctl(*args):
            p = subprocess.run([a.ddpctl, "--server", url, *args], capture_output=True, text=True, timeout=60)
            return p.returncode, p.stdout, p.stderr

        rc, out, err = ctl("sweep", "submit", path)
        if not check(rc == 0 and "sweep 1 submitted" in out, f"ddpctl sweep submit: {rc} {out!r} {err!r}"):
            return
        w = wait_sweep(s, 1)
        check(w and w["status"] == "succeeded", "the sweep succeeds")
        rc, out, err = ctl("sweep", "list")
        check(rc == 0 and "cli" in out and "succeeded" in out, f"ddpctl sweep list: {out!r} {err!r}")
        rc, out, err = ctl("sweep", "show", "1")
        lines = [line for line in out.splitlines() if line.strip()]
        check(rc == 0 and "best" in out.lower(), f"ddpctl sweep show: {out!r} {err!r}")
        rows = [line for line in lines if line.split()[0].isdigit()]
        metrics = [float(line.split()[-2]) for line in rows] if rows else []
        check(len(rows) == 2 and metrics == sorted(metrics), f"its trials table, sorted by the metric: {rows}")
        rc, out, err = ctl("sweep", "cancel", "1")
        check(rc != 0 and "already finished" in err, f"ddpctl sweep cancel of a finished sweep says so: {rc} {err!r}")
        rc, out, err = ctl("sweep", "show", "9")
        check(rc != 0 and "no sweep 9" in err, f"an unknown sweep: {rc} {err!r}")
        bad = os.path.join(s.state_dir, "bad.json")
        with open(bad, "w") as f:
            json.dump(dict(spec, parameters={"nope": {"values": [1]}}), f)
        rc, out, err = ctl("sweep", "submit", bad)
        check(rc != 0 and "nope" in err, f"a bad sweep is refused naming the parameter: {rc} {err!r}")


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer")
    p.add_argument("--fake-trainer", required=True)
    p.add_argument("--runner")
    p.add_argument("--ddpctl")
    main(CASES, p.parse_args())
