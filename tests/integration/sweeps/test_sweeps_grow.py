#!/usr/bin/env python3
"""Sweeps a team tuning with Optuna would switch to (issue 50), end to end: a real ddpd
on a loopback port, the real ddp-trainer on a Fashion-MNIST subset, and ddp-run with
/usr/bin/python3 scripts (one of them a torch MLP).

  val_acc_metric        a torch script reports val_acc with ddpd.log_epoch: it is kept
                        as a per-epoch series (GET /runs/{id}/metrics?key=epoch:val_acc,
                        ddpctl show's epochs table), the val_acc sweep picks a best and
                        ASHA stops the trial that does not learn, its run log saying
                        so (not "canceled by SIGTERM")
  metric_never_reported a sweep whose metric no trial reports ends failed, saying so and
                        what its trials did report
  pause_resume_builtin  a built-in trial paused with its sweep stops, keeps its place and
                        goes on from its checkpoint at the resume; nothing is made while
                        the sweep is paused
  extend_and_enqueue    max_trials raised on a finished sweep continues the random
                        sequence (the trials a sweep with that max_trials would have made),
                        a configuration enqueued by hand is the next trial, never one a
                        trial has; what is refused says why; a 404 names the sweeps' routes
  hand_resumed_counted  a trial ASHA stopped, resumed by hand, is followed by its (finished)
                        sweep and becomes its best
  tpe_repeatable        method tpe makes the same choices twice with the same seed (and
                        others with another), never repeating a configuration
  conditional           train.optimizer.momentum only when train.optimizer.type is sgd:
                        a grid makes sgd x 2 momenta and adam once, each trial's run
                        config has momentum only as its params say; a TPE sweep's
                        trials hold momentum exactly when they are sgd; bad conditions
                        (an unknown parameter, a loop, a value never taken) are 400s at
                        their pointers
  follow                ddpctl sweep follow, started as the sweep is submitted, prints
                        each trial as it starts, reports, is stopped by ASHA and ends,
                        the best as it changes, and exits 0 when the sweep succeeds; a
                        canceled sweep's follow exits 5; a finished one's says so at once
  failed_best           a sweep whose every trial fails after reporting its metric ends
                        failed with a best by the trials' last reported values
                        (last_reported), shown so by ddpctl sweep show
  asha_max_resource     with max_resource a command trial that trained its full length is
                        never stopped at its last epoch

Usage: test_sweeps_grow.py CASE --ddpd PATH --trainer PATH --runner PATH --ddpctl PATH"""
import argparse, json, os, shutil, subprocess

from ddpd_harness import Server, check, cases_in, wait_until, main, fmnist_config  # noqa: E402
from openapi_contract import checker as openapi_checker  # noqa: E402
from test_sweeps import FINAL, submit, sweep, wait_sweep, command_server, work_root  # noqa: E402  (beside it)

def problem(r, status, words, what):
    detail = r.json().get("detail", "") if r.body else ""
    return check(r.status == status and all(w in detail for w in words),
                 f"{what}: {status} naming {words}, got {r.status}: {r.body[:500]!r}")


# ---- val_acc_metric ----

TORCH_SCRIPT = r"""
import os, time, ddpd, torch
torch.manual_seed(0)
lr = float(os.environ["LR"])
g = torch.Generator().manual_seed(1)
x = torch.randn(512, 8, generator=g)
y = (x[:, 0] + x[:, 1] > 0).long() + 2 * (x[:, 2] > 0).long()
xv = torch.randn(256, 8, generator=g)
yv = (xv[:, 0] + xv[:, 1] > 0).long() + 2 * (xv[:, 2] > 0).long()
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=lr)
for epoch in range(4):
    for i in range(0, 512, 32):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        opt.step()
    with torch.no_grad():
        acc = (model(xv).argmax(1) == yv).float().mean().item()
    ddpd.log_epoch(epoch, train_loss=loss.item(), val_acc=acc, val_top1=acc)
    if lr < 0.001:  # the trial that does not learn lingers, so that its stop lands before its end
        ddpd.flush()
        time.sleep(60)
ddpd.flush()
"""


def case_val_acc_metric(a):
    root = work_root(TORCH_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "va", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.5, 0.2, 0.0001]}},
                    "metric": {"key": "val_acc", "goal": "maximize"},
                    "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 2, "max_resource": 4}}
            sid = submit(s, body)["id"]
            w = wait_sweep(s, sid, timeout=300)
            if not check(w and w["status"] == "succeeded", f"the val_acc sweep succeeds: {w and (w['status'], w['reason'])}"):
                return
            t = w["trials"]
            check(w["best"] and w["best"]["metric"] is not None and w["best"]["metric"] > 0.6,
                  f"it picks a best trial by val_acc: {w['best']}")
            check(t[2]["status"] == "stopped" and f"stopped by sweep {sid}'s ASHA at rung 0" in (t[2]["reason"] or ""),
                  f"the trial that does not learn (lr 0.0001) is stopped at the first rung: {t[2]}")
            run = s.wait_status(t[2]["run_id"], FINAL + ("stopped",), timeout=120)
            atts = (run or {}).get("attempts") or []
            check(run and run["status"] == "stopped" and f"stopped by sweep {sid}'s ASHA at rung 0" in run["reason"] and
                  atts and atts[-1]["status"] == "stopped" and f"sweep {sid}'s ASHA at rung 0" in (atts[-1]["reason"] or "")
                  and "canceled" not in json.dumps(atts),
                  f"its run and its attempt read stopped by the sweep's ASHA, never canceled: "
                  f"{run and (run['status'], run['reason'])} {atts}")
            log = wait_until(lambda: (lambda b: b if "run stopped:" in b else None)(
                s.get(f"/runs/{t[2]['run_id']}/logs").body.decode(errors="replace")),
                "the stopped trial's launcher to log its end", 60, interval=0.1) or \
                s.get(f"/runs/{t[2]['run_id']}/logs").body.decode(errors="replace")
            ends = [x for x in log.splitlines() if "run stopped:" in x or "run canceled:" in x]
            check(ends and f"run stopped: stopped by sweep {sid}'s ASHA at rung 0" in ends[-1] and
                  "received SIGUSR1: stopped by sweep" in log and "canceled by SIG" not in log,
                  f"the trial's run log (ddp-run's lines) says the sweep's ASHA stopped it, not canceled: {ends} "
                  f"{[x for x in log.splitlines() if 'SIGTERM' in x]}")
            best_run = w["best"]["run_id"]
            r = s.get(f"/runs/{best_run}/metrics?key=epoch:val_acc")
            pts = r.json().get("points", []) if r.status == 200 else []
            check(r.status == 200 and [p[0] for p in pts] == [0, 1, 2, 3] and
                  abs(pts[-1][1] - w["best"]["metric"]) < 1e-12,
                  f"val_acc is kept per epoch as the series epoch:val_acc, its step the epoch: {r.status} {pts}")
            keys = r.json().get("keys", []) if r.status == 200 else []
            check("epoch:val_acc" in keys and "epoch:val_top1" in keys, f"both names are series of the run: {keys}")
            ep = s.get(f"/runs/{best_run}/epochs").json()["epochs"]
            check(len(ep) == 4 and all(e["train_loss"] is not None for e in ep),
                  f"the epoch table's own columns are kept as before: {ep}")
            p = subprocess.run([a.ddpctl, "--server", f"http://127.0.0.1:{s.port}", "show", str(best_run)],
                               capture_output=True, text=True, timeout=60)
            head = [line for line in p.stdout.splitlines() if "EPOCH" in line]
            rows = [line.split() for line in p.stdout.splitlines() if line.startswith("    ") and line.split()[0].isdigit()]
            check(p.returncode == 0 and head and "val_acc" in head[0] and "val_top1" in head[0] and len(rows) == 4 and
                  abs(float(rows[-1][-2]) - w["best"]["metric"]) < 1e-3,
                  f"ddpctl show's epochs table has a column for each per-epoch series: {p.stdout!r} {p.stderr!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- metric_never_reported ----

PLAIN_SCRIPT = ("import os, ddpd\n"
                "lr = float(os.environ['LR'])\n"
                "for e in range(2):\n"
                "    ddpd.log_epoch(e, test_loss=abs(lr - 0.01) + 1.0 / (e + 1), val_loss=lr)\n"
                "ddpd.flush()\n")


def case_metric_never_reported(a):
    root = work_root(PLAIN_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "nm", "parallel": 2,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.01, 0.1]}},
                    "metric": {"key": "val_acc", "goal": "maximize"}}
            sid = submit(s, body)["id"]
            w = wait_sweep(s, sid)
            check(w and w["status"] == "failed" and 'no trial reported its metric "val_acc"' in (w["reason"] or "")
                  and "test_loss" in w["reason"] and "val_loss" in w["reason"],
                  f"the sweep ends failed, naming its metric and what its trials reported: {w and (w['status'], w['reason'])}")
            check(w and w["best"] is None, f"no best: {w and w['best']}")
            # the same sweep by a name its trials report: succeeds
            w2 = wait_sweep(s, submit(s, dict(body, metric={"key": "val_loss"}))["id"])
            check(w2 and w2["status"] == "succeeded" and w2["best"]["params"] == {"env.LR": 0.01},
                  f"by val_loss (a per-epoch series) it succeeds with a best: {w2 and (w2['status'], w2['best'])}")
            # built-in trials report only the epoch table's columns: refused at once
            bad = {"name": "bi", "base": fmnist_config(**{"data.limit": 500, "train.epochs": 1}),
                   "parameters": {"train.optimizer.lr": {"values": [0.001]}}, "metric": {"key": "val_acc"}}
            r = s.post("/sweeps", bad)
            problem(r, 400, ["/metric/key", "val_acc", "built-in"], "a built-in sweep by a metric its trainer never reports")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- pause_resume_builtin ----

def case_pause_resume_builtin(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        body = {"name": "pr", "parallel": 1, "method": "random", "max_trials": 2, "seed": 3,
                # epochs of a second or so on a quiet machine: the pause comes after the first one,
                # long before the last (epochs of 2,000 examples and a hidden layer of 64 ended
                # within the pause's latency, and the trial succeeded instead)
                "base": fmnist_config(**{"name": "pr", "data.limit": 12000, "data.test_limit": 300, "train.epochs": 6,
                                         "distributed.world_size": 1, "model.hidden": [512, 256],
                                         "train.batch_size": 32}),
                "parameters": {"train.optimizer.lr": {"min": 0.0005, "max": 0.005, "log": True}},
                "metric": {"key": "test_loss"}}
        sid = submit(s, body)["id"]
        first = wait_until(lambda: (lambda w: w if w and w["trials"] and w["trials"][0]["metric_epoch"] is not None
                                    else None)(sweep(s, sid)), "trial 0 to have an epoch", 180, interval=0.05)
        if not check(first, "trial 0 reports an epoch"):
            return
        run0 = first["trials"][0]["run_id"]
        r = s.post(f"/sweeps/{sid}/pause")
        check(r.status == 202 and r.json()["status"] == "paused", f"POST pause -> 202, paused: {r.status} {r.body[:300]!r}")
        openapi_checker().response("POST", "/sweeps/{id}/pause", r, "the 202 of POST /sweeps/{id}/pause")
        problem(s.post(f"/sweeps/{sid}/pause"), 409, ["already paused", f"/sweeps/{sid}/resume"], "a second pause")
        run = s.wait_status(run0, ("stopped", "succeeded"), timeout=120)
        check(run and run["status"] == "stopped" and f"paused by sweep {sid}" in (run["reason"] or ""),
              f"its running trial's run stops, saying why: {run and (run['status'], run['reason'])}")
        w = sweep(s, sid)
        check(w["status"] == "paused" and len(w["trials"]) == 1 and w["trials"][0]["status"] == "running",
              f"the sweep is paused, its trial keeps its place (running), no trial is made: "
              f"{w['status']} {[(t['trial'], t['status']) for t in w['trials']]}")
        epochs_then = len(s.get(f"/runs/{run0}/epochs").json()["epochs"])
        r = s.post(f"/sweeps/{sid}/resume")
        check(r.status == 202 and r.json()["status"] == "running", f"POST resume -> 202, running: {r.status} {r.body[:300]!r}")
        problem(s.post(f"/sweeps/{sid}/resume"), 409, ["not paused"], "a resume of a running sweep")
        w = wait_sweep(s, sid, timeout=400)
        if not check(w and w["status"] == "succeeded", f"the sweep carries on and succeeds: {w and (w['status'], w['reason'])}"):
            return
        run = s.run(run0)
        resumes = run.get("resumes") or []
        check(run["status"] == "succeeded" and resumes and resumes[-1].get("from_checkpoint") and
              (resumes[-1].get("from_global_step") or 0) > 0,
              f"trial 0's run went on from its checkpoint (epoch {epochs_then} done before the pause): "
              f"{run['status']} {resumes}; trial 0: {w['trials'][0]}")
        check(len(s.get(f"/runs/{run0}/epochs").json()["epochs"]) == 6, "its run has each of its 6 epochs once")
        check([t["trial"] for t in w["trials"]] == [0, 1] and w["trials"][0]["run_id"] == run0,
              f"two trials, trial 0 the same run: {[(t['trial'], t['run_id']) for t in w['trials']]}")


# ---- extend_and_enqueue ----

FAST_SCRIPT = ("import os, sys, ddpd\n"
               "lr = float(os.environ['LR'])\n"
               "width = int(sys.argv[1])\n"
               "for e in range(2):\n"
               "    ddpd.log_epoch(e, val_acc=1 - abs(lr - 0.05) - abs(width - 32) / 100 - 0.01 / (e + 1))\n"
               "ddpd.flush()\n")


def fast_body(name, **over):
    return {"name": name, "parallel": 2, "method": "random", "seed": 11, "max_trials": 3,
            "base": {"command": ["/usr/bin/python3", "train.py", "{width}"], "working_dir": "proj",
                     "distributed": {"world_size": 1}},
            "parameters": {"env.LR": {"min": 0.001, "max": 1.0, "log": True}, "{width}": {"values": [16, 32, 64]}},
            "metric": {"key": "val_acc", "goal": "maximize"}, **over}


def case_extend_and_enqueue(a):
    root = work_root(FAST_SCRIPT)
    try:
        with command_server(a, root) as s:
            sid = submit(s, fast_body("ex"))["id"]
            w = wait_sweep(s, sid)
            if not check(w and w["status"] == "succeeded", f"the first 3 trials: {w and (w['status'], w['reason'])}"):
                return
            r = s.post(f"/sweeps/{sid}/extend", {"max_trials": 5})
            check(r.status == 202 and r.json()["status"] == "running", f"extend a finished sweep -> 202, running: "
                  f"{r.status} {r.body[:300]!r}")
            openapi_checker().response("POST", "/sweeps/{id}/extend", r, "the 202 of POST /sweeps/{id}/extend")
            w = wait_sweep(s, sid)
            check(len({json.dumps(t["params"], sort_keys=True) for t in w["trials"]}) == len(w["trials"]),
                  f"no configuration twice: {[t['params'] for t in w['trials']]}")
            check(w and w["status"] == "succeeded" and len(w["trials"]) == 5 and w["spec"]["max_trials"] == 5,
                  f"it makes 2 more trials and ends again: {w and (w['status'], len(w['trials']))}")
            # the same sweep submitted with max_trials 5: the same 5 configurations
            w5 = wait_sweep(s, submit(s, fast_body("ex5", max_trials=5))["id"])
            check(w5 and [t["params"] for t in w5["trials"]] == [t["params"] for t in w["trials"]],
                  f"the extension continues the sequence: {[t['params'] for t in w['trials']]} against "
                  f"{w5 and [t['params'] for t in w5['trials']]}")
            problem(s.post(f"/sweeps/{sid}/extend", {"max_trials": 5}), 409, ["max_trials is 5 already"],
                    "an extension that does not raise max_trials")
            problem(s.post(f"/sweeps/{sid}/extend", {"max_trials": "ten"}), 400, ["/max_trials"], "max_trials not a number")
            # a configuration by hand: the next trial, the finished sweep runs again
            mine = {"env.LR": 0.05, "{width}": 32}
            r = s.post(f"/sweeps/{sid}/trials", {"params": mine})
            check(r.status == 201 and r.json()["trials"][-1]["params"] == mine and r.json()["trials"][-1]["trial"] == 5,
                  f"POST /sweeps/{{id}}/trials -> 201, trial 5 with those values: {r.status} {r.body[:400]!r}")
            openapi_checker().response("POST", "/sweeps/{id}/trials", r, "the 201 of POST /sweeps/{id}/trials")
            w = wait_sweep(s, sid)
            check(w and w["status"] == "succeeded" and len(w["trials"]) == 6 and w["best"]["trial"] == 5,
                  f"the enqueued trial runs and, the best configuration, is the best: "
                  f"{w and (w['status'], len(w['trials']), w['best'])}")
            problem(s.post(f"/sweeps/{sid}/trials", {"params": mine}), 409, ["trial 5", "has these parameters already"],
                    "the same configuration again")
            # the best, ready to use: best.config, and ddpctl sweep rerun submits it
            check(w["best"]["config"]["env"]["LR"] == "0.05" and w["best"]["config"]["command"][-1] == "32",
                  f"best.config is the best trial's run config: {w['best'].get('config')}")
            url = f"http://127.0.0.1:{s.port}"
            p = subprocess.run([a.ddpctl, "--server", url, "sweep", "rerun", str(sid)], capture_output=True, text=True,
                               timeout=60)
            words = p.stdout.split()
            if check(p.returncode == 0 and words[:1] == ["run"] and "submitted" in p.stdout,
                     f"ddpctl sweep rerun: {p.returncode} {p.stdout!r} {p.stderr!r}"):
                run = s.wait_status(int(words[1]), FINAL, timeout=120)
                check(run and run["status"] == "succeeded" and run["config"]["env"]["LR"] == "0.05" and
                      run["config"]["command"][-1] == "32" and not run.get("sweep_id"),
                      f"the rerun is a run of its own with the best's config: {run and (run['status'], run['config'])}")
            p = subprocess.run([a.ddpctl, "--server", url, "sweep", "extend", str(sid), "7"], capture_output=True,
                               text=True, timeout=60)
            check(p.returncode == 0 and "max_trials 7" in p.stdout, f"ddpctl sweep extend: {p.stdout!r} {p.stderr!r}")
            w = wait_sweep(s, sid)
            check(w and w["status"] == "succeeded" and len(w["trials"]) == 8 and w["n_trials"] == 8,
                  f"8 trials then, 7 of the method's and the one by hand: {w and (len(w['trials']), w['n_trials'])}")
            # a sweep no trial of which fits this server (2 slots): refused at once, as POST /runs refuses the run
            big = fast_body("big")
            big["base"]["distributed"] = {"world_size": 4}
            problem(s.post("/sweeps", big), 400, ["/base/distributed/world_size", "2"], "a sweep of 4-rank trials on 2 slots")
            r = s.post(f"/sweeps/{sid}/trials", {"params": {"env.LR": 0.05, "{width}": 48, "nope": 1}})
            problem(r, 400, ["/params/"], "an enqueued trial with an unknown parameter and a value not in the list")
            ptrs = sorted(e["pointer"] for e in r.json().get("errors", []))
            check(ptrs == ["/params/nope", "/params/{width}"], f"each named: {ptrs}")
            problem(s.post(f"/sweeps/{sid}/trials", {"params": {"env.LR": 5.0, "{width}": 32}}), 400,
                    ["/params/env.LR", "outside"], "a value outside the range")
            r = s.post(f"/sweeps/{sid}/pauze")
            problem(r, 404, ["/sweeps/1/pauze", "POST /sweeps/{id}/pause", "POST /sweeps/{id}/extend"],
                    "an unknown path under /sweeps names the sweeps' routes")
            r = s.get("/nothing/here")
            problem(r, 404, ["/runs", "/sweeps"], "an unknown path names the API's prefixes")
            # a grid has no more points to make
            g = fast_body("gr", method="grid", max_trials=3, parameters={"{width}": {"values": [16, 32, 64]},
                                                                        "env.LR": {"values": [0.05]}})
            gid = submit(s, g)["id"]
            wait_sweep(s, gid)
            problem(s.post(f"/sweeps/{gid}/extend", {"max_trials": 9}), 409, ["grid", "enqueue"],
                    "a grid extended past its points")
            c = submit(s, fast_body("cx"))["id"]
            s.post(f"/sweeps/{c}/cancel")
            wait_sweep(s, c)
            problem(s.post(f"/sweeps/{c}/extend", {"max_trials": 9}), 409, ["canceled"], "a canceled sweep extended")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- hand_resumed_counted ----

# the worse trial lingers after its first epoch (its stop lands before its end), unless boosted
RESUMABLE_SCRIPT = ("import os, time, ddpd\n"
                    "lr = float(os.environ['LR'])\n"
                    "boost = os.path.exists('boost-%s' % os.environ['LR'])\n"
                    "for e in range(3):\n"
                    "    v = 0.99 if boost and e == 2 else 0.5 + lr * (e + 1) / 10\n"
                    "    ddpd.log_epoch(e, val_acc=v)\n"
                    "    ddpd.flush()\n"
                    "    if lr < 0.5 and not boost:\n"
                    "        time.sleep(60)\n"
                    "ddpd.flush()\n")


def case_hand_resumed_counted(a):
    root = work_root(RESUMABLE_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "hr", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.9, 0.1]}},
                    "metric": {"key": "val_acc", "goal": "maximize"},
                    "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 2, "max_resource": 3}}
            sid = submit(s, body)["id"]
            w = wait_sweep(s, sid)
            if not check(w and w["status"] == "succeeded" and w["trials"][1]["status"] == "stopped" and
                         w["best"]["trial"] == 0, f"trial 1 is stopped by ASHA, trial 0 the best: "
                         f"{w and [(t['status'], t['metric']) for t in w['trials']]}"):
                return
            stopped_run = w["trials"][1]["run_id"]
            # the sweep ends once it has decided; the stop lands when the script has gone
            run = s.wait_status(stopped_run, FINAL + ("stopped",), timeout=120) or {"status": None, "reason": None}
            check(run["status"] == "stopped" and "ASHA at rung 0" in (run["reason"] or ""),
                  f"its run reads stopped by the sweep's ASHA: {run['status']} {run['reason']}")
            open(os.path.join(root, "proj", "boost-0.1"), "w").close()
            r = s.post(f"/runs/{stopped_run}/resume")
            check(r.status in (200, 202), f"the stopped trial's run is resumed by hand: {r.status} {r.body[:300]!r}")
            w = wait_until(lambda: (lambda x: x if x and x["best"] and x["best"]["trial"] == 1 and x["status"] in FINAL
                                    else None)(sweep(s, sid)), "the sweep to count the resumed trial", 120, interval=0.1)
            check(w and w["status"] == "succeeded" and w["trials"][1]["status"] == "succeeded" and
                  w["best"]["metric"] == 0.99,
                  f"the finished sweep follows the trial resumed by hand, which ends its best: "
                  f"{w and (w['status'], w['best'], [t['status'] for t in w['trials']])}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- tpe_repeatable ----

def case_tpe_repeatable(a):
    root = work_root(FAST_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = fast_body("tpe", method="tpe", max_trials=9, parallel=1, tpe={"n_startup_trials": 3})
            runs = []
            for seed in (5, 5, 6):
                w = wait_sweep(s, submit(s, dict(body, seed=seed))["id"], timeout=400)
                if not check(w and w["status"] == "succeeded", f"the tpe sweep succeeds: {w and (w['status'], w['reason'])}"):
                    return
                runs.append([t["params"] for t in w["trials"]])
            check(runs[0] == runs[1], f"the same seed: the same 9 choices: {runs[0]} against {runs[1]}")
            check(runs[0] != runs[2], "another seed: other choices")
            for r in runs:
                check(len({json.dumps(p, sort_keys=True) for p in r}) == len(r), f"no configuration twice: {r}")
            r = s.post("/sweeps", dict(body, method="random", tpe={"n_startup_trials": 3}))
            problem(r, 400, ["/tpe", "tpe"], "tpe settings on a random search")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- asha_max_resource ----

# trial 0 good throughout; trial 1 as good at epoch 0, the worst at its last epoch (2),
# after which it lingers 5 s: a rung there would stop it before it exits
LATE_SCRIPT = ("import os, time, ddpd\n"
               "k = int(os.environ['K'])\n"
               "for e in range(3):\n"
               "    ddpd.log_epoch(e, val_acc=0.8 if k == 0 or e < 2 else 0.1)\n"
               "ddpd.flush()\n"
               "if k == 1:\n"
               "    time.sleep(5)\n")


def case_asha_max_resource(a):
    root = work_root(LATE_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "mr", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.K": {"values": [0, 1]}},
                    "metric": {"key": "val_acc", "goal": "maximize"},
                    "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 3, "max_resource": 3}}
            w = wait_sweep(s, submit(s, body)["id"])
            check(w and w["status"] == "succeeded" and [t["status"] for t in w["trials"]] == ["succeeded", "succeeded"],
                  f"with max_resource 3 no rung is at epoch 3: the trial worst at its last epoch finishes: "
                  f"{w and (w['status'], w['reason'], [(t['status'], t['reason']) for t in w['trials']])}")
            r = s.post("/sweeps", dict(body, early_stopping={"type": "asha", "min_resource": 3, "max_resource": 3}))
            problem(r, 400, ["/early_stopping/max_resource", "min_resource"], "a max_resource not above min_resource")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- conditional ----

def case_conditional(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        params = {"train.optimizer.type": {"values": ["sgd", "adam"]},
                  "train.optimizer.momentum": {"values": [0.5, 0.9], "when": {"train.optimizer.type": ["sgd"]}}}
        body = {"name": "cond", "parallel": 2,
                "base": fmnist_config(**{"name": "cond", "data.limit": 500, "data.test_limit": 200, "train.epochs": 1,
                                         "distributed.world_size": 1, "model.hidden": [16]}),
                "parameters": params, "metric": {"key": "test_loss"}}
        r = s.post("/sweeps", body)
        openapi_checker().response("POST", "/sweeps", r, "POST /sweeps with a conditional parameter")
        if not check(r.status == 201, f"a conditional sweep is taken: {r.status} {r.body[:500]!r}"):
            return
        sid = r.json()["id"]
        w = wait_sweep(s, sid, timeout=300)
        if not check(w and w["status"] == "succeeded", f"it succeeds: {w and (w['status'], w['reason'])}"):
            return
        got = [t["params"] for t in w["trials"]]
        check(got == [{"train.optimizer.type": "sgd", "train.optimizer.momentum": 0.5},
                      {"train.optimizer.type": "sgd", "train.optimizer.momentum": 0.9},
                      {"train.optimizer.type": "adam"}] and w["n_trials"] == 3,
              f"the grid: sgd with each momentum, adam once (no momentum): {got} n_trials {w['n_trials']}")
        for t in w["trials"]:
            opt = s.run(t["run_id"])["config"]["train"]["optimizer"]
            want = t["params"].get("train.optimizer.momentum", 0)
            check(opt["type"] == t["params"]["train.optimizer.type"] and opt["momentum"] == want,
                  f"trial {t['trial']}'s run config: {opt['type']} momentum {opt['momentum']} (want {want})")
        check(w["spec"]["parameters"]["train.optimizer.momentum"]["when"] == {"train.optimizer.type": ["sgd"]},
              f"the spec shows the condition: {w['spec']['parameters']}")
        # by hand: momentum with adam is refused, naming it
        r = s.post(f"/sweeps/{sid}/trials", {"params": {"train.optimizer.type": "adam", "train.optimizer.momentum": 0.9}})
        errs = r.json().get("errors", []) if r.status == 400 else []
        check(any(e["pointer"] == "/params/train.optimizer.momentum" and "does not apply" in e["message"] for e in errs),
              f"a trial by hand with momentum and adam: 400 at /params/train.optimizer.momentum: {r.status} {r.body[:500]!r}")
        # TPE: momentum exactly where sgd
        tbody = dict(body, name="ctpe", method="tpe", max_trials=8, seed=4, parallel=2,
                     tpe={"n_startup_trials": 3},
                     parameters=dict(params, **{"train.optimizer.momentum": {
                         "min": 0.1, "max": 0.95, "when": {"train.optimizer.type": ["sgd"]}},
                         "train.optimizer.lr": {"min": 0.0005, "max": 0.05, "log": True}}))
        w = wait_sweep(s, submit(s, tbody)["id"], timeout=500)
        if check(w and w["status"] == "succeeded" and len(w["trials"]) == 8,
                 f"the tpe sweep succeeds with 8 trials: {w and (w['status'], w['reason'], len(w['trials']))}"):
            bad = [t["params"] for t in w["trials"] if ("train.optimizer.momentum" in t["params"]) !=
                   (t["params"]["train.optimizer.type"] == "sgd")]
            check(not bad, f"every trial has momentum exactly when it is sgd: {bad}")
        # bad conditions: 400s at the field
        for when, ptr, words in (({"train.optimizer.kind": ["sgd"]}, "/parameters/train.optimizer.momentum/when/train.optimizer.kind",
                                  "no parameter of the sweep"),
                                 ({"train.optimizer.type": ["rmsprop"]}, "/parameters/train.optimizer.momentum/when/train.optimizer.type",
                                  "not one of train.optimizer.type's values")):
            bad = dict(body, parameters=dict(params, **{"train.optimizer.momentum": {"values": [0.5], "when": when}}))
            r = s.post("/sweeps", bad)
            errs = r.json().get("errors", []) if r.status == 400 else []
            check(any(e["pointer"] == ptr and words in e["message"] for e in errs),
                  f"a condition {when}: 400 at {ptr} naming {words!r}: {r.status} {r.body[:500]!r}")
        loop = dict(body, parameters={"train.optimizer.type": {"values": ["sgd", "adam"], "when": {"train.optimizer.momentum": [0.5]}},
                                      "train.optimizer.momentum": {"values": [0.5], "when": {"train.optimizer.type": ["sgd"]}}})
        r = s.post("/sweeps", loop)
        errs = r.json().get("errors", []) if r.status == 400 else []
        check(any(e["pointer"] == "/parameters/train.optimizer.type/when" and "loop" in e["message"] for e in errs),
              f"a loop of conditions: 400 at /parameters/train.optimizer.type/when: {r.status} {r.body[:500]!r}")
        check(len(s.get("/sweeps").json()["sweeps"]) == 2, "no refused sweep is stored")


# ---- follow ----

FOLLOW_SCRIPT = ("import os, time, ddpd\n"
                 "lr = float(os.environ['LR'])\n"
                 "for e in range(3):\n"
                 "    ddpd.log_epoch(e, val_acc=lr * (e + 1) / 3)\n"
                 "    ddpd.flush()\n"
                 "    if lr < 0.001:\n"
                 "        time.sleep(60)\n")


def case_follow(a):
    root = work_root(FOLLOW_SCRIPT)
    try:
        with command_server(a, root) as s:
            url = f"http://127.0.0.1:{s.port}"
            body = {"name": "fol", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.5, 0.2, 0.0001]}},
                    "metric": {"key": "val_acc", "goal": "maximize"},
                    "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 2, "max_resource": 3}}
            sid = submit(s, body)["id"]
            p = subprocess.run([a.ddpctl, "--server", url, "sweep", "follow", str(sid)],
                               capture_output=True, text=True, timeout=300)
            out = p.stdout
            lines = out.splitlines()
            w = sweep(s, sid)
            runs = [t["run_id"] for t in w["trials"]]
            check(p.returncode == 0 and w["status"] == "succeeded",
                  f"it follows until the sweep ends and exits 0 as it succeeded: {p.returncode} {w['status']} "
                  f"{out!r} {p.stderr!r}")
            want = [f"trial 0 (run {runs[0]}) started", f"trial 0 (run {runs[0]}) epoch 0: val_acc 0.1667",
                    f"trial 0 (run {runs[0]}) epoch 2: val_acc 0.5", f"trial 0 (run {runs[0]}) succeeded",
                    f"trial 2 (run {runs[2]}) stopped: stopped by sweep {sid}'s ASHA at rung 0",
                    f"sweep {sid} succeeded"]
            at = [next((i for i, line in enumerate(lines) if x in line), -1) for x in want]
            check(all(i >= 0 for i in at) and at == sorted(at),
                  f"each trial's start, reports, ASHA's stop and end, the best and the sweep's end, in order: "
                  f"{[x for x, i in zip(want, at) if i < 0]} missing; {out!r}")
            bests = [line for line in lines if "  best: " in line]
            check(bests and f"best: trial 0 (run {runs[0]}), val_acc 0.5, " in bests[-1] and
                  len(bests) == len(set(x.split("  ", 1)[1] for x in bests)),
                  f"the best (as the server names it when a trial reports or ends) is said each time it changes, "
                  f"not again; the last is trial 0 at 0.5: {bests}")
            # a finished sweep: said at once
            p = subprocess.run([a.ddpctl, "--server", url, "sweep", "follow", str(sid)],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0 and f"sweep {sid} has already succeeded" in p.stdout and "best: trial 0" in p.stdout,
                  f"a finished sweep's follow says how it ended, and its best: {p.returncode} {p.stdout!r}")
            # a canceled one: exits 5
            sid2 = submit(s, dict(body, name="fol2", parameters={"env.LR": {"values": [0.0001, 0.0002]}}))["id"]
            proc = subprocess.Popen([a.ddpctl, "--server", url, "sweep", "follow", str(sid2)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                head = proc.stdout.readline()  # it has read the sweep (running): it follows it live from here
                wait_until(lambda: (lambda w: w["trials"] and w["trials"][0]["metric"] is not None)(sweep(s, sid2)),
                           "the second sweep's first report", 120, interval=0.1)
                s.post(f"/sweeps/{sid2}/cancel")
                out, err = proc.communicate(timeout=120)
                out = head + out
            finally:
                if proc.poll() is None:
                    proc.kill()
            check(proc.returncode == 5 and "(running," in head and f"sweep {sid2} canceled" in out and "trial 0" in out,
                  f"a canceled sweep's follow ends with it, exit 5: {proc.returncode} {out!r} {err!r}")
            p = subprocess.run([a.ddpctl, "--server", url, "sweep", "follow", "999"], capture_output=True, text=True,
                               timeout=60)
            check(p.returncode != 0 and "999" in p.stderr, f"an unknown sweep: refused, naming it: {p.returncode} {p.stderr!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---- failed_best ----

FAILING_SCRIPT = ("import os, sys, ddpd\n"
                  "lr = float(os.environ['LR'])\n"
                  "ddpd.log_epoch(0, val_acc=lr)\n"
                  "ddpd.flush()\n"
                  "sys.exit(3)\n")


def case_failed_best(a):
    root = work_root(FAILING_SCRIPT)
    try:
        with command_server(a, root) as s:
            body = {"name": "fb", "parallel": 2,
                    "base": {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
                             "distributed": {"world_size": 1}},
                    "parameters": {"env.LR": {"values": [0.2, 0.7, 0.4]}},
                    "metric": {"key": "val_acc", "goal": "maximize"}}
            sid = submit(s, body)["id"]
            w = wait_sweep(s, sid, timeout=300)
            best = (w or {}).get("best") or {}
            check(w and w["status"] == "failed" and all(t["status"] == "failed" for t in w["trials"]) and
                  [t["metric"] for t in w["trials"]] == [0.2, 0.7, 0.4],
                  f"every trial fails, each with the value it reported: {w and (w['status'], w['trials'])}")
            check(best.get("trial") == 1 and best.get("metric") == 0.7 and best.get("last_reported") is True,
                  f"the failed sweep's best is trial 1 by its last reported val_acc, marked so: {best}")
            p = subprocess.run([a.ddpctl, "--server", f"http://127.0.0.1:{s.port}", "sweep", "show", str(sid)],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0 and "best: trial 1" in p.stdout and
                  "its last reported value: the trial failed before it finished" in p.stdout,
                  f"ddpctl sweep show says the best is a last reported value: {p.stdout!r} {p.stderr!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer")
    p.add_argument("--runner")
    p.add_argument("--ddpctl")
    main(CASES, p.parse_args())
