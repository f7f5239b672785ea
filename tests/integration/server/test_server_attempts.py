#!/usr/bin/env python3
"""A built-in run's attempts through a real ddpd (distributed.max_restarts), on the
real ddp-trainer and a Fashion-MNIST subset: a rank SIGKILLed once after the run's
first checkpoint makes the launcher start every rank again from that checkpoint; the
run succeeds bit-identical to an uninterrupted one (every step's loss, the epochs,
the final checkpoint's bytes) with one point per step, and both attempts are on
record: GET /runs/{id} (restart_count, attempts: how the first ended, the rank it
failed on, the checkpoint the second carried on from), the live feed's `attempt`
events, and a clear refusal of logs?attempt= (a built-in run has no rank logs).

Usage: test_server_attempts.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import os, signal, sys

from ddpd_harness import Server, check, cases_in, args_for, main, needs_trainer  # noqa: E402
from test_server_resume import (CONFIG, FINAL, check_same_as, is_problem, journal, of_type, rank_pids,  # noqa: E402
                                wait_journal)
import sse_client  # noqa: E402

RESTARTING = dict(CONFIG, name="restarting",
                  distributed=dict(CONFIG["distributed"], max_restarts=1))


def case_rank_killed_restarted(a):
    needs_trainer(a)
    # a heartbeat comment a second (15 s by default): until_quiet below ends at the first
    with Server(a.ddpd, a.trainer, slots=2, env={"DDPD_RESTART_BACKOFF_S": "0.2", "DDPD_SSE_HEARTBEAT_S": "1"}) as s:
        full = s.submit(RESTARTING)
        run = s.wait_status(full, FINAL, timeout=300)
        if not check(run and run["status"] == "succeeded", f"the uninterrupted run succeeds: {run and run['reason']}"):
            return
        total = run["progress"]["total_steps"]
        check(run["restart_count"] == 0 and [(x["attempt"], x["status"]) for x in run["attempts"]] == [(0, "succeeded")],
              f"one attempt, which succeeded: {run['restart_count']} {run['attempts']}")

        rid = s.submit(RESTARTING)
        # killed right after the first checkpoint (epoch 1's), with two epochs left: once
        # killed in the last epoch, the run had ended before the kill under load
        first = wait_journal(s, rid, lambda ev: of_type(ev, "checkpoint") and len(rank_pids(ev)) == 2,
                             "the first checkpoint")
        pids = rank_pids(journal(s, rid))
        if not check(first and s.run(rid)["status"] == "running", "running, past its first checkpoint"):
            return
        os.kill(pids[1], signal.SIGKILL)
        run = s.wait_status(rid, FINAL, timeout=300)
        if not check(run and run["status"] == "succeeded", f"restarted, it succeeds: {run and run['reason']}"):
            s.dump_run_log(rid)
            return
        check(run["restart_count"] == 1 and run["attempts_omitted"] == 0, f"restart count 1: {run['restart_count']}")
        att = run["attempts"]
        check([(x["attempt"], x["status"]) for x in att] == [(0, "failed"), (1, "succeeded")],
              f"two attempts, the first failed: {att}")
        if len(att) != 2:
            return
        check(att[0]["failing_rank"] == 1 and att[0]["signal"] == signal.SIGKILL and att[0]["exit_code"] is None and
              "rank 1" in att[0]["reason"] and att[0]["checkpoint"] is None,
              f"the first: rank 1, SIGKILL, from the start: {att[0]}")
        check(att[0]["started_at"] <= att[0]["ended_at"] <= att[1]["started_at"] <= att[1]["ended_at"],
              f"one after the other: {[(x['started_at'], x['ended_at']) for x in att]}")
        ckpt = s.server_path(att[1]["checkpoint"] or "")
        check(os.path.basename(ckpt) == "epoch-0001.safetensors" and ckpt.startswith(os.path.realpath(s.state_dir)),
              f"the second carried on from the run's newest checkpoint then: {att[1]['checkpoint']}")
        check(att[1]["reason"] == "" and att[1]["failing_rank"] is None and att[1]["log_offsets"] == {},
              f"and succeeded: {att[1]}")
        check_same_as(s, rid, full, total)

        # the live feed has them, in order, as they came
        st = sse_client.Stream(s.port, f"/runs/{rid}/events", query_last_id=0)
        got = [e.data for e in st.until_quiet(timeout=30) if e.event == "attempt"]
        st.close()
        check([(e["attempt"], e["phase"], e.get("status"), e.get("restarting")) for e in got] ==
              [(0, "started", None, None), (0, "ended", "failed", True), (1, "started", None, None),
               (1, "ended", "succeeded", False)], f"the feed's attempt events: {got}")

        is_problem(s.get(f"/runs/{rid}/logs?attempt=0"), 400, f"run {rid} runs a built-in model",
                   "no rank logs", "leave out attempt=")
        log = s.get(f"/runs/{rid}/logs?tail=1000").body.decode()
        check("attempt 1 starting (TORCHELASTIC_RESTART_COUNT=1; the last allowed is attempt 1)" in log,
              f"the run's log says why the ranks started again: {log[-1500:]!r}")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
