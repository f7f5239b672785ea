#!/usr/bin/env python3
"""Sharing a box, end to end: a real ddpd on a loopback port, its users made with the
real `ddpd user` command (before the server starts and while it runs), real trainers
(the scripted stand-in for the queue's order, the real ddp-trainer on Fashion-MNIST
for preemption).

  users_and_ownership   two users and an admin: a request without a token is refused,
                        each run is its submitter's, others get 403 naming the owner,
                        the admin and the server's token may; a new token replaces the
                        old at once in the running server; a removed user's runs stay
                        its own; max-priority and quota refusals name their pointer
  quota                 a user's third run waits for her quota, saying so, while
                        another user's run starts; it starts once one of hers ends
  fair_share            bob's first run starts before alice's second when alice has
                        just used the box; GET /queue says so; her usage survives a
                        restart of the server
  priority              a run of a higher priority starts first, younger or not
  restart_charged       a run the server starts again is charged for the attempt that
                        ended, and not for its wait when canceled before the next
  backfill              a small run starts ahead of a large one within the window,
                        not after it, and says what it waits behind
  preempt_builtin       a preemptible built-in run is preempted mid-epoch for a run of
                        a higher priority, queued again with preempted_by, resumed, and
                        ends with the losses, epochs and weights of a run never
                        preempted, bit for bit
  time_slice            serve --time-slice 2, one slot: alice's and bob's long runs of
                        the same priority take turns, each yielding at a checkpoint once
                        it has held the slot a slice (queued again, pending reason
                        time_slice, its attempt saying so), each attempt going on from
                        where the last stopped, and both end with the weights of a run
                        never interrupted, bit for bit; the work thrown away is at most
                        a step's
  killed_while_preempting  the server is killed as it preempts: the next one finds the
                        run queued (or running again), never failed, and it still ends
                        bit-identical

Usage: test_server_sharing.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import hashlib, json, os, shutil, signal, subprocess, sys, tempfile, time

from ddpd_harness import (Server, check, cases_in, wait_until, args_for, main, fmnist_config, needs_trainer,  # noqa: E402
                          user, add_user, bearer, iso_seconds)

FINAL = ("succeeded", "failed", "canceled")


def problem(r, status, words, what):
    detail = ""
    try:
        detail = r.json().get("detail", "")
    except ValueError:
        pass
    return check(r.status == status and words in detail, f"{what}: {status} with \"{words}\"; got {r.status} {detail!r}")


class Box:
    """A state directory of its own, with users made before the server starts."""

    def __init__(self, a):
        self.a = a
        self.dir = tempfile.mkdtemp(prefix="ddpd-sharing-")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def add(self, name, *opts):
        token = add_user(self.a.ddpd, self.dir, name, *opts)
        self.reader = getattr(self, "reader", None) or token
        return token

    def server(self, trainer=None, **kw):
        """A server on the box; its reads carry the first user's token (reads need one once
        there are users: test_server_reads.py holds that)."""
        s = Server(self.a.ddpd, trainer or self.a.fake_trainer, state_dir=self.dir, **kw)
        if getattr(self, "reader", None):
            s.read_headers = bearer(self.reader)
        return s


def submit_as(s, token, cfg):
    r = s.post("/runs", cfg, headers=bearer(token))
    check(r.status == 201, f"POST /runs as a user -> 201: {r.status} {r.body[:300]!r}")
    return r.json()["id"] if r.status == 201 else None


def queue(s):
    return s.get("/queue").json()


# ---- users and who may change what ----

def case_users_and_ownership(a):
    with Box(a) as box:
        # the first command on a fresh state dir makes the database: one line about it, not one per migration
        code, out, err = user(a.ddpd, box.dir, "add", "alice", "--max-devices", "2")
        check(code == 0 and len(err.splitlines()) == 1 and "created the database" in err and "schema version" in err,
              f"ddpd user add on a fresh state dir: one line on stderr about the database: {code} {err!r}")
        alice = out.strip().splitlines()[-1] if out.strip() else ""
        bob = box.add("bob")
        code, out, err = user(a.ddpd, box.dir, "add", "root", "--admin")
        check(code == 0 and err == "" and "user root added (admin, no quota, any priority, up to 100)" in out,
              f"an admin's line says what it may give, and nothing more is said: {out!r} {err!r}")
        root = out.strip().splitlines()[-1] if out.strip() else ""
        code, out, err = user(a.ddpd, box.dir, "add", "alice")
        check(code == 1 and "there is a user alice already" in err, f"alice twice: refused: {code} {err!r}")
        code, out, err = user(a.ddpd, box.dir, "add", "-x")
        check(code == 2 and "cannot start with '-'" in err, f"a bad name: {code} {err!r}")
        code, out, _ = user(a.ddpd, box.dir, "list")
        lines = out.splitlines()
        check(code == 0 and lines[0].split()[:4] == ["NAME", "ADMIN", "MAX-DEVICES", "MAX-PRIORITY"] and
              [l.split()[:4] for l in lines[1:]] == [["alice", "no", "2", "0"], ["bob", "no", "none", "0"],
                                                     ["root", "yes", "none", "100"]] and
              "100 (admin)" in lines[3],
              f"ddpd user list: {out!r}")
        check(not any(t in out for t in (alice, bob, root)), "no token is listed")
        server_token = "s" * 32
        with box.server(slots=4, env={"DDPD_TOKEN": server_token}) as s:
            problem(s.post("/runs", {"name": "sleep"}), 401, "this server has users", "no token")
            problem(s.post("/runs", {"name": "sleep"}, headers=bearer("f" * 64)), 401, "not one this server knows",
                    "a token nobody has")
            run_a = submit_as(s, alice, {"name": "sleep"})
            run_b = submit_as(s, bob, {"name": "sleep"})
            run_t = s.post("/runs", {"name": "sleep"}, headers=bearer(server_token)).json()["id"]
            for rid, owner in ((run_a, "alice"), (run_b, "bob"), (run_t, None)):
                check(s.run(rid)["owner"] == owner, f"run {rid}'s owner is {owner}: {s.run(rid)['owner']}")
            listed = {r["id"]: r["owner"] for r in s.get("/runs").json()["runs"]}
            check(listed.get(run_a) == "alice" and listed.get(run_t) is None, f"GET /runs shows the owners: {listed}")
            s.wait_status(run_a, "running", timeout=30)
            # others may not touch alice's run; she may, and an admin may
            problem(s.post(f"/runs/{run_a}/cancel", headers=bearer(bob)), 403,
                    f"run {run_a} is alice's: only alice or an admin may cancel it", "bob cancels alice's run")
            problem(s.request("DELETE", f"/runs/{run_a}", headers=bearer(bob)), 403, "is alice's", "bob deletes it")
            problem(s.post(f"/runs/{run_a}/resume", headers=bearer(bob)), 403, "is alice's", "bob resumes it")
            problem(s.post(f"/runs/{run_t}/cancel", headers=bearer(alice)), 403, "has no owner", "alice, the token's run")
            check(s.post(f"/runs/{run_b}/cancel", headers=bearer(root)).status == 202, "the admin cancels bob's run")
            check(s.post(f"/runs/{run_t}/cancel", headers=bearer(server_token)).status == 202,
                  "the server's token cancels its own")
            check(s.post(f"/runs/{run_a}/cancel", headers=bearer(alice)).status == 202, "alice cancels her own")
            for rid in (run_a, run_b, run_t):
                s.wait_status(rid, "canceled", timeout=30)
            problem(s.request("DELETE", f"/runs/{run_b}", headers=bearer(alice)), 403, "is bob's", "alice deletes bob's")
            check(s.request("DELETE", f"/runs/{run_b}", headers=bearer(bob)).status == 204, "bob deletes his own")
            # who a token is
            me = s.get("/users/me", headers=bearer(alice)).json()
            check(me.get("name") == "alice" and me.get("admin") is False and me.get("max_devices") == 2,
                  f"GET /users/me: {me}")
            problem(s.get("/users/me", anonymous=True), 401, "this server has users", "GET /users/me without a token")
            names = [u["name"] for u in s.get("/users").json()["users"]]
            check(names == ["alice", "bob", "root"], f"GET /users lists them: {names}")
            # what a user may not submit
            r = s.post("/runs", {"name": "sleep", "priority": 5}, headers=bearer(alice))
            problem(r, 403, "/priority: must be at most 0 for alice", "over her max-priority")
            check(r.status == 403 and r.json().get("errors", [{}])[0].get("pointer") == "/priority",
                  f"named by its pointer: {r.body[:300]!r}")
            r = s.post("/runs", {"name": "sleep", "distributed": {"world_size": 3}}, headers=bearer(alice))
            problem(r, 403, "alice's quota is 2", "over her quota")
            check(r.status == 403 and r.json()["errors"][0]["pointer"] == "/distributed/world_size", "its pointer")
            # the same numbers written otherwise: the limits hold on the value (the validator
            # takes 100.0 and 1e2 for the integer 100)
            for how, cfg, pointer in (("100.0", {"priority": 100.0}, "/priority"), ("1e2", {"priority": 1e2}, "/priority"),
                                      ("3.0", {"distributed": {"world_size": 3.0}}, "/distributed/world_size")):
                r = s.post("/runs", dict({"name": "sleep"}, **cfg), headers=bearer(alice))
                check(r.status == 403 and r.json().get("errors", [{}])[0].get("pointer") == pointer,
                      f"{pointer} written {how} is refused as the integer is: {r.status} {r.body[:300]!r}")
            check(s.post("/runs", {"name": "steps-5", "priority": 50}, headers=bearer(root)).status == 201,
                  "an admin gives any priority")
            # a new token replaces the old one at once, in the running server
            code, out, _ = user(a.ddpd, box.dir, "token", "alice")
            new_alice = out.strip().splitlines()[-1]
            check(code == 0 and new_alice != alice, f"ddpd user token alice: a new one: {out!r}")
            # a read that asks who sent it looks the users up again too (reads that do not ask skip it)
            problem(s.get("/users/me", headers=bearer(alice)), 401, "not one this server knows",
                    "GET /users/me with alice's old token, at once")
            check(s.get("/users/me", headers=bearer(new_alice)).json().get("name") == "alice",
                  "GET /users/me with her new one")
            problem(s.post("/runs", {"name": "steps-5"}, headers=bearer(alice)), 401, "not one this server knows",
                    "alice's old token, at once")
            check(s.post(f"/runs/{run_a}/resume", headers=bearer(new_alice)).status != 403, "her new one is hers")
            # a user added while the server runs can act at once; a removed one cannot
            carol = box.add("carol")
            run_c = submit_as(s, carol, {"name": "steps-5"})
            s.wait_status(run_c, "succeeded", timeout=30)
            code, out, _ = user(a.ddpd, box.dir, "remove", "carol")
            check(code == 0 and "its runs stay" in out, f"ddpd user remove carol: {out!r}")
            problem(s.post("/runs", {"name": "steps-5"}, headers=bearer(carol)), 401, "not one this server knows",
                    "carol's token after her removal")
            check(s.run(run_c)["owner"] == "carol", "her runs stay hers")
            check(s.request("DELETE", f"/runs/{run_c}", headers=bearer(root)).status == 204, "an admin deletes it")
            code, out, _ = user(a.ddpd, box.dir, "list")
            carol_line = [l.split() for l in out.splitlines() if l.startswith("carol ")]
            check(carol_line and carol_line[0][-1] != "-" and carol_line[0][-1].startswith("20"),
                  f"a removed user is still listed, with when it was removed: {out!r}")


def case_quota(a):
    with Box(a) as box:
        alice, bob = box.add("alice", "--max-devices", "2"), box.add("bob")
        with box.server(slots=4) as s:
            first = [submit_as(s, alice, {"name": "sleep"}) for _ in range(2)]
            for rid in first:
                s.wait_status(rid, "running", timeout=30)
            third = submit_as(s, alice, {"name": "sleep"})
            theirs = submit_as(s, bob, {"name": "sleep"})
            s.wait_status(theirs, "running", timeout=30)
            run = s.run(third)
            check(run["status"] == "queued" and run.get("waiting_for") == "alice's quota: 2 of 2 devices in use",
                  f"alice's third run waits for her quota, saying so: {run['status']} {run.get('waiting_for')!r}")
            q = queue(s)
            check([r["id"] for r in q["runs"]] == [third] and q["runs"][0]["decision"] == "wait",
                  f"GET /queue: the third waits: {q['runs']}")
            owners = {o["name"]: o for o in q["owners"]}
            check(owners["alice"]["devices_in_use"] == 2 and owners["alice"]["max_devices"] == 2 and
                  owners["bob"]["max_devices"] is None, f"the owners' use and quotas: {q['owners']}")
            s.post(f"/runs/{first[0]}/cancel", headers=bearer(alice))
            s.wait_status(third, "running", timeout=30)
            check(s.get("/healthz").json()["devices"]["cpu"]["free"] == 1, "one slot left: alice 2, bob 1")
            for rid in (first[1], third, theirs):
                s.post(f"/runs/{rid}/cancel", headers=bearer(alice if rid != theirs else bob))
                s.wait_status(rid, "canceled", timeout=30)


def case_fair_share(a):
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        with box.server(slots=1) as s:
            used = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(used, "running", timeout=30)
            time.sleep(3)  # alice uses the box a while
            second = submit_as(s, alice, {"name": "sleep"})
            bobs = submit_as(s, bob, {"name": "sleep"})  # younger than alice's second
            q = queue(s)
            check([r["id"] for r in q["runs"]] == [bobs, second],
                  f"GET /queue: bob's first run before alice's second: {[(r['id'], r['owner']) for r in q['runs']]}")
            usage = {o["name"]: o["usage_device_seconds"] for o in q["owners"]}
            check(usage["alice"] > 1.0 and usage["bob"] == 0, f"alice has used the box, bob not: {usage}")
            check(s.run(bobs)["queue_position"] == 1 and s.run(second)["queue_position"] == 2, "their positions")
            s.post(f"/runs/{used}/cancel", headers=bearer(alice))
            s.wait_status(bobs, "running", timeout=30)
            check(s.run(second)["status"] == "queued", "alice's second run still waits")
            s.post(f"/runs/{bobs}/cancel", headers=bearer(bob))
            s.wait_status(bobs, "canceled", timeout=30)
            s.wait_status(second, "running", timeout=30)
            s.post(f"/runs/{second}/cancel", headers=bearer(alice))
            s.wait_status(second, "canceled", timeout=30)
        # the usage survives a restart: alice's new run waits behind bob's new one again
        with box.server(slots=1) as s:
            hold = submit_as(s, bob, {"name": "sleep"})
            s.wait_status(hold, "running", timeout=30)
            hers, his = submit_as(s, alice, {"name": "sleep"}), submit_as(s, bob, {"name": "sleep"})
            q = queue(s)
            usage = {o["name"]: o["usage_device_seconds"] for o in q["owners"]}
            check(usage.get("alice", 0) > 2.5 and usage["alice"] > usage.get("bob", 0),
                  f"alice's usage came back from the store, more than bob's: {usage}")
            order = [r["id"] for r in q["runs"]]
            check(order == [his, hers], f"after the restart too, bob's run goes first: {order} ({usage})")
            for rid, tok in ((hold, bob), (hers, alice), (his, bob)):
                s.post(f"/runs/{rid}/cancel", headers=bearer(tok))
                s.wait_status(rid, "canceled", timeout=30)


def case_restart_charged(a):
    """A run the server starts again (its launcher gone, a restart left) is charged for the
    attempt that ended, when it ends, as a preempted run is; canceled while it waits for
    its next attempt, it is not charged for the wait."""
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob", "--max-priority", "5")
        with box.server(slots=1) as s:
            rid = submit_as(s, alice, {"name": "sleep", "distributed": {"max_restarts": 1}})
            run = s.wait_status(rid, "running", timeout=30)
            time.sleep(2)  # alice uses the box a while
            urgent = submit_as(s, bob, {"name": "sleep", "priority": 5})
            os.kill(run["pid"], signal.SIGKILL)
            s.wait_status(urgent, "running", timeout=30)  # the slot alice's run gave back
            mine = s.run(rid)
            check(mine["status"] == "queued", f"alice's run waits for its next attempt: {mine['status']}")
            usage = {o["name"]: o["usage_device_seconds"] for o in queue(s)["owners"]}
            check(usage.get("alice", 0) >= 1.5, f"its first attempt (2 s and more) is charged to alice at once: {usage}")
            time.sleep(2)  # it waits
            s.post(f"/runs/{rid}/cancel", headers=bearer(alice))
            s.wait_status(rid, "canceled", timeout=30)
            after = {o["name"]: o["usage_device_seconds"] for o in queue(s)["owners"]}
            check(after.get("alice", 0) <= usage.get("alice", 0) + 0.5,
                  f"canceled while it waited, nothing more is charged (not the wait from its old start): "
                  f"{usage.get('alice')} then {after.get('alice')}")
            s.post(f"/runs/{urgent}/cancel", headers=bearer(bob))
            s.wait_status(urgent, "canceled", timeout=30)


def case_priority(a):
    with Box(a) as box:
        alice, root = box.add("alice", "--max-priority", "3"), box.add("root", "--admin")
        with box.server(slots=1) as s:
            blocker = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(blocker, "running", timeout=30)
            low = submit_as(s, alice, {"name": "sleep", "priority": -10})
            mid = submit_as(s, alice, {"name": "sleep"})
            high = submit_as(s, alice, {"name": "sleep", "priority": 3})
            top = submit_as(s, root, {"name": "sleep", "priority": 90})
            order = [(r["id"], r["priority"]) for r in queue(s)["runs"]]
            check([rid for rid, _ in order] == [top, high, mid, low], f"GET /queue by priority: {order}")
            check(s.run(mid)["queue_position"] == 3, f"mid is third: {s.run(mid)['queue_position']}")
            for expect in (top, high, mid, low):
                prev = blocker if expect == top else last
                s.post(f"/runs/{prev}/cancel", headers=bearer(root))
                s.wait_status(expect, "running", timeout=30)
                last = expect
            s.post(f"/runs/{low}/cancel", headers=bearer(root))
            s.wait_status(low, "canceled", timeout=30)


def case_backfill(a):
    with Box(a) as box:
        alice = box.add("alice")
        with box.server(slots=2, extra_args=["--backfill-window", "2"]) as s:
            one = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(one, "running", timeout=30)
            big = submit_as(s, alice, {"name": "sleep", "distributed": {"world_size": 2}})
            small = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(small, "running", timeout=30)  # within the window: it starts ahead of the big one
            check(s.run(big)["status"] == "queued", "the big one still waits")
            s.post(f"/runs/{small}/cancel", headers=bearer(alice))
            s.wait_status(small, "canceled", timeout=30)
            time.sleep(2.5)  # the big run has now waited longer than the window
            late = submit_as(s, alice, {"name": "sleep"})
            time.sleep(0.5)
            run = s.run(late)
            check(run["status"] == "queued" and run.get("waiting_for", "").startswith(f"behind run {big}, queued earlier")
                  and "longer than the backfill window (2 s)" in run.get("waiting_for", ""),
                  f"past the window, the free slot is kept for the big run: {run['status']} {run.get('waiting_for')!r}")
            s.post(f"/runs/{one}/cancel", headers=bearer(alice))
            s.wait_status(big, "running", timeout=30)
            for rid in (big, late):
                s.post(f"/runs/{rid}/cancel", headers=bearer(alice))
                s.wait_status(rid, "canceled", timeout=30)


# ---- preemption of built-in runs (the real trainer) ----

PER_EPOCH = 188  # steps of an epoch of slow_config: 3000 examples, 8 a rank's batch


def slow_config(**over):
    """4 epochs of 188 steps on 2 ranks, slow enough that a preemption lands within one."""
    return fmnist_config(**dict({"model.hidden": [512, 256], "train.epochs": 4, "train.batch_size": 16,
                                 "checkpoint.every_epochs": 1, "checkpoint.keep": 5}, **over))


def losses(s, rid):
    return [(p[0], p[1]) for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]


def epochs(s, rid):
    return [(e["epoch"], e["train_loss"], e["test_loss"], e["test_acc"]) for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]]


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def final_checkpoint(s, rid):
    return os.path.join(s.run_dir(rid), "checkpoints", "epoch-0003.safetensors")


def reference(a, box, token, cfg):
    """The run never preempted: its losses, epochs and final weights."""
    with box.server(trainer=a.trainer, slots=2) as s:
        rid = submit_as(s, token, cfg)
        run = s.wait_status(rid, FINAL, timeout=300)
        check(run and run["status"] == "succeeded", f"the reference run succeeds: {run and run['reason']}")
        return losses(s, rid), epochs(s, rid), sha(final_checkpoint(s, rid))


def check_identical(s, rid, ref, what):
    want_losses, want_epochs, want_sha = ref
    got = losses(s, rid)
    check(got == want_losses, f"{what}: every step's loss is the uninterrupted run's, one point per step "
          f"({len(got)} points, {len(want_losses)} wanted)")
    check(epochs(s, rid) == want_epochs, f"{what}: so are its epochs: {epochs(s, rid)} vs {want_epochs}")
    check(sha(final_checkpoint(s, rid)) == want_sha, f"{what}: and its final weights, byte for byte")


def case_preempt_builtin(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        cfg = slow_config(**{"preemptible": True})
        ref = reference(a, box, alice, cfg)
        with box.server(trainer=a.trainer, slots=2) as s:
            victim = submit_as(s, alice, cfg)
            s.wait_status(victim, "running", timeout=60)
            wait_until(lambda: (s.run(victim)["progress"]["global_step"] or 0) >= PER_EPOCH + 10,
                       "the victim into its epoch 1", timeout=120)
            # the urgent run trains for a while (two of the slow epochs), so that the victim stays
            # queued long enough to be seen so between two polls even on a loaded machine
            urgent = submit_as(s, root, slow_config(**{"priority": 10, "train.epochs": 2}))
            run = s.wait_status(victim, "queued", timeout=60)
            check(run and run["preempted_by"] == urgent and run["preempted_at"] and run["preemptions"] == 1,
                  f"the victim is queued again, preempted by run {urgent}: {run and {k: run[k] for k in ('preempted_by', 'preempted_at', 'preemptions')}}")
            ckpts = s.get(f"/runs/{victim}/checkpoints").json()["checkpoints"]
            within = [c for c in ckpts if c["next_step"] is not None]
            check(within and within[-1]["epoch"] >= 1, f"a checkpoint where it stopped, within an epoch: {ckpts}")
            stopped = run["progress"]["global_step"]
            check(within and stopped == PER_EPOCH * within[-1]["epoch"] + within[-1]["next_step"],
                  f"its progress is that checkpoint's: nothing it did is lost ({stopped}, {within[-1:]})")
            check(run.get("waiting_for"), f"it says what it waits for: {run.get('waiting_for')!r}")
            tl = s.get(f"/runs/{victim}/timeline").json()["entries"]
            kinds = [e["kind"] for e in tl]
            check("notice" in kinds and kinds.index("notice") > kinds.index("preempted"),
                  f"the notice went out with the preemption: {kinds}")
            s.wait_status(urgent, "succeeded", timeout=120)
            done = s.wait_status(victim, FINAL, timeout=300)
            check(done and done["status"] == "succeeded", f"the victim resumes and succeeds: {done and done['reason']}")
            check_identical(s, victim, ref, "the preempted run")
            lost = [c for c in s.get("/usage").json()["charged"] if c["run"] == victim and c["phase"] == "lost"]
            check(sum(c["device_s"] for c in lost) < 0.5,
                  f"the checkpoint at the notice left nothing to throw away: lost charged {lost}")
            log = open(s.log_path).read()
            check(f"run {victim} preempted for run {urgent}" in log, "the server's log says who preempted whom")


def slice_config():
    """One rank, 3 epochs of 1,250 steps: some 4 s on a quiet 2-core machine, minutes
    under load or the sanitizers. The test's slices are a third of what it took here."""
    return fmnist_config(**{"model.hidden": [512, 256], "train.epochs": 3, "train.batch_size": 16,
                            "data.limit": 20000, "distributed.world_size": 1, "preemptible": True,
                            "checkpoint.every_epochs": 1, "checkpoint.keep": 5})


def case_time_slice(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        cfg = slice_config()
        with box.server(trainer=a.trainer, slots=1) as s:  # the same run, never interrupted
            rid = submit_as(s, alice, cfg)
            run = s.wait_status(rid, FINAL, timeout=300)
            check(run and run["status"] == "succeeded", f"the reference run succeeds: {run and run['reason']}")
            want = sha(os.path.join(s.run_dir(rid), "checkpoints", "epoch-0002.safetensors"))
            took = iso_seconds(run["finished_at"]) - iso_seconds(run["started_at"]) if run else 3.0
        # a third of the uninterrupted run: each run is cut some 3 times, however fast this machine is
        # (a fixed slice cut a quiet machine's runs not at all, a loaded machine's a hundred times)
        time_slice = max(1, int(took / 3))
        print(f"the uninterrupted run took {took:.1f} s: slices of {time_slice} s")
        with box.server(trainer=a.trainer, slots=1, extra_args=["--time-slice", str(time_slice)]) as s:
            first = submit_as(s, alice, cfg)
            s.wait_status(first, "running", timeout=60)
            second = submit_as(s, bob, cfg)
            # bob's run waits, then takes the slot once alice's has held it a slice; alice's waits for its turn back
            seen = wait_until(lambda: (lambda r: r if r["status"] == "queued" and
                                       (r.get("pending") or {}).get("reason") == "time_slice" else None)(s.run(first)),
                              "alice's run queued again, pending reason time_slice", timeout=120 + time_slice, interval=0.1)
            if not check(seen and seen["preempted_by"] == second,
                         f"alice's run yields the slot to bob's: {seen and (seen['status'], seen['preempted_by'])}"):
                s.dump_log()
                return
            for rid in (first, second):
                done = s.wait_status(rid, FINAL, timeout=600)
                check(done and done["status"] == "succeeded", f"run {rid} succeeds: {done and done['reason']}")
            for rid, other, who in ((first, second, "alice"), (second, first, "bob")):
                run = s.run(rid)
                tl = s.get(f"/runs/{rid}/timeline").json()["entries"]
                yields = [e["detail"] for e in tl if e.get("kind") == "preempted"]
                check(yields and all(y == {"by": other, "time_slice": True} for y in yields),
                      f"{who}'s run yielded its slot to the other's at its slices' ends, and says so: {yields}")
                check(run["preemptions"] >= 1 and not [x for x in run["attempts"] if x.get("status") == "failed"],
                      f"{who}'s yields are preemptions ({run['preemptions']}), no failure: "
                      f"{[(x.get('status'), x.get('reason')) for x in run['attempts']]}")
                froms = [e["detail"].get("from_global_step") for e in tl if e.get("kind") == "queued_again"]
                check(froms and all(x is not None and x > 0 for x in froms) and froms == sorted(set(froms)),
                      f"{who}'s run moved forward in every turn it had: it went on from global steps {froms}")
                got = sha(os.path.join(s.run_dir(rid), "checkpoints", "epoch-0002.safetensors"))
                check(got == want, f"{who}'s run ends with the uninterrupted run's weights: {got[:12]} vs {want[:12]}")
            lost = [c for c in s.get("/usage").json()["charged"] if c["phase"] == "lost"]
            check(sum(c["device_s"] for c in lost) < 1.0,
                  f"each yield was at a checkpoint: next to nothing thrown away: {lost}")
            log = open(s.log_path).read()
            check(f"run {first} yields its devices at its time slice's end to run {second}" in log,
                  "the server's log says whom alice's run yielded to")


def case_killed_while_preempting(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        cfg = slow_config(**{"preemptible": True})
        ref = reference(a, box, alice, cfg)
        s = box.server(trainer=a.trainer, slots=2)
        s.start()
        victim = submit_as(s, alice, cfg)
        s.wait_status(victim, "running", timeout=60)
        wait_until(lambda: (s.run(victim)["progress"]["global_step"] or 0) >= 30, "the victim training", timeout=120)
        urgent = submit_as(s, root, fmnist_config(**{"priority": 10, "train.epochs": 1, "data.limit": 1000}))
        s.kill()  # as it preempts: the victim was asked to stop, and may be writing its checkpoint
        with box.server(trainer=a.trainer, slots=2) as s2:
            run = s2.wait_status(victim, ("queued", "starting", "running", "succeeded"), timeout=60)
            check(run and run["status"] != "failed", f"the victim is not failed after the restart: {run and run['status']}")
            check(run and run["preempted_by"] == urgent or run["preemptions"] >= 1,
                  f"it was preempted for run {urgent}: {run and run['preempted_by']}")
            s2.wait_status(urgent, "succeeded", timeout=120)
            done = s2.wait_status(victim, FINAL, timeout=300)
            check(done and done["status"] == "succeeded", f"then it goes on and succeeds: {done and done['reason']}")
            for name in os.listdir(os.path.join(s2.run_dir(victim), "checkpoints")):
                check(name.endswith(".safetensors"), f"no torn checkpoint is left: {name}")
            check_identical(s2, victim, ref, "the run preempted as the server died")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
