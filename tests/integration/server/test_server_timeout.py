#!/usr/bin/env python3
"""Time limits, end to end: a real ddpd on a loopback port, the real ddp-trainer on a
Fashion-MNIST subset.

  builtin_timeout   a built-in run with max_duration_s 3 is told to stop as a
                    preemption tells it: it writes a checkpoint at its current step and
                    ends `timeout`, its reason naming the limit; its progress is that
                    checkpoint's; resumed, it goes on from there (and, its limit still
                    3 s, ends `timeout` again further on)

Usage: test_server_timeout.py CASE --ddpd PATH --fake-trainer PATH --trainer PATH"""
from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, fmnist_config, needs_trainer  # noqa: E402

FINAL = ("succeeded", "failed", "canceled", "stopped", "timeout")


def case_builtin_timeout(a):
    needs_trainer(a)
    # far more epochs than two 3 s attempts can train on any machine: each attempt must time out
    cfg = fmnist_config(**{"model.hidden": [512, 256], "train.epochs": 1000, "train.batch_size": 16,
                           "checkpoint.every_epochs": 100, "max_duration_s": 3})
    with Server(a.ddpd, a.trainer, slots=2) as s:
        rid = s.submit(cfg)
        run = s.wait_status(rid, FINAL, timeout=120)
        if not check(run and run["status"] == "timeout", f"it ends timeout: {run and (run['status'], run['reason'])}"):
            s.dump_log()
            return
        check("max_duration_s of 3 s" in (run["reason"] or "") and run["reason"].startswith("timeout: it ran "),
              f"its reason names its limit: {run['reason']!r}")
        ckpts = s.get(f"/runs/{rid}/checkpoints").json()["checkpoints"]
        check(ckpts and run["progress"]["global_step"] and run["progress"]["global_step"] > 0,
              f"a checkpoint where it stopped, at step {run['progress']['global_step']}: {ckpts}")
        first = run["progress"]["global_step"]
        r = s.post(f"/runs/{rid}/resume")
        check(r.status in (200, 202), f"a timed-out run can be resumed: {r.status} {r.body[:300]!r}")
        again = s.wait_status(rid, FINAL, timeout=120)
        check(again and again["status"] == "timeout" and again["progress"]["global_step"] > first,
              f"resumed from its checkpoint, it goes on past step {first}, then times out again: "
              f"{again and (again['status'], again['progress']['global_step'])}")
        steps = [p[0] for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        check(steps == sorted(set(steps)) and steps[0] == 1,
              f"one point per step, in order: the resume went on from the checkpoint ({len(steps)} points)")
        timeline = s.get(f"/runs/{rid}/timeline").json()
        entries = timeline.get("entries", timeline) if isinstance(timeline, dict) else timeline
        check(sum(1 for e in entries if e.get("kind") == "timeout") == 2, f"its timeline says timeout twice: {entries}")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
