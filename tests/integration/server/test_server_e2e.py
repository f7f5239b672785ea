#!/usr/bin/env python3
"""End-to-end tests of ddpd with the real ddp-trainer on Fashion-MNIST (from
/usr/share/datasets), submitted over HTTP to a real server on a loopback port:
a 2-rank run that succeeds, cancel mid-run, a rank killed with SIGKILL, three runs on
two slots, the checkpoints listed being the ones on disk, and stale runs at start-up (a server killed mid-run: test_server_restart.py).

Usage: test_server_e2e.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import json, os, shutil, signal, sqlite3, subprocess, sys, tempfile, time

from ddpd_harness import (Server, check, cases_in, wait_until, args_for, main, fmnist_config, pids_under, DATA_ROOT,  # noqa: E402
                          needs_trainer)

# Long enough to act on mid-run (the full training set, many epochs), canceled or
# killed long before it ends.
LONG = {"data.limit": 0, "train.epochs": 50, "checkpoint.every_epochs": 0}


def wait_steps(s, run_id, n, timeout=120):
    def there():
        run = s.run(run_id)
        if run and run["status"] not in ("queued", "starting", "running"):
            return run  # ended early: the checks after will say so
        return run if run and (run["progress"]["global_step"] or 0) >= n else None
    return wait_until(there, f"run {run_id} to pass global step {n}", timeout)


def case_fmnist_two_ranks(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        cfg = fmnist_config(**{"train.lr_schedule": {"type": "step", "step_epochs": 1, "gamma": 0.5}})
        rid = s.submit(cfg)
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=240)
        if not check(run and run["status"] == "succeeded", f"the run succeeds: {run and run['status']} {run and run['reason']}"):
            s.dump_run_log(rid)
            return
        check(run["reason"] is None and run["exit_code"] == 0, f"no reason, exit 0: {run['reason']} {run['exit_code']}")
        check(sorted(run["devices"]) == ["cpu:0", "cpu:1"], f"two slots: {run['devices']}")
        p = run["progress"]
        per_epoch = -(-3000 // 128)  # each rank pads to a full last batch
        check(p["total_steps"] == 2 * per_epoch and p["global_step"] == p["total_steps"], f"progress: {p}")
        check(p["fraction"] == 1.0 and p["epochs"] == 2 and p["epoch"] == 1, f"progress: {p}")
        check(p["loss"] is not None and p["lr"] == 0.0005 and p["samples_per_s"] > 0, f"last step's values: {p}")
        for t in ("created_at", "started_at", "finished_at"):
            check(run[t] and run[t].endswith("Z"), f"{t}: {run[t]}")
        check(run["created_at"] <= run["started_at"] <= run["finished_at"], "times in order")

        m = s.get(f"/runs/{rid}/metrics?key=loss").json()
        steps = [pt[0] for pt in m["points"]]
        check(steps == list(range(1, p["total_steps"] + 1)), f"the loss series has one point per step: {steps[:5]}...{steps[-5:]} ({len(steps)})")
        check(all(isinstance(pt[1], float) and 0 < pt[1] < 10 for pt in m["points"]), "losses are numbers")
        check(m["points"][-1][1] < m["points"][0][1], f"the loss went down: {m['points'][0][1]} -> {m['points'][-1][1]}")
        d = s.get(f"/runs/{rid}/metrics?key=loss&max_points=9").json()
        check(len(d["points"]) <= 9 and d["points"][-1][0] == p["total_steps"], f"downsampled: {d['points']}")
        lr = s.get(f"/runs/{rid}/metrics?key=lr").json()["points"]
        check(len(lr) == p["total_steps"], "an lr point per step")

        epochs = s.get(f"/runs/{rid}/epochs").json()["epochs"]
        check([e["epoch"] for e in epochs] == [0, 1], f"two epochs: {epochs}")
        check([e["lr"] for e in epochs] == [0.001, 0.0005], f"the epochs carry the LR (x0.5 at epoch 1): {[e['lr'] for e in epochs]}")
        check(all(e["test_acc"] and 0.3 < e["test_acc"] <= 1 and e["train_loss"] and e["seconds"] for e in epochs),
              f"losses, accuracy, duration: {epochs}")
        ranks = s.get(f"/runs/{rid}/ranks").json()["ranks"]
        check([r["rank"] for r in ranks] == [0, 1], f"both ranks: {ranks}")
        check(all(r["state"] == "done" for r in ranks), f"both ranks reached done: {[r['state'] for r in ranks]}")
        check(all(r["pid"] and r["last_seen"] for r in ranks), "pids and last-seen times")
        check(len(run["checkpoints"]) == 2, f"a checkpoint per epoch: {run['checkpoints']}")

        log = s.get(f"/runs/{rid}/logs?tail=5").body.decode()
        check("run succeeded" in log, f"the log's tail: {log!r}")
        with open(os.path.join(s.run_dir(rid), "config.json")) as f:
            given = json.load(f)
        check(given["data"]["train"]["images"] == os.path.realpath(f"{DATA_ROOT}/fashion-mnist/train-images-idx3-ubyte.gz"),
              "the trainer read canonical paths")
        check(s.get("/runs?status=succeeded").json()["runs"][0]["id"] == rid, "listed as succeeded")
        check(not pids_under(s.run_dir(rid)), "no process left")

        # mode eval of the run's last checkpoint, named relative to the run directories
        ckpt = os.path.relpath(s.server_path(run["checkpoints"][-1]["path"]), os.path.realpath(os.path.join(s.state_dir, "runs")))
        ev = s.submit(fmnist_config(**{"name": "eval", "mode": "eval", "checkpoint.load": ckpt}))
        evrun = s.wait_status(ev, ("succeeded", "failed"), timeout=120)
        check(evrun and evrun["status"] == "succeeded", f"an eval run of {ckpt}: {evrun and evrun['reason']}")
        with open(os.path.join(s.run_dir(ev), "config.json")) as f:
            check(json.load(f)["checkpoint"]["load"] == os.path.realpath(s.server_path(run["checkpoints"][-1]["path"])),
                  "the trainer gets the checkpoint's absolute path")


def case_cancel_mid_run(a):
    with Server(a.ddpd, a.trainer, slots=2, grace=5) as s:
        rid = s.submit(fmnist_config(**LONG))
        run = wait_steps(s, rid, 5)
        check(run and run["status"] == "running", f"running: {run and run['status']}")
        check(pids_under(s.run_dir(rid)), "its processes are there")
        t0 = time.monotonic()
        r = s.post(f"/runs/{rid}/cancel")
        check(r.status == 202, f"cancel -> 202: {r.status} {r.body[:200]!r}")
        run = s.wait_status(rid, "canceled", timeout=30)
        took = time.monotonic() - t0
        check(took < 5, f"canceled within seconds ({took:.1f} s)")
        check(run and run["reason"] == "canceled by request", f"reason: {run and run['reason']}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "no process left", 10) is not None or not pids_under(s.run_dir(rid)),
              "no process of the run is left")
        check(s.get("/healthz").json()["devices"]["cpu"]["free"] == 2, "its slots are free again")
        check(run and run["progress"]["global_step"] < run["progress"]["total_steps"], "it stopped mid-run")


def case_rank_killed(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        victim = s.submit(fmnist_config(**LONG))
        waiting = s.submit(fmnist_config())
        run = wait_steps(s, victim, 3)
        check(run and run["status"] == "running", f"running: {run and run['status']}")
        check(s.run(waiting)["status"] == "queued", "the second run waits for the slots")
        ranks = s.get(f"/runs/{victim}/ranks").json()["ranks"]
        pid = next((r["pid"] for r in ranks if r["rank"] == 1), None)
        if not check(pid and str(s.run_dir(victim)) in open(f"/proc/{pid}/cmdline").read().replace("\0", " "),
                     f"rank 1's pid {pid} is a process of the run"):
            return
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        run = s.wait_status(victim, "failed", timeout=30)
        took = time.monotonic() - t0
        check(took < 10, f"failed within seconds ({took:.1f} s)")
        reason = (run and run["reason"]) or ""
        check("rank 1" in reason and ("signal 9" in reason or "SIGKILL" in reason or "Killed" in reason),
              f"the reason names the rank and the signal: {reason!r}")
        check(wait_until(lambda: not pids_under(s.run_dir(victim)), "the run's processes to be gone", 10) is not None,
              "no process of the run is left")
        nxt = s.wait_status(waiting, ("running", "succeeded"), timeout=60)
        check(nxt is not None, "the queued run starts on the freed slots")
        nxt = s.wait_status(waiting, "succeeded", timeout=240)
        check(nxt and sorted(nxt["devices"]) == ["cpu:0", "cpu:1"], "on the two freed slots")


def case_three_runs_two_slots(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        cfg = fmnist_config(**{"distributed.world_size": 1, "data.limit": 6000, "train.epochs": 3})
        ids = [s.submit(dict(cfg, name=f"r{i}")) for i in range(3)]
        samples = []
        def all_done():
            # one GET /runs is one read of the store: a consistent sample (three GETs
            # one after another could see a run end and the next start between them)
            listed = {r["id"]: r for r in s.get("/runs?limit=10").json()["runs"]}
            runs = [listed[i] for i in ids]
            samples.append([r["status"] for r in runs])
            return runs if all(r["status"] in ("succeeded", "failed", "canceled") for r in runs) else None
        runs = wait_until(all_done, "three runs to finish", timeout=300, interval=0.02)
        if not runs:
            return
        check(all(r["status"] == "succeeded" for r in runs), f"all succeed: {[(r['status'], r['reason']) for r in runs]}")
        active_max = max(sum(st in ("starting", "running", "canceling") for st in sample) for sample in samples)
        check(active_max <= 2, f"never more than two active at once (seen {active_max})")
        check(any(sample.count("queued") == 1 for sample in samples), "the third was seen waiting")
        # no device was ever given to two runs at once: compare the intervals
        spans = [(r["started_at"], r["finished_at"], r["devices"][0], r["id"]) for r in runs]
        for i in range(3):
            for j in range(i + 1, 3):
                a_, b_ = spans[i], spans[j]
                if a_[2] == b_[2]:
                    check(a_[1] <= b_[0] or b_[1] <= a_[0], f"{a_[2]} was never shared: runs {a_[3]} and {b_[3]}")
        first_two_end = min(spans[0][1], spans[1][1])
        third = spans[2]
        check(third[0] >= first_two_end, f"the third started ({third[0]}) only after a slot freed ({first_two_end})")
        from datetime import datetime
        ms = lambda t: datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
        check(ms(third[0]) - ms(first_two_end) < 1.0, f"and at once: {ms(third[0]) - ms(first_two_end):.3f} s later")


def case_stale_running(a):
    first = Server(a.ddpd, a.fake_trainer, state_dir=tempfile.mkdtemp(prefix="ddpd-test-"))
    with first:
        pass  # creates the database
    dead = subprocess.Popen(["true"])
    dead.wait()
    db = sqlite3.connect(os.path.join(first.state_dir, "ddpd.db"))
    now = int(time.time() * 1000)
    rows = [("running", dead.pid), ("starting", None), ("canceling", dead.pid)]
    ids = []
    for status, pid in rows:
        cur = db.execute("INSERT INTO runs (name, status, config, world_size, device_kind, pid, created_at, started_at)"
                         " VALUES ('stale', ?, '{}', 1, 'cpu', ?, ?, ?)", (status, pid, now - 5000, now - 4000))
        ids.append(cur.lastrowid)
    db.commit()
    db.close()
    with Server(a.ddpd, a.trainer or a.fake_trainer, state_dir=first.state_dir) as s:
        run = s.run(ids[0])
        gone = ("the server restarted and the run's processes were gone; its journal has no step and no end event;"
                " failure: infra")  # its class (docs/failures.md)
        check(run["status"] == "failed" and run["reason"] == gone, f"a stale running run: {run['status']}: {run['reason']}")
        check(run["finished_at"] is not None, "with a finish time")
        run = s.run(ids[1])
        check(run["status"] == "failed" and run["reason"] == gone,
              f"a stale starting run: {run['status']}: {run['reason']}")
        run = s.run(ids[2])
        check(run["status"] == "canceled" and "being canceled" in run["reason"], f"a stale canceling run: {run['reason']}")
        check(s.get("/runs?status=running,starting,canceling").json()["runs"] == [], "nothing stays active")
    shutil.rmtree(first.state_dir, ignore_errors=True)


def case_checkpoints_kept(a):
    """Without any restart: with keep 2, the API lists the two checkpoints on disk, not
    the ones keep deleted."""
    with Server(a.ddpd, a.trainer, slots=2) as s:
        rid = s.submit(fmnist_config(**{"train.epochs": 4, "checkpoint.every_epochs": 1, "checkpoint.keep": 2}))
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=240)
        if not check(run and run["status"] == "succeeded", f"the run succeeds: {run and run['status']}"):
            return
        listed = [(c["epoch"], os.path.basename(c["path"])) for c in run["checkpoints"]]
        check(listed == [(2, "epoch-0002.safetensors"), (3, "epoch-0003.safetensors")], f"the newest two: {listed}")
        check(all(os.path.exists(s.server_path(c["path"])) for c in run["checkpoints"]), "each listed one is on disk")


CASES = cases_in(globals())

if __name__ == "__main__":
    args = args_for(CASES)
    if args.case != "stale_running":
        needs_trainer(args)
    main(CASES, args)
