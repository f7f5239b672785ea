#!/usr/bin/env python3
"""Elastic built-in runs, end to end: a real ddpd on a loopback port with 4 CPU slots,
real users, the real ddp-trainer on a few thousand Fashion-MNIST examples.

  shrink_and_grow       a preemptible run of width 4 (distributed.min_world_size 2) on
                        4 slots; a run of a higher priority that needs 2 arrives: the
                        elastic run is shrunk to 2 ranks and keeps going (never
                        preempted whole: preemptions 0, its sizes say why and for
                        whom), the other runs beside it and succeeds, the elastic run
                        grows back to 4, and it ends with the losses and the final
                        checkpoint (sha256) of the same config never interrupted. A
                        resize is no attempt: GET /runs/{id}'s attempts and ddpctl show
                        hold one attempt, running while it runs at each size (never
                        "resized"), then succeeded, and its sizes hold the resizes. A
                        connection of its first start (said hello with that start's
                        secret) kept open past the shrink forges the old launcher's late
                        attempt end and end: both are refused as an earlier start's, and
                        the attempt still runs
  not_elastic_evicted   the same run without min_world_size is preempted whole, as
                        before: queued again with preempted_by, no size history
  hostile_resize        another user cannot change a run's size: there is no route
                        that resizes (POST/PATCH answer 404/405, the run unchanged),
                        and a run of hers of the same priority shrinks nothing
  start_narrow          2 of the 4 slots held by another run: the elastic run starts at
                        once on the 2 free (ranks_now 2, no pending reason) rather than
                        waiting, grows to 4 when the other run ends, and ends with the
                        losses and the final checkpoint of the uninterrupted run
  restart_mid_resize    the server is killed while the elastic run's shrink is under way
                        (its launcher stopped, SIGSTOP, so it cannot end first): the next
                        server asks it again and starts it on 2 ranks; that server is
                        killed while the run is shrunk: the third takes it back on 2 ranks
                        (ranks_now, sizes), grows it back to 4 once the urgent run ends,
                        and it ends with the uninterrupted run's bytes

Usage: test_server_elastic.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import hashlib, json, os, signal, socket, sqlite3, subprocess, time

from ddpd_harness import (check, cases_in, wait_until, args_for, main, fmnist_config, needs_trainer,  # noqa: E402
                          bearer)
from test_server_sharing import Box as SharingBox  # noqa: E402

FINAL = ("succeeded", "failed", "canceled", "stopped", "timeout")


class Box(SharingBox):
    """test_server_sharing's box (a state directory of its own, users made before the
    server starts), whose server has 4 slots, the real trainer, and grows a shrunk run
    back within a second."""

    def server(self, **kw):
        return super().server(trainer=self.a.trainer, slots=4, extra_args=["--elastic-grow-interval", "1"], **kw)


def submit_as(s, token, cfg):
    r = s.post("/runs", cfg, headers=bearer(token))
    check(r.status == 201, f"POST /runs as a user -> 201: {r.status} {r.body[:300]!r}")
    return r.json()["id"] if r.status == 201 else None


PER_EPOCH = 188  # steps of an epoch: 3000 examples, a batch of 16
EPOCHS = 4


def elastic_config(**over):
    """Width 4, 4 epochs of 188 steps, slow enough that a shrink and a grow land within it."""
    return fmnist_config(**dict({"model.hidden": [512, 256], "train.epochs": EPOCHS, "train.batch_size": 16,
                                 "checkpoint.every_epochs": 1, "checkpoint.keep": 5, "preemptible": True,
                                 "distributed.world_size": 4, "distributed.min_world_size": 2}, **over))


def losses(s, rid):
    return [(p[0], p[1]) for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def final_checkpoint(s, rid, epochs=EPOCHS):
    return os.path.join(s.run_dir(rid), "checkpoints", f"epoch-{epochs - 1:04d}.safetensors")


def attempts(s, rid):
    return [(x["attempt"], x["status"], x["ended_at"], x["reason"]) for x in s.run(rid)["attempts"]]


def ddpctl_show(a, s, token, rid, what):
    """ddpctl show's output (printed), and its attempts table's rows: [(attempt, status)]."""
    ddpctl = os.path.join(os.path.dirname(a.ddpd), "ddpctl")
    p = subprocess.run([ddpctl, "--server", f"http://127.0.0.1:{s.port}", "--token", token, "show", str(rid)],
                       capture_output=True, text=True, timeout=30)
    print(f"ddpctl show {rid} ({what}):\n{p.stdout}")
    check(p.returncode == 0, f"ddpctl show {rid} ({what}) -> 0: {p.returncode} {p.stderr!r}")
    lines = p.stdout.splitlines()
    head = next((i for i, line in enumerate(lines) if line.split()[:2] == ["ATTEMPT", "STARTED"]), None)
    rows = []
    for line in lines[head + 1:] if head is not None else []:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        rows.append((int(cells[0]), cells[4]))  # ATTEMPT, STARTED (date, time), DURATION, STATUS
    return p.stdout, rows


def launcher_secret(s, rid):
    """The secret of the run's start now (its launcher blanks it in its environment):
    read from the server's database, as someone who can read the state directory can."""
    db = sqlite3.connect(f"file:{os.path.join(s.state_dir, 'ddpd.db')}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT secret FROM runs WHERE id = ?", (rid,)).fetchone()
    finally:
        db.close()
    check(row and row[0], f"run {rid}'s secret is in the database: {row}")
    return row[0] if row else ""


class Forger:
    """A connection to the event socket that says hello with a start's secret, as its
    launcher (rank -1), and later sends what that launcher would say late."""

    def __init__(self, s, rid, secret):
        self.rid, self.seq = str(rid), 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(os.path.join(s.state_dir, "events.sock"))
        self.send({"type": "hello", "rank": -1, "secret": secret, "pid": os.getpid(), "host": "forger",
                   "device": "cpu", "world_size": 4})

    def send(self, ev):
        ev = dict({"run": self.rid, "rank": -1, "seq": self.seq, "t": int(time.time() * 1000)}, **ev)
        self.seq += 1
        self.sock.sendall(json.dumps(ev).encode() + b"\n")

    def close(self):
        self.sock.close()


def case_shrink_and_grow(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        # 16 epochs: on a quiet machine the 4 take about a second after the shrink, less
        # than the urgent run and the grow interval take, and the run ended before it grew
        long_epochs = 16
        # max_restarts 1: ddpctl show prints the attempts (it does not for one attempt of none)
        cfg = elastic_config(**{"train.epochs": long_epochs, "distributed.max_restarts": 1})
        with box.server() as s:
            ref = submit_as(s, alice, cfg)
            run = s.wait_status(ref, FINAL, timeout=600)
            check(run and run["status"] == "succeeded", f"the uninterrupted run succeeds: {run and run['reason']}")
            check(run and run["sizes"] == [] and run["ranks_now"] is None,
                  f"it was never resized: {run and (run['sizes'], run['ranks_now'])}")
            ref_losses, ref_sha = losses(s, ref), sha(final_checkpoint(s, ref, long_epochs))
            print(f"uninterrupted width 4 on 4 ranks: sha256 {ref_sha}")

            rid = submit_as(s, alice, cfg)
            s.wait_status(rid, "running", timeout=60)
            check(s.run(rid)["ranks_now"] == 4, f"it starts on 4 ranks: {s.run(rid)['ranks_now']}")
            wait_until(lambda: (s.run(rid)["progress"]["global_step"] or 0) >= PER_EPOCH // 2,
                       "the elastic run into its first epoch", timeout=180)
            check([x[:3] for x in attempts(s, rid)] == [(0, None, None)],
                  f"on 4 ranks: one attempt, running: {attempts(s, rid)}")
            # a connection of this first start, as its launcher, kept open past the shrink
            forger = Forger(s, rid, launcher_secret(s, rid))
            # the urgent run trains a while (376 steps on 2 ranks) beside the shrunk one
            urgent = submit_as(s, root, fmnist_config(**{"priority": 10, "train.epochs": 2, "train.batch_size": 16}))
            wait_until(lambda: s.run(rid)["ranks_now"] == 2 and s.run(rid)["status"] == "running",
                       "the elastic run running again on 2 ranks", timeout=120)
            run = s.run(rid)
            shrink = run["sizes"][0] if run["sizes"] else {}
            check(len(run["sizes"]) == 1 and shrink.get("from") == 4 and shrink.get("to") == 2 and
                  shrink.get("why") == "shrink" and shrink.get("for_run") == urgent and shrink.get("at"),
                  f"its sizes say it was shrunk from 4 to 2 for run {urgent}: {run['sizes']}")
            check(run["preemptions"] == 0 and run["preempted_by"] is None,
                  f"a shrink is no preemption: {run['preemptions']}, {run['preempted_by']}")
            check(run["world_size"] == 4 if "world_size" in run else run["config"]["distributed"]["world_size"] == 4,
                  "its width stays 4")
            # (it may have grown back already: on a quiet machine the urgent run is short)
            check(attempts(s, rid) == [(0, None, None, None)] and s.run(rid)["restart_count"] == 0,
                  f"shrunk to 2 ranks: the same attempt 0, running (a resize is no attempt): {attempts(s, rid)}, "
                  f"restart count {s.run(rid)['restart_count']}")
            out, rows = ddpctl_show(a, s, alice, rid, "shrunk, running on 2 ranks")
            check(rows == [(0, "running")] and "shrunk from 4 to 2 ranks" in out,
                  f"ddpctl show: attempt 0 running, and the shrink in its sizes: {rows}")
            # the first start's launcher, late: its attempt failed, and its end
            forger.send({"type": "attempt", "phase": "ended", "attempt": 0, "status": "failed",
                         "reason": "forged late end of the first start", "failing_rank": 0, "exit_code": 1})
            forger.send({"type": "end", "status": "failed", "reason": "forged late end of the first start"})
            said = lambda what: f"event socket: {what} for run {rid} from an earlier start of it" in open(s.log_path).read()  # noqa: E731
            ok = wait_until(lambda: said("an attempt event") and said("an end event"),
                            "the forged late events refused as an earlier start's", timeout=60)
            forger.close()
            check(ok, "the server refused both forged late events as an earlier start's")
            check(attempts(s, rid) == [(0, None, None, None)] and s.run(rid)["status"] == "running",
                  f"after the forged late end: attempt 0 still runs: {attempts(s, rid)} {s.run(rid)['status']}")
            u = s.wait_status(urgent, ("running", "succeeded"), timeout=120)
            check(u and u["status"] in ("running", "succeeded"), f"the urgent run runs beside it: {u and u['status']}")
            u = s.wait_status(urgent, FINAL, timeout=300)
            check(u and u["status"] == "succeeded", f"the urgent run succeeds: {u and u['reason']}")
            wait_until(lambda: s.run(rid)["ranks_now"] == 4 or s.run(rid)["status"] in FINAL,
                       "the elastic run grown back to 4 ranks", timeout=120)
            run = s.run(rid)
            if run["status"] == "running":
                check(attempts(s, rid) == [(0, None, None, None)],
                      f"grown back to 4 ranks: still attempt 0, running: {attempts(s, rid)}")
            grow = run["sizes"][1] if len(run["sizes"]) > 1 else {}
            check(grow.get("from") == 2 and grow.get("to") == 4 and grow.get("why") == "grow" and
                  grow.get("for_run") is None, f"then grown from 2 to 4: {run['sizes']}")
            check((grow.get("from_global_step") or 0) >= (shrink.get("from_global_step") or 0) > 0,
                  f"it went on from where it was shrunk: global step {shrink.get('from_global_step')} at the shrink, "
                  f"{grow.get('from_global_step')} at the grow")
            print(f"shrunk at global step {shrink.get('from_global_step')}, grown at {grow.get('from_global_step')}")
            done = s.wait_status(rid, FINAL, timeout=600)
            check(done and done["status"] == "succeeded", f"the elastic run succeeds: {done and done['reason']}")
            got_attempts = attempts(s, rid)
            check(len(got_attempts) == 1 and got_attempts[0][:2] == (0, "succeeded") and got_attempts[0][2] and
                  s.run(rid)["restart_count"] == 0 and len(s.run(rid)["sizes"]) == 2,
                  f"ended: one attempt, succeeded; two resizes in its sizes: {got_attempts} {s.run(rid)['sizes']}")
            out, rows = ddpctl_show(a, s, alice, rid, "ended")
            check(rows == [(0, "succeeded")] and "shrunk from 4 to 2 ranks" in out and "grown from 2 to 4 ranks" in out
                  and "resized to" not in out, f"ddpctl show: attempt 0 succeeded, the shrink and the grow: {rows}")
            got = losses(s, rid)
            check(got == ref_losses, f"every step's loss is the uninterrupted run's ({len(got)} points, "
                  f"{len(ref_losses)} wanted)")
            got_sha = sha(final_checkpoint(s, rid, long_epochs))
            check(got_sha == ref_sha, f"its final checkpoint is the uninterrupted run's, byte for byte: {got_sha} vs {ref_sha}")
            print(f"shrunk 4 -> 2, grown 2 -> 4: sha256 {got_sha}")
            timeline = [e["kind"] for e in s.get(f"/runs/{rid}/timeline").json()["entries"]]
            check(timeline.count("resized") == 2 and "preempted" not in timeline and "restarted" not in timeline,
                  f"its timeline: two resizes, no preemption, no restart: {timeline}")
            log = open(s.log_path).read()
            check(f"run {rid}: shrunk from 4 to 2 ranks for run {urgent}" in log, "the server's log says so")
            with open(os.path.join(s.run_dir(rid), "trainer.log"), errors="replace") as f:
                trainer_log = f.read()
            check("4 batch shards on 2 ranks" in trainer_log,
                  "its trainer was started on 2 processes for its 4 batch shards (ddp-trainer --ranks 2)")


def case_not_elastic_evicted(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        with box.server() as s:
            rid = submit_as(s, alice, elastic_config(**{"distributed.min_world_size": 0}))
            s.wait_status(rid, "running", timeout=60)
            wait_until(lambda: (s.run(rid)["progress"]["global_step"] or 0) >= 10, "the run training", timeout=180)
            urgent = submit_as(s, root, fmnist_config(**{"priority": 10, "train.epochs": 1, "data.limit": 1000}))
            run = s.wait_status(rid, "queued", timeout=120)
            check(run and run["preempted_by"] == urgent and run["preemptions"] == 1,
                  f"it is preempted whole, as before: {run and (run['preempted_by'], run['preemptions'])}")
            check(run and run["sizes"] == [] and run["ranks_now"] is None,
                  f"no size history, and no ranks while queued: {run and (run['sizes'], run['ranks_now'])}")
            s.post(f"/runs/{rid}/cancel", {}, headers=bearer(alice))
            s.wait_status(urgent, FINAL, timeout=300)


def case_hostile_resize(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, mallory = box.add("alice"), box.add("mallory")
        with box.server() as s:
            rid = submit_as(s, alice, elastic_config(**{"train.epochs": 1}))
            s.wait_status(rid, "running", timeout=60)
            for method, path in (("POST", f"/runs/{rid}/resize"), ("POST", f"/runs/{rid}/size"),
                                 ("PATCH", f"/runs/{rid}")):
                r = s.request(method, path, {"ranks": 2}, headers=bearer(mallory))
                check(r.status in (404, 405), f"{method} {path} as another user: no such route ({r.status})")
            # a run of hers of the same priority as alice's shrinks nothing: it waits
            other = submit_as(s, mallory, fmnist_config(**{"train.epochs": 1, "data.limit": 1000}))
            q = s.wait_status(other, ("queued",), timeout=30)
            check(q and q["pending"] and q["pending"]["reason"] == "devices",
                  f"mallory's run waits for devices: {q and q['pending']}")
            run = s.run(rid)
            check(run["ranks_now"] == 4 and run["sizes"] == [], f"alice's run keeps its 4 ranks: {run['ranks_now']}, "
                  f"{run['sizes']}")
            s.post(f"/runs/{other}/cancel", {}, headers=bearer(mallory))
            done = s.wait_status(rid, FINAL, timeout=600)
            check(done and done["status"] == "succeeded" and done["sizes"] == [],
                  f"and ends unresized: {done and (done['status'], done['sizes'])}")


def reference(s, token, cfg, epochs=EPOCHS):
    """The config run uninterrupted on 4 ranks: its losses and its final checkpoint's sha256."""
    ref = submit_as(s, token, cfg)
    run = s.wait_status(ref, FINAL, timeout=600)
    check(run and run["status"] == "succeeded", f"the uninterrupted run succeeds: {run and run['reason']}")
    return losses(s, ref), sha(final_checkpoint(s, ref, epochs))


def same_as_reference(s, rid, ref_losses, ref_sha, what, epochs=EPOCHS):
    done = s.wait_status(rid, FINAL, timeout=600)
    check(done and done["status"] == "succeeded" and done["preemptions"] == 0,
          f"{what} succeeds, never preempted: {done and (done['status'], done['reason'], done['preemptions'])}")
    got = losses(s, rid)
    check(got == ref_losses, f"{what}: every step's loss is the uninterrupted run's ({len(got)} points, "
          f"{len(ref_losses)} wanted)")
    got_sha = sha(final_checkpoint(s, rid, epochs))
    check(got_sha == ref_sha, f"{what}: its final checkpoint is the uninterrupted run's, byte for byte: {got_sha} vs "
          f"{ref_sha}")
    print(f"{what}: sha256 {got_sha}")


def case_start_narrow(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        cfg = elastic_config()
        with box.server() as s:
            ref_losses, ref_sha = reference(s, alice, cfg)
            other = submit_as(s, bob, elastic_config(**{"distributed.world_size": 2, "distributed.min_world_size": 0,
                                                        "train.epochs": 1, "preemptible": False}))
            s.wait_status(other, "running", timeout=60)
            rid = submit_as(s, alice, cfg)
            run = s.wait_status(rid, ("starting", "running"), timeout=60)
            check(run and run["ranks_now"] == 2 and run["pending"] is None,
                  f"with 2 of its 4 slots free it starts on 2 ranks rather than waiting: "
                  f"{run and (run['status'], run['ranks_now'], run['pending'])}")
            check(s.run(other)["status"] == "running", "the other run still runs beside it")
            o = s.wait_status(other, FINAL, timeout=300)
            check(o and o["status"] == "succeeded", f"the other run succeeds: {o and o['reason']}")
            wait_until(lambda: s.run(rid)["ranks_now"] == 4 or s.run(rid)["status"] in FINAL,
                       "the elastic run grown to 4 ranks", timeout=120)
            run = s.run(rid)
            check(run["ranks_now"] == 4 and [(z["from"], z["to"], z["why"]) for z in run["sizes"]] == [(2, 4, "grow")],
                  f"then it grows from 2 to 4: {run['ranks_now']} {run['sizes']}")
            same_as_reference(s, rid, ref_losses, ref_sha, "started on 2 ranks, grown to 4")
            log = open(s.log_path).read()
            check(f"run {rid} starts on 2 of its 4 ranks" in log, "the server's log says it started below its width")


def launcher_of(s, rid):
    pid = s.run(rid)["pid"]
    check(pid, f"run {rid} has a launcher: {pid}")
    return pid


def case_restart_mid_resize(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        long_epochs = 16  # (as shrink_and_grow: on a quiet machine 4 end before it can grow back)
        cfg = elastic_config(**{"train.epochs": long_epochs})
        with box.server() as s:
            ref_losses, ref_sha = reference(s, alice, cfg, long_epochs)
        s = box.server()
        s.start()
        rid = submit_as(s, alice, cfg)
        s.wait_status(rid, "running", timeout=60)
        wait_until(lambda: (s.run(rid)["progress"]["global_step"] or 0) >= PER_EPOCH // 2,
                   "the elastic run into its first epoch", timeout=180)
        pid = launcher_of(s, rid)
        # its launcher stopped until the next server has taken the run back: it cannot act on
        # the notice, so the shrink is still under way when the server dies
        os.kill(pid, signal.SIGSTOP)
        try:
            # 3 epochs: it still runs when the second server is killed
            urgent = submit_as(s, root, fmnist_config(**{"priority": 10, "train.epochs": 3, "train.batch_size": 16}))
            kinds = lambda srv: [e["kind"] for e in srv.get(f"/runs/{rid}/timeline").json()["entries"]]  # noqa: E731
            wait_until(lambda: "resizing" in kinds(s), "the shrink decided", timeout=60)
            check(s.run(rid)["status"] == "running" and s.run(rid)["sizes"] == [],
                  f"the shrink is under way, not done: {s.run(rid)['status']} {s.run(rid)['sizes']}")
            s.kill()
            s2 = box.server()
            s2.start()
        finally:
            os.kill(pid, signal.SIGCONT)
        ok = wait_until(lambda: s2.run(rid)["ranks_now"] == 2 and s2.run(rid)["status"] == "running",
                        "the elastic run started again on 2 ranks by the next server", timeout=120)
        run = s2.run(rid)
        check(ok and [(z["from"], z["to"], z["why"], z["for_run"]) for z in run["sizes"]] == [(4, 2, "shrink", urgent)],
              f"the shrink under way was carried out: {run['status']} {run['ranks_now']} {run['sizes']}")
        check(run["preemptions"] == 0, f"no preemption: {run['preemptions']}")
        log = open(s2.log_path).read()
        check(f"run {rid}: its change of size to 2 ranks was under way" in log, "the server's log says it went on")
        wait_until(lambda: (s2.run(rid)["progress"]["global_step"] or 0) > (run["sizes"][0]["from_global_step"] or 0)
                   + 10, "the shrunk run training", timeout=120)
        s2.kill()
        with box.server() as s3:
            # the urgent run first: while it runs, the elastic run cannot have grown (a grow takes its
            # stop and start again, far longer than the next read)
            urgent_runs = s3.run(urgent)["status"] == "running"
            run = s3.run(rid)
            if not urgent_runs:  # it may be growing back already: between its stop and its start again
                run = wait_until(lambda: (lambda r: r if r["status"] == "running" else None)(s3.run(rid)),
                                 "the elastic run running after the restart", timeout=120) or run
            check(run["status"] == "running" and run["ranks_now"] == run["sizes"][-1]["to"],
                  f"taken back running, on the ranks its history says: {run['status']} {run['ranks_now']} "
                  f"{run['sizes']}")
            check(not urgent_runs or (run["ranks_now"] == 2 and len(run["sizes"]) == 1),
                  f"the urgent run still running, it is still on 2 ranks, one change: {run['ranks_now']} "
                  f"{run['sizes']}")
            print(f"after the second restart: urgent running {urgent_runs}, ranks_now {run['ranks_now']}")
            u = s3.wait_status(urgent, FINAL, timeout=300)
            check(u and u["status"] == "succeeded", f"the urgent run succeeds: {u and u['reason']}")
            ok = wait_until(lambda: s3.run(rid)["ranks_now"] == 4 or s3.run(rid)["status"] in FINAL,
                            "the elastic run grown back to 4 ranks after the restarts", timeout=120)
            run = s3.run(rid)
            check(ok and [(z["from"], z["to"], z["why"]) for z in run["sizes"]] == [(4, 2, "shrink"), (2, 4, "grow")],
                  f"then grown back to 4: {run['ranks_now']} {run['sizes']}")
            same_as_reference(s3, rid, ref_losses, ref_sha, "shrunk across a restart, grown back after another",
                              long_epochs)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
