#!/usr/bin/env python3
"""ddp-trainer's restarts (distributed.max_restarts), end to end on real Fashion-MNIST:
a rank SIGKILLed once, the ranks started again from the newest checkpoint, and the
run ends bit-identical to an uninterrupted one (every step's loss, the final
checkpoint's bytes); a cancel during the pause before a restart stops it for good.

Usage: test_trainer_restarts.py CASE --trainer PATH"""
import os, signal, sys

from checks import check, cases_in  # noqa: E402
from test_trainer_e2e import Run, all_gone, config, losses, main, no_noise, sha  # noqa: E402


def attempts(run):
    return run.of_type("attempt", -1)


def kill_rank_1_after_first_checkpoint(run):
    """SIGKILLs rank 1 of the first attempt once epoch 0's checkpoint is written."""
    run.wait_for(lambda r: any(e["epoch"] == 0 for e in r.of_type("checkpoint")) and 1 in r.rank_pids(),
                 "the first checkpoint")
    os.kill(run.rank_pids()[1], signal.SIGKILL)


def case_restart_bit_identical(t, w):
    cfg = config(**{"train.epochs": 4, "data.limit": 6000})
    full = Run(t, w, "full", cfg)
    check(full.wait() == 0, f"the uninterrupted run exits 0: {full.stderr}")
    r = Run(t, w, "restarted", config(**{"train.epochs": 4, "data.limit": 6000, "distributed.max_restarts": 2}),
            extra_env={"DDPD_RESTART_BACKOFF_S": "0"})
    kill_rank_1_after_first_checkpoint(r)
    code = r.wait()
    check(code == 0, f"the run whose rank 1 was killed exits 0 after a restart: {code} {r.stderr[-600:]!r}")
    a = attempts(r)
    shape = [(e["attempt"], e["phase"], e.get("status")) for e in a]
    check(shape == [(0, "started", None), (0, "ended", "failed"), (1, "started", None), (1, "ended", "succeeded")],
          f"two attempts, the first failed: {shape}")
    if len(a) == 4:
        check(a[0]["checkpoint"] is None and a[0]["max_restarts"] == 2, f"the first from the start: {a[0]}")
        check(a[1]["failing_rank"] == 1 and a[1]["signal"] == 9 and a[1]["exit_code"] is None and a[1]["restarting"]
              and a[1]["reason"].startswith("rank 1 exited with signal 9 (Killed) at epoch "),
              f"the first attempt's end names rank 1 and SIGKILL: {a[1]}")
        ckpt = a[2]["checkpoint"] or ""
        check(os.path.dirname(ckpt) == os.path.join(r.dir, "checkpoints") and ckpt.endswith(".safetensors"),
              f"the second carries on from a checkpoint of the run: {a[2]}")
        redone = [e["global_step"] for e in r.events() if e["type"] == "step" and e["t"] >= a[2]["t"]]
        check(redone and redone[0] < max(losses(full)), f"the second attempt redid steps before the end: {redone[:3]}")
    check(losses(r) == losses(full), "every step's loss (the later report of a step done twice) is the uninterrupted run's")
    check(sha(r.checkpoint(3)) == sha(full.checkpoint(3)), "and so are the final checkpoint's bytes")
    check(any(": it continues at epoch " in e.get("msg", "") for e in r.of_type("log", 0)),
          "rank 0's log says it loaded the checkpoint")
    check(any("attempt 1 starting (TORCHELASTIC_RESTART_COUNT=1; the last allowed is attempt 2) in 0 s: rank 1 exited with signal 9" in
              e.get("msg", "") for e in r.of_type("log", -1)), "the launcher's log says why attempt 2 starts")
    end = r.of_type("end")
    check(end and end[-1]["status"] == "succeeded" and end[-1]["exit_code"] == 0, f"the run's end: {end}")
    pids = [e["pid"] for e in r.of_type("hello") if e["rank"] >= 0]
    check(len(pids) == 4 and all_gone(pids, 5), f"two ranks an attempt, none left: {pids}")
    no_noise(r.stderr, "restarted run")

    # without max_restarts the same kill fails the run, as it always did
    once = Run(t, w, "once", cfg)
    kill_rank_1_after_first_checkpoint(once)
    check(once.wait() == 1 and "rank 1 exited with signal 9 (Killed)" in once.stderr, f"fails: {once.stderr[-300:]!r}")
    check([(e["attempt"], e["phase"], e.get("restarting")) for e in attempts(once)] ==
          [(0, "started", None), (0, "ended", False)], f"one attempt: {attempts(once)}")


def case_cancel_in_pause(t, w):
    r = Run(t, w, "pause", config(**{"train.epochs": 4, "data.limit": 6000, "distributed.max_restarts": 2}),
            extra_env={"DDPD_RESTART_BACKOFF_S": "600"})
    kill_rank_1_after_first_checkpoint(r)
    r.wait_for(lambda r: any(e["phase"] == "ended" and e["restarting"] for e in attempts(r)), "a restart to be due")
    r.proc.send_signal(signal.SIGTERM)
    code = r.wait(timeout=60)  # well before the pause would end
    check(code == 128 + signal.SIGTERM, f"canceled: exit 143 (got {code})")
    end = r.of_type("end")
    check(end and end[-1]["status"] == "canceled" and end[-1]["exit_code"] == code and
          end[-1]["reason"].startswith("canceled by SIGTERM before attempt 1 (rank 1 exited with signal 9"),
          f"the end says it was canceled before the restart, and why that was due: {end}")
    check(len(attempts(r)) == 2, f"no second attempt: {attempts(r)}")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, "trainer_restarts")
