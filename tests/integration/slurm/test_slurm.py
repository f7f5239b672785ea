#!/usr/bin/env python3
"""Runs on a real Slurm cluster (ddpd serve --executor slurm): a slurmctld and two
slurmd on this host (slurm_cluster.py; the cases share one through a ctest fixture,
or a case run by hand starts its own), each case with its own ddpd serve whose every
run is one Slurm job, one `ddpd part` per node.

Cases: the built-in MLP with 4 ranks on the 2 Slurm nodes against the same run on one
node (float rounding), its devices named by Slurm's nodes, and the times from POST
to the job's start and to the first step; a PyTorch DDP command run (gloo) across the
2 nodes with torchrun's variables right on every rank; a rank that fails, named with
its node; a cancel that reaches every rank through scancel; a run waiting in Slurm's
queue showing Slurm's reason (and the parts' route's answers against the OpenAPI
document); ddpd serve killed mid-run and started again, following the job to its
end with no step and no log line lost; scancel from a shell; a job Slurm requeues,
followed to its end; the sharing settings in Slurm's (a user's own account, a
priority as the job's nice, a preemptible run's QOS) and bad such flags refused; a
crash restarted by retry_elsewhere as a job that excludes the node it failed on
(--exclude), and no job submitted when that would leave none.
Skips (exit 77), saying so, where no cluster can start (not
root, Slurm not installed).

Usage: test_slurm.py CASE --ddpd PATH --trainer PATH --runner PATH [--cluster-dir DIR]
                          [--openapi schema/openapi.json]"""
import argparse, json, os, pwd, re, shutil, signal, sqlite3, subprocess, sys, tempfile, textwrap, time, uuid

import checks  # noqa: E402
import ddpd_harness  # noqa: E402
import slurm_cluster  # noqa: E402
from checks import check, cases_in  # noqa: E402
from ddpd_harness import Server, wait_until, fmnist_config  # noqa: E402
from procs import live_with_env  # noqa: E402
from ddpd_harness import Accounts, add_user, bearer  # noqa: E402

PYTHON = "/usr/bin/python3"
FINAL = ("succeeded", "failed", "canceled")

SCRIPT = """
    import json, os, signal, sys, threading, time
    # SIGTERM is taken by a thread of ours, whatever the main thread is blocked in (a
    # gloo collective): blocked here, before torch starts threads, so in all of them
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    import torch
    import torch.distributed as dist
    import ddpd
    out, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rank_env = os.environ["RANK"]

    def sender(pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip()
        except OSError:
            return "pid %d" % pid

    termed = threading.Event()

    def record(senders):
        with open(os.path.join(out, ".sigterm-rank-%s" % rank_env), "w") as f:
            json.dump(senders, f)
        os.replace(os.path.join(out, ".sigterm-rank-%s" % rank_env), os.path.join(out, "sigterm-rank-%s" % rank_env))

    def on_term():
        senders = [sender(signal.sigwaitinfo({signal.SIGTERM}).si_pid)]
        record(senders)  # at once: the main thread waits for it when the others are gone first
        termed.set()
        while True:  # every SIGTERM of the next half second: Slurm's and the launcher's
            more = signal.sigtimedwait({signal.SIGTERM}, 0.5)
            if more is None:
                break
            senders.append(sender(more.si_pid))
        record(senders)
        os._exit(143)

    threading.Thread(target=on_term, daemon=True).start()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(os.path.join(out, "env-rank-%d.json" % rank), "w") as f:
        json.dump({k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                   "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT",
                   "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURMD_NODENAME")}, f)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for step in range(steps):
        try:
            x = torch.randn(16, 8, generator=g)
            loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total = torch.tensor([float(rank)])
            dist.all_reduce(total)
        except RuntimeError:
            # a peer gone (its node's ranks ended by the same scancel, a moment earlier
            # under load): this rank's own SIGTERM is on its way; it says who sent it
            if termed.wait(30):
                time.sleep(1)
            raise
        assert total.item() == sum(range(world)), total
        if step == 3 and os.environ.get("SLURM_TEST_FAIL_RANK") == str(rank):
            print("a planned failure of rank", rank, file=sys.stderr, flush=True)
            os._exit(3)  # at once, as a crash
        ddpd.log_step(step + 1, loss=loss.item())
        print("step", step, "of rank", rank, flush=True)
        time.sleep(pause)
    dist.barrier()
    dist.destroy_process_group()
"""


# ---- the cluster and the server ----

class Env:
    """The case's cluster (shared, or its own) and its scratch directory."""

    def __init__(self, args):
        self.args = args
        self.own = None
        info = slurm_cluster.shared(args.cluster_dir) if args.cluster_dir else None
        if isinstance(info, dict):
            skip(info["skip"])
        if info is None:
            reason = slurm_cluster.why_not()
            if reason:
                skip(reason)
            self.own = slurm_cluster.Cluster(tempfile.mkdtemp(prefix="ddpd-slurm-cluster-"))
            if not self.own.start():
                raise RuntimeError(f"the cluster did not come up: {self.own.node_states()}")
            print(f"a slurmctld and 2 slurmd up in {self.own.up_s:.2f} s", flush=True)
            info = self.own
        self.cluster = info
        self.d = tempfile.mkdtemp(prefix="ddpd-slurm-test-")
        self.dirs = [self.d]

    def tmpdir(self, prefix):
        """A directory of the case's, removed with it (a state directory kept across
        two servers lives outside the first one's)."""
        d = tempfile.mkdtemp(prefix=prefix)
        self.dirs.append(d)
        return d

    def server(self, state_dir=None, extra=()):
        s = Server(self.args.ddpd, self.args.trainer, slots=1, state_dir=state_dir,
                   env={"SLURM_CONF": self.cluster.conf}, extra_args=list(extra))
        s.extra_args += ["--executor", "slurm", "--slurm-work-dir", os.path.join(s.state_dir, "work"),
                         "--allow-commands", "--runner", self.args.runner,
                         "--port-range", "29600-29999"]  # the default, named: the ranks' ports are the nodes' own
        return s

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        # every job of the case gone, on the shared cluster too, whoever owns it (a
        # mapped user's job is theirs)
        self.cluster.cmd("scancel", "--partition", "debug", check_rc=False)
        wait_until(lambda: not self.cluster.cmd("squeue", "-h", check_rc=False).stdout.strip(),
                   "the cluster's queue to be empty", 30)
        if self.own:
            self.own.stop()
            shutil.rmtree(self.own.d, ignore_errors=True)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


def skip(reason):
    print(f"skipped: {reason}", flush=True)
    sys.exit(slurm_cluster.SKIP)


def wait_final(s, rid, timeout=240):
    run = s.wait_status(rid, FINAL, timeout)
    return run or {}


def script_run(e, name, steps, pause, out, env=None, world=4, nodes=2):
    path = os.path.join(e.d, "script.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(SCRIPT))
    os.makedirs(out, exist_ok=True)
    return {"name": name, "command": [PYTHON, path, out, str(steps), str(pause)], "env": env or {},
            "distributed": {"world_size": world, "nodes": nodes}}


def job_of(s, rid):
    return (s.run(rid) or {}).get("slurm_job_id")


def ranks_alive(mark_value):
    return live_with_env("SLURM_TEST_MARK", mark_value)


def loss_points(s, rid):
    return s.get(f"/runs/{rid}/metrics?key=loss").json().get("points", [])


def iso_ms(t):
    """"2026-12-04T18:45:01.325Z" -> unix ms."""
    from datetime import datetime, timezone
    return int(datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp() * 1000)


# ---- cases ----

def case_builtin_two_nodes(args):
    """The built-in MLP, 4 ranks on the 2 Slurm nodes, against the same run on one."""
    with Env(args) as e:
        with e.server() as s:
            cfg = fmnist_config(**{"data.limit": 2048, "data.test_limit": 512, "train.epochs": 2,
                                   "distributed.world_size": 4})
            posted = time.time()
            two = s.submit(ddpd_harness.merge(cfg, {"name": "two-nodes", "distributed.nodes": 2}))
            run = wait_final(s, two)
            check(run.get("status") == "succeeded", f"the run on 2 Slurm nodes succeeded: {run.get('reason')}")
            check(run.get("devices") == ["n1/cpu:0", "n1/cpu:1", "n2/cpu:0", "n2/cpu:1"],
                  f"its devices are named by Slurm's nodes, 2 ranks each: {run.get('devices')}")
            job = run.get("slurm_job_id")
            check(job and e.cluster.job(job).get("JobName") == f"ddpd-{two}",
                  f"it was Slurm job {job}, named ddpd-{two}: {e.cluster.job(job) if job else None}")
            info = e.cluster.job(job) if job else {}
            check(info.get("NumNodes") == "2" and info.get("NumTasks") == "4" and info.get("JobState") == "COMPLETED",
                  f"Slurm ran it on 2 nodes, 4 tasks, and says it completed: {info}")
            points = loss_points(s, two)
            if run.get("started_at") and points:
                created = iso_ms(run["created_at"])
                print(f"POST to the job's parts all reporting (started_at): {iso_ms(run['started_at']) - created} ms; "
                      f"POST to the first step: {points[0][2] - created} ms (POST took {(created / 1000 - posted) * 1000:.0f} ms to store)",
                      flush=True)
            one = s.submit(ddpd_harness.merge(cfg, {"name": "one-node", "distributed.nodes": 1}))
            run1 = wait_final(s, one)
            check(run1.get("status") == "succeeded", f"the run on 1 Slurm node succeeded: {run1.get('reason')}")
            check(len(set(d.split("/")[0] for d in run1.get("devices", []))) == 1 and len(run1.get("devices", [])) == 4,
                  f"its 4 ranks on one node: {run1.get('devices')}")
            p1 = loss_points(s, one)
            check(len(points) == len(p1) == run["progress"]["total_steps"] and points,
                  f"every step's loss of both runs is kept: {len(points)}, {len(p1)}, {run['progress']['total_steps']}")
            worst = max((abs(a[1] - b[1]) / max(abs(b[1]), 1e-12) for a, b in zip(points, p1)), default=1)
            check(worst < 1e-5, f"the losses on 2 nodes are the losses on 1 to float rounding: worst relative {worst:.2e}")
            ep2 = s.get(f"/runs/{two}/epochs").json()["epochs"]
            ep1 = s.get(f"/runs/{one}/epochs").json()["epochs"]
            check(len(ep2) == len(ep1) == 2 and all(abs(a["test_acc"] - b["test_acc"]) < 1e-6 for a, b in zip(ep2, ep1)),
                  f"and so are the epochs' test accuracies: {[x['test_acc'] for x in ep2]} {[x['test_acc'] for x in ep1]}")
            log = s.get(f"/runs/{two}/logs").body.decode(errors="replace")
            check("[node n1] " in log and "[node n2] " in log and "slurm: submitted as job" in log,
                  f"the run's log has both nodes' launchers and what Slurm did: {log[-800:]!r}")
            ckpts = s.run(two).get("checkpoints") or []
            check(ckpts and all("part-0/checkpoints/" in c["path"] for c in ckpts),
                  f"the checkpoints rank 0 wrote on its node are listed: {ckpts}")


def case_command_two_nodes(args):
    """A PyTorch DDP script (gloo) across the 2 nodes: torchrun's variables on every rank."""
    with Env(args) as e:
        mark = uuid.uuid4().hex
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(script_run(e, "torch-two-nodes", 20, 0.02, out, env={"SLURM_TEST_MARK": mark}))
            run = wait_final(s, rid)
            check(run.get("status") == "succeeded", f"the command run succeeded: {run.get('reason')}")
            check(run.get("devices") == ["n1/cpu:0", "n1/cpu:1", "n2/cpu:0", "n2/cpu:1"], f"devices: {run.get('devices')}")
            ports = set()
            for r in range(4):
                try:
                    with open(os.path.join(out, f"env-rank-{r}.json")) as f:
                        env = json.load(f)
                except OSError:
                    check(False, f"rank {r} wrote its environment")
                    continue
                want = {"RANK": str(r), "LOCAL_RANK": str(r % 2), "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                        "GROUP_RANK": str(r // 2), "GROUP_WORLD_SIZE": "2", "ROLE_RANK": str(r),
                        "MASTER_ADDR": "127.0.0.1", "SLURM_JOB_ID": run.get("slurm_job_id"),
                        "SLURMD_NODENAME": f"n{r // 2 + 1}"}
                wrong = {k: (env.get(k), v) for k, v in want.items() if env.get(k) != v}
                check(not wrong, f"rank {r}: torchrun's variables (seen, wanted): {wrong}")
                ports.add(env.get("MASTER_PORT"))
            check(len(ports) == 1 and all(p and p.isdigit() for p in ports), f"one MASTER_PORT for every rank: {ports}")
            check(all(p and 29600 <= int(p) <= 29999 for p in ports),
                  f"taken from the server's --port-range (29600-29999), not among the ephemeral ports: {ports}")
            for r in (0, 3):
                log = s.get(f"/runs/{rid}/logs?rank={r}").body.decode(errors="replace")
                check(f"step 19 of rank {r}" in log, f"rank {r}'s log reached the server: {log[-300:]!r}")
            m = loss_points(s, rid)
            check([p[0] for p in m] == list(range(1, 21)), f"every step the script reported: {[p[0] for p in m]}")
            check(wait_until(lambda: not ranks_alive(mark), "no rank left", 30), f"no rank left: {ranks_alive(mark)}")


def case_rank_fails(args):
    """Rank 3, on node n2, fails on its own: the run fails naming n2 and rank 3."""
    with Env(args) as e:
        mark = uuid.uuid4().hex
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(script_run(e, "a-rank-fails", 200, 0.05, out,
                                      env={"SLURM_TEST_MARK": mark, "SLURM_TEST_FAIL_RANK": "3"}))
            run = wait_final(s, rid)
            reason = run.get("reason") or ""
            check(run.get("status") == "failed" and reason.startswith("node n2 (ranks 2 to 3): rank 3 exited with status 3")
                  and "a planned failure of rank 3" in reason, f"the run fails naming node n2 and rank 3: {reason!r}")
            info = e.cluster.job(run.get("slurm_job_id"))
            check(info.get("JobState") == "FAILED", f"Slurm says the job failed: {info.get('JobState')}")
            check(wait_until(lambda: not ranks_alive(mark), "no rank left", 30), f"no rank left: {ranks_alive(mark)}")


def case_cancel(args):
    """A cancel is scancel: every rank gets SIGTERM from Slurm, and the run is canceled."""
    with Env(args) as e:
        mark = uuid.uuid4().hex
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(script_run(e, "canceled", 100000, 0.05, out, env={"SLURM_TEST_MARK": mark}))
            wait_until(lambda: len(loss_points(s, rid)) >= 3, "the run to make steps", 180)
            alive = ranks_alive(mark)
            r = s.post(f"/runs/{rid}/cancel")
            check(r.status == 202, f"cancel -> 202: {r.status}")
            run = wait_final(s, rid, 120)
            check(run.get("status") == "canceled" and run.get("reason") == "canceled by request",
                  f"the run was canceled: {run.get('status')} {run.get('reason')!r}")
            senders = {}
            for r in range(4):
                try:
                    with open(os.path.join(out, f"sigterm-rank-{r}")) as f:
                        senders[r] = json.load(f)
                except (OSError, ValueError):
                    senders[r] = None
            if not check(all(v and "slurmstepd" in v for v in senders.values()),
                         f"every rank got SIGTERM from Slurm (slurmstepd), after scancel: {senders}"):
                for r in range(4):
                    print(s.get(f"/runs/{rid}/logs?rank={r}&tail=15").body.decode(errors="replace"), file=sys.stderr)
                print(s.get(f"/runs/{rid}/logs?tail=40").body.decode(errors="replace"), file=sys.stderr)
            with open(s.log_path, errors="replace") as f:
                log = f.read()
            check(f"Slurm job {run.get('slurm_job_id')} canceled (scancel)" in log, "ddpd canceled the job with scancel")
            check(e.cluster.job(run.get("slurm_job_id")).get("JobState") == "CANCELLED", "Slurm says it was canceled")
            check(alive and wait_until(lambda: not ranks_alive(mark), "no rank left", 30),
                  f"the ranks ({alive}) are gone: {ranks_alive(mark)}")


def blocker(e):
    """A job of someone else's that holds every CPU of both nodes."""
    r = e.cluster.cmd("sbatch", "--parsable", "-N2", "--ntasks-per-node=4", "--job-name=blocker", "--output=/dev/null",
                      "--wrap", "sleep 600")
    job = r.stdout.strip()
    wait_until(lambda: e.cluster.job(job).get("JobState") == "RUNNING", "the blocker to run", 60)
    return job


def case_waiting(args):
    """A run Slurm cannot start yet is queued, showing Slurm's reason (waiting_for, and
    pending.reason slurm with it in detail); it starts once the nodes are free."""
    with Env(args) as e:
        with e.server() as s:
            held = blocker(e)
            rid = s.submit(fmnist_config(**{"data.limit": 1024, "data.test_limit": 256, "train.epochs": 1,
                                            "distributed.world_size": 2, "distributed.nodes": 2}))
            run = wait_until(lambda: (lambda r: r if r.get("slurm_job_id") and "Resources" in (r.get("waiting_for") or "")
                                      else None)(s.run(rid)), "Slurm's reason in waiting_for", 60) or s.run(rid)
            job = run.get("slurm_job_id")
            check(run.get("status") == "queued" and run.get("queue_position") == 0,
                  f"it is queued (in Slurm's queue, not ddpd's): {run.get('status')} {run.get('queue_position')}")
            check(run.get("waiting_for") == f"Slurm job {job} is PENDING: Resources (the nodes it asks for are busy)",
                  f"waiting_for says what Slurm says: {run.get('waiting_for')!r}")
            check(e.cluster.job(job).get("Reason") == "Resources", f"as Slurm does: {e.cluster.job(job).get('Reason')}")
            # its pending reason: slurm, with Slurm's words in its detail (made at the scheduler's tick)
            pending = wait_until(lambda: (lambda p: p if p and p.get("detail") == run.get("waiting_for") else None)(
                s.run(rid).get("pending")), "pending slurm", 30) or s.run(rid).get("pending")
            check(pending and pending["reason"] == "slurm" and pending["blocked_by"] == [] and
                  pending["estimated_start"] is None, f"pending: reason slurm, Slurm's words: {pending}")
            e.cluster.cmd("scancel", held)
            run = wait_final(s, rid)
            check(run.get("status") == "succeeded", f"it ran once the nodes were free: {run.get('status')} {run.get('reason')}")


def case_parts_route(args):
    """POST /runs/{id}/parts, as a job's part sends it: answered as the OpenAPI document
    says, refused without the run's secret or with a node rank the job has not."""
    with Env(args) as e:
        with e.server() as s:
            held = blocker(e)
            rid = s.submit(fmnist_config(**{"data.limit": 1024, "train.epochs": 1, "distributed.world_size": 2}))
            wait_until(lambda: job_of(s, rid), "the run's job id", 60)
            db = sqlite3.connect(os.path.join(s.state_dir, "ddpd.db"))
            secret = db.execute("SELECT secret FROM runs WHERE id = ?", (rid,)).fetchone()[0]
            db.close()
            report = {"node_rank": 0, "node": "n1", "address": "127.0.0.1", "boot": "test", "master_port": 0,
                      "stop_t": 0, "parts": [], "streams": [], "logs": []}
            mine = {"Authorization": f"Bearer {secret}"}
            r = s.post(f"/runs/{rid}/parts", report, headers=mine)
            body = r.json() if r.status == 200 else {}
            check(r.status == 200 and len(body.get("parts", [])) == 1 and body["parts"][0]["node_rank"] == 0
                  and body["parts"][0]["run"] == rid and body.get("stop") is False,
                  f"a part's report is answered with what it runs: {r.status} {r.body[:300]!r}")
            validate(args, "PartAnswer", body)
            r = s.post(f"/runs/{rid}/parts", report, headers={"Authorization": "Bearer not-the-secret"})
            check(r.status == 401, f"another secret is refused: {r.status}")
            r = s.post(f"/runs/{rid}/parts", dict(report, node_rank=5), headers=mine)
            check(r.status == 400 and "node_rank 5" in r.json().get("detail", ""), f"a node rank it has not: {r.status}")
            check(s.post(f"/runs/{rid}/cancel").status == 202, "cancel")
            run = wait_final(s, rid, 60)
            check(run.get("status") == "canceled", f"canceled while its job waited: {run.get('status')} {run.get('reason')}")
            r = s.post(f"/runs/{rid}/parts", report, headers=mine)
            check(r.status == 404, f"a report for a run that ended: {r.status}")
            e.cluster.cmd("scancel", held)


def validate(args, component, body):
    if not args.openapi:
        return
    try:
        import jsonschema
    except ImportError:
        check(False, "python3-jsonschema is installed")
        return
    with open(args.openapi) as f:
        doc = json.load(f)
    schema = dict(doc["components"]["schemas"][component], components=doc["components"])
    schema = json.loads(json.dumps(schema).replace("#/components/", "#/components/"))
    try:
        jsonschema.validate(body, schema)
        check(True, f"the answer is a {component}")
    except jsonschema.ValidationError as err:
        check(False, f"the answer is a {component}: {err.message}")


def case_server_restart(args):
    """ddpd serve killed (SIGKILL) mid-run and started again: it finds its job, follows
    it to its end, and nothing its ranks reported meanwhile is lost."""
    with Env(args) as e:
        state = e.tmpdir("ddpd-slurm-state-")
        mark = uuid.uuid4().hex
        out = os.path.join(e.d, "out")
        steps = 40
        # not a `with`: its end would take the job's processes, under the state dir, for leftovers
        s = e.server(state_dir=state)
        s.start()
        try:
            rid = s.submit(script_run(e, "across-a-restart", steps, 0.25, out, env={"SLURM_TEST_MARK": mark}))
            wait_until(lambda: len(loss_points(s, rid)) >= 5, "some steps", 180)
            job = job_of(s, rid)
        finally:
            s.kill()
        check(e.cluster.job(job).get("JobState") == "RUNNING", "the job runs on without the server")
        time.sleep(3)  # steps are made, and logs written, while no server listens
        # at the same address: the job's parts report to the URL their job script was given
        second = e.server(state_dir=state, extra=["--listen", f"127.0.0.1:{s.port}"])
        with second as s:
            run = wait_final(s, rid, 240)
            check(run.get("status") == "succeeded" and run.get("slurm_job_id") == job,
                  f"the restarted server followed job {job} to its end: {run.get('status')} {run.get('reason')}")
            m = loss_points(s, rid)
            check([p[0] for p in m] == list(range(1, steps + 1)), f"every step is kept, once: {[p[0] for p in m]}")
            for r in range(4):
                log = s.get(f"/runs/{rid}/logs?rank={r}").body.decode(errors="replace")
                lines = [l for l in log.splitlines() if l.startswith("step ")]
                check(lines == [f"step {k} of rank {r}" for k in range(steps)],
                      f"rank {r}'s log has every line once: {len(lines)} lines, {lines[:3]}...{lines[-3:]}")
            with open(s.log_path, errors="replace") as f:
                log = f.read()
            check(f"taken back after the restart: Slurm job {job}" in log, "the server said it took the job back")
            check(wait_until(lambda: not ranks_alive(mark), "no rank left", 30), f"no rank left: {ranks_alive(mark)}")


def case_scancel_from_shell(args):
    """scancel from a shell, not through ddpd: the run ends canceled, saying so."""
    with Env(args) as e:
        mark = uuid.uuid4().hex
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(script_run(e, "scanceled", 100000, 0.05, out, env={"SLURM_TEST_MARK": mark}))
            wait_until(lambda: len(loss_points(s, rid)) >= 2, "the run to make steps", 180)
            job = job_of(s, rid)
            e.cluster.cmd("scancel", job)
            run = wait_final(s, rid, 120)
            check(run.get("status") == "canceled"
                  and run.get("reason") == f"Slurm canceled it (scancel, from outside ddpd) (job {job} CANCELLED)",
                  f"the run is canceled, saying Slurm did it: {run.get('status')} {run.get('reason')!r}")
            check(wait_until(lambda: not ranks_alive(mark), "no rank left", 30), f"no rank left: {ranks_alive(mark)}")


def case_requeued(args):
    """A job Slurm requeues (scontrol requeue) is followed, not failed: the run goes on
    when it runs again, and succeeds."""
    with Env(args) as e:
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(script_run(e, "requeued", 30, 0.1, out, world=2, nodes=1))
            wait_until(lambda: len(loss_points(s, rid)) >= 3, "the run to make steps", 180)
            job = job_of(s, rid)
            e.cluster.cmd("scontrol", "requeue", job)
            wait_until(lambda: (lambda j: int(j.get("Restarts", "0")) >= 1 and j.get("JobState") == "PENDING")(
                e.cluster.job(job)), "Slurm to requeue it", 60)
            # a requeued job is eligible again only 2 minutes later (Reason=BeginTime): once ddpd has seen it
            # wait, it is made eligible now, for a quick test
            wait_until(lambda: f"Slurm requeued job {job}" in s.get(f"/runs/{rid}/logs").body.decode(errors="replace"),
                       "ddpd to see the job requeued", 60)
            e.cluster.cmd("scontrol", "update", f"jobid={job}", "StartTime=now")
            run = wait_final(s, rid, 240)
            check(run.get("status") == "succeeded", f"the requeued job's run succeeded: {run.get('status')} {run.get('reason')}")
            log = s.get(f"/runs/{rid}/logs").body.decode(errors="replace")
            check(f"Slurm requeued job {job}" in log, f"the run's log says Slurm requeued it: {log[-600:]!r}")
            m = loss_points(s, rid)
            check([p[0] for p in m] == list(range(1, 31)),
                  f"its steps, those of the second start replacing the first's: {[p[0] for p in m]}")


ELSEWHERE_SCRIPT = """
    import json, os, signal, sys
    # where each attempt ran, as Slurm names the node; a SIGSEGV (class crash) on the
    # first attempt only (always, with "always"), marked by a file
    out, how = sys.argv[1], sys.argv[2]
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    with open(os.path.join(out, "attempt-%s.json" % attempt), "w") as f:
        json.dump({k: os.environ.get(k) for k in ("SLURMD_NODENAME", "SLURM_JOB_ID", "TORCHELASTIC_RESTART_COUNT")}, f)
    marker = os.path.join(out, "crashed-once")
    if how == "always" or not os.path.exists(marker):
        open(marker, "w").close()
        print("crashing on", os.environ.get("SLURMD_NODENAME"), flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    print("done on", os.environ.get("SLURMD_NODENAME"), flush=True)
"""


def elsewhere_run(e, name, out, how, action="retry_elsewhere"):
    """A 1-rank command run on 1 node whose crash is restarted by retry_elsewhere."""
    path = os.path.join(e.d, "elsewhere.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(ELSEWHERE_SCRIPT))
    os.makedirs(out, exist_ok=True)
    return {"name": name, "command": [PYTHON, path, out, how],
            "distributed": {"world_size": 1, "nodes": 1, "restart_policy": {
                "max_restarts": 3, "on": {"crash": action}, "backoff": {"initial_s": 0, "max_s": 0}}}}


def attempt_env(out, attempt):
    try:
        with open(os.path.join(out, f"attempt-{attempt}.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def submitted_jobs(s, rid):
    """The jobs the run's log says were submitted, in order, with their sbatch lines."""
    log = s.get(f"/runs/{rid}/logs").body.decode(errors="replace")
    return re.findall(r"slurm: submitted as job (\S+): (sbatch .*)", log), log


def ddpctl_show(args, s, rid):
    """`ddpctl show RID`, printed for the record (the run's attempts as a user reads
    them); "" without --ddpctl."""
    if not args.ddpctl:
        return ""
    p = subprocess.run([args.ddpctl, "--server", f"http://127.0.0.1:{s.port}", "show", str(rid)],
                       capture_output=True, text=True, timeout=60)
    print(f"--- ddpctl show {rid}\n{p.stdout}{p.stderr}", flush=True)
    return p.stdout


def case_retry_elsewhere(args):
    """A run that crashes (SIGSEGV, class crash, retry_elsewhere) on one Slurm node is
    restarted as a new job that excludes that node (sbatch --exclude, Slurm's
    ExcNodeList): it runs on the other node and succeeds; the failure names the node
    as Slurm does, and the timeline says which nodes were excluded."""
    with Env(args) as e:
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(elsewhere_run(e, "crash-once", out, "once"))
            run = wait_final(s, rid)
            first, second = attempt_env(out, 0), attempt_env(out, 1)
            x = first.get("SLURMD_NODENAME")
            check(run.get("status") == "succeeded", f"restarted elsewhere, it succeeds: {run.get('status')} "
                  f"{run.get('reason')} {run.get('attempts')}")
            check(x in ("n1", "n2") and second.get("SLURMD_NODENAME") in ("n1", "n2") and
                  second.get("SLURMD_NODENAME") != x,
                  f"attempt 1 ran on the other node than attempt 0 ({x}): {second}")
            check(second.get("TORCHELASTIC_RESTART_COUNT") == "1" and first.get("SLURM_JOB_ID") != second.get("SLURM_JOB_ID"),
                  f"the restart is a new job, its launcher at attempt 1: {first} {second}")
            attempts = [(a["attempt"], a["status"], (a.get("failure") or {}).get("class"),
                         (a.get("failure") or {}).get("node")) for a in run.get("attempts") or []]
            check(attempts == [(0, "failed", "crash", x), (1, "succeeded", None, None)],
                  f"its attempts: the crash on {x}, named as Slurm names it, then a success: {attempts}")
            shown = ddpctl_show(args, s, rid)
            check(not args.ddpctl or "crash: rank 0, signal 11" in shown,
                  f"ddpctl show names the first attempt's failure: {shown[-800:]}")
            jobs, log = submitted_jobs(s, rid)
            check(len(jobs) == 2 and "--exclude" not in jobs[0][1] and f"--exclude={x} " in jobs[1][1],
                  f"the first job excludes nothing, the second excludes {x}: {jobs}")
            info = e.cluster.job(jobs[1][0]) if len(jobs) == 2 else {}
            check(info.get("ExcNodeList") == x and info.get("NodeList") == second.get("SLURMD_NODENAME")
                  and info.get("JobState") == "COMPLETED",
                  f"Slurm kept the second job off {x} (ExcNodeList) and ran it on the other: "
                  f"{ {k: info.get(k) for k in ('ExcNodeList', 'NodeList', 'JobState')} }")
            first_info = e.cluster.job(jobs[0][0]) if jobs else {}
            check(first_info.get("ExcNodeList") == "(null)", f"the first job excluded no node: {first_info.get('ExcNodeList')}")
            timeline = s.get(f"/runs/{rid}/timeline").json()["entries"]
            excluded = [t["detail"] for t in timeline if t["kind"] == "excluded_nodes"]
            check(excluded == [{"attempt": 1, "nodes": [x], "why": {x: "its attempt failed there"}}],
                  f"the timeline says attempt 1's job excluded {x}, and why: {excluded}")
            if args.openapi:
                with open(args.openapi) as f:
                    doc = json.load(f)
                entry = doc["paths"]["/runs/{id}/timeline"]["get"]["responses"]["200"]["content"]["application/json"][
                    "schema"]["properties"]["entries"]["items"]
                check("excluded_nodes" in entry["properties"]["kind"]["enum"] and
                      "excluded_nodes" in entry["properties"]["detail"]["description"],
                      "the OpenAPI document lists the timeline's excluded_nodes and says its detail")


def case_retry_in_place_node_named(args):
    """A crash its launcher restarts in place (policy retry: the same job, the same
    node): the failed attempt's failure.node is the Slurm node's name (SLURMD_NODENAME),
    not the host name the launcher sees, and nothing is excluded."""
    with Env(args) as e:
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(elsewhere_run(e, "crash-once-in-place", out, "once", action="retry"))
            run = wait_final(s, rid)
            first, second = attempt_env(out, 0), attempt_env(out, 1)
            x = first.get("SLURMD_NODENAME")
            attempts = [(a["attempt"], a["status"], (a.get("failure") or {}).get("class"),
                         (a.get("failure") or {}).get("node")) for a in run.get("attempts") or []]
            check(run.get("status") == "succeeded" and x in ("n1", "n2") and second.get("SLURMD_NODENAME") == x
                  and second.get("SLURM_JOB_ID") == first.get("SLURM_JOB_ID"),
                  f"restarted in place, in the same job on {x}, it succeeds: {run.get('reason')} {first} {second}")
            check(attempts == [(0, "failed", "crash", x), (1, "succeeded", None, None)],
                  f"the crash is recorded on {x}, as Slurm names the node: {attempts}")
            jobs, _ = submitted_jobs(s, rid)
            timeline = s.get(f"/runs/{rid}/timeline").json()["entries"]
            check(len(jobs) == 1 and "--exclude" not in jobs[0][1] and
                  not [t for t in timeline if t["kind"] == "excluded_nodes"],
                  f"one job, nothing excluded: {jobs}")


def case_retry_elsewhere_no_node_left(args):
    """A run that crashes on both Slurm nodes, one after the other (retry_elsewhere):
    its third job would exclude every node of the partition, which Slurm would never
    start. It is not submitted: the run fails at once, naming the excluded nodes and
    what an admin or its owner can do."""
    with Env(args) as e:
        with e.server() as s:
            out = os.path.join(e.d, "out")
            rid = s.submit(elsewhere_run(e, "crash-everywhere", out, "always"))
            run = wait_final(s, rid)
            nodes = [attempt_env(out, k).get("SLURMD_NODENAME") for k in (0, 1)]
            check(sorted(n or "" for n in nodes) == ["n1", "n2"], f"attempts 0 and 1 ran on both nodes: {nodes}")
            reason = run.get("reason") or ""
            check(run.get("status") == "failed" and "leaves its Slurm job too few nodes" in reason
                  and "it needs 1 node of partition debug, and 0 are not excluded" in reason
                  and f"{nodes[0]} (its attempt failed there), {nodes[1]} (its attempt failed there)" in reason
                  and "ddpd node clear NAME" in reason and f"ddpctl resume {rid}" in reason,
                  f"the run fails, naming the nodes it excludes and what to do: {run.get('status')} {reason!r}")
            attempts = [(a["attempt"], a["status"], (a.get("failure") or {}).get("node")) for a in run.get("attempts") or []]
            check(attempts == [(0, "failed", nodes[0]), (1, "failed", nodes[1])], f"its two attempts: {attempts}")
            shown = ddpctl_show(args, s, rid)
            check(not args.ddpctl or "leaves its Slurm job too few nodes" in shown,
                  f"ddpctl show gives the reason: {shown[-800:]}")
            jobs, log = submitted_jobs(s, rid)
            check(len(jobs) == 2 and f"--exclude={nodes[0]} " in jobs[1][1],
                  f"two jobs only, no third that could never start: {jobs}")
            left = e.cluster.cmd("squeue", "-h", "-n", f"ddpd-{rid}", "-o", "%i %T", check_rc=False).stdout.strip()
            check(left == "", f"nothing of the run waits in Slurm's queue: {left!r}")
            timeline = s.get(f"/runs/{rid}/timeline").json()["entries"]
            excluded = [t["detail"] for t in timeline if t["kind"] == "excluded_nodes"]
            check([d["nodes"] for d in excluded] == [nodes[:1], nodes],
                  f"the timeline says what attempts 1 and 2 excluded: {excluded}")


def case_sharing(args):
    """A user's runs go under their Slurm account (--slurm-user-account), others' under
    the server's (--slurm-account); a run's priority is its job's nice (lowered always,
    raised where the site allows it, --slurm-allow-priority); a preemptible run goes
    with the site's QOS (Slurm without slurmdbd keeps no QOS: scontrol shows
    QOS=(null), so only what ddpd submitted is checked here; test_slurm_cli checks the
    argv). Users made with `ddpd user add`, as on a shared server."""
    with Env(args) as e:
        state = e.tmpdir("ddpd-slurm-sharing-")
        alice = add_user(args.ddpd, state, "alice")
        bob = add_user(args.ddpd, state, "bob", "--max-priority", "10")
        small = {"data.limit": 512, "data.test_limit": 128, "train.epochs": 1, "distributed.world_size": 1}
        with e.server(state_dir=state, extra=["--slurm-account", "ml", "--slurm-user-account", "alice=physics",
                                              "--slurm-user-account", "carol=chem", "--slurm-allow-priority",
                                              "--slurm-preemptible-qos", "scavenger"]) as s:
            s.read_headers = bearer(alice)  # with users, reading needs a token too
            r = s.post("/runs", dict(fmnist_config(**small), priority=-3), headers=bearer(alice))
            check(r.status == 201, f"alice's run of priority -3 is taken: {r.status} {r.body[:300]!r}")
            low = r.json().get("id")
            r = s.post("/runs", dict(fmnist_config(**small), priority=5, preemptible=True), headers=bearer(bob))
            check(r.status == 201, f"bob's preemptible run of priority 5 is taken: {r.status} {r.body[:300]!r}")
            high = r.json().get("id")
            jobs = {rid: wait_until(lambda rid=rid: job_of(s, rid), f"run {rid}'s Slurm job", 60) for rid in (low, high)}
            shown = {rid: e.cluster.job(job) for rid, job in jobs.items()}
            for rid, account, nice, who in ((low, "physics", "300", "alice's run of priority -3: her own account"),
                                            (high, "ml", "-500", "bob's of priority 5: the server's account, raised")):
                j = shown[rid]
                check(j.get("Account") == account and j.get("Nice") == nice,
                      f"{who} (scontrol: Account={j.get('Account')} Nice={j.get('Nice')}; wanted {account}, {nice})")
            check(int(shown[high].get("Priority", "0")) > int(shown[low].get("Priority", "0")),
                  f"Slurm ranks bob's above alice's: {shown[high].get('Priority')} > {shown[low].get('Priority')}")
            for rid in (low, high):
                run = wait_final(s, rid)
                check(run.get("status") == "succeeded", f"run {rid} ran under it: {run.get('status')} {run.get('reason')}")
            log_high = s.get(f"/runs/{high}/logs").body.decode(errors="replace")
            log_low = s.get(f"/runs/{low}/logs").body.decode(errors="replace")
            check(f"submitted as job {jobs[high]}:" in log_high and "--qos=scavenger" in log_high,
                  f"bob's preemptible run was submitted with the site's QOS: {log_high[:800]!r}")
            check(f"submitted as job {jobs[low]}:" in log_low and "--qos" not in log_low,
                  f"alice's, not preemptible, without: {log_low[:800]!r}")
            with open(s.log_path, errors="replace") as f:
                server_log = f.read()
            check("--slurm-user-account carol=chem: there is no ddpd user carol (yet)" in server_log,
                  "the server says carol, given an account, is no user")
            check("alice=physics: there is no ddpd user" not in server_log, "and nothing of alice, who is one")
        with e.server(state_dir=state, extra=["--slurm-account", "ml"]) as s:
            s.read_headers = bearer(bob)
            r = s.post("/runs", dict(fmnist_config(**small), priority=5), headers=bearer(bob))
            rid = r.json().get("id") if r.status == 201 else None
            job = wait_until(lambda: job_of(s, rid), "the run's Slurm job", 60) if rid else None
            j = e.cluster.job(job) if job else {}
            check(j.get("Nice") == "0" and j.get("Account") == "ml",
                  f"without --slurm-allow-priority, priority 5 leaves the job's nice alone: {j.get('Nice')} {j.get('Account')}")
            run = wait_final(s, rid) if rid else {}
            log = s.get(f"/runs/{rid}/logs").body.decode(errors="replace") if rid else ""
            check("priority 5 is not passed on" in log and "--slurm-allow-priority" in log,
                  f"the run's log says why its priority was not passed on: {log[:800]!r}")
            check(run.get("status") == "succeeded", f"and it ran: {run.get('status')} {run.get('reason')}")


UID_SCRIPT = """
    import os, sys, time
    out = sys.argv[1]
    with open(os.path.join(out, ".uid-%s" % os.environ["RANK"]), "w") as f:
        f.write("%d %d" % (os.getuid(), os.getgid()))
    os.replace(os.path.join(out, ".uid-%s" % os.environ["RANK"]), os.path.join(out, "uid-%s" % os.environ["RANK"]))
    for _ in range(1200):  # until the test has looked at the job in squeue
        if os.path.exists(os.path.join(out, "go")):
            break
        time.sleep(0.1)
"""


def case_mapped_users(args):
    """Two users mapped to Unix accounts of their own (ddpd user add NAME --unix-user):
    each one's run is submitted as that account (sbatch run as it): squeue and
    scontrol name it as the job's owner, every rank on the nodes runs under its uid,
    the run's work directory on the nodes is its alone (0700), a cancel (scancel, as
    the account) ends the job, and a raised priority (a negative nice: an operator's)
    is set by the server after the account's sbatch."""
    if os.geteuid() != 0:
        skip("mapping users to accounts needs root (useradd, and a server that may switch accounts)")
    with Accounts("alice", "bob") as acc, Env(args) as e:  # its jobs gone before its accounts
        state = e.tmpdir("ddpd-slurm-accounts-")
        tokens = {who: add_user(args.ddpd, state, who, "--unix-user", acc[who], "--max-priority", "10")
                  for who in ("alice", "bob")}
        shared = e.tmpdir("ddpd-slurm-accounts-files-")
        os.chmod(shared, 0o755)  # the script, readable by both accounts
        script = os.path.join(shared, "uid.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(UID_SCRIPT))
        os.chmod(script, 0o644)
        outs = {}
        for who in ("alice", "bob"):
            outs[who] = os.path.join(shared, who)
            os.makedirs(outs[who])
            os.chown(outs[who], acc.uid(who), -1)
        with e.server(state_dir=state, extra=["--slurm-allow-priority"]) as s:
            s.read_headers = bearer(tokens["alice"])
            runs = {}
            for who in ("alice", "bob"):
                r = s.post("/runs", {"name": f"uid-{who}", "command": [PYTHON, script, outs[who]],
                                     "distributed": {"world_size": 2, "nodes": 2}, "priority": 5 if who == "alice" else 0},
                           headers=bearer(tokens[who]))
                check(r.status == 201, f"{who}'s command run is taken: {r.status} {r.body[:300]!r}")
                runs[who] = r.json().get("id") if r.status == 201 else None
            for who, rid in runs.items():
                if rid is None:
                    continue
                job = wait_until(lambda rid=rid: job_of(s, rid), f"{who}'s run {rid}'s Slurm job", 60)
                uid_files = [os.path.join(outs[who], f"uid-{r}") for r in (0, 1)]
                wait_until(lambda: all(os.path.exists(p) for p in uid_files) or
                           (s.run(rid) or {}).get("status") in FINAL, f"{who}'s ranks to run", 120)
                q = e.cluster.cmd("squeue", "-h", "-j", str(job), "-o", "%u", check_rc=False)
                check(q.stdout.strip() == acc[who],
                      f"squeue names {who}'s account as job {job}'s owner: {q.stdout.strip()!r} {q.stderr.strip()!r}")
                shown = e.cluster.job(job)
                check(shown.get("UserId", "").startswith(f"{acc[who]}({acc.uid(who)})"),
                      f"scontrol's UserId of job {job} is {who}'s account: {shown.get('UserId')}")
                for r, path in enumerate(uid_files):
                    try:
                        with open(path) as f:
                            uid, gid = (int(x) for x in f.read().split())
                    except (OSError, ValueError):
                        check(False, f"{who}'s rank {r} ran and wrote its uid: {(s.run(rid) or {}).get('reason')}")
                        continue
                    check(uid == acc.uid(who) and gid == pwd.getpwnam(acc[who]).pw_gid,
                          f"{who}'s rank {r} runs as her account's uid and gid: {uid} {gid}, "
                          f"wanted {acc.uid(who)}")
                    check(os.stat(path).st_uid == acc.uid(who), f"and the file it made is the account's")
                work = os.path.join(s.state_dir, "work", str(rid))
                st = os.stat(work) if os.path.isdir(work) else None
                check(st is not None and st.st_uid == acc.uid(who) and (st.st_mode & 0o777) == 0o700,
                      f"{who}'s work directory on the nodes is her account's alone: "
                      f"{(st.st_uid, oct(st.st_mode & 0o777)) if st else 'missing'}")
                if who == "alice":  # hers ends on its own
                    with open(os.path.join(outs[who], "go"), "w"):
                        pass
                else:  # his is canceled: scancel as his account
                    r = s.post(f"/runs/{rid}/cancel", headers=bearer(tokens[who]))
                    check(r.status == 202, f"{who}'s cancel -> 202: {r.status} {r.body[:300]!r}")
            for who, rid in runs.items():
                if rid is None:
                    continue
                run = wait_final(s, rid)
                want = "succeeded" if who == "alice" else "canceled"
                check(run.get("status") == want, f"{who}'s run {want}: {run.get('status')} {run.get('reason')}")
                if who == "bob":
                    state = e.cluster.job(job_of(s, rid)).get("JobState")
                    check(state == "CANCELLED", f"and Slurm canceled his job: {state}")
                    with open(s.log_path, errors="replace") as f:
                        server_log = f.read()
                    check(f"Slurm job {job_of(s, rid)} canceled (scancel as {acc[who]})" in server_log,
                          f"the server's scancel ran as his account: {server_log[-1500:]!r}")
                log = s.get(f"/runs/{rid}/logs", headers=bearer(tokens[who])).body.decode(errors="replace")
                check(f"submitted as job {job_of(s, rid)} by the account {acc[who]}:" in log,
                      f"{who}'s run's log names its job and its account: {log[:600]!r}")
                if who == "alice":  # a raise is an operator's (the server's), not her sbatch's
                    nice = e.cluster.job(job_of(s, rid)).get("Nice")
                    check(nice == "-500" and "--nice" not in log and "priority 5 passed on by the server" in log,
                          f"her priority 5 is her job's nice, set by the server: Nice={nice} {log[:800]!r}")
            e.cluster.cmd("scancel", "--user", acc["alice"], check_rc=False)
            e.cluster.cmd("scancel", "--user", acc["bob"], check_rc=False)


def case_sharing_flags_refused(args):
    """Bad sharing flags stop `ddpd serve` at once, naming the flag and what is wrong."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_")}
    state = tempfile.mkdtemp(prefix="ddpd-slurm-flags-")
    try:
        for flags, words in (
                (["--slurm-user-account", "alice"], '--slurm-user-account "alice": USER=ACCOUNT is needed'),
                (["--slurm-user-account", "=physics"], "the ddpd user before '=' is empty"),
                (["--slurm-user-account", "alice="], "the Slurm account after '=' is empty"),
                (["--slurm-user-account", "alice=a", "--slurm-user-account", "alice=b"],
                 "user alice is given twice"),
                (["--slurm-user-account", "-bob=physics"],
                 '--slurm-user-account "-bob=physics": a user\'s name cannot start with \'-\''),
                (["--slurm-preemptible-qos", ""], '--slurm-preemptible-qos "": a QOS name is needed')):
            p = subprocess.run([args.ddpd, "serve", "--state-dir", state, "--listen", "127.0.0.1:0", "--executor",
                                "slurm"] + flags, capture_output=True, timeout=30, env=env)
            err = p.stderr.decode(errors="replace")
            check(p.returncode == 2 and words in err, f"ddpd serve {' '.join(flags)}: exit 2 saying {words!r}: "
                                                      f"{p.returncode} {err[-400:]!r}")
        p = subprocess.run([args.ddpd, "serve", "--state-dir", state, "--listen", "127.0.0.1:0"],
                           capture_output=True, timeout=30, env=dict(env, DDPD_SLURM_USER_ACCOUNTS="alice=physics bob"))
        err = p.stderr.decode(errors="replace")
        check(p.returncode == 2 and 'DDPD_SLURM_USER_ACCOUNTS "bob": USER=ACCOUNT is needed' in err,
              f"the environment's bad pair is named there: {p.returncode} {err[-400:]!r}")
        p = subprocess.run([args.ddpd, "serve", "--help"], capture_output=True, timeout=30, env=env)
        text = p.stdout.decode()
        for flag in ("--slurm-user-account USER=ACCOUNT", "--slurm-allow-priority", "--slurm-preemptible-qos NAME",
                     "DDPD_SLURM_USER_ACCOUNTS", "DDPD_SLURM_ALLOW_PRIORITY", "DDPD_SLURM_PREEMPTIBLE_QOS"):
            check(flag in text, f"ddpd serve --help mentions {flag}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer", required=True)
    p.add_argument("--runner", required=True)
    p.add_argument("--cluster-dir")
    p.add_argument("--openapi")
    p.add_argument("--ddpctl")
    a = p.parse_args()
    ddpd_harness.main(CASES, a)
