#!/usr/bin/env python3
"""End-to-end tests of ddp-trainer's GPU backend: the real binary on Fashion-MNIST.

Usage: test_gpu_e2e.py CASE --trainer PATH.

nccl_refused and auto_picks_cpu run on every host (CUDA_VISIBLE_DEVICES="" hides
every GPU). The others need a GPU (two_ranks and watchdog: two); without one they
print "SKIPPED: no CUDA device (...)" and exit 77, which ctest shows as skipped.
With --fake-gpu the trainer is ddp-trainer-fake-cuda (two GPUs played by the CPU,
tests/support/fake_cuda.c): the cases then run anywhere, and failure_messages and
memory_after_nccl (which need the stand-in's fault injection) only there. --data
names the Fashion-MNIST directory (the GPU bundle brings its own)."""
import argparse, glob, hashlib, json, os, signal, subprocess, sys, tempfile, time

from ddpd_harness import merge  # noqa: E402  (dotted config overrides)

import checks  # noqa: E402  (the one pass/fail count)
from checks import check, cases_in  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
SKIP = 77
FAKE_GPU = False  # --fake-gpu


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


def config(**over):
    cfg = {
        "name": "gpu-e2e", "seed": 42,
        "model": {"hidden": [128, 64]},
        "data": {"train": {"images": f"{DATA}/train-images-idx3-ubyte.gz", "labels": f"{DATA}/train-labels-idx1-ubyte.gz"},
                 "test": {"images": f"{DATA}/t10k-images-idx3-ubyte.gz", "labels": f"{DATA}/t10k-labels-idx1-ubyte.gz"},
                 "limit": 4096, "test_limit": 1000},
        "train": {"epochs": 2, "batch_size": 128, "optimizer": {"type": "adam", "lr": 0.001}},
        "distributed": {"world_size": 1, "backend": "nccl"},
        "checkpoint": {"every_epochs": 1, "keep": 2},
    }
    return merge(cfg, over)


class Run:
    """One ddp-trainer process and its run directory."""

    def __init__(self, trainer, workdir, name, cfg, env=None, args=()):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(workdir, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        self.proc = subprocess.Popen([trainer, "--config", path, "--run-dir", self.dir, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})))
        self.stdout = self.stderr = ""

    def wait(self, timeout=240):
        self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        return self.proc.returncode

    def events(self):
        path = os.path.join(self.dir, "events.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]  # whole lines only: the last may be being written

    def of_type(self, t):
        return [e for e in self.events() if e["type"] == t]

    def losses(self):
        return {e["global_step"]: e["loss"] for e in self.of_type("step")}

    def reason(self):
        ends = self.of_type("end")
        return ends[-1]["reason"] if ends else ""

    def log(self):
        path = os.path.join(self.dir, "trainer.log")
        return open(path).read() if os.path.exists(path) else ""


def visible_gpus():
    """GPUs as CUDA would show them, counted without CUDA (as the launcher does)."""
    if FAKE_GPU:
        return 2, "two fake GPUs"
    present = glob.glob("/proc/driver/nvidia/gpus/*") or [
        p for p in glob.glob("/dev/nvidia*") if p[len("/dev/nvidia"):].isdigit()]
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return len(present), f"{len(present)} GPU(s) found by the driver"
    if not cvd.strip():
        return 0, "CUDA_VISIBLE_DEVICES is empty"
    return min(len(present), len([t for t in cvd.split(",") if t.strip()])), f"CUDA_VISIBLE_DEVICES={cvd}"


def need_gpus(n):
    count, how = visible_gpus()
    if count == 0:
        skip(f"no CUDA device ({how}; no NVIDIA GPU in /proc/driver/nvidia/gpus or /dev/nvidiaN)")
    if count < n:
        skip(f"needs {n} GPUs, {count} visible ({how})")


def run_gpu(trainer, work, name, cfg, env=None, timeout=240):
    """A run that needs the nccl backend; SKIPPED when this build or host cannot give it."""
    r = Run(trainer, work, name, cfg, env)
    rc = r.wait(timeout)
    if rc == 2 and "nccl" in r.stderr:
        skip(f"no CUDA device ({r.stderr.strip().splitlines()[-1]})")
    return r, rc


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- on every host -------------------------------------------------------------------

def case_nccl_refused(trainer, work):
    """backend nccl where no GPU is visible: exit 2 at once, naming nccl and what to do, no rank forked."""
    t0 = time.time()
    r = Run(trainer, work, "refused", config(**{"distributed.world_size": 2}), env={"CUDA_VISIBLE_DEVICES": ""})
    rc = r.wait(60)
    check(rc == 2, f"exit code {rc}, expected 2; stderr: {r.stderr!r}")
    check(time.time() - t0 < 20, "refused at once")
    check("nccl" in r.stderr and "distributed.backend" in r.stderr, f"the message names nccl and what to do: {r.stderr!r}")
    check(not [e for e in r.of_type("hello") if e["rank"] >= 0], "no rank was started")
    check("started" not in r.log(), "no rank was forked")
    check("nccl" in r.reason(), f"the run's end reason says why: {r.reason()!r}")
    print(f"  refused: {r.stderr.strip()}")


def case_auto_picks_cpu(trainer, work):
    """backend auto without a visible GPU: cpu, and the log says so and why."""
    cfg = config(**{"distributed.world_size": 2, "distributed.backend": "auto", "train.epochs": 1,
                    "data.limit": 512, "data.test_limit": 200, "checkpoint.every_epochs": 0})
    r = Run(trainer, work, "auto", cfg, env={"CUDA_VISIBLE_DEVICES": ""})
    rc = r.wait(120)
    check(rc == 0, f"exit code {rc}; stderr: {r.stderr[-2000:]!r}")
    picked = [line for line in r.log().splitlines() if "backend auto picked" in line]
    check(picked and "picked cpu" in picked[0], f"the log says auto picked cpu: {picked}")
    hellos = [e for e in r.of_type("hello") if e["rank"] >= 0]
    check(len(hellos) == 2 and all(e["device"] == "cpu" for e in hellos), f"ranks report device cpu: {hellos}")
    if picked:
        print(f"  {picked[0].split(': ', 1)[-1]}")


# ---- with a GPU ------------------------------------------------------------------------

def case_losses_follow_cpu(trainer, work):
    """2 epochs on the GPU follow the same run on the CPU, step by step."""
    need_gpus(1)
    g, rc = run_gpu(trainer, work, "gpu", config())
    check(rc == 0, f"gpu run exit code {rc}; stderr: {g.stderr[-2000:]!r}")
    c = Run(trainer, work, "cpu", config(**{"distributed.backend": "cpu"}))
    check(c.wait() == 0, f"cpu run failed: {c.stderr[-2000:]!r}")
    gl, cl = g.losses(), c.losses()
    check(len(gl) == len(cl) and len(gl) > 0, f"{len(gl)} gpu steps, {len(cl)} cpu steps")
    rel = {k: abs(gl[k] - cl[k]) / abs(cl[k]) for k in cl if k in gl}
    first = [rel[k] for k in sorted(rel)[:10]]
    check(first and max(first) <= 1e-4, f"the first 10 steps within 1e-4: {first}")
    check(rel and max(rel.values()) <= 1e-2, f"every step within 1e-2 (worst {max(rel.values()) if rel else None})")
    ge, ce = g.of_type("epoch"), c.of_type("epoch")
    check(len(ge) == 2 and len(ce) == 2, "two epochs each")
    if len(ge) == 2 and len(ce) == 2:
        check(abs(ge[-1]["test_acc"] - ce[-1]["test_acc"]) <= 0.02,
              f"test accuracy {ge[-1]['test_acc']} vs {ce[-1]['test_acc']}")
        print(f"  test accuracy gpu {ge[-1]['test_acc']:.4f}, cpu {ce[-1]['test_acc']:.4f}; "
              f"step losses: worst relative difference {max(rel.values()):.2e}, first 10 steps {max(first):.2e}")
    hello = [e for e in g.of_type("hello") if e["rank"] == 0]
    check(hello and hello[0]["device"].startswith("cuda:"), f"hello names the GPU: {hello}")
    software = [line.split("GPU software: ", 1)[1] for line in g.log().splitlines() if "GPU software: " in line]
    check(software and all(w in software[0] for w in ("NVIDIA driver", "CUDA runtime", "cuBLAS", "NCCL")),
          f"the log names the driver, CUDA, cuBLAS and NCCL versions: {software}")
    if software:
        print(f"  GPU software: {software[0]}")
    beats = [e for e in g.of_type("heartbeat") if "gpu_mem_used_bytes" in e]
    check(beats and beats[-1]["gpu_mem_used_bytes"] > 0, "heartbeats carry the GPU memory in use")
    if hello:
        print(f"  device: {hello[0]['device']}")


CNN = {"type": "cnn", "cnn": {"conv": [{"channels": 8, "kernel": 5, "padding": 2, "pool": 2},
                                       {"channels": 16, "kernel": 3, "padding": 1, "pool": 2, "batch_norm": True}],
                              "fc": [64], "dropout": 0.3}}


def case_cnn(trainer, work):
    """A small CNN (conv, pool, batch norm, dropout) on the GPU follows the CPU step by step, repeats
    bit for bit, and checkpoints the same tensors; on two GPUs, with sync batch norm, too."""
    need_gpus(1)
    over = {"model": CNN, "data.limit": 512, "data.test_limit": 300}
    g, rc = run_gpu(trainer, work, "gpu", config(**over))
    check(rc == 0, f"gpu run exit code {rc}; stderr: {g.stderr[-2000:]!r}")
    again, rc = run_gpu(trainer, work, "gpu2", config(**over))
    check(rc == 0 and g.losses() and again.losses() == g.losses(), "the same CNN run twice: the same losses")
    c = Run(trainer, work, "cpu", config(**over, **{"distributed.backend": "cpu"}))
    check(c.wait() == 0, f"cpu run failed: {c.stderr[-2000:]!r}")
    gl, cl = g.losses(), c.losses()
    rel = {k: abs(gl[k] - cl[k]) / abs(cl[k]) for k in cl if k in gl}
    first = [rel[k] for k in sorted(rel)[:10]]
    check(len(gl) == len(cl) == 8 and first and max(first) <= 1e-4, f"the first 10 steps within 1e-4: {first}")
    check(rel and max(rel.values()) <= 1e-2, f"every step within 1e-2 (worst {max(rel.values()) if rel else None})")
    ge, ce = g.of_type("epoch"), c.of_type("epoch")
    if len(ge) == 2 and len(ce) == 2:
        check(abs(ge[-1]["test_acc"] - ce[-1]["test_acc"]) <= 0.02,
              f"test accuracy {ge[-1]['test_acc']} vs {ce[-1]['test_acc']}")
        print(f"  cnn: test accuracy gpu {ge[-1]['test_acc']:.4f}, cpu {ce[-1]['test_acc']:.4f}; step losses: worst "
              f"relative difference {max(rel.values()):.2e}, first 10 steps {max(first):.2e}")

    def names(run):
        path = os.path.join(run.dir, "checkpoints", "epoch-0001.safetensors")
        if not os.path.exists(path):
            return set()
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            return set(json.loads(f.read(n))) - {"__metadata__"}
    check(names(g) and names(g) == names(c) and "layers.2.running_var" in names(g),
          "the GPU's checkpoint holds the CPU's tensors, running statistics included")
    if visible_gpus()[0] >= 2:
        sync = json.loads(json.dumps(CNN))
        sync["cnn"]["batch_norm_stats"] = "sync"
        over2 = {"model": sync, "data.limit": 512, "data.test_limit": 300, "distributed.world_size": 2, "checkpoint.every_epochs": 0}
        g2, rc = run_gpu(trainer, work, "gpu-sync", config(**over2))
        check(rc == 0, f"two GPUs, sync batch norm: {g2.stderr[-2000:]!r}")
        c2 = Run(trainer, work, "cpu-sync", config(**over2, **{"distributed.backend": "cpu"}))
        check(c2.wait() == 0, f"cpu, sync batch norm: {c2.stderr[-2000:]!r}")
        a, b = g2.losses(), c2.losses()
        worst = max((abs(a[k] - b[k]) / abs(b[k]) for k in b if k in a), default=None)
        check(worst is not None and len(a) == len(b) and worst <= 1e-2,
              f"two GPUs with sync batch norm follow the CPU (worst {worst})")
        print(f"  cnn, 2 GPUs, sync batch norm: worst relative loss difference to the CPU {worst:.2e}")


def case_deterministic(trainer, work):
    """The same GPU run twice: the same losses and the same checkpoint, bit for bit."""
    need_gpus(1)
    a, rc = run_gpu(trainer, work, "a", config())
    check(rc == 0, f"first run: {a.stderr[-2000:]!r}")
    b, rc = run_gpu(trainer, work, "b", config())
    check(rc == 0, f"second run: {b.stderr[-2000:]!r}")
    check(a.losses() and a.losses() == b.losses(), "the same losses")
    ca = os.path.join(a.dir, "checkpoints", "epoch-0001.safetensors")
    cb = os.path.join(b.dir, "checkpoints", "epoch-0001.safetensors")
    check(os.path.exists(ca) and os.path.exists(cb) and sha(ca) == sha(cb), "the same final checkpoint")
    print(f"  {len(a.losses())} step losses identical; checkpoints identical: {os.path.exists(ca) and sha(ca) == sha(cb)}")


def case_memory_refused(trainer, work):
    """A run that does not fit its share of the GPU fails before training, with both numbers."""
    need_gpus(1)
    cfg = config(**{"model.hidden": [4096, 4096], "distributed.gpu_memory_fraction": 0.001})
    r, rc = run_gpu(trainer, work, "mem", cfg)
    check(rc == 1, f"exit code {rc}, expected 1")
    reason = r.reason()
    check("needs " in reason and "its share is" in reason and "gpu_memory_fraction 0.001" in reason,
          f"the reason has both numbers: {reason!r}")
    check(not r.of_type("step"), "no step was taken")
    print(f"  {reason}")


def case_two_ranks(trainer, work):
    """Two ranks on two GPUs follow one rank with the same global batch."""
    need_gpus(2)
    one, rc = run_gpu(trainer, work, "one", config(**{"checkpoint.every_epochs": 0}))
    check(rc == 0, f"one rank: {one.stderr[-2000:]!r}")
    # CUDA's own order (FASTEST_FIRST) may differ from the driver's listing, by which
    # the run's GPUs are given: the trainer sets PCI_BUS_ID (the stand-in numbers its
    # GPUs the other way round without it, and the ranks check their GPU's PCI address).
    two, rc = run_gpu(trainer, work, "two", config(**{"distributed.world_size": 2, "checkpoint.every_epochs": 0}),
                      env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    check(rc == 0, f"two ranks: {two.stderr[-2000:]!r}")
    check("CUDA_DEVICE_ORDER was FASTEST_FIRST: set to PCI_BUS_ID" in two.log(), "the log says the order was set")
    if FAKE_GPU:
        closed = [line for line in two.stderr.splitlines() if "destroyed its communicator" in line]
        check(len(closed) == 2, f"both ranks destroy their communicator on the way out: {closed}")
    l1, l2 = one.losses(), two.losses()
    rel = [abs(l1[k] - l2[k]) / abs(l1[k]) for k in l1 if k in l2]
    check(len(l1) == len(l2) and rel and max(rel) <= 5e-3, f"losses agree (worst {max(rel) if rel else None})")
    devices = sorted(e["device"] for e in two.of_type("hello") if e["rank"] >= 0)
    check(len(devices) == 2 and devices[0] != devices[1], f"one GPU per rank: {devices}")
    print(f"  devices {devices}; worst relative loss difference {max(rel) if rel else float('nan'):.2e}")


def same_on_two_gpus(trainer, work, name, what, cfg, l1, ck1, line):
    """The run of cfg on two GPUs (one shard each) gives the very losses l1 and the
    checkpoint ck1 of its run on one; `line` (what the one-GPU run showed) printed with
    the outcome, or with "not run" on a machine with one GPU."""
    if visible_gpus()[0] < 2:
        print(line + "; on 2 GPUs: not run (one GPU)")
        return
    two, rc = run_gpu(trainer, work, name, cfg)
    check(rc == 0, f"{what} on two GPUs: {two.stderr[-2000:]!r}")
    ck2 = os.path.join(two.dir, "checkpoints", "epoch-0000.safetensors")
    check(two.losses() == l1, "the same losses on 1 and 2 GPUs, bit for bit")
    same = os.path.exists(ck2) and os.path.exists(ck1) and sha(ck1) == sha(ck2)
    check(same, "the same checkpoint on 1 and 2 GPUs, byte for byte")
    print(line + f"; on 2 GPUs: losses {'identical' if two.losses() == l1 else 'DIFFER'}, checkpoint sha256 "
          f"{sha(ck2) if os.path.exists(ck2) else None} ({'the same' if same else 'DIFFERS'})")


def case_width_on_fewer_gpus(trainer, work):
    """A run of logical width 2 (distributed.world_size 2) trained on one GPU (--ranks 1):
    its batch shards each computed on their own and summed in shard order, so with two
    GPUs the very same losses and checkpoint as on two; on one GPU, losses that follow
    the cpu backend's width 2 on one rank."""
    need_gpus(1)
    cfg = config(**{"distributed.world_size": 2, "distributed.min_world_size": 1, "train.epochs": 1})
    one = Run(trainer, work, "width2-on-1", cfg, args=("--ranks", "1"))
    rc = one.wait()
    check(rc == 0, f"width 2 on one GPU: {one.stderr[-2000:]!r}")
    check("2 batch shards on 1 rank" in one.log(), "the log says 2 batch shards on 1 rank")
    hellos = [e for e in one.of_type("hello") if e["rank"] >= 0]
    check(len(hellos) == 1 and "cuda" in hellos[0]["device"], f"one rank, on a GPU: {hellos}")
    ck1 = os.path.join(one.dir, "checkpoints", "epoch-0000.safetensors")
    check(os.path.exists(ck1), "a checkpoint")
    cpu_cfg = merge(cfg, {"distributed.backend": "cpu"})
    ref = Run(trainer, work, "width2-cpu", cpu_cfg)
    rc = ref.wait()
    check(rc == 0, f"width 2 on the cpu backend: {ref.stderr[-2000:]!r}")
    l1, lc = one.losses(), ref.losses()
    rel = [abs(l1[k] - lc[k]) / abs(lc[k]) for k in lc if k in l1]
    check(l1 and len(l1) == len(lc) and max(rel) <= 5e-3, f"losses follow the cpu backend (worst {max(rel) if rel else None})")
    line = f"  width 2 on 1 GPU: {len(l1)} steps, worst relative loss difference to cpu {max(rel) if rel else float('nan'):.2e}"
    same_on_two_gpus(trainer, work, "width2-on-2", "width 2", cfg, l1, ck1, line)


def case_width_sync_bn_on_fewer_gpus(trainer, work):
    """The CNN with sync batch norm at logical width 2 on one GPU (--ranks 1: both shards on
    it, each batch norm point gathered before the step's passes) follows the cpu backend's
    width 2; on two GPUs (one shard each, the points totalled as they come) the very same
    losses and checkpoint, byte for byte."""
    need_gpus(1)
    sync = json.loads(json.dumps(CNN))
    sync["cnn"]["batch_norm_stats"] = "sync"
    cfg = config(**{"model": sync, "data.limit": 512, "data.test_limit": 300, "train.epochs": 1,
                    "distributed.world_size": 2, "distributed.min_world_size": 1})
    one = Run(trainer, work, "sync-width2-on-1", cfg, args=("--ranks", "1"))
    rc = one.wait()
    check(rc == 0, f"sync batch norm, width 2 on one GPU: {one.stderr[-2000:]!r}")
    ck1 = os.path.join(one.dir, "checkpoints", "epoch-0000.safetensors")
    ref = Run(trainer, work, "sync-width2-cpu", merge(cfg, {"distributed.backend": "cpu"}))
    check(ref.wait() == 0, f"sync batch norm, width 2 on the cpu backend: {ref.stderr[-2000:]!r}")
    l1, lc = one.losses(), ref.losses()
    rel = [abs(l1[k] - lc[k]) / abs(lc[k]) for k in lc if k in l1]
    check(l1 and len(l1) == len(lc) and max(rel) <= 1e-2,
          f"losses follow the cpu backend's sync batch norm (worst {max(rel) if rel else None})")
    line = f"  sync batch norm, width 2 on 1 GPU: {len(l1)} steps, worst relative loss difference to cpu " \
           f"{max(rel) if rel else float('nan'):.2e}"
    same_on_two_gpus(trainer, work, "sync-width2-on-2", "sync batch norm, width 2", cfg, l1, ck1, line)


def case_watchdog(trainer, work):
    """A rank that stops answering: the other's watchdog aborts NCCL and the run fails with a reason.

    On two GPUs rank 1 is stopped (SIGSTOP). With --fake-gpu the stand-in hangs one
    wait instead: released by the abort (NCCL's kernels), never released (a hung
    kernel: the watchdog ends the process), or with NCCL reporting an error."""
    if FAKE_GPU:
        # distributed.collective_timeout_s sets the timeout (the first; the others by
        # the environment variable); "abort hangs": ncclCommAbort never returns, and
        # the watchdog still ends the process a grace after it aborted (10 s;
        # DDPD_NCCL_EXIT_GRACE_S makes it 3 where the test waits for it to pass)
        cfg = config(**{"train.epochs": 50, "checkpoint.every_epochs": 0})
        grace = {"DDPD_NCCL_EXIT_GRACE_S": "3"}
        for name, env, want in [
            ("released", {"DDPD_FAKE_CUDA_HANG_AT": "30"}, "did not complete within 2 s"),
            ("forever", {"DDPD_FAKE_CUDA_HANG_AT": "30", "DDPD_FAKE_CUDA_HANG_FOREVER": "1", **grace},
             "did not complete within 2 s"),
            ("async", {"DDPD_FAKE_NCCL_ASYNC_ERROR_AT": "30"}, "asynchronous error"),
            ("abort hangs", {"DDPD_FAKE_CUDA_HANG_AT": "30", "DDPD_FAKE_CUDA_HANG_FOREVER": "1",
                             "DDPD_FAKE_NCCL_ABORT_HANGS": "1", **grace}, "did not complete within 2 s"),
        ]:
            t0 = time.time()
            if name == "released":
                r = Run(trainer, work, "wd-" + name, config(**{"train.epochs": 50, "checkpoint.every_epochs": 0,
                                                               "distributed.collective_timeout_s": 2}), env=env)
            else:
                r = Run(trainer, work, "wd-" + name.replace(" ", "-"), cfg, env=dict(env, DDPD_COLLECTIVE_TIMEOUT_S="2"))
            try:
                rc = r.wait(120)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                rc = r.wait()
            took = time.time() - t0
            check(rc == 1, f"{name}: exit code {rc}, expected 1; stderr {r.stderr[-1000:]!r}")
            check(want in r.reason(), f"{name}: the reason says '{want}': {r.reason()!r}")
            check(took < 40, f"{name}: the run ended after {took:.0f} s")
            if "DDPD_NCCL_EXIT_GRACE_S" in env:
                check("the rank did not end within 3 s of the abort, ending it" in r.stderr,
                      f"{name}: the watchdog ended the rank its grace after the abort: {r.stderr[-1000:]!r}")
            print(f"  {name}: ended after {took:.1f} s: {r.reason()}")
    need_gpus(2)
    cfg = config(**{"distributed.world_size": 2, "train.epochs": 200, "checkpoint.every_epochs": 0,
                    "distributed.collective_timeout_s": 5})
    # on the stand-in rank 0's wait is not released by the abort: the grace ends it
    r = Run(trainer, work, "wd", cfg, env={"DDPD_NCCL_EXIT_GRACE_S": "3"} if FAKE_GPU else None)
    deadline = time.time() + 120
    while time.time() < deadline and not r.of_type("step") and r.proc.poll() is None:
        time.sleep(0.1)
    pids = {e["rank"]: e["pid"] for e in r.of_type("hello") if e["rank"] >= 0}
    if r.proc.poll() is not None and r.proc.returncode == 2:
        r.wait()
        skip(f"no CUDA device ({r.stderr.strip().splitlines()[-1]})")
    check(1 in pids, "rank 1 started")
    t0 = time.time()
    if 1 in pids:
        os.kill(pids[1], signal.SIGSTOP)
    rc = r.wait(120)
    took = time.time() - t0
    check(rc == 1, f"exit code {rc}, expected 1")
    check("did not complete within 5 s" in r.reason(), f"the reason names the timeout: {r.reason()!r}")
    check(took < 60, f"the run ended {took:.0f} s after rank 1 stopped")
    print(f"  ended after {took:.1f} s: {r.reason()}")


def case_resume(trainer, work):
    """A run resumed from its epoch-0 checkpoint ends as the run that never stopped, bit for bit."""
    need_gpus(1)
    over = {"train.lr_schedule": {"type": "constant"}}
    whole, rc = run_gpu(trainer, work, "whole", config(**over))
    check(rc == 0, f"the whole run: {whole.stderr[-2000:]!r}")
    first, rc = run_gpu(trainer, work, "resumed", config(**over, **{"train.epochs": 1}))
    check(rc == 0, f"the first epoch: {first.stderr[-2000:]!r}")
    cfg_path = os.path.join(work, "resumed.json")
    with open(cfg_path, "w") as f:
        json.dump(config(**over), f)
    p = subprocess.run([trainer, "--config", cfg_path, "--run-dir", first.dir, "--resume"], capture_output=True,
                       text=True, timeout=240)
    check(p.returncode == 0, f"the resumed run: {p.stderr[-2000:]!r}")
    a, b = whole.losses(), first.losses()
    check(a and a == b, f"the same losses after the resume ({len(a)} vs {len(b)} steps)")
    ca = os.path.join(whole.dir, "checkpoints", "epoch-0001.safetensors")
    cb = os.path.join(first.dir, "checkpoints", "epoch-0001.safetensors")
    check(os.path.exists(cb) and sha(ca) == sha(cb), "the same final checkpoint")
    print(f"  resumed at epoch 1: {len(b)} step losses and the final checkpoint as the whole run's")


def case_restarts(trainer, work):
    """distributed.max_restarts on the nccl backend: a failed attempt's ranks all start
    again from the newest checkpoint, with a new NCCL id, and the run ends as the one
    that never failed, bit for bit. With --fake-gpu the stand-in's NCCL reports an
    error at the 120th collective of every process (each attempt gets one checkpoint
    further); on two GPUs rank 1 is SIGKILLed once, after the first checkpoint."""
    need_gpus(2)
    over = {"distributed.world_size": 2, "train.epochs": 4, "train.lr_schedule": {"type": "constant"}}
    if not FAKE_GPU:  # epochs long enough (all 60000 examples) that the kill surely comes mid-run
        over.update({"data.limit": 0, "train.epochs": 3})
    whole, rc = run_gpu(trainer, work, "whole", config(**over))
    check(rc == 0, f"the whole run: {whole.stderr[-2000:]!r}")
    cfg = config(**over, **{"distributed.max_restarts": 3})
    if FAKE_GPU:
        r, rc = run_gpu(trainer, work, "restarted", cfg,
                        env={"DDPD_FAKE_NCCL_ASYNC_ERROR_AT": "120", "DDPD_RESTART_BACKOFF_S": "0"})
    else:
        r = Run(trainer, work, "restarted", cfg, env={"DDPD_RESTART_BACKOFF_S": "0"})
        deadline = time.time() + 120
        while time.time() < deadline and r.proc.poll() is None and not r.of_type("checkpoint"):
            time.sleep(0.05)
        pids = {e["rank"]: e["pid"] for e in r.of_type("hello") if e["rank"] >= 0}
        check(1 in pids and r.proc.poll() is None, f"rank 1 runs after the first checkpoint: {pids}")
        if 1 in pids:
            os.kill(pids[1], signal.SIGKILL)
        rc = r.wait(240)
    check(rc == 0, f"the run that failed and started again: {rc} {r.stderr[-2000:]!r}")
    started = [e for e in r.of_type("attempt") if e["phase"] == "started"]
    ended = [e["status"] for e in r.of_type("attempt") if e["phase"] == "ended"]
    check(len(ended) >= 2 and ended[-1] == "succeeded" and set(ended[:-1]) == {"failed"},
          f"attempts that failed, then one that succeeded: {ended}")
    check(len(started) >= 2 and all(e["checkpoint"] for e in started[1:]),
          f"every restart carried on from a checkpoint: {[e.get('checkpoint') for e in started]}")
    a, b = whole.losses(), r.losses()
    check(a and a == b, f"the same losses as the run that never failed ({len(a)} vs {len(b)} steps)")
    final = os.path.join("checkpoints", "epoch-%04d.safetensors" % (over["train.epochs"] - 1))
    check(sha(os.path.join(whole.dir, final)) == sha(os.path.join(r.dir, final)), "the same final checkpoint")
    print(f"  {len(ended)} attempts: {ended}")


class Rendezvous:
    """A stand-in for the coordinator's rendezvous routes (POST and GET
    /runs/{id}/rendezvous: tests/integration/server/test_server_rendezvous.py holds the real ones
    to the contract), on a loopback port, for launchers run here without a ddpd."""

    def __init__(self):
        import http.server, threading
        from urllib.parse import urlparse, parse_qs
        keys = self.keys = {}

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self, status, doc):
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                b = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                keys[urlparse(self.path).path + " " + b["key"]] = b["value"]
                self.answer(201, {"key": b["key"]})

            def do_GET(self):
                u = urlparse(self.path)
                k = parse_qs(u.query)["key"][0]
                v = keys.get(u.path + " " + k)
                self.answer(200 if v is not None else 404, {"key": k, "value": v} if v is not None else {"detail": "not yet"})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, run):
        return f"http://127.0.0.1:{self.server.server_port}/runs/{run}/rendezvous"


def across_two_nodes(trainer, work, name, cfg, rdv_url, resume=False):
    """Two launchers, one a "node" of one GPU each (GPU 0 and GPU 1), met through
    rdv_url: (node 0's Run, its return code, node 1's Run, its return code)."""
    runs = []
    for k in range(2):
        path = os.path.join(work, f"{name}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        d = os.path.join(work, f"{name}-node{k}")
        os.makedirs(d, exist_ok=True)
        env = dict(os.environ, DDPD_RUN_SECRET="s3cret", DDPD_RENDEZVOUS_TIMEOUT_S="60")
        if FAKE_GPU:
            env["DDPD_FAKE_GPUS"] = "1"
        else:
            env["CUDA_VISIBLE_DEVICES"] = str(k)
        r = Run.__new__(Run)
        r.dir, r.stdout, r.stderr = d, "", ""
        r.proc = subprocess.Popen([trainer, "--config", path, "--run-dir", d, "--nodes", "2", "--node-rank", str(k),
                                   "--node-addr", "127.0.0.1", "--rendezvous", rdv_url] + (["--resume"] if resume else []),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        runs.append(r)
    rcs = [r.wait(240) for r in runs]
    return runs[0], rcs[0], runs[1], rcs[1]


def case_across_nodes(trainer, work):
    """Two "nodes" of one GPU each, NCCL's unique id made by node 0's launcher and
    handed to node 1's through the rendezvous: the run trains as two ranks on one host
    do; resumed, node 0 reads the checkpoint (only it has one) and node 1 gets its
    state from rank 0, ending as the run that never stopped."""
    need_gpus(2)
    over = {"distributed.world_size": 2, "train.lr_schedule": {"type": "constant"}}
    one, rc = run_gpu(trainer, work, "one-host", config(**over))
    check(rc == 0, f"two ranks on one host: {one.stderr[-2000:]!r}")
    rdv = Rendezvous()
    n0, rc0, n1, rc1 = across_two_nodes(trainer, work, "nodes", config(**over), rdv.url(1))
    if not check(rc0 == 0 and rc1 == 0, f"both nodes succeed: {rc0} {n0.stderr[-1500:]!r} / {rc1} {n1.stderr[-1500:]!r}"):
        return
    check(any(k.endswith(" nccl/unique-id") for k in rdv.keys), f"NCCL's id went through the rendezvous: {list(rdv.keys)}")
    a, b = one.losses(), n0.losses()
    rel = [abs(a[k] - b[k]) / abs(a[k]) for k in a if k in b]
    check(len(a) == len(b) and rel and max(rel) <= (0 if FAKE_GPU else 1e-5),
          f"the losses of one host's two ranks (worst relative difference {max(rel) if rel else None})")
    check([e["rank"] for e in n1.of_type("hello") if e["rank"] >= 0] == [1], "node 1 ran rank 1")
    check(not glob.glob(os.path.join(n1.dir, "checkpoints", "*")), "only rank 0's node holds checkpoints")
    # resumed from epoch 0's checkpoint: node 0 finds and reads it, node 1 has none
    os.remove(os.path.join(n0.dir, "checkpoints", "epoch-0001.safetensors"))
    m0, rc0, m1, rc1 = across_two_nodes(trainer, work, "nodes", config(**over), rdv.url(2), resume=True)
    check(rc0 == 0 and rc1 == 0, f"the resume succeeds on both nodes: {m0.stderr[-1500:]!r} / {m1.stderr[-1500:]!r}")
    final = os.path.join("checkpoints", "epoch-0001.safetensors")
    check(os.path.exists(os.path.join(n0.dir, final)) and sha(os.path.join(n0.dir, final)) == sha(os.path.join(one.dir, final))
          if FAKE_GPU else os.path.exists(os.path.join(n0.dir, final)),
          "the resumed run's final checkpoint is the uninterrupted one's")
    print(f"  across 2 nodes: {len(b)} steps, worst relative difference to one host {max(rel):.2e}; resumed from epoch 0")


def case_one_gpu_two_ranks(trainer, work):
    """Two ranks and one visible GPU: nccl is refused (no fork), auto falls back to cpu."""
    need_gpus(1)
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    r = Run(trainer, work, "two", config(**{"distributed.world_size": 2}), env=env)
    rc = r.wait(60)
    if rc == 2 and "built without" in r.stderr:
        skip(f"no CUDA device ({r.stderr.strip().splitlines()[-1]})")
    check(rc == 2, f"exit code {rc}, expected 2")
    check("two ranks on one GPU" in r.stderr and "world_size 2" in r.stderr, f"the reason: {r.stderr!r}")
    check(not [e for e in r.of_type("hello") if e["rank"] >= 0], "no rank was started")
    cfg = config(**{"distributed.world_size": 2, "distributed.backend": "auto", "train.epochs": 1,
                    "data.limit": 512, "data.test_limit": 200, "checkpoint.every_epochs": 0})
    a = Run(trainer, work, "auto", cfg, env=env)
    check(a.wait(120) == 0, f"auto: {a.stderr[-2000:]!r}")
    picked = [line for line in a.log().splitlines() if "backend auto picked" in line]
    check(picked and "picked cpu" in picked[0] and "never share a GPU" in picked[0], f"auto says why: {picked}")
    print(f"  refused: {r.reason()}")


def case_canceled(trainer, work):
    """SIGTERM to the launcher (a cancel): the run ends canceled, with its end event.
    NCCL's bootstrap thread, started in the launcher by ncclGetUniqueId, must not take
    the signal (it would end the launcher at once, with no end event). The kernel
    gives a process's signal to any of its threads that does not block it: sent to
    each of the launcher's threads in turn, it finds such a thread if there is one."""
    need_gpus(1)
    cfg = config(**{"distributed.world_size": 2 if FAKE_GPU else 1, "train.epochs": 500, "checkpoint.every_epochs": 0})
    r = Run(trainer, work, "cancel", cfg)
    deadline = time.time() + 120
    while time.time() < deadline and not r.of_type("step") and r.proc.poll() is None:
        time.sleep(0.05)
    if r.proc.poll() is not None and r.proc.returncode == 2:
        r.wait()
        skip(f"no CUDA device ({r.stderr.strip().splitlines()[-1]})")
    check(r.of_type("step"), "the run trains before the cancel")
    threads = sorted(int(t) for t in os.listdir(f"/proc/{r.proc.pid}/task"))
    check(len(threads) > 1, f"the launcher has NCCL's bootstrap thread beside its own: threads {threads}")
    for tid in reversed(threads):  # the others first: the main thread waits for the signal
        try:
            os.kill(tid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    rc = r.wait(120)
    ends = r.of_type("end")
    check(rc == 128 + signal.SIGTERM, f"the launcher exits {128 + signal.SIGTERM} (canceled), not killed: {rc}")
    check(ends and ends[-1]["status"] == "canceled" and "TERM" in ends[-1]["reason"],
          f"its end event says canceled by SIGTERM: {ends}")
    print(f"  canceled: exit code {rc}, end event {ends[-1] if ends else None}")


def case_single_rank_collectives(trainer, work):
    """One rank with DDPD_NCCL_FORCE_COLLECTIVES=1 issues its NCCL collectives (the
    comm stream, its events, the watchdog's view of them), and trains as one rank
    without them does, bit for bit."""
    need_gpus(1)
    plain, rc = run_gpu(trainer, work, "plain", config())
    check(rc == 0, f"one rank: {plain.stderr[-2000:]!r}")
    forced, rc = run_gpu(trainer, work, "forced", config(), env={"DDPD_NCCL_FORCE_COLLECTIVES": "1"})
    check(rc == 0, f"one rank issuing its collectives: {forced.stderr[-2000:]!r}")
    check(plain.losses() and forced.losses() == plain.losses(), "the same losses, bit for bit")
    ca, cb = (os.path.join(x.dir, "checkpoints", "epoch-0001.safetensors") for x in (plain, forced))
    check(os.path.exists(ca) and os.path.exists(cb) and sha(ca) == sha(cb), "the same final checkpoint")
    if FAKE_GPU:
        def issued(run):
            lines = [line for line in run.stderr.splitlines() if "destroyed its communicator" in line]
            return int(lines[-1].split(" after ")[1].split()[0]) if lines else -1
        check(issued(plain) == 0 and issued(forced) > 100,
              f"collectives issued: {issued(plain)} without the switch, {issued(forced)} with it")
        print(f"  one rank: {issued(forced)} NCCL collectives with DDPD_NCCL_FORCE_COLLECTIVES=1, "
              f"{issued(plain)} without; {len(plain.losses())} step losses identical")
    else:
        print(f"  one rank with its collectives: {len(forced.losses())} step losses as without them")


def fake_only(what):
    if not FAKE_GPU:
        skip(f"{what} needs the CPU stand-in's fault injection (--fake-gpu)")


def case_failure_messages(trainer, work):
    """A GPU failure says what happened and what to try: an illegal address (the
    CUDA_LAUNCH_BLOCKING=1 hint), running out of memory, an NCCL error with NCCL's
    own last error (the NCCL_DEBUG=WARN hint); not "the process group was aborted"."""
    fake_only("failing on demand")
    cfg = config(**{"train.epochs": 20, "checkpoint.every_epochs": 0})
    two = config(**{"train.epochs": 20, "checkpoint.every_epochs": 0, "distributed.world_size": 2})
    for name, c, env, wants in [
        ("illegal address", cfg, {"DDPD_FAKE_CUDA_ERROR_AT": "30:illegal_address"},
         ["an illegal memory access was encountered (cudaErrorIllegalAddress)", "CUDA_LAUNCH_BLOCKING=1"]),
        ("out of memory", cfg, {"DDPD_FAKE_CUDA_ERROR_AT": "30:out_of_memory"},
         ["out of memory (cudaErrorMemoryAllocation)", "the GPU ran out of memory"]),
        ("NCCL error", two, {"DDPD_FAKE_NCCL_ERROR_AT": "40"},
         # (the failing call: the loss's all-reduce, or a bucket's all-to-all or all-gather
         # group, whichever is the 40th collective)
         [("ncclAllReduce", "ncclGroupEnd"), "unhandled system error", "connection closed by peer", "NCCL_DEBUG=WARN"]),
    ]:
        r = Run(trainer, work, "fail-" + name.replace(" ", "-"), c, env=env)
        rc = r.wait(120)
        reason = r.reason()
        check(rc == 1, f"{name}: exit code {rc}, expected 1")
        for want in wants:
            check(any(w in reason for w in want) if isinstance(want, tuple) else want in reason,
                  f"{name}: the reason says {want!r}: {reason!r}")
        check("process group was aborted" not in reason, f"{name}: not just an abort: {reason!r}")
        print(f"  {name}: {reason}")


def case_memory_after_nccl(trainer, work):
    """The memory plan is checked against what is free once cuBLAS and NCCL hold theirs
    (NCCL connected at init), with a margin: a device whose NCCL buffers leave too
    little refuses the run before training, naming the numbers; one that leaves enough
    trains."""
    fake_only("a device of a chosen size")
    small = {"DDPD_FAKE_GPU_MEMORY_MIB": "2048"}
    r = Run(trainer, work, "nccl-takes-it", config(), env=dict(small, DDPD_FAKE_NCCL_BUFFERS_MIB="1600"))
    rc = r.wait(120)
    reason = r.reason()
    check(rc == 1 and "is free on the device once the CUDA context, cuBLAS and NCCL hold theirs" in reason
          and "margin of 256 MiB" in reason, f"refused before training, saying why: {rc} {reason!r}")
    check(not r.of_type("step"), "no step was taken")
    ok = Run(trainer, work, "fits", config(**{"train.epochs": 1}), env=dict(small, DDPD_FAKE_NCCL_BUFFERS_MIB="1200"))
    check(ok.wait(120) == 0, f"with 480 MiB left the run trains: {ok.reason()!r} {ok.stderr[-1000:]!r}")
    print(f"  refused: {reason}")


CASES = cases_in(globals())


def main():
    global FAKE_GPU, DATA
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--fake-gpu", action="store_true", help="the trainer is ddp-trainer-fake-cuda")
    ap.add_argument("--data", default=DATA, help="the Fashion-MNIST directory")
    a = ap.parse_args()
    FAKE_GPU, DATA = a.fake_gpu, a.data
    with tempfile.TemporaryDirectory(prefix="ddpd-gpu-e2e-") as work:
        CASES[a.case](a.trainer, work)
    checks.finish(f"gpu_e2e_{a.case}")


if __name__ == "__main__":
    main()
