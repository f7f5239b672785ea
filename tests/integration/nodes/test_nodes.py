#!/usr/bin/env python3
"""Runs across nodes: a coordinator (`ddpd serve`) and an agent (`ddpd agent`) on two
"hosts", each a network namespace this test makes (a veth pair named ddpd0 on both
sides, 10.201.X.1 and .2, addresses that exist only inside them). The test itself
runs inside the coordinator's namespace; the agent runs in the other.

Cases: a 4-rank PyTorch gloo script across the 2 nodes (2 CPU slots each) with each
rank's torchrun variables checked and its events and logs on the coordinator; a rank
on the agent's node failing on its own (the run names that node and rank); an
agent killed mid-run (the run fails within the node timeout naming the node, and no
rank process is left on either node); the coordinator killed (the agent stops its
ranks after its grace); GET /nodes and the refusals of what cannot be
placed. The built-in MLP across the nodes (gloo between them): its losses against
one node's 4 ranks and against its own rerun, canceled and resumed, a rank of node-b
killed or stopped, node-b's agent killed. A user mapped to a Unix account: every
process of its runs, on both nodes, runs as that account (the agent root); an agent
that cannot switch accounts, or a node without the account, refuses the part, naming
what to do; a run whose account
went while it was queued never reaches the agent. Suspect nodes and devices, and a
user's own failed run's evidence hidden from another user (GET /nodes, ddpctl nodes),
who may not clear the node. Skips (exit
77), saying so, where network namespaces cannot be made.

Usage: test_nodes.py CASE --ddpd PATH --runner PATH --trainer PATH"""
import argparse, json, os, pwd, shutil, signal, stat, subprocess, sys, tempfile, textwrap, time, uuid

import checks  # noqa: E402
from procs import live_with_env  # noqa: E402
import ddpd_harness  # noqa: E402
from checks import check, cases_in  # noqa: E402
from ddpd_harness import Server, Accounts, add_user, bearer, wait_until, DATA_ROOT  # noqa: E402

PYTHON = "/usr/bin/python3"
NODE_TIMEOUT = 4

SCRIPT = """
    import json, os, signal, sys, time
    import torch
    import torch.distributed as dist
    import ddpd
    out, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert os.path.isdir(os.environ["NODES_TEST_DATA"]), "the config's paths reach every node as written"
    with open(os.path.join(out, "env-rank-%d.json" % rank), "w") as f:
        json.dump({k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                   "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT")}, f)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(rank)
    for step in range(steps):
        # the planned failure comes first in its step, so that no rank reports step 5
        # (one that passed step 5's all_reduce would, as the reporter's pace allows), and
        # after the steps so far reach ddpd (a crash loses what the reporter has queued):
        # each attempt is seen to fail after step 4, no attempt progress over the one before
        if (step == 5 and os.environ.get("NODES_TEST_FAIL_RANK") == str(rank) and
                (os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" or os.environ.get("NODES_TEST_FAIL_ALWAYS"))):
            ddpd.flush()
            print("a planned failure of rank", rank, file=sys.stderr, flush=True)
            if os.environ.get("NODES_TEST_SEGV"):
                os.kill(os.getpid(), signal.SIGSEGV)  # a crash (SIGSEGV): the class that marks a node
            os._exit(3)  # at once, as a crash: sys.exit would first tear down the gloo group
        x = torch.randn(16, 8, generator=g)
        loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = torch.tensor([float(rank)])
        dist.all_reduce(total)
        assert total.item() == sum(range(world)), total
        ddpd.log_step(step, loss=loss.item())
        print("step", step, "loss", loss.item(), flush=True)
        time.sleep(pause)
    del model
    dist.barrier()
    dist.destroy_process_group()
"""


# ---- the two hosts ----

def sh(*argv, check_rc=True):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r


def make_hosts(tag):
    """Two namespaces joined by a veth pair; (coordinator ns, node ns, their addresses)."""
    net = 10 + os.getpid() % 240
    c, n = f"ddpdc{tag}", f"ddpdn{tag}"
    ac, an = f"10.201.{net}.1", f"10.201.{net}.2"
    sh("ip", "netns", "add", c)
    sh("ip", "netns", "add", n)
    sh("ip", "link", "add", f"dv{tag}a", "type", "veth", "peer", "name", f"dv{tag}b")
    for ns, end, addr in ((c, "a", ac), (n, "b", an)):
        sh("ip", "link", "set", f"dv{tag}{end}", "netns", ns, "name", "ddpd0")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "ddpd0")
        sh("ip", "-n", ns, "link", "set", "ddpd0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    return c, n, ac, an


def remove_hosts(c, n):
    for ns in (c, n):
        pids = sh("ip", "netns", "pids", ns, check_rc=False).stdout.split()
        for p in pids:
            try:
                os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        sh("ip", "netns", "del", ns, check_rc=False)


def marked(mark):
    """Live processes (any namespace: one pid namespace) whose environment has the mark."""
    return live_with_env("NODES_TEST_MARK", mark)


class Cluster:
    """The coordinator here (this namespace) and an agent in the node's namespace."""

    def __init__(self, args, d, agent_data_root=DATA_ROOT, agent_as=None, agent_slots=2, here_across=True,
                 agent_etc=None, coord_args=()):
        """agent_as: the agent runs as this account (setpriv: its uid, gid and groups,
        no capability), its state dir and token file its own. here_across: the
        coordinator's host takes part in runs across nodes (--advertise); without it, a
        run larger than this host runs on the agent's node alone. agent_etc: the
        agent's node has this directory as its /etc (a mount namespace of its own; see
        node_etc)."""
        self.args, self.d, self.agent_data_root, self.agent_as = args, d, agent_data_root, agent_as
        self.agent_slots, self.agent_etc = agent_slots, agent_etc
        self.token_file = os.path.join(d, "token")
        with open(os.open(self.token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(uuid.uuid4().hex + "\n")
        with open(self.token_file) as f:
            self.token = f.read().strip()
        self.server = Server(args.ddpd, args.trainer, slots=2, state_dir=os.path.join(d, "coordinator"), extra_args=[
            "--listen", "0.0.0.0:0", "--token-file", self.token_file,
            *(["--advertise", args.coord_addr] if here_across else []), "--node-name", "node-a", "--allow-commands", "--runner", args.runner, "--node-timeout", str(NODE_TIMEOUT), *coord_args])
        os.makedirs(self.server.state_dir, mode=0o700)
        self.agent = None

    def __enter__(self):
        self.server.__enter__()
        self.server.headers = {"Authorization": f"Bearer {self.token}"}
        self.start_agent()
        return self

    def start_agent(self):
        self.agent_log = open(os.path.join(self.d, "agent.log"), "ab")
        state, token_file, prefix = os.path.join(self.d, "agent"), self.token_file, []
        if self.agent_as:
            pw = pwd.getpwnam(self.agent_as)
            os.makedirs(state, mode=0o700, exist_ok=True)
            os.chown(state, pw.pw_uid, pw.pw_gid)
            token_file = os.path.join(self.d, "agent-token")
            with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(self.token + "\n")
            os.chown(token_file, pw.pw_uid, pw.pw_gid)
            prefix = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
                      "--inh-caps=-all", "--bounding-set=-all", "--"]
        if self.agent_etc:
            prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                      'mount --bind "$0" /etc && exec "$@"', self.agent_etc, *prefix]
        self.agent = subprocess.Popen(
            ["ip", "netns", "exec", self.args.node_ns, *prefix, self.args.ddpd, "agent", "--coordinator",
             f"http://{self.args.coord_addr}:{self.server.port}", "--token-file", token_file, "--slots", str(self.agent_slots),
             "--name", "node-b", "--state-dir", state, "--allow-commands", "--runner",
             self.args.runner, "--trainer", self.args.trainer, "--data-root", self.agent_data_root,
             "--coordinator-grace", "5"],
            stdout=self.agent_log, stderr=self.agent_log)
        wait_until(lambda: any(n["name"] == "node-b" and n["state"] == "up"
                               for n in self.server.get("/nodes").json()["nodes"]), "the agent to register", 30)

    def __exit__(self, *exc):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                check(self.agent.wait(30) == 0, "the agent exits 0 on SIGTERM")
            except subprocess.TimeoutExpired:
                check(False, "the agent exits within 30 s of SIGTERM")
                self.agent.kill()
        self.agent_log.close()
        if checks.FAILED:
            with open(os.path.join(self.d, "agent.log"), "rb") as f:
                sys.stderr.write("---- agent log ----\n" + f.read().decode(errors="replace")[-8000:] + "\n")
        return self.server.__exit__(*exc)


def submit_script(cl, d, steps, pause, mark, env=None, node_env=False, **dist):
    """node_env: the gloo interface comes from each node's own environment (the
    coordinator's and the agent's), not from the run's config."""
    path = os.path.join(d, "script.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(SCRIPT))
    out = os.path.join(d, "out")
    os.makedirs(out, exist_ok=True)
    cfg = {"name": "across-nodes", "command": [PYTHON, path, out, str(steps), str(pause)],
           "env": dict({"NODES_TEST_MARK": mark, "NODES_TEST_DATA": DATA_ROOT},
                       **({} if node_env else {"GLOO_SOCKET_IFNAME": "ddpd0"}), **(env or {})),
           "distributed": dict({"world_size": 4, "nodes": 2}, **dist)}
    r = cl.server.post("/runs", cfg)
    check(r.status == 201, f"a run across 2 nodes is accepted: {r.status} {r.body[:400]!r}")
    return r.json()["id"], out


def wait_final(cl, rid, timeout):
    return wait_until(lambda: (lambda run: run if run["status"] in ("succeeded", "failed", "canceled") else None)(
        cl.server.get(f"/runs/{rid}").json()), f"run {rid} to end", timeout)


# ---- cases ----

def case_torch_across_nodes(args, d):
    mark = uuid.uuid4().hex
    # each machine names its own interface: set where ddpd serve and ddpd agent run,
    # it reaches the ranks that node starts (the run's config says nothing of it)
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"
    with Cluster(args, d) as cl:
        rid, out = submit_script(cl, d, 30, 0.02, mark, node_env=True)
        run = wait_final(cl, rid, 180)
        check(run and run["status"] == "succeeded", f"the run across nodes succeeded: {run}")
        check(run and run["devices"] == ["cpu:0", "cpu:1", "node-b/cpu:0", "node-b/cpu:1"],
              f"two ranks on each node: {run and run['devices']}")
        check(run and run["config"]["env"]["NODES_TEST_DATA"] == DATA_ROOT,
              f"the run's config comes back as submitted, its paths unrenamed: {run and run['config']['env']}")
        for r in range(4):
            try:
                with open(os.path.join(out, f"env-rank-{r}.json")) as f:
                    e = json.load(f)
            except OSError:
                check(False, f"rank {r} wrote its environment")
                continue
            want = {"RANK": str(r), "LOCAL_RANK": str(r % 2), "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                    "GROUP_RANK": str(r // 2), "GROUP_WORLD_SIZE": "2", "ROLE_RANK": str(r),
                    "MASTER_ADDR": args.coord_addr}
            wrong = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
            check(not wrong, f"rank {r}: its torchrun variables (seen, wanted): {wrong}")
        ranks = cl.server.get(f"/runs/{rid}/ranks").json()
        seen = sorted(x["rank"] for x in (ranks.get("ranks", ranks) if isinstance(ranks, dict) else ranks))
        check(seen[-4:] == [0, 1, 2, 3], f"every rank reported, the agent's through the coordinator: {seen}")
        for r in (0, 3):
            log = cl.server.get(f"/runs/{rid}/logs?rank={r}")
            check(log.status == 200 and "step 29 loss" in log.body.decode(errors="replace"),
                  f"rank {r}'s log is on the coordinator: {log.status} {log.body[-200:]!r}")
        main_log = cl.server.get(f"/runs/{rid}/logs").body.decode(errors="replace")
        check("[node node-b] " in main_log, f"the agent's launcher log is in the run's log, marked: {main_log[-600:]!r}")
        m = cl.server.get(f"/runs/{rid}/metrics?key=loss").json()
        check(m.get("points") or m.get("series") or m, f"the loss series exists: {str(m)[:200]}")
        check(not wait_until(lambda: not marked(mark), "no process of the run left", 20) is None,
              f"nothing of the run is left on either node: {marked(mark)}")
        nodes = cl.server.get("/nodes").json()["nodes"]
        b = [n for n in nodes if n["name"] == "node-b"]
        check(b and b[0]["free_slots"] == 2 and nodes[0]["local"] and nodes[0]["free_slots"] == 2,
              f"every device is free again: {nodes}")


def case_remote_rank_fails(args, d):
    """A rank on the agent's node fails on its own: the run fails naming that node and
    rank (not the coordinator's ranks, which lose their peer a moment later), and no
    rank is left on either node."""
    mark = uuid.uuid4().hex
    with Cluster(args, d) as cl:
        rid, _ = submit_script(cl, d, 200, 0.05, mark, env={"NODES_TEST_FAIL_RANK": "3"})
        run = wait_final(cl, rid, 180)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed" and reason.startswith("node node-b (ranks 2 to 3): rank 3 exited with status 3")
              and "a planned failure of rank 3" in reason, f"the run fails naming node-b and rank 3: {reason!r}")
        check(wait_until(lambda: not marked(mark), "every rank to be gone", 30), f"no rank left: {marked(mark)}")


def case_remote_rank_restarted(args, d):
    """distributed.max_restarts 1: a rank on the agent's node fails on the first
    attempt; every part is stopped and the coordinator starts both nodes' parts again
    at restart count 1 (a node's part never restarts alone); the run succeeds and both
    attempts are on record, the first naming rank 3."""
    mark = uuid.uuid4().hex
    with Cluster(args, d) as cl:
        rid, _ = submit_script(cl, d, 20, 0.05, mark, env={"NODES_TEST_FAIL_RANK": "3"}, max_restarts=1)
        run = wait_final(cl, rid, 240)
        if not check(run and run["status"] == "succeeded", f"restarted, it succeeds: {run and run['reason']}"):
            return
        att = run["attempts"]
        check(run["restart_count"] == 1 and [(x["attempt"], x["status"]) for x in att] == [(0, "failed"), (1, "succeeded")],
              f"two attempts, the first failed: {att}")
        check(att and att[0]["failing_rank"] == 3 and att[0]["exit_code"] == 3 and
              "a planned failure of rank 3" in (att[0]["reason"] or "") + (att[0]["last_line"] or ""),
              f"the first names rank 3 and its last words: {att and att[0]}")
        check(sorted(att[1]["log_offsets"]) == ["0", "1", "2", "3"] if len(att) == 2 else False,
              f"the second attempt's start on both nodes (every rank's log offset): {att}")
        check(wait_until(lambda: not marked(mark), "every rank to be gone", 30), f"no rank left: {marked(mark)}")


def case_agent_killed(args, d):
    mark = uuid.uuid4().hex
    with Cluster(args, d) as cl:
        rid, _ = submit_script(cl, d, 100000, 0.05, mark)
        wait_until(lambda: cl.server.get(f"/runs/{rid}").json()["status"] == "running", "the run to run", 120)
        wait_until(lambda: len(marked(mark)) >= 4, "four ranks", 60)
        time.sleep(1)
        killed_at = time.monotonic()
        cl.agent.kill()
        cl.agent.wait()
        run = wait_final(cl, rid, NODE_TIMEOUT + 60)
        took = time.monotonic() - killed_at
        check(run and run["status"] == "failed", f"the run failed: {run and run['status']}")
        reason = (run or {}).get("reason") or ""
        check("node node-b (ranks 2 to 3) stopped heartbeating" in reason,
              f"the reason names the node that went away: {reason!r} (after {took:.1f} s)")
        print(f"run failed {took:.1f} s after the agent was killed (node timeout {NODE_TIMEOUT} s): {reason}")
        left = wait_until(lambda: not marked(mark), "no rank left on either node", 30)
        check(left is not None, f"no rank process left on either node: {marked(mark)}")
        nodes = {n["name"]: n for n in cl.server.get("/nodes").json()["nodes"]}
        check(nodes.get("node-b", {}).get("state") == "lost", f"GET /nodes says node-b is lost: {nodes.get('node-b')}")
        check(nodes.get("node-a", {}).get("free_slots") == 2, f"this host's slots are free again: {nodes.get('node-a')}")


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        return int(env.get(b"RANK", b"-1"))
    except (OSError, ValueError):
        return -1


def case_coordinator_lost(args, d):
    """The coordinator is SIGKILLed mid-run: once it has not answered for the agent's
    --coordinator-grace (5 s here), the agent stops the ranks it runs, says why in its
    log, and keeps running (to register again with a coordinator that comes back)."""
    mark = uuid.uuid4().hex
    with Cluster(args, d) as cl:
        rid, _ = submit_script(cl, d, 100000, 0.05, mark)
        wait_until(lambda: cl.server.get(f"/runs/{rid}").json()["status"] == "running", "the run to run", 120)
        wait_until(lambda: len(marked(mark)) >= 4, "four ranks", 60)
        killed_at = time.monotonic()
        cl.server.proc.kill()
        cl.server.proc.wait()
        remote = lambda: [p for p in marked(mark) if rank_of(p) in (2, 3)]  # noqa: E731
        gone = wait_until(lambda: not remote(), "node-b's ranks to stop", 60)
        took = time.monotonic() - killed_at
        check(gone is not None, f"the agent stopped its ranks after losing the coordinator: left {remote()}")
        check(took >= 4.0, f"not before the grace (5 s, heard once a second): after {took:.1f} s")
        print(f"node-b's ranks stopped {took:.1f} s after the coordinator was killed (grace 5 s)")
        check(cl.agent.poll() is None, "the agent itself keeps running")
        with open(os.path.join(d, "agent.log"), "rb") as f:
            log = f.read().decode(errors="replace")
        check("--coordinator-grace" in log and "stopping every part here" in log,
              f"its log says why it stopped them: {log[-600:]!r}")
        # the coordinator's own ranks outlive it, as a trainer outlives its server: gone here
        # (one may end by itself meanwhile: its peers on node-b are gone)
        for pid in marked(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not marked(mark), "the coordinator's ranks to go", 30)
        time.sleep(1)  # and their launcher after them


# ---- the built-in trainer across nodes ----

def builtin_config(**over):
    """A small MLP run of 4 ranks on the 2 nodes (2 CPU slots each); paths relative to
    each node's data root."""
    return ddpd_harness.fmnist_config(**dict({"name": "mlp-across-nodes", "data.limit": 3072, "data.test_limit": 500,
                                              "train.epochs": 3, "distributed.world_size": 4,
                                              "distributed.nodes": 2, "distributed.backend": "cpu",
                                              "checkpoint.every_epochs": 1}, **over))


def step_losses(journal_path):
    """[(global_step, loss)] of a run's step events, in order (whole lines only)."""
    with open(journal_path) as f:
        events = [json.loads(line) for line in f if line.endswith("\n") and line.strip()]
    return [(e["global_step"], e["loss"]) for e in events if e["type"] == "step"]


def api_losses(cl, rid):
    return [(p[0], p[1]) for p in cl.server.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]


def epochs_of(cl, rid):
    return [(e["epoch"], e["lr"], e["train_loss"], e["test_loss"], e["test_acc"])
            for e in cl.server.get(f"/runs/{rid}/epochs").json()["epochs"]]


def one_node_reference(args, d, cfg):
    """The same config on one host, 4 ranks, by ddp-trainer on its own: its step losses."""
    ref = json.loads(json.dumps(cfg))
    ref["distributed"].pop("nodes")
    for split in ("train", "test"):
        for k in ("images", "labels"):
            ref["data"][split][k] = os.path.join(DATA_ROOT, ref["data"][split][k])
    path, run_dir = os.path.join(d, "one-node.json"), os.path.join(d, "one-node")
    with open(path, "w") as f:
        json.dump(ref, f)
    r = subprocess.run([args.trainer, "--config", path, "--run-dir", run_dir], capture_output=True, text=True,
                       timeout=300)
    check(r.returncode == 0, f"the one-node reference run succeeds: {r.stderr[-600:]}")
    return step_losses(os.path.join(run_dir, "events.jsonl"))


def trainer_pids(args, d):
    """Live ddp-trainer processes (launchers and ranks) of this test's runs, on either node."""
    found = []
    for pid in ddpd_harness.pids_under(d):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].decode() == args.trainer:
                    found.append(pid)
        except OSError:
            pass
    return found


def case_builtin_across_nodes(args, d):
    """The built-in MLP, 4 ranks across the 2 nodes: it succeeds with every rank
    reporting through the coordinator, its step losses equal a one-node 4-rank run's
    to 1e-5 (relative), and a second run is bit-identical to the first."""
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"  # each node's interface, from where ddpd runs there
    cfg = builtin_config()
    reference = one_node_reference(args, d, cfg)
    with Cluster(args, d) as cl:
        runs = []
        for attempt in range(2):
            r = cl.server.post("/runs", cfg)
            if not check(r.status == 201, f"a built-in run across 2 nodes is accepted: {r.status} {r.body[:400]!r}"):
                return
            rid = r.json()["id"]
            run = wait_final(cl, rid, 300)
            if not check(run and run["status"] == "succeeded", f"run {rid} across nodes succeeded: {run and run['reason']}"):
                return
            runs.append(rid)
        rid = runs[0]
        run = cl.server.get(f"/runs/{rid}").json()
        check(run["devices"] == ["cpu:0", "cpu:1", "node-b/cpu:0", "node-b/cpu:1"], f"two ranks a node: {run['devices']}")
        ranks = cl.server.get(f"/runs/{rid}/ranks").json()
        ranks = ranks.get("ranks", ranks) if isinstance(ranks, dict) else ranks
        check(sorted(x["rank"] for x in ranks if x["rank"] >= 0) == [0, 1, 2, 3],
              f"every rank reported, node-b's through the coordinator: {ranks}")
        mine = api_losses(cl, rid)
        check(len(mine) == len(reference) and len(mine) > 0, f"as many steps as one node's run: {len(mine)} vs {len(reference)}")
        worst = max((abs(a[1] - b[1]) / abs(b[1]) for a, b in zip(mine, reference)), default=1.0)
        check(worst <= 1e-5, f"every step's loss within 1e-5 (relative) of one node's 4 ranks: worst {worst:.3g}")
        print(f"built-in MLP across 2 nodes: {len(mine)} steps, worst relative difference to one node {worst:.3g}")
        again = api_losses(cl, runs[1])
        check(again == mine, "a second run across nodes is bit-identical, step by step")
        check(epochs_of(cl, runs[1]) == epochs_of(cl, rid), "and epoch by epoch")
        ckpt = os.path.join("checkpoints", "epoch-0002.safetensors")
        first, second = (os.path.join(cl.server.run_dir(x), ckpt) for x in runs)
        check(os.path.exists(first) and open(first, "rb").read() == open(second, "rb").read(),
              "rank 0 wrote the checkpoints on its node, the same bytes both times")
        log = cl.server.get(f"/runs/{rid}/logs").body.decode(errors="replace")
        check("between nodes" in log and "[node node-b]" in log and "started ranks 2 to 3 of 4 (node 1 of 2)" in log,
              f"the run's log has both nodes' launchers and where the steps went: {log[-1500:]!r}")
        check(wait_until(lambda: not trainer_pids(args, d), "no trainer left", 30) is not None,
              f"no trainer process left on either node: {trainer_pids(args, d)}")


def case_builtin_resumed_across_nodes(args, d):
    """A built-in run across nodes canceled after its first checkpoint and resumed:
    node 0 (rank 0's, which holds the checkpoints) loads it, node 1 gets its state from
    rank 0, and the run ends bit-identical to an uninterrupted one."""
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"
    cfg = builtin_config(**{"train.epochs": 4, "checkpoint.every_epochs": 2})
    with Cluster(args, d) as cl:
        full = cl.server.post("/runs", cfg).json()["id"]
        frun = wait_final(cl, full, 300)
        if not check(frun and frun["status"] == "succeeded", f"the uninterrupted run succeeds: {frun and frun['reason']}"):
            return
        rid = cl.server.post("/runs", cfg).json()["id"]
        have_checkpoint = lambda: cl.server.get(f"/runs/{rid}/checkpoints").json().get("checkpoints")  # noqa: E731
        if not check(wait_until(have_checkpoint, "the first checkpoint", 300), "a checkpoint was written"):
            return
        check(cl.server.post(f"/runs/{rid}/cancel").status == 202, "cancel -> 202")
        run = wait_final(cl, rid, 60)
        if run and run["status"] == "succeeded":
            print("the run ended before the cancel landed: nothing to resume")
            return
        check(run and run["status"] == "canceled", f"canceled: {run and run['status']} {run and run['reason']}")
        check(wait_until(lambda: not trainer_pids(args, d), "no trainer left", 30) is not None, "no trainer left")
        r = cl.server.post(f"/runs/{rid}/resume")
        check(r.status == 202, f"it resumes: {r.status} {r.body[:300]!r}")
        run = wait_final(cl, rid, 300)
        check(run and run["status"] == "succeeded", f"and succeeds across the nodes: {run and run['reason']}")
        check(api_losses(cl, rid) == api_losses(cl, full), "bit-identical losses to the uninterrupted run")
        check(epochs_of(cl, rid) == epochs_of(cl, full), "and epochs")
        log = cl.server.get(f"/runs/{rid}/logs").body.decode(errors="replace")
        check("loaded " in log and "it continues at epoch 2" in log, f"rank 0 loaded the checkpoint: {log[-800:]!r}")


def remote_rank_hit(args, d, sig, over, words, timeout):
    """A built-in run across the nodes; once it trains, rank 3 (on the agent's node)
    gets `sig`: the run must fail with a reason starting with `words`, and no trainer
    may be left on either node."""
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"
    cfg = builtin_config(**dict({"train.epochs": 200, "data.limit": 6000, "checkpoint.every_epochs": 0}, **over))
    with Cluster(args, d) as cl:
        rid = cl.server.post("/runs", cfg).json()["id"]
        if not check(wait_until(lambda: len(api_losses(cl, rid)) >= 5, "the run to take steps", 180), "the run trains"):
            return
        journal = os.path.join(d, "agent", "runs", str(rid), "events.jsonl")
        with open(journal) as f:
            hellos = {e["rank"]: e["pid"] for e in map(json.loads, (l for l in f if l.endswith("\n")))
                      if e["type"] == "hello"}
        if not check(3 in hellos, f"rank 3 said hello on node-b: {hellos}"):
            return
        os.kill(hellos[3], sig)
        run = wait_final(cl, rid, timeout)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed" and reason.startswith(words),
              f"the run names node-b's rank 3 ({words!r}): {reason!r}")
        check(wait_until(lambda: not trainer_pids(args, d), "no trainer left on either node", 30) is not None,
              f"no trainer process left on either node: {trainer_pids(args, d)}")


def case_builtin_remote_rank_killed(args, d):
    """A rank of a built-in run on the agent's node is SIGKILLed: the run fails naming
    that node and rank (the coordinator's ranks, which lose their gloo peers a moment
    later, are not blamed), and no trainer is left on either node."""
    remote_rank_hit(args, d, signal.SIGKILL, {}, "node node-b (ranks 2 to 3): rank 3 exited with signal 9", 60)


def case_builtin_remote_rank_stopped(args, d):
    """A rank of a built-in run on the agent's node is SIGSTOPped: both nodes' hang
    watches fire (distributed.hang_timeout_s, 6 s here), and the run names node-b's
    stopped rank, not the coordinator's ranks, which were only waiting for it in gloo."""
    remote_rank_hit(args, d, signal.SIGSTOP, {"distributed.hang_timeout_s": 6},
                    "node node-b (ranks 2 to 3): rank 3 made no progress", 90)


def case_builtin_data_missing_on_node(args, d):
    """node-b's data root lacks the dataset the coordinator has: the run fails at once,
    naming node-b and the file it could not open, and nothing is left running on the
    coordinator's node (whose ranks were waiting for node-b's at the rendezvous)."""
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"
    empty = os.path.join(d, "empty-data-root")
    os.makedirs(empty)
    with Cluster(args, d, agent_data_root=empty) as cl:
        rid = cl.server.post("/runs", builtin_config()).json()["id"]
        run = wait_final(cl, rid, 120)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed" and reason.startswith("node node-b (ranks 2 to 3): cannot load the training data")
              and "train-images-idx3-ubyte.gz" in reason, f"the run names node-b and the file it lacks: {reason!r}")
        check(wait_until(lambda: not trainer_pids(args, d), "no trainer left on either node", 30) is not None,
              f"no trainer process left on either node: {trainer_pids(args, d)}")


def case_builtin_agent_killed(args, d):
    """The agent of a built-in run's second node is killed: the run fails within the
    node timeout naming that node, and no trainer is left on either node (the
    coordinator's ranks, waiting in gloo for their peers, are stopped)."""
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"
    cfg = builtin_config(**{"train.epochs": 200, "data.limit": 6000, "checkpoint.every_epochs": 0})
    with Cluster(args, d) as cl:
        rid = cl.server.post("/runs", cfg).json()["id"]
        started = wait_until(lambda: len(api_losses(cl, rid)) >= 5, "the run to take steps", 180)
        if not check(started, f"the run trains: {cl.server.get(f'/runs/{rid}').json()}"):
            return
        killed_at = time.monotonic()
        cl.agent.kill()
        cl.agent.wait()
        run = wait_final(cl, rid, NODE_TIMEOUT + 60)
        took = time.monotonic() - killed_at
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed" and "node node-b (ranks 2 to 3) stopped heartbeating" in reason,
              f"the run fails naming node-b: {reason!r}")
        check(took <= NODE_TIMEOUT + 5, f"within the node timeout ({NODE_TIMEOUT} s) and a little: {took:.1f} s")
        print(f"built-in run failed {took:.1f} s after node-b's agent was killed: {reason}")
        check(wait_until(lambda: not trainer_pids(args, d), "no trainer left on either node", 30) is not None,
              f"no trainer process left on either node: {trainer_pids(args, d)}")


def admitted_on(cl, rid):
    """The devices each start of the run was given, in order (its timeline's `admitted`)."""
    r = cl.server.get(f"/runs/{rid}/timeline")
    return [e["detail"].get("devices") for e in r.json().get("entries", []) if e["kind"] == "admitted"] \
        if r.status == 200 else []


def marks(cl):
    return {m["node"]: m for m in cl.server.get("/nodes").json().get("suspects", [])}


def ddpd_node(cl, *argv):
    p = subprocess.run([cl.args.ddpd, "node", *argv, "--state-dir", cl.server.state_dir], capture_output=True,
                       text=True, timeout=60)
    print(f"--- ddpd node {' '.join(argv)}\n{p.stdout}{p.stderr}", flush=True)
    return p


def ddpctl(cl, token, *argv):
    """`ddpctl ARGV` with `token`, printed for the record; its output."""
    p = subprocess.run([cl.args.ddpctl, "--server", f"http://127.0.0.1:{cl.server.port}", "--token", token, *argv],
                       capture_output=True, text=True, timeout=60)
    print(f"--- ddpctl {' '.join(argv)}\n{p.stdout}{p.stderr}", flush=True)
    return p.stdout


def show(cl, rid):
    """`ddpctl show RID` as the admin sees it: printed for the record (docs/failures.md's scenarios)."""
    return ddpctl(cl, cl.token, "show", str(rid))


def case_suspect_nodes(args, d):
    """Suspect nodes and devices, and retry_elsewhere, across node-a (the coordinator)
    and node-b, 2 slots each (CPU slots stand in for GPUs), two failures to mark
    (--suspect-after 2, the default), a node excluded after 2 failed runs:
    a run of 2 ranks whose rank 0 crashes (SIGSEGV) on node-a's cpu:0: after its first
    attempt node-a is only watched (not in GET /nodes' suspects); after its second (the
    same slot) node-a's cpu:0 alone is suspect, with the class and evidence, shown under
    node-a's devices. A run of 1 rank goes to node-a's cpu:1 (the device avoided, not the
    node); the next run of 2 goes to node-b (node-a has one clean slot), and its rank 1
    crashes there, with restart_policy.on.crash retry_elsewhere: node-b is only watched,
    yet the restart avoids the slot it failed on and node-a's suspect slot, waiting with
    reason suspect_nodes naming both; a user's token may not clear a node (403), an
    admin's clears node-a, and the restart runs on node-a only and succeeds. A run of 4
    ranks (2 a node) that crashes on node-b's cpu:1 makes it suspect (its second failure)
    and excluded (its second failed run): the next such run waits, suspect_nodes, until
    `ddpd node clear node-b`, then runs on both nodes."""
    mark = uuid.uuid4().hex
    with Cluster(args, d, coord_args=("--exclude-node-after", "2", "--exclude-node-window", "3600")) as cl:
        alice = add_user(args.ddpd, cl.server.state_dir, "alice")
        # 1. two crashes of rank 0 on node-a's cpu:0 (attempt 0, then its launcher's restart)
        rid, _ = submit_script(cl, d, 20, 0.05, mark, env={"NODES_TEST_FAIL_RANK": "0", "NODES_TEST_SEGV": "1",
                                                           "NODES_TEST_FAIL_ALWAYS": "1"},
                               world_size=2, nodes=0, restart_policy={"max_restarts": 1,
                                                                      "backoff": {"initial_s": 0, "max_s": 0}})
        run = wait_final(cl, rid, 120)
        show(cl, rid)
        classes = [(x.get("failure") or {}).get("class") for x in (run or {}).get("attempts", [])]
        # max_restarts 1: two attempts, each failing at step 5 (a third once ran: the first
        # attempt's steps counted as progress over no earlier attempt, under reset_on_progress)
        check(run and run["status"] == "failed" and classes == ["crash", "crash"] and
              (run["reason"] or "").startswith("all 2 attempts failed (distributed.restart_policy.max_restarts is 1)"),
              f"the first run crashed on each of its 2 attempts: {run and run['reason']} {run and run['attempts']}")
        m = marks(cl).get("node-a")
        check(m and m["class"] == "crash" and m["run_id"] == rid and not m["excluded"] and m["evidence"] and
              m["since"] and m["state"] == "suspect" and not m["suspect"] and m["device"] == "cpu:0" and
              m["devices"] == ["cpu:0"] and [f["device"] for f in m["failures"]] == ["cpu:0"] * len(classes),
              f"node-a's cpu:0 alone is suspect, with the class, the run and the evidence: {marks(cl)}")
        # the evidence is a line of the run's output: a user who does not own the run reads none of it
        seen_by_alice = cl.server.get("/nodes", headers=bearer(alice)).json()
        am = {x["node"]: x for x in seen_by_alice.get("suspects", [])}.get("node-a") or {}
        an = {x["name"]: x for x in seen_by_alice["nodes"]}.get("node-a", {}).get("suspect") or {}
        check(am.get("evidence") == an.get("evidence") == "<hidden>" and am.get("hidden") == ["evidence"] and
              am.get("class") == "crash" and am.get("devices") == ["cpu:0"] and m and m["evidence"] != "<hidden>",
              f"alice (a user) sees node-a's mark without the evidence of a run not hers: {am} {an}")
        listed = ddpctl(cl, cl.token, "nodes")
        row = next((l for l in listed.splitlines() if l.startswith("node-a") and "crash" in l), "")
        check("cpu:0" in row and "suspect" in row and "killed by SIGSEGV" in row,
              f"ddpctl nodes lists node-a's suspect cpu:0 with its class and evidence: {listed!r}")
        listed = ddpctl(cl, alice, "nodes")
        row = next((l for l in listed.splitlines() if l.startswith("node-a") and "crash" in l), "")
        check("cpu:0" in row and "<hidden>" in row and "SIGSEGV" not in listed,
              f"ddpctl nodes as alice: the mark without the evidence: {listed!r}")
        nodes = {n["name"]: n for n in cl.server.get("/nodes").json()["nodes"]}
        check((nodes.get("node-a") or {}).get("suspect_devices") == ["cpu:0"] and
              (nodes.get("node-b") or {}).get("suspect") is None,
              f"GET /nodes shows node-a's suspect slot under its devices, no mark on node-b: {nodes}")
        # 2. a run of 1 rank: node-a, on its clean slot
        rid, _ = submit_script(cl, d, 3, 0.01, mark, world_size=1, nodes=0)
        run = wait_final(cl, rid, 120)
        check(run and run["status"] == "succeeded" and admitted_on(cl, rid) == [["cpu:1"]],
              f"a run of 1 goes to node-a's clean slot, not its suspect cpu:0: {run and run['reason']} "
              f"{admitted_on(cl, rid)}")
        # 3. the next run of 2 goes to node-b, crashes there, and is restarted elsewhere
        rid, _ = submit_script(cl, d, 20, 0.05, mark, env={"NODES_TEST_FAIL_RANK": "1", "NODES_TEST_SEGV": "1"},
                               world_size=2, nodes=0, restart_policy={
                                   "max_restarts": 2, "on": {"crash": "retry_elsewhere"},
                                   "backoff": {"initial_s": 0, "max_s": 0}})
        seen = {}

        def waits_for_marks():
            run = cl.server.get(f"/runs/{rid}").json()
            seen["run"] = run
            p = run.get("pending") or {}
            return run if run["status"] == "queued" and p.get("reason") == "suspect_nodes" else None
        run = wait_until(waits_for_marks, "the restart to wait for the suspect nodes", 120)
        check(run is not None, f"its restart waits, suspect_nodes: {seen.get('run')}")
        check(admitted_on(cl, rid)[:1] == [["node-b/cpu:0", "node-b/cpu:1"]],
              f"its first start was on node-b, not node-a with its suspect slot: {admitted_on(cl, rid)}")
        detail = ((run or {}).get("pending") or {}).get("detail") or ""
        check("node-a's suspect devices" in detail and "node-b/cpu:1 (its attempt failed there)" in detail and
              "ddpd node clear" in detail, f"the pending detail names both and how to clear them: {detail!r}")
        shown = show(cl, rid)
        check("waits for:" in shown and "node-b/cpu:1 (its attempt failed there)" in shown,
              f"ddpctl show says what the restart waits for: {shown!r}")
        check("node-b" not in marks(cl), f"node-b, one failure, is only watched: {marks(cl)}")
        r = cl.server.post("/nodes/node-a/clear", {}, headers=bearer(alice))
        check(r.status == 403 and "node-a" in marks(cl), f"alice (a user) may not clear a node: {r.status} {r.body[:300]!r}")
        r = cl.server.post("/nodes/node-a/clear", {})
        check(r.status == 200 and "node-a" not in marks(cl), f"the admin clears node-a: {r.status} {r.body[:300]!r}")
        run = wait_final(cl, rid, 180)
        show(cl, rid)
        check(run and run["status"] == "succeeded", f"restarted elsewhere, it succeeds: {run and run['reason']}")
        starts = admitted_on(cl, rid)
        check(starts == [["node-b/cpu:0", "node-b/cpu:1"], ["cpu:0", "cpu:1"]],
              f"the restart ran on node-a only, node-b avoided: {starts}")
        check(run and [(x["attempt"], x["status"], (x.get("failure") or {}).get("node")) for x in run["attempts"]] ==
              [(0, "failed", "node-b"), (1, "succeeded", None)], f"its attempts: {run and run['attempts']}")
        # 4. node-b's second failure (cpu:1 again) and second failed run exclude it; ddpd node clear brings it back
        rid, _ = submit_script(cl, d, 20, 0.05, mark, env={"NODES_TEST_FAIL_RANK": "3", "NODES_TEST_SEGV": "1"})
        run = wait_final(cl, rid, 120)
        check(run and run["status"] == "failed", f"the run of 4 ranks failed: {run and run['reason']}")
        m = marks(cl).get("node-b")
        check(m and m["excluded"] and m["state"] == "excluded" and m["failed_runs"] == 2 and
              m["devices"] == ["cpu:1"] and "node-a" not in marks(cl),
              f"node-b excluded after its second failed run, cpu:1 suspect; node-a not blamed: {marks(cl)}")
        rid, _ = submit_script(cl, d, 10, 0.05, mark)
        got = wait_until(lambda: (cl.server.get(f"/runs/{rid}").json().get("pending") or {}).get("reason")
                         == "suspect_nodes", "the run of 4 to wait for node-b", 60)
        check(got, f"a run that needs node-b waits while it is excluded: {cl.server.get(f'/runs/{rid}').json().get('pending')}")
        show(cl, rid)
        listed = ddpd_node(cl, "list")
        check(listed.returncode == 0 and "node-b" in listed.stdout and "excluded" in listed.stdout,
              f"ddpd node list shows node-b excluded: {listed.stdout!r}")
        cleared = ddpd_node(cl, "clear", "node-b")
        check(cleared.returncode == 0, f"ddpd node clear node-b exits 0: {cleared.stderr!r}")
        run = wait_final(cl, rid, 180)
        check(run and run["status"] == "succeeded" and admitted_on(cl, rid) ==
              [["cpu:0", "cpu:1", "node-b/cpu:0", "node-b/cpu:1"]],
              f"cleared, node-b takes the run again: {run and run['reason']} {admitted_on(cl, rid)}")
        check(not marks(cl), f"no mark left: {marks(cl)}")
        check(wait_until(lambda: not marked(mark), "every rank to be gone", 30), f"no rank left: {marked(mark)}")


# A line a collective class is read from (base/failure_class.c), with what only its
# owner (and an admin) may read, then a failed exit.
HER_FAILURE = """
    import sys
    print("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error (" + sys.argv[1] + ")",
          file=sys.stderr, flush=True)
    sys.exit(1)
"""


def case_marks_of_her_run(args, d):
    """The hostile side of the marks: alice's own command run fails twice on one slot
    (restart_policy.max_restarts 1: exactly 2 attempts) with a collective error whose
    line, her run's output, carries a secret; the slot is suspect with that line as
    evidence. Bob (another user) reads "<hidden>" in its place in GET /nodes (the node's
    mark and the list of marks) and in `ddpctl nodes`, and his clear is refused (403),
    the mark kept; alice and the admin read her line. Cleared, her next run (no restart)
    fails once there: the node is only watched (GET /nodes' `watch`, state watched), its
    evidence hidden from bob all the same."""
    secret = f"alice-secret-{uuid.uuid4().hex[:12]}"
    path = os.path.join(d, "hers.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(HER_FAILURE))
    os.chmod(path, 0o644)
    with Cluster(args, d) as cl:
        alice = add_user(args.ddpd, cl.server.state_dir, "alice")
        bob = add_user(args.ddpd, cl.server.state_dir, "bob")

        def hers(max_restarts):
            cfg = {"name": "hers", "command": [PYTHON, path, secret],
                   "distributed": {"world_size": 1, "restart_policy": {
                       "max_restarts": max_restarts, "backoff": {"initial_s": 0, "max_s": 0}}}}
            r = cl.server.post("/runs", cfg, headers=bearer(alice))
            check(r.status == 201, f"alice's run is accepted: {r.status} {r.body[:300]!r}")
            return wait_final(cl, r.json()["id"], 120) if r.status == 201 else None

        def nodes_as(token):
            r = cl.server.get("/nodes", headers=bearer(token))
            return r.json(), r.body.decode()

        run = hers(1)
        rid = (run or {}).get("id")
        check(run and [(x.get("failure") or {}).get("class") for x in run["attempts"]] == ["collective", "collective"],
              f"her run failed twice, collective: {run and run['reason']} {run and run['attempts']}")
        got = wait_until(lambda: next((m for m in marks(cl).values() if m["run_id"] == rid), None), "her run's mark", 30)
        node = (got or {}).get("node")
        check(got and got["state"] == "suspect" and got["owner"] == "alice" and secret in got["evidence"] and
              [f["class"] for f in got["failures"]] == ["collective", "collective"],
              f"the admin reads her line as the mark's evidence, each failure's class: {got}")
        seen, body = nodes_as(bob)
        bm = next((m for m in seen.get("suspects", []) if m["node"] == node), {})
        bn = next((n for n in seen["nodes"] if n["name"] == node), {}).get("suspect") or {}
        check(bm.get("evidence") == bn.get("evidence") == "<hidden>" and bm.get("hidden") == ["evidence"] and
              bm.get("class") == "collective" and bm.get("run_id") == rid and secret not in body,
              f"bob sees her run's mark without her line, in both places: {bm} {bn}")
        seen, body = nodes_as(alice)
        am = next((m for m in seen.get("suspects", []) if m["node"] == node), {})
        check(secret in am.get("evidence", "") and "hidden" not in am, f"alice reads her own line: {am}")
        listed = ddpctl(cl, bob, "nodes")
        row = next((l for l in listed.splitlines() if l.startswith(node or "?") and "collective" in l), "")
        check("<hidden>" in row and secret not in listed, f"ddpctl nodes as bob: the mark without her line: {listed!r}")
        listed = ddpctl(cl, bob, "nodes", "--json")
        check(secret not in listed and "<hidden>" in listed, f"ddpctl nodes --json as bob: no line of hers: {listed!r}")
        listed = ddpctl(cl, cl.token, "nodes")
        check(secret in listed, f"ddpctl nodes as the admin: her line: {listed!r}")
        r = cl.server.post(f"/nodes/{node}/clear", {}, headers=bearer(bob))
        check(r.status == 403 and node in marks(cl), f"bob may not clear the node: {r.status} {r.body[:300]!r}")
        r = cl.server.post(f"/nodes/{node}/clear", {}, headers=bearer(alice))
        check(r.status == 403 and node in marks(cl), f"nor alice, whose run marked it: {r.status} {r.body[:300]!r}")
        r = cl.server.post(f"/nodes/{node}/clear", {})
        check(r.status == 200 and node not in marks(cl), f"the admin clears it: {r.status} {r.body[:300]!r}")
        # one failure: watched, not suspect; the evidence hidden from bob there too
        run = hers(0)
        check(run and len(run["attempts"]) == 1, f"max_restarts 0: one attempt: {run and run['attempts']}")
        def watched(token):
            seen, body = nodes_as(token)
            n = next((x for x in seen["nodes"] if (x.get("watch") or {}).get("run_id") == (run or {}).get("id")), None)
            return (n, body) if n else None
        got = wait_until(lambda: watched(cl.token), "the node to be watched", 30)
        n = got[0] if got else {}
        check(n.get("suspect") is None and n["watch"]["state"] == "watched" and secret in n["watch"]["evidence"] and
              not marks(cl), f"one failure: the node is watched, not suspect; the admin reads her line: {n}")
        got = watched(bob)
        n, body = got if got else ({}, "")
        check(got and n["watch"]["evidence"] == "<hidden>" and n["watch"]["hidden"] == ["evidence"] and secret not in body,
              f"bob reads no line of hers in the watch either: {n}")


def case_placement_refusals(args, d):
    with Cluster(args, d) as cl:
        nodes = cl.server.get("/nodes").json()["nodes"]
        check([n["name"] for n in nodes] == ["node-a", "node-b"] and nodes[0]["address"] == args.coord_addr
              and nodes[1]["address"] == args.node_addr and nodes[1]["slots"] == 2,
              f"GET /nodes: this host first, then the agent, with their addresses: {nodes}")
        base = {"command": [PYTHON, "-c", "pass"], "distributed": {"world_size": 4}}
        for dist, pointer, words in (({"world_size": 4, "nodes": 3}, "/distributed/nodes", "must divide"),
                                     ({"world_size": 6, "nodes": 2}, "/distributed/nodes", "needs 2 nodes with 3"),
                                     ({"world_size": 8}, "/distributed/world_size", "no set of nodes holds it")):
            r = cl.server.post("/runs", dict(base, distributed=dist))
            errs = r.json().get("errors", []) if r.status == 400 else []
            check(len(errs) == 1 and errs[0]["pointer"] == pointer and words in errs[0]["message"],
                  f"{dist} refused once, at {pointer} saying {words!r}: {r.status} {r.body[:500]!r}")
        mlp = ddpd_harness.fmnist_config(**{"distributed.world_size": 6, "distributed.nodes": 2, "train.batch_size": 120})
        r = cl.server.post("/runs", mlp)
        errs = r.json().get("errors", []) if r.status == 400 else []
        check(len(errs) == 1 and errs[0]["pointer"] == "/distributed/nodes" and "needs 2 nodes with 3" in errs[0]["message"],
              f"a built-in model is placed as a command run is: too big refused at /distributed/nodes: {r.body[:400]!r}")
        r = cl.server.post("/nodes/1/heartbeat", {"parts": []}, headers={"Authorization": "Bearer wrong"})
        check(r.status == 401, f"an agent without the token is refused: {r.status}")
        r = cl.server.post("/nodes/77/heartbeat", {"parts": []})
        check(r.status == 404 and "register again" in r.body.decode(), f"an unknown node is told to register: {r.body!r}")
        r = cl.server.post("/nodes", {"name": "bad name", "address": "x", "slots": 1})
        check(r.status == 400 and "name" in r.body.decode(), f"a bad node name is refused: {r.body!r}")
        # what an agent forwards goes only into the run's own logs
        node_b = next(n["id"] for n in cl.server.get("/nodes").json()["nodes"] if n["name"] == "node-b")
        bad = ("../trainer.log", "ranks/rank-01.log", "ranks/rank- 1.log", "ranks/rank-+1.log", "ranks/rank-1.log.x",
               "ranks/rank-.log", "ranks/rank-99999.log", "config.json")
        r = cl.server.post(f"/nodes/{node_b}/heartbeat", {"logs": [{"run": 1, "file": f, "offset": 0, "text": "x\n"}
                                                                   for f in bad]})
        acks = r.json().get("logs", []) if r.status == 200 else []
        check(len(acks) == len(bad) and all("forwards only trainer.log and ranks/rank-N.log" in a.get("error", "")
                                            for a in acks), f"forwarded log names other than a run's logs are refused: {acks}")
        # a 4-rank run with no distributed.nodes, while this host is busy: it waits, saying for what
        hold = cl.server.post("/runs", {"command": [PYTHON, "-c", "import time; time.sleep(60)"],
                                        "distributed": {"world_size": 2}}).json()["id"]
        wait_until(lambda: cl.server.get(f"/runs/{hold}").json()["status"] == "running", "the first run", 60)
        rid = cl.server.post("/runs", base).json()["id"]
        run = cl.server.get(f"/runs/{rid}").json()
        check(run["status"] == "queued" and "node-a 0 of 2" in run.get("waiting_for", "")
              and "node-b 2 of 2" in run.get("waiting_for", ""),
              f"a queued run says what it waits for, node by node: {run.get('waiting_for')!r}")
        cl.server.post(f"/runs/{rid}/cancel")
        cl.server.post(f"/runs/{hold}/cancel")
        wait_until(lambda: cl.server.get(f"/runs/{hold}").json()["status"] == "canceled", "the cancel", 60)


WHOAMI = """
    import json, os, sys
    import ddpd
    out, rank = sys.argv[1], int(os.environ["RANK"])
    parent = os.stat("/proc/%d" % os.getppid())
    who = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
           "home": os.environ.get("HOME"), "user": os.environ.get("USER"), "logname": os.environ.get("LOGNAME"),
           "launcher_uid": parent.st_uid, "cwd": os.getcwd()}
    with open(os.path.join(out, "who-rank-%d.json" % rank), "w") as f:
        json.dump(who, f)
    with open("wrote-rank-%d" % rank, "w") as f:  # in its part's directory on its node
        f.write("x")
    ddpd.log_step(0, loss=1.0)
"""


def submit_whoami(cl, d, token, mark):
    """A command run of 4 ranks on the 2 nodes, each writing who it runs as into out/
    (made the submitter's account's by the caller) and a file into its cwd."""
    path = os.path.join(d, "whoami.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(WHOAMI))
    os.chmod(path, 0o644)
    cfg = {"name": "whoami", "command": [PYTHON, path, os.path.join(d, "out")],
           "env": {"NODES_TEST_MARK": mark, "GLOO_SOCKET_IFNAME": "ddpd0"},
           "distributed": {"world_size": 4, "nodes": 2}}
    r = cl.server.post("/runs", cfg, headers=bearer(token))
    check(r.status == 201, f"a run across 2 nodes is accepted: {r.status} {r.body[:400]!r}")
    return r.json()["id"] if r.status == 201 else None


def agent_log(d):
    with open(os.path.join(d, "agent.log"), "rb") as f:
        return f.read().decode(errors="replace")


def refused_on_node_b(cl, d, token, mark, out, words_for):
    """submit_whoami's run, refused on node-b: it fails with a reason that holds each
    of words_for(its id), nothing of it is left on either node, and no rank ran on
    node-b (where it would have run as the agent's user). Its id."""
    rid = submit_whoami(cl, d, token, mark)
    run = wait_final(cl, rid, 120) if rid else None
    reason = (run or {}).get("reason") or ""
    check(run and run["status"] == "failed", f"the run fails: {run and (run['status'], reason)}")
    for w in words_for(rid):
        check(w in reason, f"its reason says {w!r}: {reason!r}")
    check(wait_until(lambda: not marked(mark), "no process of the run left", 30) is not None,
          f"nothing of the run is left on either node: {marked(mark)}")
    ran = sorted(os.listdir(out))
    check(not [f for f in ran if f in ("who-rank-2.json", "who-rank-3.json")], f"no rank started on node-b: {ran}")
    return rid


def case_account_across_nodes(args, d):
    """A user mapped to a Unix account: every rank on both nodes runs as that account
    (uid, gid, groups, HOME, USER; the launchers too); what the agent node's rank
    writes is the account's, and its part's directory there is the account's and not
    another account's to read."""
    mark = uuid.uuid4().hex
    with Accounts("alice", "bob") as acc:
        cl = Cluster(args, d)
        alice = add_user(args.ddpd, cl.server.state_dir, "alice", "--unix-user", acc["alice"])
        pw = pwd.getpwnam(acc["alice"])
        out = os.path.join(d, "out")
        os.makedirs(out)
        os.chown(out, pw.pw_uid, pw.pw_gid)
        os.chmod(out, 0o700)
        with cl:
            check("runs parts as their runs' accounts: yes (it runs as root)" in agent_log(d),
                  f"the agent's start says it can switch accounts: {agent_log(d)[-1500:]}")
            rid = submit_whoami(cl, d, alice, mark)
            run = wait_final(cl, rid, 180) if rid else None
            check(run and run["status"] == "succeeded", f"alice's run across nodes succeeded: {run and run['reason']}")
            want_groups = sorted(os.getgrouplist(acc["alice"], pw.pw_gid))
            for r in range(4):
                try:
                    with open(os.path.join(out, f"who-rank-{r}.json")) as f:
                        who = json.load(f)
                    st = os.stat(os.path.join(out, f"who-rank-{r}.json"))
                except OSError as e:
                    check(False, f"rank {r} wrote who it is: {e}")
                    continue
                check(who["uid"] == who["euid"] == pw.pw_uid and who["gid"] == pw.pw_gid and
                      who["groups"] == want_groups, f"rank {r} runs as alice's account and its groups: {who}")
                check(who["home"] == pw.pw_dir and who["user"] == who["logname"] == acc["alice"],
                      f"rank {r} has alice's HOME, USER and LOGNAME: {who}")
                check(who["launcher_uid"] == pw.pw_uid, f"rank {r}'s launcher (ddp-run) runs as alice too: {who}")
                check(st.st_uid == pw.pw_uid, f"what rank {r} writes is alice's: uid {st.st_uid}")
            part_dir = os.path.join(d, "agent", "runs", str(rid))
            try:
                ds = os.stat(part_dir)
                check(ds.st_uid == pw.pw_uid and stat.S_IMODE(ds.st_mode) & 0o007 == 0,
                      f"the part's directory on node-b is alice's, no access for others: uid {ds.st_uid} "
                      f"{oct(ds.st_mode)}")
                wrote = [os.stat(os.path.join(part_dir, f"wrote-rank-{r}")).st_uid for r in (2, 3)]
                check(wrote == [pw.pw_uid] * 2, f"node-b's ranks ran in their part's directory and wrote as alice: "
                      f"{wrote}")
                for name in ("config.json", "trainer.log"):
                    st = os.stat(os.path.join(part_dir, name))
                    check(st.st_uid == pw.pw_uid and stat.S_IMODE(st.st_mode) == 0o600,
                          f"{name} of the part is alice's, 0600: {st.st_uid} {oct(st.st_mode)}")
            except OSError as e:
                check(False, f"the part's directory on node-b: {e}")
            bob = pwd.getpwnam(acc["bob"])
            peek = subprocess.run(["setpriv", f"--reuid={bob.pw_uid}", f"--regid={bob.pw_gid}", "--clear-groups",
                                   "ls", part_dir], capture_output=True, text=True)
            check(peek.returncode != 0 and "Permission denied" in peek.stderr,
                  f"another account cannot list alice's part's directory on node-b: {peek.returncode} {peek.stderr!r}")
            ranks = cl.server.get(f"/runs/{rid}/ranks").json()
            ranks = ranks.get("ranks", ranks) if isinstance(ranks, dict) else ranks
            check(sorted(x["rank"] for x in ranks if x["rank"] >= 0) == [0, 1, 2, 3],
                  f"every rank reported, node-b's (as alice, through the agent) too: {ranks}")
            check(wait_until(lambda: not marked(mark), "no process of the run left", 30) is not None,
                  f"nothing of the run is left on either node: {marked(mark)}")
            # the agent's event socket is open to the parts' accounts now: another account's
            # connection that speaks for a run is dropped there, never forwarded
            sock = os.path.join(d, "agent", "events.sock")
            hello = json.dumps({"event": "hello", "run": rid, "rank": 7, "secret": "a guess"})
            talk = subprocess.run(["setpriv", f"--reuid={bob.pw_uid}", f"--regid={bob.pw_gid}", "--clear-groups",
                                   PYTHON, "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                                   "s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b'\\n'); s.close()",
                                   sock, hello], capture_output=True, text=True)
            check(talk.returncode == 0, f"another account reaches the agent's socket: {talk.stderr!r}")
            said = f"a connection of uid {bob.pw_uid} speaks for run {rid}, whose part here runs as another account"
            check(wait_until(lambda: said in agent_log(d), "the agent to drop bob's connection", 30) is not None,
                  f"the agent drops another account's connection that speaks for alice's run: {agent_log(d)[-800:]}")
            # a built-in run: its launcher and ranks on node-b are alice's too (what they wrote there is hers)
            r = cl.server.post("/runs", builtin_config(**{"name": "builtin-as-alice", "data.limit": 1024,
                                                          "train.epochs": 1}), headers=bearer(alice))
            check(r.status == 201, f"alice's built-in run across nodes is accepted: {r.status} {r.body[:300]!r}")
            bid = r.json()["id"] if r.status == 201 else None
            run = wait_final(cl, bid, 240) if bid else None
            check(run and run["status"] == "succeeded", f"alice's built-in run across nodes succeeded: "
                  f"{run and run['reason']}")
            bdir = os.path.join(d, "agent", "runs", str(bid))
            owners = {os.path.relpath(os.path.join(root, n), bdir): os.lstat(os.path.join(root, n)).st_uid
                      for root, dirs, files in os.walk(bdir) for n in dirs + files}
            check("events.jsonl" in owners and set(owners.values()) == {pw.pw_uid},
                  f"everything in the built-in part's directory on node-b is alice's (its journal too): {owners}")


def case_agent_cannot_switch(args, d):
    """An agent that is not root and has no CAP_SETUID/CAP_SETGID is given the part of
    a run of a user mapped to an account: the part is refused, the run fails naming
    the node, the account and what the operator must do, and no rank ran there (not as
    the agent's own user either)."""
    mark = uuid.uuid4().hex
    with Accounts("alice", "agent") as acc:
        cl = Cluster(args, d, agent_as=acc["agent"])
        alice = add_user(args.ddpd, cl.server.state_dir, "alice", "--unix-user", acc["alice"])
        out = os.path.join(d, "out")
        os.makedirs(out)
        os.chmod(out, 0o1777)  # anyone's: a rank of any account could say it ran
        with cl:
            check("runs parts as their runs' accounts: no (it is not root and lacks CAP_SETUID and CAP_SETGID)"
                  in agent_log(d), f"the agent's start says it cannot switch accounts: {agent_log(d)[-1500:]}")
            rid = refused_on_node_b(cl, d, alice, mark, out, lambda rid: (
                "node node-b", f"cannot run parts as the account {acc['alice']}", "is not root", "CAP_SETUID",
                "start `ddpd agent` there as root or with CAP_SETUID and CAP_SETGID"))
            part_dir = os.path.join(d, "agent", "runs", str(rid))
            check(not os.path.exists(os.path.join(part_dir, "trainer.log")),
                  f"the agent started no launcher for it: {os.listdir(part_dir) if os.path.isdir(part_dir) else []}")
            check("cannot run parts as the account" in agent_log(d), "the agent's log says why it refused the part")


def node_etc(d, without):
    """A copy of this host's /etc whose passwd lacks the account `without`: another
    node's. (A bind mount over /etc/passwd alone would not do: a useradd of a test
    beside this one renames a new passwd over it, which takes such a mount away in
    every namespace; over /etc, it stays.) The shadow files and locks are left out."""
    etc = os.path.join(d, "node-b-etc")
    skip = shutil.ignore_patterns("shadow*", "gshadow*", "*.lock", "*+", "*-")
    try:
        shutil.copytree("/etc", etc, symlinks=True, ignore=skip)
    except shutil.Error:
        pass  # a file that another test's useradd replaced meanwhile: passwd and group are written below
    for name in ("passwd", "group"):
        with open(os.path.join("/etc", name)) as f:
            lines = f.readlines()
        with open(os.path.join(etc, name), "w") as g:
            g.writelines(l for l in lines if name == "group" or not l.startswith(without + ":"))
        os.chmod(os.path.join(etc, name), 0o644)
    return etc


def case_account_missing_on_node(args, d):
    """The agent's node has no account of the run's name: the part is refused there,
    the run failing naming the node, the account and what to do, and no rank runs
    there as the agent's user instead."""
    mark = uuid.uuid4().hex
    with Accounts("alice") as acc:
        cl = Cluster(args, d, agent_etc=node_etc(d, acc["alice"]))
        alice = add_user(args.ddpd, cl.server.state_dir, "alice", "--unix-user", acc["alice"])
        out = os.path.join(d, "out")
        os.makedirs(out)
        os.chmod(out, 0o1777)
        with cl:
            refused_on_node_b(cl, d, alice, mark, out, lambda rid: (
                f"node node-b cannot run run {rid}'s part as the account {acc['alice']}",
                f"this host has no account \"{acc['alice']}\"", "make it with useradd",
                "every node a user's runs reach needs the account"))


def case_agent_is_the_account(args, d):
    """An agent that runs as the run's account itself, unprivileged: it has nothing to
    switch, and runs the part as it is (its ranks that account's) rather than refusing
    it or failing to set the account's groups."""
    mark = uuid.uuid4().hex
    with Accounts("alice") as acc:
        cl = Cluster(args, d, agent_as=acc["alice"])
        alice = add_user(args.ddpd, cl.server.state_dir, "alice", "--unix-user", acc["alice"])
        pw = pwd.getpwnam(acc["alice"])
        out = os.path.join(d, "out")
        os.makedirs(out)
        os.chown(out, pw.pw_uid, pw.pw_gid)
        with cl:
            rid = submit_whoami(cl, d, alice, mark)
            run = wait_final(cl, rid, 180) if rid else None
            check(run and run["status"] == "succeeded", f"alice's run succeeds on her own agent: {run and run['reason']}")
            for r in (2, 3):
                try:
                    with open(os.path.join(out, f"who-rank-{r}.json")) as f:
                        who = json.load(f)
                except OSError as e:
                    check(False, f"node-b's rank {r} wrote who it is: {e}")
                    continue
                check(who["uid"] == pw.pw_uid and who["user"] == acc["alice"],
                      f"node-b's rank {r} runs as alice, her HOME and USER: {who}")


def case_account_gone_before_agent_start(args, d):
    """A run placed on node-b alone whose account was removed on the coordinator while
    it was queued: its start fails there (the scheduler's refusal), saying so, and the
    agent is never handed the part."""
    with Accounts("alice", "bob") as acc:
        cl = Cluster(args, d, agent_slots=4, here_across=False)  # a 4-rank run: node-b's alone
        alice = add_user(args.ddpd, cl.server.state_dir, "alice", "--unix-user", acc["alice"])
        bob = add_user(args.ddpd, cl.server.state_dir, "bob", "--unix-user", acc["bob"])
        sleep = {"command": [PYTHON, "-c", "import time; time.sleep(120)"], "distributed": {"world_size": 4}}
        with cl:
            r = cl.server.post("/runs", dict(sleep, name="hold"), headers=bearer(bob))
            hid = r.json()["id"] if r.status == 201 else None
            run = wait_until(lambda: (lambda x: x if x["status"] == "running" else None)(
                cl.server.get(f"/runs/{hid}").json()), "bob's run on node-b", 60) if hid else None
            check(run and all(x.startswith("node-b/") for x in run["devices"]),
                  f"bob's run holds node-b: {run and run['devices']}")
            r = cl.server.post("/runs", dict(sleep, name="alice"), headers=bearer(alice))
            rid = r.json()["id"] if r.status == 201 else None
            check(rid and cl.server.get(f"/runs/{rid}").json()["status"] == "queued", "alice's run waits")
            p = Accounts._shadow_tool("userdel", acc["alice"])
            check(p.returncode == 0, f"alice's account is removed: {p.stderr}")
            cl.server.post(f"/runs/{hid}/cancel", headers=bearer(bob))
            run = wait_final(cl, rid, 60) if rid else None
            reason = (run or {}).get("reason") or ""
            check(run and run["status"] == "failed" and f"this host has no account \"{acc['alice']}\"" in reason,
                  f"alice's run fails as it starts, naming the account it lacks: {run and run['status']} {reason!r}")
            with open(cl.server.log_path) as f:
                started = f"run {rid} starting on 1 nodes (4 ranks each): node-b/cpu:0" in f.read()
            check(started, "it was placed on node-b alone (the agents' executor refused its start)")
            check(not os.path.exists(os.path.join(d, "agent", "runs", str(rid))) and f"run {rid}:" not in agent_log(d),
                  f"the agent was never handed its part: {agent_log(d)[-800:]}")


CASES = cases_in(globals())


def inside(args):
    d = tempfile.mkdtemp(prefix="ddpd-nodes-")
    os.chmod(d, 0o755)
    try:
        CASES[args.case](args, d)
    except Exception:
        import traceback
        traceback.print_exc()
        check(False, f"case {args.case} raised")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    checks.finish(args.case)


def parse_args(ap):
    """The programs' paths and, inside the coordinator's namespace, where the hosts are."""
    for a in ("--ddpd", "--runner", "--trainer"):
        ap.add_argument(a, required=True)
    ap.add_argument("--ddpctl")
    ap.add_argument("--inside", action="store_true")
    ap.add_argument("--node-ns")
    ap.add_argument("--coord-addr")
    ap.add_argument("--node-addr")
    args = ap.parse_args()
    args.ddpd, args.runner, args.trainer = (os.path.abspath(x) for x in (args.ddpd, args.runner, args.trainer))
    args.ddpctl = os.path.abspath(args.ddpctl) if args.ddpctl else None
    return args


def run_on_two_hosts(script, lead, args, tag):
    """Makes the two hosts, runs `script` (its `lead` arguments first) again inside the
    coordinator's namespace with --inside and where the hosts are, removes the hosts;
    its exit status. Raises RuntimeError or OSError where namespaces cannot be made."""
    try:
        c, n, ac, an = make_hosts(tag)
    except (RuntimeError, OSError):
        remove_hosts(f"ddpdc{tag}", f"ddpdn{tag}")
        raise
    try:
        return subprocess.call(["ip", "netns", "exec", c, sys.executable, os.path.abspath(script), *lead,
                                "--ddpd", args.ddpd, "--runner", args.runner, "--trainer", args.trainer,
                                *(["--ddpctl", args.ddpctl] if args.ddpctl else []), "--inside",
                                "--node-ns", n, "--coord-addr", ac, "--node-addr", an])
    finally:
        remove_hosts(c, n)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    args = parse_args(ap)
    if args.inside:
        inside(args)
    try:
        rc = run_on_two_hosts(__file__, [args.case], args, f"{os.getpid() % 100000}")
    except (RuntimeError, OSError) as e:
        print(f"SKIPPED: cannot make network namespaces here ({e}): runs across nodes are not tested", flush=True)
        sys.exit(77)
    sys.exit(rc)
