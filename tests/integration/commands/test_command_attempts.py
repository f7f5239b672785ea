#!/usr/bin/env python3
"""A command run's attempts through a real ddpd (--allow-commands, a work root), on
real processes (Debian's python3 and its torch where a script needs it):
  on_record          distributed.max_restarts 1, rank 1 fails once: both attempts in
                     GET /runs/{id} (how the first ended, its rank and last line, where
                     each rank's output of it begins) and in the live feed; the ETag
                     moves with a new attempt; logs?rank=N&attempt=K serves each
                     attempt's part of the rank's log (tail, offsets within it), and
                     says why when there is none
  cancel_in_backoff  a cancel in the pause before the restart ends the run canceled,
                     no second attempt made, nothing left running
  resumed            POST /runs/{id}/resume of a failed command run (and ddpctl resume
                     --follow of it failed again): the same id and working directory,
                     the restart count going on (TORCHELASTIC_RESTART_COUNT seen by the
                     script), each resume on record with the attempt it started
  server_killed      the server SIGKILLed and the run's processes with it: started again,
                     the run is restarted at its next attempt (its script sees
                     TORCHELASTIC_RESTART_COUNT 1) and succeeds; a run without restarts
                     fails saying its processes were gone, as before
  hang_restarted     a rank that hangs (hang_timeout_s) with a restart left: the server
                     stops the gang and starts it again; the first attempt's end names
                     the hang and the rank
  restart_cuts_series  a restart reporting from step 4 after its attempt reached step 10:
                     steps 5-10 leave every series at its first step, kept on record;
                     the restart's first step (4) stored with its attempt

Usage: test_command_attempts.py CASE --ddpd PATH --runner PATH --ddpctl PATH"""
import argparse, json, os, re, signal, sqlite3, subprocess, sys

import ddpd_harness  # noqa: E402
from ddpd_harness import check, cases_in, wait_until, pids_under  # noqa: E402
from test_command_runs import FAILS_ONCE, WorkRoot, procs_in  # noqa: E402
import sse_client  # noqa: E402

FINAL = ("succeeded", "failed", "canceled")
PY = "/usr/bin/python3"


def problem(r, status, *needles):
    try:
        detail = r.json().get("detail", "")
    except ValueError:
        detail = ""
    return check(r.status == status and all(n in detail for n in needles),
                 f"{status} saying {needles}: {r.status} {r.body[:300]!r}")


def attempts_are(s, rid, want):
    return [(x["attempt"], x["status"]) for x in s.run(rid)["attempts"]] == want


def case_on_record(a):
    # a heartbeat comment a second (15 s by default): until_quiet below ends at the first
    with WorkRoot() as w, w.server(a, env={"DDPD_RESTART_BACKOFF_S": "3", "DDPD_SSE_HEARTBEAT_S": "1"}) as s:
        os.makedirs(os.path.join(w.root, "once"))
        rid = s.submit({"name": "on-record", "command": [PY, "-c", FAILS_ONCE], "working_dir": "once",
                        "distributed": {"world_size": 2, "max_restarts": 1}})
        # in the pause before attempt 1: attempt 0 ended, and the run's tag is what it is then
        seen = wait_until(lambda: attempts_are(s, rid, [(0, "failed")]), "attempt 0 to end", 120, interval=0.02)
        etag = s.get(f"/runs/{rid}").header("ETag")
        check(seen and etag, f"attempt 0 ended, the restart to come: {s.run(rid)['attempts']} {etag}")
        wait_until(lambda: len(s.run(rid)["attempts"]) == 2, "attempt 1 to start", 60, interval=0.02)
        r = s.get(f"/runs/{rid}", headers={"If-None-Match": etag})
        check(r.status == 200 and r.header("ETag") != etag and len(r.json()["attempts"]) == 2,
              f"a new attempt moves the run's ETag: {r.status} {etag} -> {r.header('ETag')}")
        run = s.wait_status(rid, FINAL, timeout=120)
        if not check(run and run["status"] == "succeeded", f"succeeded: {run and (run['status'], run['reason'])}"):
            s.dump_run_log(rid)
            return
        check(run["restart_count"] == 1 and run["attempts_omitted"] == 0, f"restart count 1: {run['restart_count']}")
        first, second = run["attempts"]
        check(first["status"] == "failed" and first["failing_rank"] == 1 and first["exit_code"] == 3 and
              first["signal"] is None and first["last_line"] == "rank 1 gives up on attempt 0" and
              first["reason"].startswith("rank 1 exited with status 3") and first["log_offsets"] == {"0": 0, "1": 0},
              f"the first attempt: rank 1, status 3, its last line, its output from the logs' start: {first}")
        check(second["status"] == "succeeded" and second["reason"] == "" and second["failing_rank"] is None and
              second["master_port"] == first["master_port"] and w.ports[0] <= first["master_port"] <= w.ports[1],
              f"the second succeeded on the run's MASTER_PORT: {second}")
        check(first["started_at"] <= first["ended_at"] <= second["started_at"] <= second["ended_at"],
              f"one after the other: {[(x['started_at'], x['ended_at']) for x in (first, second)]}")
        points = [(p[0], p[1]) for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        check(points == [(i, float(i)) for i in range(1, 11)], f"one point per step, the second attempt's: {points}")

        # the live feed: the attempts as they came
        st = sse_client.Stream(s.port, f"/runs/{rid}/events", query_last_id=0)
        got = [e.data for e in st.until_quiet(timeout=30) if e.event == "attempt"]
        st.close()
        check([(e["attempt"], e["phase"], e.get("restarting")) for e in got] ==
              [(0, "started", None), (0, "ended", True), (1, "started", None), (1, "ended", False)],
              f"the feed's attempt events: {got}")
        check(got and got[1].get("backoff_s") == 3.0 and got[1].get("failing_rank") == 1 and
              got[2].get("log_offsets") == second["log_offsets"], f"with the pause and the offsets: {got}")

        # each attempt's part of each rank's log
        for rank in (0, 1):
            whole = s.get(f"/runs/{rid}/logs?rank={rank}&offset=0").body.decode()
            at = second["log_offsets"][str(rank)]
            parts = [s.get(f"/runs/{rid}/logs?rank={rank}&attempt={k}&offset=0") for k in (0, 1)]
            texts = [p.body.decode() for p in parts]
            check(texts[0] + texts[1] == whole and len(texts[0].encode()) == at,
                  f"rank {rank}: the two attempts' parts are the whole log, split at {at}: {texts!r}")
            check(re.match(r"--- ddp-run: attempt 0 starting \(TORCHELASTIC_RESTART_COUNT=0; the last allowed is attempt 1\); program \S+; "
                           r"working directory \S+ ---\n" f"rank {rank} on attempt 0\n", texts[0]) and
                  re.match(r"--- ddp-run: attempt 1 starting \(TORCHELASTIC_RESTART_COUNT=1; the last allowed is attempt 1\); program \S+; "
                           r"working directory \S+ ---\n" f"rank {rank} on attempt 1\n", texts[1])
                  and texts[1].endswith("attempt 1 of 1 done\n"),
                  f"rank {rank}: attempt 0's, then attempt 1's from its marker: {texts!r}")
            check([p.header("X-Next-Offset") for p in parts] == [str(len(t.encode())) for t in texts],
                  f"X-Next-Offset counts the part's bytes: {[p.header('X-Next-Offset') for p in parts]}")
        one = s.get(f"/runs/{rid}/logs?rank=1&attempt=1&offset=0").body.decode()
        cut = one.index("\n") + 1
        r = s.get(f"/runs/{rid}/logs?rank=1&attempt=1&offset={cut}")
        check(r.body.decode() == one[cut:] and r.header("X-Next-Offset") == str(len(one.encode())),
              f"offset= counts from the attempt's start: {r.body!r} {r.header('X-Next-Offset')}")
        r = s.get(f"/runs/{rid}/logs?rank=1&attempt=1&offset={len(one.encode())}")
        check(r.status == 200 and r.body == b"" and r.header("X-Next-Offset") == str(len(one.encode())),
              f"nothing past its end: {r.body!r} {r.header('X-Next-Offset')}")
        r = s.get(f"/runs/{rid}/logs?rank=1&attempt=0&tail=1")
        check(r.body.decode() == "rank 1 gives up on attempt 0\n", f"tail= counts its lines: {r.body!r}")
        # ddpctl: show lists both attempts, logs --attempt reads one attempt's part
        env = dict(os.environ, DDPD_URL=f"http://127.0.0.1:{s.port}")
        p = subprocess.run([a.ddpctl, "show", str(rid)], env=env, capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and "attempts:  2 (restart count 1; distributed.max_restarts 1)" in p.stdout and
              "rank 1, status 3" in p.stdout, f"ddpctl show lists the attempts: {p.returncode} {p.stdout!r} {p.stderr!r}")
        # one numbering: the API's attempt K is show's row K, logs --attempt K, the banner's attempt K
        shown = [ln.split()[0] for ln in p.stdout.splitlines() if re.match(r"^    \d+ ", ln)]
        check(shown == [str(x["attempt"]) for x in run["attempts"]] == ["0", "1"],
              f"ddpctl show numbers the attempts as the API does: {shown}")
        for k in (0, 1):
            p = subprocess.run([a.ddpctl, "logs", str(rid), "--rank", "0", "--attempt", str(k)], env=env,
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0 and p.stdout.startswith(f"--- ddp-run: attempt {k} starting "
                                                            f"(TORCHELASTIC_RESTART_COUNT={k};") and
                  f"rank 0 on attempt {k}\n" in p.stdout,
                  f"ddpctl logs --attempt {k}: the part whose banner says attempt {k}: {p.stdout[:200]!r}")
        p = subprocess.run([a.ddpctl, "logs", str(rid), "--rank", "1", "--attempt", "0"], env=env, capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0 and p.stdout.startswith("--- ddp-run: attempt 0 starting") and
              p.stdout.split("\n", 1)[1] == "rank 1 on attempt 0\nrank 1 gives up on attempt 0\n",
              f"ddpctl logs --attempt 0: rank 1's output in attempt 0 alone: {p.returncode} {p.stdout!r} {p.stderr!r}")
        p = subprocess.run([a.ddpctl, "logs", str(rid), "--attempt", "0"], env=env, capture_output=True, text=True,
                           timeout=60)
        parts = re.split(r"(?m)^==> rank (\d), attempt 0 <==\n", p.stdout)
        check(p.returncode == 0 and parts[0] == "" and parts[1::2] == ["0", "1"] and
              parts[4].split("\n", 1)[1] == "rank 1 on attempt 0\nrank 1 gives up on attempt 0\n" and
              parts[2].startswith("--- ddp-run: attempt 0 starting") and "rank 0 on attempt 0\n" in parts[2],
              f"--attempt without --rank: every rank's part of that attempt, each under its rank: {p.returncode} "
              f"{p.stdout!r} {p.stderr!r}")
        p = subprocess.run([a.ddpctl, "logs", str(rid), "--attempt", "0", "-f"], env=env, capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 2 and "give --rank with --attempt" in p.stderr, f"-f follows one rank: {p.stderr!r}")
        problem(s.get(f"/runs/{rid}/logs?rank=1&attempt=2"), 404, f"run {rid} has no attempt 2", "0 to 1")
        problem(s.get(f"/runs/{rid}/logs?attempt=0"), 400, "give rank= too", "ranks 0 to 1")
        problem(s.get(f"/runs/{rid}/logs?rank=1&attempt=-1"), 400, "attempt")
        holds = s.submit({"command": ["sleep", "600"], "distributed": {"world_size": 2}})  # the 2 slots held:
        queued = s.submit({"command": ["true"], "distributed": {"world_size": 2}})          # this one waits
        problem(s.get(f"/runs/{queued}/logs?rank=0&attempt=0"), 404, "no attempt on record yet")
        for other in (queued, holds):
            s.post(f"/runs/{other}/cancel")


def case_cancel_in_backoff(a):
    script = ("import os, sys, time\n"
              "if os.environ['RANK'] == '1':\n"
              "    print('rank 1 fails at once', flush=True)\n"
              "    sys.exit(4)\n"
              "time.sleep(600)\n")
    with WorkRoot() as w, w.server(a, env={"DDPD_RESTART_BACKOFF_S": "120"}) as s:
        rid = s.submit({"name": "pause", "command": [PY, "-c", script],
                        "distributed": {"world_size": 2, "max_restarts": 2}})
        ok = wait_until(lambda: attempts_are(s, rid, [(0, "failed")]), "attempt 0 to end", 120)
        if not check(ok, f"attempt 0 failed, the pause before attempt 1 begun: {s.run(rid)['attempts']}"):
            return
        check(s.run(rid)["status"] == "running", f"still running in the pause: {s.run(rid)['status']}")
        r = s.post(f"/runs/{rid}/cancel")
        check(r.status == 202, f"cancel in the pause: 202 ({r.status})")
        run = s.wait_status(rid, FINAL, timeout=60)
        check(run and run["status"] == "canceled", f"canceled: {run and (run['status'], run['reason'])}")
        check(run and [(x["attempt"], x["status"]) for x in run["attempts"]] == [(0, "failed")] and
              run["restart_count"] == 0, f"no second attempt was made: {run and run['attempts']}")
        log = s.get(f"/runs/{rid}/logs").body.decode()
        check("during the pause: no attempt 1" in log, f"the run's log says the pause ended it: {log[-600:]!r}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "the launcher to be gone", 30) is not None,
              "no process left")


# Writes what it saw to seen-RANK-COUNT (whole, by a rename); fails (rank 1) while the count
# is below its argument, once rank 0 has written its file: the gang stops rank 0 as soon as
# rank 1 exits, and under load rank 0 may not have started its script by then.
RECORDS_ATTEMPT = ("import os, sys, json, time\n"
                   "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                   "with open(f'.seen-{rank}-{k}', 'w') as f:\n"
                   "    json.dump({'cwd': os.getcwd(), 'max': os.environ['TORCHELASTIC_MAX_RESTARTS'],"
                   " 'run': os.environ['TORCHELASTIC_RUN_ID']}, f)\n"
                   "os.replace(f'.seen-{rank}-{k}', f'seen-{rank}-{k}')\n"
                   "if rank == 1 and k < int(sys.argv[1]):\n"
                   "    while not os.path.exists(f'seen-0-{k}'):\n"
                   "        time.sleep(0.01)\n"
                   "    print(f'rank 1 fails on attempt {k}', flush=True)\n"
                   "    sys.exit(6)\n"
                   "print(f'rank {rank} done on attempt {k}', flush=True)\n")


def case_resumed(a):
    with WorkRoot() as w, w.server(a) as s:
        proj = os.path.join(w.root, "resumable")
        os.makedirs(proj)
        rid = s.submit({"name": "resumable", "command": [PY, "-c", RECORDS_ATTEMPT, "2"], "working_dir": "resumable",
                        "distributed": {"world_size": 2}})
        run = s.wait_status(rid, FINAL, timeout=120)
        check(run and run["status"] == "failed" and "rank 1 exited with status 6" in (run["reason"] or ""),
              f"it fails at its first attempt: {run and run['reason']}")
        r = s.post(f"/runs/{rid}/resume")
        check(r.status == 202 and r.json()["id"] == rid, f"resumed: {r.status} {r.body[:300]!r}")
        run = wait_until(lambda: (lambda x: x if x["restart_count"] == 1 and x["status"] in FINAL else None)(s.run(rid)),
                         "its second attempt to end", 120)
        check(run and run["status"] == "failed" and [(x["attempt"], x["status"]) for x in run["attempts"]] ==
              [(0, "failed"), (1, "failed")], f"attempt 1 failed too: {run and run['attempts']}")
        res = run["resumes"] if run else []
        check([(x["attempt"], x["from_checkpoint"], x["prior_status"]) for x in res] == [(1, None, "failed")],
              f"the resume, at attempt 1, without a checkpoint: {res}")

        env = dict(os.environ, DDPD_URL=f"http://127.0.0.1:{s.port}")
        p = subprocess.run([a.ddpctl, "resume", str(rid), "--follow"], env=env, capture_output=True, text=True,
                           timeout=180)
        check(p.returncode == 0, f"ddpctl resume --follow exits 0 once it succeeds: {p.returncode} {p.stdout[-400:]!r} "
                                 f"{p.stderr[-400:]!r}")
        check(f"run {rid} resumed" in p.stdout and "at attempt 2 (TORCHELASTIC_RESTART_COUNT=2)" in p.stdout,
              f"ddpctl says it goes on at attempt 2, numbered as the API numbers it: {p.stdout[-400:]!r}")
        check("attempt 2 started (TORCHELASTIC_RESTART_COUNT=2)" in p.stdout,
              f"--follow says which attempt started, by the same number: {p.stdout[-400:]!r}")
        run = s.run(rid)
        check(run["status"] == "succeeded" and run["restart_count"] == 2 and
              [(x["attempt"], x["status"]) for x in run["attempts"]] == [(0, "failed"), (1, "failed"), (2, "succeeded")]
              and [x["attempt"] for x in run["resumes"]] == [1, 2],
              f"the third attempt succeeded, each resume on record: {run['attempts']} {run['resumes']}")
        seen = sorted(f for f in os.listdir(proj) if f.startswith("seen-"))
        check(seen == [f"seen-{r}-{k}" for r in (0, 1) for k in (0, 1, 2)],
              f"both ranks saw TORCHELASTIC_RESTART_COUNT 0, 1 and 2: {seen}")
        for name in seen:
            with open(os.path.join(proj, name)) as f:
                got = json.load(f)
            check(got == {"cwd": os.path.realpath(proj), "max": "0", "run": str(rid)},
                  f"{name}: the same working dir and run, TORCHELASTIC_MAX_RESTARTS the config's: {got}")
        log = s.get(f"/runs/{rid}/logs?rank=1&attempt=2&offset=0").body.decode()
        check(log.startswith("--- ddp-run: attempt 2 starting (TORCHELASTIC_RESTART_COUNT=2; the last allowed is attempt 2); program ") and
              "rank 1 done on attempt 2" in log, f"attempt 2's part of rank 1's log: {log!r}")


# Rank 0 reports a step a second (a slow run); on attempt 1 both ranks report 3 and end.
SLOW_THEN_QUICK = ("import os, time, ddpd\n"
                   "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                   "open(f'count-{rank}-{k}', 'w').close()\n"
                   "for step in range(1, 4 if k else 600):\n"
                   "    if rank == 0:\n"
                   "        ddpd.log_step(step, loss=1.0 / step)\n"
                   "    if not k:\n"
                   "        time.sleep(0.5)\n")


def case_server_killed(a):
    with WorkRoot() as w:
        os.makedirs(os.path.join(w.root, "slow"))
        s1 = w.server(a, slots=3)  # both runs at once: the 2 ranks of one, the 1 of the other
        s1.own_dir = False
        s1.start()
        try:
            rid = s1.submit({"name": "restarted", "command": [PY, "-c", SLOW_THEN_QUICK], "working_dir": "slow",
                             "distributed": {"world_size": 2, "max_restarts": 1}})
            plain = s1.submit({"name": "plain", "command": [PY, "-c", SLOW_THEN_QUICK], "working_dir": "slow",
                               "distributed": {"world_size": 1}})
            up = wait_until(lambda: s1.get(f"/runs/{rid}/metrics?key=loss").json()["count"] >= 2 and
                            s1.run(plain)["status"] == "running", "steps reported", 120)
            check(up, f"both runs running, steps reported: {s1.run(rid)['status']} {s1.run(plain)['status']}")
        finally:
            s1.kill()
        # the server and every process of the runs gone at once (the host's restart, an OOM
        # killer's sweep): all held first, so that no launcher sees a rank die and says so
        # in its journal before it dies itself
        doomed = set(pids_under(s1.state_dir)) | set(procs_in(w.root))
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in doomed:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        wait_until(lambda: not pids_under(s1.state_dir) and not procs_in(w.root), "the runs' processes to be gone", 30)
        s2 = w.server(a, slots=3, state_dir=s1.state_dir)
        s2.own_dir = True  # removed when it stops
        with s2:
            run = s2.wait_status(rid, FINAL, timeout=180)
            if not check(run and run["status"] == "succeeded", f"restarted, it succeeds: {run and run['reason']}"):
                s2.dump_log()
                return
            att = run["attempts"]
            check([(x["attempt"], x["status"]) for x in att] == [(0, "failed"), (1, "succeeded")] and
                  run["restart_count"] == 1, f"its second attempt: {att}")
            check("the server restarted and the run's processes were gone" in att[0]["reason"] and
                  att[0]["ended_at"] is not None, f"the first ended as the server found it: {att[0]}")
            check(sorted(f for f in os.listdir(os.path.join(w.root, "slow")) if f.startswith("count-")) ==
                  ["count-0-0", "count-0-1", "count-1-0", "count-1-1"],
                  "the script's ranks saw TORCHELASTIC_RESTART_COUNT 1 the second time")
            log = s2.get(f"/runs/{rid}/logs").body.decode()
            check("attempt 1 (TORCHELASTIC_RESTART_COUNT=1)" in log, f"the run's log says which attempt: {log[-800:]!r}")
            run = s2.wait_status(plain, FINAL, timeout=60)
            check(run and run["status"] == "failed" and (run["reason"] or "").startswith(
                "the server restarted and the run's processes were gone; its journal ends at step"),
                f"without restarts: failed as before: {run and run['reason']}")
            check(run and [(x["attempt"], x["status"]) for x in run["attempts"]] == [(0, "failed")],
                  f"its one attempt ended as the server found it: {run and run['attempts']}")


def case_hang_restarted(a):
    script = ("import os, signal, time, ddpd\n"
              "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
              "for step in range(1, 8 if k else 100000):\n"
              "    ddpd.log_step(step, loss=1.0 / step)\n"
              "    if rank == 1 and step == 3 and k == 0:\n"
              "        print('rank 1 stops here', flush=True)\n"
              "        ddpd.flush()\n"
              "        os.kill(os.getpid(), signal.SIGSTOP)\n"
              "    time.sleep(0.05)\n")
    # a heartbeat comment a second (15 s by default): until_quiet below ends at the first
    with WorkRoot() as w, w.server(a, env={"DDPD_SSE_HEARTBEAT_S": "1"}) as s:
        rid = s.submit({"name": "hangs-once", "command": [PY, "-c", script],
                        "distributed": {"world_size": 2, "hang_timeout_s": 3, "max_restarts": 1}})
        run = s.wait_status(rid, FINAL, timeout=120)
        if not check(run and run["status"] == "succeeded", f"restarted, it succeeds: {run and run['reason']}"):
            s.dump_log()
            return
        att = run["attempts"]
        check([(x["attempt"], x["status"]) for x in att] == [(0, "failed"), (1, "succeeded")],
              f"the hung attempt, then the second: {att}")
        check("no progress for 3 s" in att[0]["reason"] and "rank 1" in att[0]["reason"] and
              att[0]["failing_rank"] == 1 and att[0]["last_line"] == "rank 1 stops here",
              f"the first ended on the hang, naming rank 1 and its last line: {att[0]}")
        st = sse_client.Stream(s.port, f"/runs/{rid}/events", query_last_id=0)
        runs = [e.data for e in st.until_quiet(timeout=30) if e.event == "run"]
        st.close()
        again = [e for e in runs if e.get("restarting")]
        check([e["status"] for e in again] == ["queued"] and again[0]["restarting"]["attempt"] == 1 and
              "no progress" in again[0]["restarting"]["reason"],
              f"the feed says the run was queued again to start attempt 1: {runs}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "the ranks to be gone", 30) is not None,
              "no process left")


# Attempt 0: rank 0 reports steps 1-10 (loss 100 + step), then rank 1 fails. Attempt 1
# starts again from "its snapshot" at step 4 (loss 200 + step) and waits for `go`
# before steps 5 and 6.
REDONE_FROM_4 = ("import os, sys, time, ddpd\n"
                 "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                 "if k == 0:\n"
                 "    if rank == 0:\n"
                 "        for step in range(1, 11):\n"
                 "            ddpd.log_step(step, loss=100.0 + step, acc=float(step))\n"
                 "        ddpd.flush()\n"
                 "        open('reported-10', 'w').close()\n"
                 "    while not os.path.exists('reported-10'):\n"
                 "        time.sleep(0.02)\n"
                 "    if rank == 1:\n"
                 "        sys.exit(6)\n"
                 "    time.sleep(60)\n"
                 "if rank == 0:\n"
                 "    ddpd.log_step(4, loss=204.0, acc=40.0)\n"
                 "    ddpd.flush()\n"
                 "while not os.path.exists('go'):\n"
                 "    time.sleep(0.02)\n"
                 "if rank == 0:\n"
                 "    for step in (5, 6):\n"
                 "        ddpd.log_step(step, loss=200.0 + step, acc=10.0 * step)\n")


def case_restart_cuts_series(a):
    """A restart that reports from an earlier step than its last attempt reached hides
    that attempt's points past it at once, in the API and what the dashboard reads, and
    keeps them on record with their attempt."""
    with WorkRoot() as w, w.server(a) as s:
        proj = os.path.join(w.root, "cut")
        os.makedirs(proj)
        rid = s.submit({"name": "cut", "command": [PY, "-c", REDONE_FROM_4], "working_dir": "cut",
                        "distributed": {"world_size": 2, "max_restarts": 1}})

        def points(key):
            return [tuple(p[:2]) for p in s.get(f"/runs/{rid}/metrics?key={key}").json()["points"]]
        restarted = wait_until(lambda: s.run(rid)["restart_count"] == 1 and points("loss") == [
            (1, 101.0), (2, 102.0), (3, 103.0), (4, 204.0)], "the restart's step 4 to cut steps 5-10", 120)
        check(restarted, f"with the restart's first step (4), steps 5-10 of attempt 0 are gone: {points('loss')}")
        check(points("acc") == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 40.0)], f"from every series: {points('acc')}")
        with open(os.path.join(proj, "go"), "w"):
            pass
        run = s.wait_status(rid, FINAL, timeout=120)
        check(run and run["status"] == "succeeded", f"it succeeds: {run and run['reason']}")
        check(points("loss") == [(1, 101.0), (2, 102.0), (3, 103.0), (4, 204.0), (5, 205.0), (6, 206.0)],
              f"one point a step, the restart's from 4 on: {points('loss')}")
        check([(x["attempt"], x["first_step"]) for x in run["attempts"]] == [(0, None), (1, 4)],
              f"the restart's first step is 4: {run['attempts']}")
        db = sqlite3.connect(f"file:{os.path.join(s.state_dir, 'ddpd.db')}?mode=ro", uri=True)
        stored = db.execute("SELECT attempt, first_global_step FROM run_attempts WHERE run_id = ? ORDER BY attempt",
                            (rid,)).fetchall()
        check(stored == [(0, None), (1, 4)], f"stored with its attempt as it was written, not scanned for: {stored}")
        kept = db.execute("SELECT attempt, global_step, loss FROM superseded_steps WHERE run_id = ? ORDER BY global_step",
                          (rid,)).fetchall()
        kept_acc = db.execute("SELECT attempt, global_step, value FROM superseded_series WHERE run_id = ? AND key = 'acc'"
                              " ORDER BY global_step", (rid,)).fetchall()
        db.close()
        check(kept == [(0, st, 100.0 + st) for st in range(5, 11)],
              f"attempt 0's steps 5-10 are on record, its own: {kept}")
        check(kept_acc == [(0, st, float(st)) for st in range(5, 11)], f"and its series' points: {kept_acc}")


# Rank 0 reports steps 1..4, checkpoints at step 4 (ddpd.checkpoint_saved), steps 5..9,
# then dies by SIGKILL; attempt 1 goes on from the checkpoint: steps 5..8.
CHECKPOINTED_THEN_KILLED = (
    "import os, signal, time, ddpd\n"
    "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
    "def steps(a, b):\n"
    "    for s in range(a, b + 1):\n"
    "        time.sleep(0.05)\n"
    "        ddpd.log_step(s, loss=1.0 / s)\n"
    "if rank == 0 and k == 0:\n"
    "    steps(1, 4)\n"
    "    ddpd.status('checkpointing'); time.sleep(0.1); ddpd.checkpoint_saved(4, 'ckpt-4.pt')\n"
    "    steps(5, 9)\n"
    "    ddpd.flush(); time.sleep(0.3)\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "elif rank == 0:\n"
    "    steps(5, 8)\n"
    "    ddpd.flush()\n"
    "elif k == 0:\n"
    "    time.sleep(60)\n")


def case_usage_lost_and_unknown(a):
    """Usage of command runs (GET /usage, docs/using.md): a rank SIGKILLed after its
    script's ddpd.checkpoint_saved(4) and steps to 9, restarted from the checkpoint:
    lost_steps 5, lost time, the checkpoint's time; a run that reports nothing: all of
    its time unknown. The phases add up to the time held."""
    with WorkRoot() as w, w.server(a, env={"DDPD_RESTART_BACKOFF_S": "0.2"}) as s:
        os.makedirs(os.path.join(w.root, "u"))
        rid = s.submit({"name": "usage", "command": [PY, "-c", CHECKPOINTED_THEN_KILLED], "working_dir": "u",
                        "distributed": {"world_size": 2, "max_restarts": 1}})
        quiet = s.submit({"name": "quiet", "command": [PY, "-c", "import time; time.sleep(1)"], "working_dir": "u"})
        for r in (rid, quiet):
            run = s.wait_status(r, FINAL, timeout=120)
            check(run and run["status"] == "succeeded", f"run {r} succeeds: {run and run['reason']}")
        groups = {g["run"]: g for g in s.get("/usage?by=run").json()["groups"]}
        g, q = groups.get(rid), groups.get(quiet)
        if not check(g and q, f"both runs' usage: {groups}"):
            return
        print(f"run {rid}: {g}\nrun {quiet}: {q}")
        for x in (g, q):
            total = sum(x["phases"][p] for p in ("startup", "productive", "checkpoint", "lost", "idle", "unknown"))
            check(abs(total - x["held_device_s"]) <= 0.01 * x["held_device_s"], f"the phases add up: {x}")
        check(g["phases"]["unknown"] == 0, f"a run that reports steps has no unknown time: {g['phases']}")
        check(g["lost_steps"] == 5 and g["phases"]["lost"] > 0,
              f"steps 5..9 thrown away by the restart from the checkpoint at 4: {g['lost_steps']} {g['phases']}")
        check(g["phases"]["checkpoint"] >= 0.1 * 0.9 * 2, f"its checkpoint's 0.1 s (two devices): {g['phases']}")
        check(q["phases"]["unknown"] == q["held_device_s"] > 0 and q["goodput"] == 0,
              f"a run that reports nothing: all its time unknown: {q['phases']}")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--ddpd", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--ddpctl", required=True)
    args = ap.parse_args()
    args.ddpd, args.runner, args.ddpctl = (os.path.abspath(x) for x in (args.ddpd, args.runner, args.ddpctl))
    ddpd_harness.main(CASES, args)
