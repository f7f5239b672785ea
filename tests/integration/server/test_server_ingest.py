#!/usr/bin/env python3
"""Integration tests of ddpd's event socket and supervision, with a scripted trainer
(fake_trainer.py) doing what the real one will not do on demand: a hello with the
wrong secret, malformed lines, a planted loss spike, chosen exit statuses, ignoring
SIGTERM. A real server on a loopback port, a real socket, real processes.

Usage: test_server_ingest.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import json, os, signal, sqlite3, sys, time

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, pids_under  # noqa: E402
from sse_client import Stream  # noqa: E402


def steps_of(s, run_id, query=""):
    r = s.get(f"/runs/{run_id}/metrics?key=loss{query}")
    check(r.status == 200, f"metrics: {r.status} {r.body[:200]!r}")
    return r.json()


def case_secret_and_malformed(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        bad = s.submit({"name": "badsecret"})
        run = s.wait_status(bad, "succeeded", timeout=60)
        m = steps_of(s, bad)
        check([p[0] for p in m["points"]] == [1, 2, 3],
              f"only the authenticated connection's steps are stored: {[p[0] for p in m['points']]}")
        health = s.get("/healthz").json()["ingest"]
        check(health["dropped_connections"] >= 4,
              f"wrong secret, no hello, no secret, other run: 4 connections dropped: {health}")

        mal = s.submit({"name": "malformed"})
        run = s.wait_status(mal, "succeeded", timeout=60)
        m = steps_of(s, mal)
        check([p[0] for p in m["points"]] == [1, 2, 3, 4, 5],
              f"every good line survives the malformed ones around it: {[p[0] for p in m['points']]}")
        check(run["progress"]["global_step"] == 5 and run["progress"]["fraction"] == 1.0, f"progress: {run['progress']}")
        after = s.get("/healthz").json()["ingest"]
        check(after["malformed"] - health["malformed"] >= 8, f"the malformed lines were counted: {after}")
        check(after["dropped_connections"] == health["dropped_connections"],
              "malformed lines do not drop the connection")
        with open(s.log_path) as f:
            log = f.read()
        check("not JSON" in log and "line skipped" in log, "malformed lines are logged")
        check("wrong secret" in log, "the wrong secret is logged")


def case_downsampling(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        rid = s.submit({"name": "spike", "distributed": {"world_size": 2}, "train": {"batch_size": 128}})
        run = s.wait_status(rid, "succeeded", timeout=120)
        full = steps_of(s, rid)
        check(full["count"] == 5000 and len(full["points"]) == 5000 and not full["downsampled"],
              f"without max_points: every step, {full['count']} / {len(full['points'])}")
        check([p[0] for p in full["points"]] == list(range(1, 5001)), "one point per step, in order")
        for n in (3, 10, 100, 999):
            d = steps_of(s, rid, f"&max_points={n}")
            pts = d["points"]
            check(len(pts) <= n and d["downsampled"] and d["count"] == 5000, f"max_points={n}: {len(pts)} points")
            check([3217, 99.0] in [p[:2] for p in pts], f"max_points={n}: the spike at step 3217 survives")
            check(pts[-1][0] == 5000, f"max_points={n}: the last point is kept: {pts[-1]}")
            check(all(pts[i][0] < pts[i + 1][0] for i in range(len(pts) - 1)), f"max_points={n}: ascending")
            check(pts[0][0] == 1 or n < 5, f"max_points={n}: the first bucket's extreme (step 1 here): {pts[0]}")
        tail = steps_of(s, rid, "&after=4990")
        check([p[0] for p in tail["points"]] == list(range(4991, 5001)), f"after=4990: {[p[0] for p in tail['points']]}")
        lr = s.get(f"/runs/{rid}/metrics?key=lr&max_points=50").json()
        check(lr["key"] == "lr" and len(lr["points"]) <= 50 and {p[1] for p in lr["points"]} == {0.001, 0.0005},
              f"the lr series: {set(p[1] for p in lr['points'])}")
        sps = s.get(f"/runs/{rid}/metrics?key=samples_per_s").json()
        check(sps["points"][-1][1] == 6000.0, f"samples_per_s: {sps['points'][-1]}")
        epochs = s.get(f"/runs/{rid}/epochs").json()["epochs"]
        check([(e["epoch"], e["lr"]) for e in epochs] == [(0, 0.001), (1, 0.0005)], f"epochs carry the lr: {epochs}")
        ranks = s.get(f"/runs/{rid}/ranks").json()["ranks"]
        check([r["rank"] for r in ranks] == [0, 1] and all(r["state"] == "done" for r in ranks), f"ranks: {ranks}")
        check(all(r["step_ms"] == 1.5 and r["global_step"] == 5000 for r in ranks), f"heartbeats stored: {ranks}")
        check(len(run["checkpoints"]) == 2 and run["checkpoints"][1]["bytes"] == 1001, f"checkpoints: {run['checkpoints']}")
        p = run["progress"]
        check(p["total_steps"] == 5000 and p["global_step"] == 5000 and p["epochs"] == 2 and p["epoch"] == 1,
              f"progress: {p}")


def case_gpu_ranks(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        live = Stream(s.port, "/events")
        rid = s.submit({"name": "gpu", "distributed": {"world_size": 2}, "train": {"batch_size": 128}})
        s.wait_status(rid, "succeeded", timeout=60)
        # the live heartbeats carry the GPU's memory too (the newest per rank is sent)
        beats = {}

        def both_ranks(e):
            if e.event == "heartbeat" and e.data and e.data.get("run") == rid:
                beats[e.data["rank"]] = e.data
            return len(beats) == 2
        live.events_until(both_ranks, timeout=20)
        live.close()
        for r in (0, 1):
            hb = beats.get(r, {})
            check(hb.get("gpu_mem_total_bytes") == 150 * 2**30 and (hb.get("gpu_mem_used_bytes") or 0) > r * 2**30,
                  f"rank {r}'s live heartbeat has its GPU's memory: {hb}")
        ranks = {r["rank"]: r for r in s.get(f"/runs/{rid}/ranks").json()["ranks"]}
        for r in (0, 1):
            gpu = ranks[r]["gpu"]
            check(gpu == {"index": r + 4, "name": "NVIDIA H200", "memory_used_bytes": (r + 1) * 2**30 + 1,
                          "memory_total_bytes": 150 * 2**30}, f"rank {r}'s GPU, with its latest heartbeat: {gpu}")
        cpu = s.submit({"name": "steps-4"})
        s.wait_status(cpu, "succeeded", timeout=60)
        ranks = s.get(f"/runs/{cpu}/ranks").json()["ranks"]
        check(len(ranks) >= 1 and all(r["gpu"] is None for r in ranks), f"a CPU rank has no GPU: {ranks}")


def case_exit_reasons(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        expect = {
            "exit2": ("failed", ["/train/epochs: must be at least 1"], 2),
            "exit1-end": ("failed", ["rank 1 exited with signal 9 (Killed) at epoch 0 step 12"], 1),
            "exit1-noend": ("failed", ["exited with status 1", "something broke in a way nobody planned"], 1),
            "killself": ("failed", ["killed by signal 9"], None),
        }
        ids = {name: s.submit({"name": name}) for name in expect}
        for name, (status, words, code) in expect.items():
            run = s.wait_status(ids[name], status, timeout=60)
            if not run:
                continue
            check(all(w in (run["reason"] or "") for w in words), f"{name}: the reason {run['reason']!r} says {words}")
            check(run["exit_code"] == code, f"{name}: exit code {run['exit_code']}")
            check(run["finished_at"] is not None, f"{name}: finished_at")
        run = s.run(ids["killself"])
        check(run["exit_signal"] == 9, f"killself: exit_signal {run['exit_signal']}")
        missing = Server(a.ddpd, "/nonexistent/ddp-trainer")
        with missing as m:
            rid = m.submit({"name": "x"})
            run = m.wait_status(rid, "failed", timeout=30)
            check(run and "cannot start ddp-trainer" in run["reason"] and "/nonexistent" not in run["reason"]
                  and "No such file" in run["reason"],
                  f"a missing trainer: {run and run['reason']}")
            check(m.get("/healthz").json()["devices"]["cpu"]["free"] == 2, "its slot is free again")


def case_cancel_and_grace(a):
    with Server(a.ddpd, a.fake_trainer, slots=2, grace=3) as s:
        polite = s.submit({"name": "sleep"})
        s.wait_status(polite, "running", timeout=30)
        t0 = time.monotonic()
        r = s.post(f"/runs/{polite}/cancel")
        check(r.status == 202 and r.json()["status"] in ("canceling", "canceled"), f"cancel -> 202: {r.status} {r.body[:200]!r}")
        run = s.wait_status(polite, "canceled", timeout=20)
        check(time.monotonic() - t0 < 2.5, f"a trainer that obeys SIGTERM is canceled at once ({time.monotonic() - t0:.1f} s)")
        check(run and run["reason"] == "canceled by request", f"reason: {run and run['reason']}")
        check(not pids_under(s.run_dir(polite)), "no process left")
        r = s.post(f"/runs/{polite}/cancel")
        check(r.status == 409 and "already finished" in r.json()["detail"], f"cancel a finished run -> 409: {r.body!r}")

        stubborn = s.submit({"name": "ignore-term"})
        s.wait_status(stubborn, "running", timeout=30)
        t0 = time.monotonic()
        check(s.post(f"/runs/{stubborn}/cancel").status == 202, "cancel the stubborn one")
        time.sleep(1.0)
        check(s.run(stubborn)["status"] == "canceling", "still canceling within the grace period")
        check(s.post(f"/runs/{stubborn}/cancel").status == 202, "cancel again is fine")
        run = s.wait_status(stubborn, "canceled", timeout=20)
        took = time.monotonic() - t0
        check(2.5 <= took < 10, f"SIGKILL after the 3 s grace period ({took:.1f} s)")
        check(run and run["exit_signal"] == 9, f"it was killed: {run and run['exit_signal']}")
        check(not pids_under(s.run_dir(stubborn)), "no process left")

        # a queued run is canceled at once, and never starts
        blockers = [s.submit({"name": "sleep"}) for _ in range(2)]
        for b in blockers:
            s.wait_status(b, "running", timeout=30)
        queued = s.submit({"name": "steps-5"})
        check(s.run(queued)["status"] == "queued" and s.run(queued)["queue_position"] == 1, "queued behind the two")
        r = s.post(f"/runs/{queued}/cancel")
        check(r.status == 202 and r.json()["status"] == "canceled", f"a queued run is canceled at once: {r.body[:200]!r}")
        check(s.run(queued)["reason"] == "canceled by request", f"its reason: {s.run(queued)['reason']}")
        check(s.run(queued)["started_at"] is None, "it never started")
        for b in blockers:
            s.post(f"/runs/{b}/cancel")
            s.wait_status(b, "canceled", timeout=20)
        check(s.get("/healthz").json()["devices"]["cpu"]["free"] == 2, "every slot is free again")


def case_shutdown(a):
    s = Server(a.ddpd, a.fake_trainer, slots=1, grace=3)
    with s:
        active = s.submit({"name": "sleep"})
        s.wait_status(active, "running", timeout=30)
        waiting = s.submit({"name": "steps-5"})
        check(s.run(waiting)["status"] == "queued", "the second waits for the slot")
        t0 = time.monotonic()
        rc = s.stop()
        check(rc == 0, f"ddpd exits 0 on SIGTERM: {rc}")
        check(time.monotonic() - t0 < 10, "and promptly")
        check(not pids_under(s.run_dir(active)), "the active run's processes are gone")
        with open(s.log_path) as f:
            check("canceling 1 active run" in f.read(), "the shutdown is logged")
        # the next server sees what the first left: the active run canceled, the queued one runs
        s2 = Server(a.ddpd, a.fake_trainer, slots=1, state_dir=s.state_dir)
        with s2:
            run = s2.run(active)
            check(run["status"] == "canceled" and run["reason"] == "the server shut down", f"active run: {run['status']} {run['reason']}")
            s2.wait_status(waiting, "succeeded", timeout=60)


def case_queue_order(a):
    # no backfill window: strict first come first served per pool (the window's own
    # case is in test_server_sharing.py)
    with Server(a.ddpd, a.fake_trainer, slots=2, extra_args=["--backfill-window", "0"]) as s:
        small = s.submit({"name": "sleep"})
        s.wait_status(small, "running", timeout=30)
        big = s.submit({"name": "sleep", "distributed": {"world_size": 2}})
        behind = s.submit({"name": "sleep"})
        time.sleep(1.0)
        check(s.run(big)["status"] == "queued", "the 2-slot run waits: one slot is taken")
        check(s.run(behind)["status"] == "queued", "FIFO: a 1-slot run does not overtake the 2-slot run at the head")
        check(s.run(big)["queue_position"] == 1 and s.run(behind)["queue_position"] == 2, "queue positions 1 and 2")
        s.post(f"/runs/{small}/cancel")
        run = s.wait_status(big, "running", timeout=30)
        check(run and sorted(run["devices"]) == ["cpu:0", "cpu:1"], f"the big run got both slots: {run and run['devices']}")
        time.sleep(0.5)
        check(s.run(behind)["status"] == "queued", "the third still waits")
        s.post(f"/runs/{big}/cancel")
        run = s.wait_status(behind, "running", timeout=30)
        check(run and len(run["devices"]) == 1, "then the third starts")
        s.post(f"/runs/{behind}/cancel")
        s.wait_status(behind, "canceled", timeout=30)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
