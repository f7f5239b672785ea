#!/usr/bin/env python3
"""Across nodes, side by side in one run, on two "hosts" that are network namespaces
made here (tests/integration/nodes/test_nodes.py makes them the same way: a veth pair, private
addresses that exist only inside them):

  1. the TCP bandwidth between them (Debian's iperf3, one stream);
  2. an all-reduce of 64 MiB of float32 between them with PyTorch's gloo (the engine a
     command run across nodes uses), as bus bandwidth against (1);
  3. the same all-reduce with the built-in trainer's link between nodes
     (bench_gloo_allreduce: gloo's ring through trainer/nodes/gloo_link.cc), across and
     in one namespace;
  4. samples/s of a PyTorch DDP MLP (784-512-256-10, Fashion-MNIST) run through ddpd as
     a command run: 4 ranks across the 2 nodes (a coordinator and a `ddpd agent`) against
     2 ranks on the coordinator alone;
  5. the same for ddpd's built-in MLP (the same layers, Adam, batch 128).

Three repetitions each, min/median/max, then the ratios. Both namespaces share this
machine's cores: the 4-rank run has twice the ranks of the 2-rank one on the same CPUs,
so its ratio says what crossing the nodes costs on top of that, not what two real
hosts would give. Needs root (ip netns). Run by bench/cross_node.sh."""
import argparse, json, os, statistics, subprocess, sys, tempfile, textwrap, time

HERE = os.path.dirname(os.path.abspath(__file__))
# the tests' support (the harness), which test_nodes.py and the copies of it that it
# runs in each namespace import from PYTHONPATH, as ctest gives it to them
SUPPORT = os.path.realpath(os.path.join(HERE, "..", "tests", "support"))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SUPPORT, os.environ.get("PYTHONPATH")) if p)
sys.path[:0] = [SUPPORT, os.path.join(HERE, "..", "tests", "integration", "nodes")]
import test_nodes  # noqa: E402  (the namespaces and the coordinator + agent pair)
from ddpd_harness import wait_until  # noqa: E402

PYTHON = "/usr/bin/python3"
DATA = "/usr/share/datasets/fashion-mnist"
REPS = 3
MIB64 = 64 << 20

ALLREDUCE = """
    import os, sys, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    x = torch.ones(int(sys.argv[1]) // 4)
    for _ in range(2):
        dist.all_reduce(x)
    times = []
    for _ in range(int(sys.argv[2])):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t)
    if dist.get_rank() == 0:
        print(sorted(times)[len(times) // 2], flush=True)
    dist.destroy_process_group()
"""

MLP = """
    import gzip, json, os, sys, time
    import numpy as np, torch, torch.distributed as dist
    out, data, limit, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    def idx(name, offset):
        with gzip.open(os.path.join(data, name)) as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
    x = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784)[:limit], dtype=torch.float32) / 255
    y = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8)[:limit].astype(np.int64))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 10))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    per_rank = 128 // world
    mine = torch.arange(rank, limit, world)
    seconds = []
    for epoch in range(epochs):
        dist.barrier()
        t = time.perf_counter()
        for i in range(0, len(mine) - per_rank + 1, per_rank):
            b = mine[i:i + per_rank]
            loss = torch.nn.functional.cross_entropy(model(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
        dist.barrier()
        seconds.append(time.perf_counter() - t)
    if rank == 0:  # the first epoch warms up: the rate is over the others
        with open(os.path.join(out, "rate.json"), "w") as f:
            json.dump({"samples_per_s": limit * (epochs - 1) / sum(seconds[1:]), "seconds": seconds}, f)
    del model
    dist.barrier()
    dist.destroy_process_group()
"""


def spread(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def iperf(args, reps):
    """Bits per second over one TCP stream from this namespace to the node's, `reps` times."""
    server = subprocess.Popen(["ip", "netns", "exec", args.node_ns, "iperf3", "-s", "-B", args.node_addr],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        listening = wait_until(lambda: ":5201" in subprocess.run(["ip", "netns", "exec", args.node_ns, "ss", "-ltn"],
                                                                  capture_output=True, text=True).stdout,
                               "iperf3 -s to listen", 10)
        if not listening:
            raise RuntimeError("iperf3 -s did not start in the node's namespace")
        out = []
        for _ in range(reps):
            r = subprocess.run(["iperf3", "-c", args.node_addr, "-t", "3", "-J"], capture_output=True, text=True)
            end = json.loads(r.stdout or "{}").get("end", {}) if r.stdout.strip().startswith("{") else {}
            if r.returncode != 0 or "sum_received" not in end:
                raise RuntimeError(f"iperf3 -c {args.node_addr}: {r.stdout[-300:]} {r.stderr[-300:]}")
            out.append(end["sum_received"]["bits_per_second"])
        return out
    finally:
        server.terminate()
        server.wait(10)


def allreduce(args, d, across, port):
    """The median seconds of one 64 MiB all-reduce between 2 ranks: rank 1 in the node's
    namespace (across) or beside rank 0 here."""
    script = os.path.join(d, "allreduce.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(ALLREDUCE))
    master = args.coord_addr if across else "127.0.0.1"
    env = dict(os.environ, MASTER_ADDR=master, MASTER_PORT=str(port), WORLD_SIZE="2", OMP_NUM_THREADS="1",
               GLOO_SOCKET_IFNAME="ddpd0" if across else "lo")
    prefix = ["ip", "netns", "exec", args.node_ns] if across else []
    peer = subprocess.Popen(prefix + ["env", "RANK=1", PYTHON, script, str(MIB64), "10"], env=env,
                            stdout=subprocess.DEVNULL)
    r = subprocess.run([PYTHON, script, str(MIB64), "10"], env=dict(env, RANK="0"), capture_output=True, text=True,
                       timeout=300)
    peer.wait(60)
    if r.returncode != 0:
        raise RuntimeError(f"the all-reduce failed: {r.stderr[-500:]}")
    return float(r.stdout.split()[-1])


def run_to_success(cl, cfg):
    """Submits cfg to the coordinator and waits for it to succeed; its id."""
    r = cl.server.post("/runs", cfg)
    if r.status != 201:
        raise RuntimeError(f"the run was refused: {r.status} {r.body[:300]!r}")
    rid = r.json()["id"]
    run = wait_until(lambda: (lambda x: x if x["status"] in ("succeeded", "failed", "canceled") else None)(
        cl.server.get(f"/runs/{rid}").json()), f"run {rid}", 600)
    if not run or run["status"] != "succeeded":
        raise RuntimeError(f"run {rid} did not succeed: {run and run.get('reason')}")
    return rid


def link_allreduce(args, d, across, rep):
    """The median seconds of one 64 MiB all-reduce of the built-in trainer's link
    between 2 members: member 1 in the node's namespace (across) or beside member 0."""
    program = os.path.join(os.path.dirname(args.trainer), "bench_gloo_allreduce")
    kv = os.path.join(d, f"kv-{'across' if across else 'one'}-{rep}")
    os.makedirs(kv)
    host0, host1 = (args.coord_addr, args.node_addr) if across else ("127.0.0.1", "127.0.0.1")
    prefix = ["ip", "netns", "exec", args.node_ns] if across else []
    common = ["--kv-dir", kv, "--size", "2", "--bytes", str(MIB64), "--iters", "10"]
    peer = subprocess.Popen(prefix + [program, *common, "--rank", "1", "--host", host1], stdout=subprocess.DEVNULL)
    r = subprocess.run([program, *common, "--rank", "0", "--host", host0], capture_output=True, text=True, timeout=300)
    peer.wait(60)
    if r.returncode != 0:
        raise RuntimeError(f"bench_gloo_allreduce failed: {r.stderr[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["median_s"]


def builtin_run(cl, world, nodes, rep):
    """samples/s of ddpd's built-in MLP (784-512-256-10, Adam, batch 128): the median of
    its epochs after the first."""
    cfg = {"name": f"bench-builtin-{world}-{rep}", "model": {"hidden": [512, 256]},
           "data": {"train": {"images": "fashion-mnist/train-images-idx3-ubyte.gz",
                              "labels": "fashion-mnist/train-labels-idx1-ubyte.gz"},
                    "test": {"images": "fashion-mnist/t10k-images-idx3-ubyte.gz",
                             "labels": "fashion-mnist/t10k-labels-idx1-ubyte.gz"},
                    "limit": 12000, "test_limit": 500},
           "train": {"epochs": 4, "batch_size": 128, "optimizer": {"type": "adam", "lr": 1e-3}},
           "checkpoint": {"every_epochs": 0},
           "distributed": {"world_size": world, "backend": "cpu", **({"nodes": nodes} if nodes else {})}}
    rid = run_to_success(cl, cfg)
    epochs = cl.server.get(f"/runs/{rid}/epochs").json()["epochs"]
    return statistics.median(e["samples_per_s"] for e in epochs[1:])


def mlp_run(cl, d, world, nodes, rep):
    """samples/s of the DDP MLP as a command run through the coordinator."""
    script = os.path.join(d, "mlp.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(MLP))
    out = os.path.join(d, f"mlp-{world}-{rep}")
    os.makedirs(out)
    os.chmod(out, 0o777)
    dist = {"world_size": world, **({"nodes": nodes} if nodes else {})}
    run_to_success(cl, {"name": f"bench-mlp-{world}", "command": [PYTHON, script, out, DATA, "6000", "4"],
                        "env": {"GLOO_SOCKET_IFNAME": "ddpd0"}, "distributed": dist})
    with open(os.path.join(out, "rate.json")) as f:
        return json.load(f)["samples_per_s"]


def inside(args):
    d = tempfile.mkdtemp(prefix="ddpd-bench-nodes-")
    os.chmod(d, 0o755)
    rows = {}
    print(f"load before: {loadavg()}", flush=True)
    rows["tcp_bits_per_s"] = iperf(args, REPS)
    print(f"iperf3 between the namespaces: {[round(b / 1e9, 2) for b in rows['tcp_bits_per_s']]} Gbit/s", flush=True)
    for name, across in (("allreduce_across_s", True), ("allreduce_one_node_s", False)):
        rows[name] = [allreduce(args, d, across, 29650 + i + (10 if across else 0)) for i in range(REPS)]
        print(f"64 MiB all-reduce, 2 ranks {'across the namespaces' if across else 'in one namespace'}: "
              f"{[round(t * 1000, 1) for t in rows[name]]} ms", flush=True)
    for name, across in (("link_allreduce_across_s", True), ("link_allreduce_one_node_s", False)):
        rows[name] = [link_allreduce(args, d, across, i) for i in range(REPS)]
        print(f"64 MiB all-reduce, ddpd's link between nodes, {'across the namespaces' if across else 'in one namespace'}: "
              f"{[round(t * 1000, 1) for t in rows[name]]} ms", flush=True)
    args.runner = args.runner or ""
    os.environ["GLOO_SOCKET_IFNAME"] = "ddpd0"  # each node's interface, for the built-in runs
    with test_nodes.Cluster(args, d) as cl:
        for name, world, nodes in (("mlp_4_ranks_2_nodes", 4, 2), ("mlp_2_ranks_1_node", 2, 0)):
            rows[name] = [mlp_run(cl, d, world, nodes, rep) for rep in range(REPS)]
            print(f"DDP MLP, {world} ranks on {nodes or 1} node{'s' if nodes else ''}: "
                  f"{[round(x) for x in rows[name]]} samples/s", flush=True)
        for name, world, nodes in (("builtin_4_ranks_2_nodes", 4, 2), ("builtin_2_ranks_1_node", 2, 0)):
            rows[name] = [builtin_run(cl, world, nodes, rep) for rep in range(REPS)]
            print(f"ddpd's built-in MLP, {world} ranks on {nodes or 1} node{'s' if nodes else ''}: "
                  f"{[round(x) for x in rows[name]]} samples/s", flush=True)
    print(f"load after: {loadavg()}", flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    bus = MIB64 * 8 / med["allreduce_across_s"]  # 2 ranks: each sends and receives the buffer once
    link_bus = MIB64 * 8 / med["link_allreduce_across_s"]
    summary = {"what": "cross_node", **{k: spread(v) for k, v in rows.items()},
               "allreduce_bus_bits_per_s_over_tcp": bus / med["tcp_bits_per_s"],
               "allreduce_across_over_one_node": med["allreduce_across_s"] / med["allreduce_one_node_s"],
               "link_allreduce_bus_bits_per_s_over_tcp": link_bus / med["tcp_bits_per_s"],
               "link_allreduce_across_over_one_node": med["link_allreduce_across_s"] / med["link_allreduce_one_node_s"],
               "mlp_4_across_over_2_on_one": med["mlp_4_ranks_2_nodes"] / med["mlp_2_ranks_1_node"],
               "builtin_4_across_over_2_on_one": med["builtin_4_ranks_2_nodes"] / med["builtin_2_ranks_1_node"],
               "builtin_over_torch_4_across": med["builtin_4_ranks_2_nodes"] / med["mlp_4_ranks_2_nodes"]}
    print(json.dumps(summary), flush=True)
    print(f"\nall-reduce 64 MiB across: {bus / 1e9:.2f} Gbit/s bus bandwidth = "
          f"{summary['allreduce_bus_bits_per_s_over_tcp']:.2f} x the TCP bandwidth ({med['tcp_bits_per_s'] / 1e9:.2f} "
          f"Gbit/s); {summary['allreduce_across_over_one_node']:.2f} x the time in one namespace")
    print(f"ddpd's link: {link_bus / 1e9:.2f} Gbit/s bus bandwidth = {summary['link_allreduce_bus_bits_per_s_over_tcp']:.2f} "
          f"x the TCP bandwidth; {summary['link_allreduce_across_over_one_node']:.2f} x the time in one namespace")
    print(f"built-in MLP: 4 ranks on 2 nodes {med['builtin_4_ranks_2_nodes']:.0f} samples/s, 2 ranks on 1 node "
          f"{med['builtin_2_ranks_1_node']:.0f}: ratio {summary['builtin_4_across_over_2_on_one']:.2f} (same 2 cores); "
          f"{summary['builtin_over_torch_4_across']:.2f} x PyTorch's DDP across the same nodes")
    print(f"DDP MLP: 4 ranks on 2 nodes {med['mlp_4_ranks_2_nodes']:.0f} samples/s, 2 ranks on 1 node "
          f"{med['mlp_2_ranks_1_node']:.0f}: ratio {summary['mlp_4_across_over_2_on_one']:.2f} (same 2 cores)")
    sys.exit(0)


def main():
    args = test_nodes.parse_args(argparse.ArgumentParser())
    if args.inside:
        inside(args)
    sys.exit(test_nodes.run_on_two_hosts(__file__, [], args, f"b{os.getpid() % 10000}"))


if __name__ == "__main__":
    main()
