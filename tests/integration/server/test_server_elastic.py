#!/usr/bin/env python3
"""Elastic built-in runs, end to end: a real ddpd on a loopback port with 4 CPU slots,
real users, the real ddp-trainer on a few thousand Fashion-MNIST examples.

  shrink_and_grow       a preemptible run of width 4 (distributed.min_world_size 2) on
                        4 slots; a run of a higher priority that needs 2 arrives: the
                        elastic run is shrunk to 2 ranks and keeps going (never
                        preempted whole: preemptions 0, its sizes say why and for
                        whom), the other runs beside it and succeeds, the elastic run
                        grows back to 4, and it ends with the losses and the final
                        checkpoint (sha256) of the same config never interrupted
  not_elastic_evicted   the same run without min_world_size is preempted whole, as
                        before: queued again with preempted_by, no size history
  hostile_resize        another user cannot change a run's size: there is no route
                        that resizes (POST/PATCH answer 404/405, the run unchanged),
                        and a run of hers of the same priority shrinks nothing

Usage: test_server_elastic.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import hashlib, os

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


def final_checkpoint(s, rid):
    return os.path.join(s.run_dir(rid), "checkpoints", f"epoch-{EPOCHS - 1:04d}.safetensors")


def case_shrink_and_grow(a):
    needs_trainer(a)
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        cfg = elastic_config()
        with box.server() as s:
            ref = submit_as(s, alice, cfg)
            run = s.wait_status(ref, FINAL, timeout=600)
            check(run and run["status"] == "succeeded", f"the uninterrupted run succeeds: {run and run['reason']}")
            check(run and run["sizes"] == [] and run["ranks_now"] is None,
                  f"it was never resized: {run and (run['sizes'], run['ranks_now'])}")
            ref_losses, ref_sha = losses(s, ref), sha(final_checkpoint(s, ref))
            print(f"uninterrupted width 4 on 4 ranks: sha256 {ref_sha}")

            rid = submit_as(s, alice, cfg)
            s.wait_status(rid, "running", timeout=60)
            check(s.run(rid)["ranks_now"] == 4, f"it starts on 4 ranks: {s.run(rid)['ranks_now']}")
            wait_until(lambda: (s.run(rid)["progress"]["global_step"] or 0) >= PER_EPOCH // 2,
                       "the elastic run into its first epoch", timeout=180)
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
            u = s.wait_status(urgent, ("running", "succeeded"), timeout=120)
            check(u and u["status"] in ("running", "succeeded"), f"the urgent run runs beside it: {u and u['status']}")
            u = s.wait_status(urgent, FINAL, timeout=300)
            check(u and u["status"] == "succeeded", f"the urgent run succeeds: {u and u['reason']}")
            wait_until(lambda: s.run(rid)["ranks_now"] == 4 or s.run(rid)["status"] in FINAL,
                       "the elastic run grown back to 4 ranks", timeout=120)
            run = s.run(rid)
            grow = run["sizes"][1] if len(run["sizes"]) > 1 else {}
            check(grow.get("from") == 2 and grow.get("to") == 4 and grow.get("why") == "grow" and
                  grow.get("for_run") is None, f"then grown from 2 to 4: {run['sizes']}")
            check((grow.get("from_global_step") or 0) >= (shrink.get("from_global_step") or 0) > 0,
                  f"it went on from where it was shrunk: global step {shrink.get('from_global_step')} at the shrink, "
                  f"{grow.get('from_global_step')} at the grow")
            print(f"shrunk at global step {shrink.get('from_global_step')}, grown at {grow.get('from_global_step')}")
            done = s.wait_status(rid, FINAL, timeout=600)
            check(done and done["status"] == "succeeded", f"the elastic run succeeds: {done and done['reason']}")
            got = losses(s, rid)
            check(got == ref_losses, f"every step's loss is the uninterrupted run's ({len(got)} points, "
                  f"{len(ref_losses)} wanted)")
            got_sha = sha(final_checkpoint(s, rid))
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


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
