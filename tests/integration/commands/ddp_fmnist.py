#!/usr/bin/env python3
"""A user's training script in the shape of the PyTorch DDP tutorial, as ddpd's
command runs are meant to run it unchanged: env:// initialisation from torchrun's
variables, a DistributedSampler with set_epoch, DDP around a small MLP, Adam, the
LR times 0.3 every 5 epochs, the model let go, a barrier, destroy_process_group. It trains on the
first --limit Fashion-MNIST images and reports through `import ddpd` (a no-op
outside ddpd). It writes what it saw of its environment to env-rank-N.json and
prints a line per epoch (each rank) and its final loss as "final loss X" (rank 0).

Test hooks: --fail-rank R --fail-at STEP makes rank R print a line and exit 3 at
that global step (the other rank is then blocked in an all-reduce). It leaves with
os._exit: an ordinary sys.exit there runs Debian torch 1.13's gloo teardown in the middle
of a collective, which now and then aborts the process ("terminate called without an
active exception", SIGABRT) instead of exiting 3, and the test wants one known status."""
import argparse, gzip, json, os, sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import ddpd

DATA = "/usr/share/datasets/fashion-mnist"
SEEN = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
        "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
        "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
        "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES", "DDPD_RUN_ID", "MY_FLAG"]


def idx(path, limit, offset, shape):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, dtype=np.uint8, offset=offset)[: limit * int(np.prod(shape))].reshape(limit, *shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--limit", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--fail-at", type=int, default=0)
    a = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    with open(f"env-rank-{rank}.json", "w") as f:
        json.dump({k: os.environ.get(k) for k in SEEN} | {"cwd": os.getcwd(),
                                                            "pythonpath": os.environ.get("PYTHONPATH")}, f)
    dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    x = torch.tensor(idx(f"{DATA}/train-images-idx3-ubyte.gz", a.limit, 16, (784,)), dtype=torch.float32) / 255.0
    y = torch.tensor(idx(f"{DATA}/train-labels-idx1-ubyte.gz", a.limit, 8, ()), dtype=torch.int64)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=a.batch, sampler=sampler)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.3)
    step, last = 0, None
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        lr = opt.param_groups[0]["lr"]
        total, n = 0.0, 0
        ddpd.status("training", f"epoch {epoch}")
        for xb, yb in loader:
            step += 1
            if rank == a.fail_rank and step == a.fail_at:
                print(f"RuntimeError: planted failure at step {step}", file=sys.stderr, flush=True)
                os._exit(3)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean = mean.item() / world
            total, n, last = total + mean, n + 1, mean
            ddpd.log_step(step, loss=mean, lr=lr, grad_steps=float(step))
        ddpd.log_epoch(epoch, lr=lr, train_loss=total / n)
        print(f"rank {rank}: epoch {epoch} done, {n} steps", flush=True)  # each rank's log has lines of its own
        sched.step()
    # The model (its DDP reducer holds the process group) goes while the group is still
    # registered: Debian's torch 1.13 can deadlock when the reducer's destruction is what
    # drops the group, at main()'s return after destroy_process_group (the destructor
    # joins a gloo worker while holding the GIL the worker waits for to free a tensor).
    del loss, opt, sched, model
    dist.barrier()
    if rank == 0:
        print(f"final loss {last!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
