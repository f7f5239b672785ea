#!/usr/bin/env python3
"""Command runs end to end: a real ddpd (--allow-commands, a work root) starts the
user's script through ddp-run, once per rank, and serves what it reports.

The script is tests/integration/commands/ddp_fmnist.py, in the DDP tutorial's shape, on Debian's
python3-torch (gloo, CPU) with /usr/bin/python3, reporting through `import ddpd`:
  torch_two_ranks    succeeded; torchrun's variables on each rank; a loss point per
                     step and the LR per epoch in the API, a series of its own; both
                     ranks' logs; the same final loss as the script launched by hand
  ports_differ       two command runs at once get different MASTER_PORTs
  rank_exits_3       one rank exits 3 mid-run: the run fails naming that rank and its
                     line; the other (blocked in an all-reduce) is stopped
  cancel             a running command run canceled: no process left
  stop_grace_kept    distributed.stop_grace_s 6 over --cancel-grace 1: a SIGTERM handler
                     that needs 3 s keeps its checkpoint; the attempt closed; the bound
  open_attempt_closed  a launcher stopped (SIGSTOP) is killed after the grace; the
                     server closes the attempt it left open
  finished_at_exit   rank 0 exits 0, rank 1 hangs: stopped after distributed.exit_timeout_s,
                     the run succeeds naming it
  ranks_without_reporter  a script without `import ddpd`: both ranks in GET /runs/{id}/ranks
                     with their pids, exited with status 0 (from ddp-run)
  hang_named         a rank that stops reporting fails the run by name (hang_timeout_s)
  hang_blames_running  rank 0 exits 0, rank 1 hangs (exit timeout off): the hang names
                     rank 1, never the rank that exited
  server_killed      the server SIGKILLed mid-run and started again: succeeded, every step
  ddpctl_run         ddpctl run -n 2 --follow -- ...: succeeds, its logs by rank
  ddpctl_run_knobs   ddpctl run's torchrun knobs (--nproc-per-node, --max-restarts, ...) in
                     the config; an absolute --workdir; the banner and PWD; what is refused
                     (a relative script without --workdir, a missing interpreter) says why
  restarted_once     distributed.max_restarts 1: rank 1 fails once, the gang starts
                     again, the run succeeds with a point per step
  preempted          a preemptible command run preempted for a run of a higher
                     priority: stopped (SIGTERM), queued again with preempted_by, and
                     restarted once placed, its ranks seeing TORCHELASTIC_RESTART_COUNT 1
  epochs_rank_zero   every rank reports its epochs: the table is rank 0's, the same on a
                     rerun; another rank's epoch counts with rank_zero_only false

Usage: test_command_runs.py CASE --ddpd PATH --runner PATH --ddpctl PATH"""
import argparse, json, os, re, shutil, signal, socket, subprocess, sys, tempfile
from datetime import datetime

import ddpd_harness  # noqa: E402
from ddpd_harness import Server, check, cases_in, wait_until, pids_under, lease_port_range  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "ddp_fmnist.py")
REPORTER = os.path.join(HERE, "..", "..", "..", "reporter", "python")
TORCHRUN_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
                 "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                 "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
                 "OMP_NUM_THREADS", "PYTHONUNBUFFERED"]


def procs_in(directory):
    """Processes working inside `directory` (the ranks of a run whose working_dir it holds)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (cwd == directory or cwd.startswith(directory + "/")) and state != "Z":
            found.append(int(name))
    return found


class WorkRoot:
    """A work root with the script in a project folder of it."""

    def __enter__(self):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-work-"))
        self.ports = lease_port_range()
        os.mkdir(os.path.join(self.root, "proj"))
        shutil.copy(SCRIPT, os.path.join(self.root, "proj", "ddp_fmnist.py"))
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.root, ignore_errors=True)

    def server(self, a, slots=2, env=None, state_dir=None):
        return Server(a.ddpd, None, slots=slots, env=env, state_dir=state_dir,
                      extra_args=["--allow-commands", "--work-root", self.root, "--runner", a.runner,
                                  "--port-range", "%d-%d" % self.ports])


def command(*args):
    return ["/usr/bin/python3", "ddp_fmnist.py", *args]


# For the restart cases here and in test_command_attempts.py: rank 0 reports steps
# 1..5 (loss 100 + step) and waits; rank 1 then gives up, on attempt 0 only.
# Attempt 1 reports steps 1..10 (loss = step) and both ranks end.
FAILS_ONCE = ("import os, sys, time, ddpd\n"
              "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
              "print(f'rank {rank} on attempt {k}', flush=True)\n"
              "if k == 0:\n"
              "    if rank == 0:\n"
              "        for step in range(1, 6):\n"
              "            ddpd.log_step(step, loss=100.0 + step)\n"
              "        ddpd.flush()\n"
              "        open('reported-0', 'w').close()\n"
              "        time.sleep(600)\n"
              "    while not os.path.exists('reported-0'):\n"
              "        time.sleep(0.01)\n"
              "    print('rank 1 gives up on attempt 0', flush=True)\n"
              "    sys.exit(3)\n"
              "if rank == 0:\n"
              "    for step in range(1, 11):\n"
              "        ddpd.log_step(step, loss=float(step))\n"
              "print(f'attempt {k} of {os.environ[\"TORCHELASTIC_MAX_RESTARTS\"]} done', flush=True)\n")


def case_torch_two_ranks(a):
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "tutorial", "command": command("--epochs", "6"), "working_dir": "proj",
                        "env": {"MY_FLAG": "on"},
                        # a hang (none is expected) then fails with the rank named instead of waiting out the test
                        "distributed": {"world_size": 2, "hang_timeout_s": 90}})
        run = s.wait_status(rid, ("succeeded", "failed"), timeout=240)
        if not check(run and run["status"] == "succeeded", f"succeeded: {run and (run['status'], run['reason'])}"):
            s.dump_run_log(rid)
            return
        proj = os.path.join(w.root, "proj")
        envs = {r: json.load(open(os.path.join(proj, f"env-rank-{r}.json"))) for r in (0, 1)}
        for r, e in envs.items():
            missing = [k for k in TORCHRUN_VARS if not e.get(k)]
            check(not missing, f"rank {r}: every torchrun variable set (missing {missing})")
            check(e["RANK"] == str(r) and e["LOCAL_RANK"] == str(r) and e["WORLD_SIZE"] == "2" and
                  e["LOCAL_WORLD_SIZE"] == "2" and e["GROUP_RANK"] == "0" and e["ROLE_NAME"] == "default" and
                  e["MASTER_ADDR"] == "127.0.0.1" and e["TORCHELASTIC_RUN_ID"] == str(rid) and
                  e["DDPD_RUN_ID"] == str(rid) and e["OMP_NUM_THREADS"] == "1" and e["MY_FLAG"] == "on",
                  f"rank {r}: the values are right: {e}")
            check(e["cwd"] == os.path.realpath(proj), f"rank {r} works in the working_dir: {e['cwd']}")
            check(e["CUDA_VISIBLE_DEVICES"] == "", f"CPU slots: no GPU visible ({e['CUDA_VISIBLE_DEVICES']!r})")
        port = int(envs[0]["MASTER_PORT"])
        check(envs[1]["MASTER_PORT"] == str(port) and w.ports[0] <= port <= w.ports[1],
              f"one MASTER_PORT for the run, from the server's --port-range {w.ports}: {port}")
        loss = s.get(f"/runs/{rid}/metrics?key=loss").json()
        steps = [p[0] for p in loss["points"]]
        # 2000 examples over 2 ranks in batches of 64: 16 steps an epoch, 6 epochs
        check(steps == list(range(1, 97)), f"a loss point per step: {len(steps)} points, {steps[:3]}...{steps[-3:]}")
        check("grad_steps" in loss["keys"], f"the script's own series is listed: {loss['keys']}")
        own = s.get(f"/runs/{rid}/metrics?key=grad_steps").json()
        check([p[1] for p in own["points"]] == [float(i) for i in range(1, 97)], "and served")
        epochs = s.get(f"/runs/{rid}/epochs").json()["epochs"]
        lrs = [e["lr"] for e in epochs]
        check([e["epoch"] for e in epochs] == list(range(6)) and lrs[:5] == [1e-3] * 5 and abs(lrs[5] - 3e-4) < 1e-12,
              f"the LR per epoch, times 0.3 at epoch 5: {lrs}")
        run = s.run(rid)
        check(run["progress"]["global_step"] == 96 and run["progress"]["loss"] == loss["points"][-1][1],
              f"progress follows the reported steps: {run['progress']}")
        ranks = {r["rank"]: r for r in s.get(f"/runs/{rid}/ranks").json()["ranks"]}
        check(set(ranks) >= {0, 1}, f"both ranks said hello: {sorted(ranks)}")
        check(ranks.get(0, {}).get("global_step") == 96,
              f"rank 0's row has its last reported step (a reporter sends no heartbeat): {ranks.get(0)}")
        for r in (0, 1):
            log = s.get(f"/runs/{rid}/logs?rank={r}&offset=0").body.decode()
            check(r != 0 or "final loss" in log, f"rank {r}'s own log: {log[-200:]!r}")
        whole = s.get(f"/runs/{rid}/logs").body.decode()
        check("[rank 0] final loss" in whole, f"the run's log has the ranks' lines, prefixed: {whole[-300:]!r}")
        final = re.search(r"final loss (\S+)", whole)
        # the same script launched by hand with the same environment
        by_hand = tempfile.mkdtemp(prefix="ddpd-by-hand-")
        try:
            shutil.copy(SCRIPT, by_hand)
            with socket.socket() as t:
                t.bind(("127.0.0.1", 0))
                hand_port = t.getsockname()[1]
            procs = []
            for r in (0, 1):
                env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(hand_port), OMP_NUM_THREADS="1", PYTHONPATH=REPORTER)
                for k in list(env):
                    if k.startswith("DDPD_"):
                        del env[k]
                procs.append(subprocess.Popen(command("--epochs", "6"), cwd=by_hand, env=env,
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            outs = [p.communicate(timeout=240)[0] for p in procs]
            hand = re.search(r"final loss (\S+)", outs[0])
            check(final and hand and final.group(1) == hand.group(1),
                  f"the same final loss as by hand: {final and final.group(1)} vs {hand and hand.group(1)} {outs[0][-300:]!r}")
        finally:
            shutil.rmtree(by_hand, ignore_errors=True)


def case_ports_differ(a):
    with WorkRoot() as w, w.server(a, slots=2) as s:
        sleeper = ["/usr/bin/python3", "-c", "import os, time; print(os.environ['MASTER_PORT'], flush=True); time.sleep(60)"]
        ids = [s.submit({"name": f"p{i}", "command": sleeper, "distributed": {"world_size": 1}}) for i in range(2)]
        for rid in ids:
            s.wait_status(rid, "running", timeout=60)
        ports = []
        for rid in ids:
            out = wait_until(lambda: re.search(r"\[rank 0\] (\d+)", s.get(f"/runs/{rid}/logs").body.decode()),
                             f"run {rid}'s port line", timeout=60)
            ports.append(int(out.group(1)) if out else None)
        check(None not in ports and ports[0] != ports[1], f"two runs at once, two ports: {ports}")
        for rid in ids:
            s.post(f"/runs/{rid}/cancel")
        for rid in ids:
            s.wait_status(rid, "canceled", timeout=60)


def case_rank_exits_3(a):
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "dies", "command": command("--epochs", "6", "--fail-rank", "1", "--fail-at", "20"),
                        "working_dir": "proj", "distributed": {"world_size": 2}})
        run = s.wait_status(rid, ("succeeded", "failed"), timeout=240)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed", f"the run failed: {run and run['status']}")
        check("rank 1" in reason and "status 3" in reason and "planted failure at step 20" in reason,
              f"the reason names the rank, its status and its line: {reason!r}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)) and not procs_in(w.root), "the ranks to be gone", 30)
              is not None, "the other rank (blocked in an all-reduce) was stopped: no process left")


def case_cancel(a):
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "long", "command": command("--epochs", "500"), "working_dir": "proj",
                        "distributed": {"world_size": 2}})
        wait_until(lambda: s.get(f"/runs/{rid}/metrics?key=loss").json()["count"] > 3, "steps reported", 120)
        r = s.post(f"/runs/{rid}/cancel")
        check(r.status == 202, f"cancel: 202 ({r.status})")
        run = s.wait_status(rid, "canceled", timeout=60)
        check(run and run["status"] == "canceled", f"canceled: {run and run['status']}")
        check(wait_until(lambda: not procs_in(w.root), "the ranks to be gone", 30) is not None, "no process left")


# Each rank joins a gloo group, then saves on SIGTERM: 3 s of work, then its file.
SAVES_ON_SIGTERM = ("import os, signal, sys, time\n"
                    "import torch, torch.distributed as dist\n"
                    "dist.init_process_group('gloo')\n"
                    "rank = dist.get_rank()\n"
                    "def save(*_):\n"
                    "    time.sleep(float(sys.argv[1]))\n"
                    "    torch.save(torch.ones(3) * rank, f'ckpt-{rank}.pt.tmp')\n"
                    "    os.rename(f'ckpt-{rank}.pt.tmp', f'ckpt-{rank}.pt')\n"
                    "    os._exit(0)\n"
                    "signal.signal(signal.SIGTERM, save)\n"
                    "open(f'ready-{rank}', 'w').close()\n"
                    "while True:\n"
                    "    time.sleep(1)\n")


def case_stop_grace_kept(a):
    """The grace a run asks for (distributed.stop_grace_s 6, over --cancel-grace 1) is
    its ranks' from SIGTERM to SIGKILL, kept by ddp-run and by the server: a script that
    needs 3 s to save its checkpoint on SIGTERM keeps it, and the run ends canceled with
    its attempt closed. A grace asked beyond --max-stop-grace gets the bound."""
    with WorkRoot() as w:
        s = Server(a.ddpd, None, slots=2, grace=1,
                   extra_args=["--allow-commands", "--work-root", w.root, "--runner", a.runner,
                               "--port-range", "%d-%d" % w.ports, "--max-stop-grace", "8"])
        with s:
            with open(os.path.join(w.root, "proj", "saves.py"), "w") as f:
                f.write(SAVES_ON_SIGTERM)
            rid = s.submit({"name": "saves", "command": ["/usr/bin/python3", "saves.py", "3"], "working_dir": "proj",
                            "distributed": {"world_size": 2, "stop_grace_s": 6}})
            ready = [os.path.join(w.root, "proj", f"ready-{r}") for r in range(2)]
            wait_until(lambda: all(os.path.exists(p) for p in ready), "both ranks in their gloo group", 180)
            check(s.post(f"/runs/{rid}/cancel").status == 202, "canceled")
            run = s.wait_status(rid, ("canceled", "failed", "succeeded"), timeout=60)
            check(run and run["status"] == "canceled", f"the run ends canceled: {run and (run['status'], run['reason'])}")
            saved = [os.path.exists(os.path.join(w.root, "proj", f"ckpt-{r}.pt")) for r in range(2)]
            check(all(saved), f"each rank's checkpoint, written 3 s after SIGTERM, is there: {saved}")
            last = (run or {}).get("attempts", [{}])[-1]
            check(last.get("status") == "canceled" and last.get("ended_at"),
                  f"its attempt is closed: {last.get('status')} {last.get('ended_at')}")
            log = s.get(f"/runs/{rid}/logs?offset=0").body.decode(errors="replace")
            check("SIGKILL at " in log and "in 6 s" in log, f"the launcher names the deadline it keeps: {log[-600:]!r}")

            bounded = s.submit({"name": "bounded", "command": ["/usr/bin/python3", "saves.py", "0"],
                                "working_dir": "proj", "distributed": {"world_size": 2, "stop_grace_s": 600}})
            for p in ready:
                os.unlink(p)
            wait_until(lambda: all(os.path.exists(p) for p in ready), "both ranks in their gloo group", 180)
            s.post(f"/runs/{bounded}/cancel")
            run = s.wait_status(bounded, "canceled", timeout=60)
            log = s.get(f"/runs/{bounded}/logs?offset=0").body.decode(errors="replace")
            check(run and "in 8 s" in log, f"600 s asked, --max-stop-grace 8 given: {log[-600:]!r}")
            check(wait_until(lambda: not procs_in(w.root), "the ranks to be gone", 30) is not None, "no process left")


def case_open_attempt_closed(a):
    """A launcher that cannot close its attempt (stopped here: SIGSTOP, as one stuck or
    swapped out) is killed by the server after the grace and a margin; the server closes
    the attempt with the run's end, so nothing shows it running on a canceled run."""
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "stuck", "command": ["/usr/bin/python3", "-c", "import time; time.sleep(600)"],
                        "distributed": {"world_size": 2}})
        run = wait_until(lambda: (lambda r: r if r and r["status"] == "running" and r.get("attempts") else None)(
            s.run(rid)), "the run and its attempt to start", 120)
        check(run and run["attempts"][-1]["status"] is None, f"its attempt is open: {run and run['attempts']}")
        pid = run and run["pid"]
        os.kill(pid, signal.SIGSTOP)
        check(s.post(f"/runs/{rid}/cancel").status == 202, "canceled")
        run = s.wait_status(rid, ("canceled", "failed"), timeout=60)
        check(run and run["status"] == "canceled", f"the run ends canceled: {run and (run['status'], run['reason'])}")
        last = (run or {}).get("attempts", [{}])[-1]
        check(last.get("status") == "canceled" and last.get("ended_at") and last.get("reason"),
              f"the server closed its attempt: {last}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "the ranks to be gone", 30) is not None,
              "no process left")


def case_finished_at_exit(a):
    """Rank 0 exits 0 after the last all-reduce and rank 1 hangs in its teardown (here:
    sleeps for ever): after distributed.exit_timeout_s the launcher stops rank 1 and the
    run succeeds, its reason and its attempt naming the rank stopped at exit."""
    script = ("import os, time\n"
              "import torch, torch.distributed as dist\n"
              "dist.init_process_group('gloo')\n"
              "t = torch.ones(2)\n"
              "dist.all_reduce(t)\n"
              "print(f'reduced {t.tolist()}', flush=True)\n"
              "if dist.get_rank() == 1:\n"
              "    time.sleep(600)\n")
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "finished", "command": ["/usr/bin/python3", "-c", script],
                        "distributed": {"world_size": 2, "exit_timeout_s": 2}})
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=180)
        want = "rank 1 stopped at exit: still running, silent, 2 s after rank 0 exited 0 (distributed.exit_timeout_s)"
        check(run and run["status"] == "succeeded" and run["reason"] == want,
              f"the finished training succeeded, naming the rank stopped at exit: {run and (run['status'], run['reason'])}")
        last = (run or {}).get("attempts", [{}])[-1]
        check(last.get("status") == "succeeded" and last.get("reason") == want, f"so does its attempt: {last}")
        check("reduced [2.0, 2.0]" in s.get(f"/runs/{rid}/logs?rank=1&offset=0").body.decode(),
              "rank 1 took part in the all-reduce before it hung")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "the ranks to be gone", 30) is not None,
              "no process left")


def case_ranks_without_reporter(a):
    """A script that does not `import ddpd` still has its ranks in GET /runs/{id}/ranks,
    from its launcher: each with its pid, started, then exited with status 0."""
    script = ("import os\n"
              "import torch, torch.distributed as dist\n"
              "dist.init_process_group('gloo')\n"
              "t = torch.ones(1)\n"
              "dist.all_reduce(t)\n"
              "print(f'rank {dist.get_rank()} pid {os.getpid()} sum {t.item()}', flush=True)\n"
              "dist.destroy_process_group()\n")
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "plain", "command": ["/usr/bin/python3", "-c", script],
                        "distributed": {"world_size": 2}})
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=180)
        check(run and run["status"] == "succeeded", f"succeeded: {run and (run['status'], run['reason'])}")
        ranks = {r["rank"]: r for r in s.get(f"/runs/{rid}/ranks").json()["ranks"]}
        check(sorted(ranks) == [0, 1], f"both ranks are listed: {sorted(ranks)}")
        for r in (0, 1):
            row = ranks.get(r, {})
            log = s.get(f"/runs/{rid}/logs?rank={r}&offset=0").body.decode()
            check(row.get("pid") and f"rank {r} pid {row.get('pid')} sum 2.0" in log,
                  f"rank {r}'s pid is its process's: {row.get('pid')} ({log.strip()!r})")
            check(row.get("state") == "exited" and row.get("detail") == "exited with status 0" and row.get("host"),
                  f"rank {r} exited with status 0, on its host: {row}")


def case_server_killed(a):
    """The server SIGKILLed mid-run and started again on the same state: the run (taken
    back alive, or ended meanwhile) ends succeeded with every step and epoch its
    script reported, from the journal ddp-run and the reporter keep."""
    with WorkRoot() as w:
        s1 = w.server(a)
        s1.own_dir = False
        s1.start()
        try:
            rid = s1.submit({"name": "restarted", "command": command("--epochs", "6"), "working_dir": "proj",
                             "distributed": {"world_size": 2}})
            wait_until(lambda: s1.get(f"/runs/{rid}/metrics?key=loss").json()["count"] >= 3, "steps reported", 120)
        finally:
            s1.kill()
        s2 = w.server(a, state_dir=s1.state_dir)
        s2.own_dir = True  # removed when it stops
        with s2:
            run = s2.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=240)
            check(run and run["status"] == "succeeded" and run["exit_code"] == 0,
                  f"succeeded: {run and (run['status'], run['reason'], run['exit_code'])}")
            steps = [p[0] for p in s2.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
            check(steps == list(range(1, 97)), f"a loss point per step: {len(steps)} points, {steps[:3]}...{steps[-3:]}")
            epochs = [e["epoch"] for e in s2.get(f"/runs/{rid}/epochs").json()["epochs"]]
            check(epochs == list(range(6)), f"every epoch: {epochs}")
            check(wait_until(lambda: not procs_in(w.root), "the ranks to be gone", 30) is not None, "no process left")


def case_hang_named(a):
    # distributed.hang_timeout_s: rank 1 reports three steps and then goes quiet
    # (SIGSTOP: it hangs as a rank stuck in a collective does); rank 0 keeps going.
    # The run fails within seconds naming rank 1 and its last step; nothing is left.
    script = ("import os, signal, time, ddpd\n"
              "rank = int(os.environ['RANK'])\n"
              "for step in range(1, 100000):\n"
              "    ddpd.log_step(step, loss=1.0 / step)\n"
              "    if rank == 1 and step == 3:\n"
              "        ddpd.flush()\n"
              "        os.kill(os.getpid(), signal.SIGSTOP)\n"
              "    time.sleep(0.05)\n")
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "hangs", "command": ["/usr/bin/python3", "-c", script],
                        "distributed": {"world_size": 2, "hang_timeout_s": 3}})
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=90)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed" and "rank 1" in reason and "step 3" in reason
              and "hang_timeout_s" in reason, f"failed, naming rank 1 at step 3: {run and run['status']} {reason!r}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "the ranks to be gone", 30) is not None,
              "no process left")
        cfg = s.run(rid)["config"]["distributed"]
        check(cfg["hang_timeout_s"] == 3, f"the timeout stored as given: {cfg}")
        other = s.post("/runs", {"command": ["true"]}).json()
        check(other.get("config", {}).get("distributed", {}).get("hang_timeout_s") == 0,
              f"a command run's default: off ({other.get('config')})")


def case_hang_blames_running(a):
    # Rank 0 reports steps 1..3 and exits 0; only then does rank 1 report steps 1..5
    # and go quiet. With the exit timeout off, the hang watch fails the run, naming
    # rank 1 at step 5: never rank 0, whose process ended (its launcher said so).
    script = ("import os, sys, time, ddpd\n"
              "rank = int(os.environ['RANK'])\n"
              "if rank == 0:\n"
              "    for step in range(1, 4):\n"
              "        ddpd.log_step(step, loss=1.0)\n"
              "    ddpd.flush()\n"
              "    open('rank-0.pid.tmp', 'w').write(str(os.getpid()))\n"
              "    os.rename('rank-0.pid.tmp', 'rank-0.pid')\n"
              "    sys.exit(0)\n"
              "while not os.path.exists('rank-0.pid'):\n"
              "    time.sleep(0.02)\n"
              "pid = int(open('rank-0.pid').read())\n"
              "while os.path.exists(f'/proc/{pid}') and open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':\n"
              "    time.sleep(0.02)\n"
              "for step in range(1, 6):\n"
              "    ddpd.log_step(step, loss=1.0)\n"
              "ddpd.flush()\n"
              "time.sleep(600)\n")
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "hangs-after-exit", "command": ["/usr/bin/python3", "-c", script],
                        "working_dir": "proj",
                        "distributed": {"world_size": 2, "hang_timeout_s": 2, "exit_timeout_s": 0}})
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=90)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed" and "rank 1 furthest behind" in reason and "step 5" in reason,
              f"failed, naming rank 1 (still running) at step 5, not rank 0 (exited 0): {run and run['status']} {reason!r}")
        ranks = {r["rank"]: r for r in s.get(f"/runs/{rid}/ranks").json()["ranks"]}
        check(ranks.get(0, {}).get("detail") == "exited with status 0", f"rank 0 exited 0: {ranks.get(0)}")


def case_ddpctl_run(a):
    with WorkRoot() as w, w.server(a) as s:
        env = dict(os.environ, DDPD_URL=f"http://127.0.0.1:{s.port}")
        p = subprocess.run([a.ddpctl, "run", "-n", "2", "--name", "from-ddpctl", "--workdir", "proj", "--follow",
                            "--", *command("--epochs", "2")], env=env, capture_output=True, text=True, timeout=240)
        check(p.returncode == 0, f"ddpctl run --follow exits 0 when the run succeeds: {p.returncode} {p.stderr[-300:]!r}")
        m = re.search(r"run (\d+) submitted", p.stdout)
        rid = int(m.group(1)) if m else None
        check(rid and s.run(rid)["status"] == "succeeded" and s.run(rid)["config"]["command"][1] == "ddp_fmnist.py",
              f"the run is the command given: {p.stdout[-300:]!r}")
        p = subprocess.run([a.ddpctl, "logs", str(rid), "--rank", "0"], env=env, capture_output=True, text=True,
                           timeout=60)
        check(p.returncode == 0 and "final loss" in p.stdout, f"ddpctl logs --rank 0: {p.stdout[-200:]!r}")


def case_ddpctl_run_knobs(a):
    """torchrun's knobs on ddpctl run's command line, an absolute --workdir inside the
    work root, and the refusals that say what to pass."""
    with WorkRoot() as w, w.server(a) as s:
        env = dict(os.environ, DDPD_URL=f"http://127.0.0.1:{s.port}")
        proj = os.path.join(w.root, "proj")
        show_env = ("import os, ddpd; print('pwd', os.environ['PWD'], os.getcwd())\n"
                    "ddpd.log_step(1, loss=0.5); ddpd.log_step(2, loss=0.25); ddpd.flush()")

        def ddpctl(*argv):
            return subprocess.run([a.ddpctl, *argv], env=env, capture_output=True, text=True, timeout=120)

        p = ddpctl("run", "--nproc-per-node", "2", "--max-restarts", "2", "--priority", "5", "--preemptible",
                   "--hang-timeout", "30", "--workdir", proj, "--follow", "--", "python3", "-c", show_env)
        check(p.returncode == 0, f"ddpctl run with the knobs and an absolute --workdir succeeds: {p.returncode} "
                                 f"{p.stdout[-300:]!r} {p.stderr[-300:]!r}")
        check("note: --nproc-per-node 2 is the run's world size, all ranks on one node (distributed.world_size 2, "
              "distributed.nodes 1)" in p.stderr, f"a note says what --nproc-per-node became: {p.stderr!r}")
        m = re.search(r"run (\d+) submitted", p.stdout)
        rid = int(m.group(1)) if m else None
        cfg = s.run(rid)["config"] if rid else {}
        dist = cfg.get("distributed", {})
        check(dist.get("world_size") == 2 and dist.get("nodes") == 1 and dist.get("max_restarts") == 2 and dist.get("hang_timeout_s") == 30
              and cfg.get("priority") == 5 and cfg.get("preemptible") is True,
              f"each flag became its config field: {cfg}")
        log = s.get(f"/runs/{rid}/logs?rank=1&offset=0").body.decode() if rid else ""
        banner = log.split("\n", 1)[0]
        check(f"program {os.path.realpath(shutil.which('python3'))};" in banner and
              re.search(r"; working directory (<work-root>|" + re.escape(w.root) + ")/proj ---$", banner),
              f"rank 1's banner names the interpreter found and the working directory: {banner!r}")
        check(re.search(r"^pwd (<work-root>|" + re.escape(w.root) + r")/proj \1/proj$", log, re.M),
              f"PWD is the working directory: {log!r}")
        # a command run's total of steps is unknown: no "of 0"; no samples_per_s series of nulls
        p = ddpctl("show", str(rid))
        check(p.returncode == 0 and re.search(r"^  progress:  100%, step 2, ETA ", p.stdout, re.M) and " of 0" not in p.stdout,
              f"ddpctl show: the step without a total: {p.stdout!r}")
        m = s.get(f"/runs/{rid}/metrics?key=loss").json()
        sps = s.get(f"/runs/{rid}/metrics?key=samples_per_s").json()
        check([pt[1] for pt in m["points"]] == [0.5, 0.25] and "samples_per_s" not in m["keys"] and
              sps["points"] == [] and sps["count"] == 0,
              f"the script reported no samples_per_s: not listed, no points of nulls: {m['keys']} {sps}")
        p = ddpctl("run", "--nproc_per_node=1", "--", "python3", "-c", "pass")
        check(p.returncode == 0 and "--nproc_per_node 1 is the run's world size, all ranks on one node" in p.stderr,
              f"torchrun's other spelling, with =: {p.returncode} {p.stderr!r}")

        # what is refused says what to pass
        p = ddpctl("run", "-n", "2", "--", "python3", "train.py")
        check(p.returncode == 2 and "train.py is a relative path" in p.stderr and "pass --workdir DIR" in p.stderr,
              f"a relative script without --workdir: {p.returncode} {p.stderr!r}")
        outside = tempfile.mkdtemp(prefix="ddpd-outside-")
        try:
            p = ddpctl("run", "--workdir", outside, "--", "python3", "train.py")
        finally:
            os.rmdir(outside)
        check(p.returncode == 4 and f'"{outside}" is not inside any of the work roots' in p.stderr and
              "--workdir" in p.stderr, f"an absolute --workdir outside the work roots: {p.returncode} {p.stderr!r}")
        p = ddpctl("run", "--workdir", "proj", "--follow", "--", "python9-not-here", "train.py")
        check(p.returncode == 1, f"a missing interpreter fails the run: {p.returncode} {p.stderr[-300:]!r}")
        runs = s.get("/runs").json()["runs"]
        reason = runs[0].get("reason") or ""
        check("no program python9-not-here on the ranks' PATH" in reason and "absolute path" in reason and
              "--env PATH=" in reason, f"its reason says what to pass: {reason!r}")


def case_restarted_once(a):
    """distributed.max_restarts through ddpd (the server's side of attempts is still to
    come): ddp-run restarts the gang after rank 1 fails, the server takes the
    launcher's `attempt` events without a fault, the run succeeds, and the steps the
    second attempt reports again replace the first one's (a point per step)."""
    with WorkRoot() as w, w.server(a) as s:
        rid = s.submit({"name": "restarts", "command": ["/usr/bin/python3", "-c", FAILS_ONCE],
                        "distributed": {"world_size": 2, "max_restarts": 1}})
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=120)
        if not check(run and run["status"] == "succeeded", f"succeeded: {run and (run['status'], run['reason'])}"):
            s.dump_run_log(rid)
            return
        check(run["config"]["distributed"]["max_restarts"] == 1, f"stored as given: {run['config']['distributed']}")
        points = [(p[0], p[1]) for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        check(points == [(i, float(i)) for i in range(1, 11)],
              f"one point per step, the second attempt's where it reported a step again: {points}")
        whole = s.get(f"/runs/{rid}/logs").body.decode()
        check("attempt 1 starting (TORCHELASTIC_RESTART_COUNT=1; the last allowed is attempt 1) in 1 s: rank 1 exited with status 3: rank 1 "
              "gives up on attempt 0" in whole and "[rank 1] attempt 1 of 1 done" in whole,
              f"the run's log says why the gang started again: {whole[-600:]!r}")
        log = s.get(f"/runs/{rid}/logs?rank=1&offset=0").body.decode()
        banner = (r"--- ddp-run: attempt 1 starting \(TORCHELASTIC_RESTART_COUNT=1; the last allowed is attempt 1\); program /\S+/python3\.\d+; "
                  r"working directory \S+ ---\n")
        check(re.search("rank 1 gives up on attempt 0\n" + banner + "rank 1 on attempt 1\nattempt 1 of 1 done", log),
              f"rank 1's log keeps both attempts, each after its banner (the interpreter found, the working "
              f"directory): {log!r}")


def case_preempted(a):
    with WorkRoot() as w, w.server(a) as s:
        # each rank writes its pid under the work root; the urgent run holds its slot
        # until the test creates `go`, so the preempted run stays queued until then
        script = ("import os, time, ddpd\n"
                  "rank, k = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                  f"open(f'{w.root}/rank-{{rank}}-attempt-{{k}}.pid', 'w').write(str(os.getpid()))\n"
                  "print(f'rank {rank} attempt {k}', flush=True)\n"
                  "steps = 100000 if k == 0 else 3\n"
                  "for step in range(1, steps + 1):\n"
                  "    if rank == 0:\n"
                  "        ddpd.log_step(step, loss=float(k * 1000 + step))\n"
                  "    time.sleep(0.05 if k == 0 else 0)\n")
        go = os.path.join(w.root, "go")
        waits = f"import os, time\nwhile not os.path.exists({go!r}): time.sleep(0.05)\nprint('urgent done')\n"
        rid = s.submit({"name": "preemptible", "command": ["/usr/bin/python3", "-c", script], "preemptible": True,
                        "distributed": {"world_size": 2}})
        wait_until(lambda: s.get(f"/runs/{rid}/metrics?key=loss").json()["count"] >= 3, "steps reported", 120)
        first = [int(open(os.path.join(w.root, f"rank-{r}-attempt-0.pid")).read()) for r in range(2)]
        urgent = s.submit({"name": "urgent", "command": ["/usr/bin/python3", "-c", waits],
                           "priority": 10, "distributed": {"world_size": 1}})
        run = s.wait_status(rid, "queued", timeout=60)
        check(run and run["preempted_by"] == urgent and run["preemptions"] == 1 and run["preempted_at"],
              f"stopped and queued again, preempted by run {urgent}: "
              f"{run and (run['preempted_by'], run['preemptions'], run['preempted_at'])}")

        def gone(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] == "Z"
            except OSError:
                return True
        check(all(gone(p) for p in first), f"its first attempt's ranks {first} were stopped")
        # the preempted run is queued again as soon as its ranks are gone; the urgent run
        # starts in the slots they freed a moment later (starting, then running), so wait
        # for it rather than read its status at once
        held = s.wait_status(urgent, "running", timeout=60)
        check(held and s.run(rid)["status"] == "queued",
              f"the urgent run holds the slots it freed, the preempted one waits: {held and held['status']}")
        queued = [q for q in s.get("/queue").json()["runs"] if q["id"] == rid]
        check(queued and queued[0]["preempted_by"] == urgent and
              (queued[0]["waiting_for"] or "").startswith(f"preempted by run {urgent} and queued again; it waits for "),
              f"the queue says why it waits: preempted by run {urgent}: {queued}")
        waiting = s.run(rid).get("waiting_for") or ""
        check(waiting.startswith(f"preempted by run {urgent}"), f"and so does the run: {waiting!r}")
        open(go, "w").close()
        done = s.wait_status(urgent, ("succeeded", "failed"), timeout=60)
        check(done and done["status"] == "succeeded", f"the urgent run ran: {done and done['status']}")
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=120)
        if not check(run and run["status"] == "succeeded", f"restarted, it succeeds: {run and (run['status'], run['reason'])}"):
            s.dump_run_log(rid)
            return
        points = [(p[0], p[1]) for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        check(points[:3] == [(1, 1001.0), (2, 1002.0), (3, 1003.0)],
              f"the restart's steps replace the first attempt's where it reported them again: {points[:5]}")
        log = s.get(f"/runs/{rid}/logs?rank=0&offset=0").body.decode()
        check("rank 0 attempt 0\n" in log and "rank 0 attempt 1\n" in log,
              f"its ranks saw TORCHELASTIC_RESTART_COUNT 0, then 1: {log[-400:]!r}")
        first_attempt = s.run(rid)["attempts"][0]
        check(first_attempt["status"] == "preempted" and first_attempt["reason"] == f"preempted by run {urgent}"
              and first_attempt["ended_at"] and first_attempt["failing_rank"] is None,
              f"its first attempt reads preempted by run {urgent}, not canceled: {first_attempt}")
        env = dict(os.environ, DDPD_URL=f"http://127.0.0.1:{s.port}")
        shown = subprocess.run([a.ddpctl, "show", str(rid)], env=env, capture_output=True, text=True, timeout=30).stdout
        check(f"preempted by run {urgent}" in shown and "canceled" not in shown,
              f"ddpctl show says preempted by run {urgent}, nowhere canceled: {shown!r}")
        run_log = s.get(f"/runs/{rid}/logs?tail=400").body.decode(errors="replace")
        check("run preempted: preempted: ddpd took its devices back" in run_log and "canceled" not in run_log,
              f"the run's log (its launcher's words) says preempted, nowhere canceled: {run_log[-1500:]!r}")
        final = s.run(rid)
        first_took = (datetime.fromisoformat(first_attempt["ended_at"].replace("Z", "+00:00")) -
                      datetime.fromisoformat(first_attempt["started_at"].replace("Z", "+00:00"))).total_seconds()
        check(abs(final["earlier_attempts_s"] - first_took) < 0.01,
              f"earlier_attempts_s is its first attempt's time, {first_took} s: {final['earlier_attempts_s']}")
        check(re.search(r"\(\S+ over 2 attempts, the last \S+\)", shown),
              f"ddpctl show's duration counts both attempts and says the last one's: {shown!r}")


# Every rank reports each epoch, rank 1 a moment after rank 0 (the order that made the
# table rank 1's when the last writer won); rank 1 alone reports epoch 3, saying it counts.
EVERY_RANK_EPOCHS = ("import os, time, ddpd\n"
                     "rank = int(os.environ['RANK'])\n"
                     "for epoch in range(3):\n"
                     "    if rank == 1:\n"
                     "        time.sleep(0.2)\n"
                     "    ddpd.log_epoch(epoch, lr=0.1, train_loss=100.0 * rank + epoch)\n"
                     "    ddpd.flush()\n"
                     "if rank == 1:\n"
                     "    ddpd.log_epoch(3, rank_zero_only=False, test_acc=0.5)\n")


def case_epochs_rank_zero(a):
    """The epoch table is rank 0's whatever order the ranks' reports come in, so two
    identical runs have the same table; another rank's epoch counts only where it says so."""
    with WorkRoot() as w, w.server(a) as s:
        tables = []
        for name in ("first", "again"):
            rid = s.submit({"name": name, "command": ["/usr/bin/python3", "-c", EVERY_RANK_EPOCHS],
                            "distributed": {"world_size": 2}})
            run = s.wait_status(rid, ("succeeded", "failed"), timeout=120)
            check(run and run["status"] == "succeeded", f"run {name} succeeded: {run and run['reason']}")
            tables.append([(e["epoch"], e["train_loss"], e["test_acc"]) for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]])
        check(tables[0] == [(0, 0.0, None), (1, 1.0, None), (2, 2.0, None), (3, None, 0.5)],
              f"rank 0's train loss for epochs 0-2, rank 1's test accuracy for epoch 3 (rank_zero_only false): {tables[0]}")
        check(tables[1] == tables[0], f"the same table for the same script: {tables[1]} vs {tables[0]}")


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
