#!/usr/bin/env python3
"""An elastic command run's script, as a user writes one for torchrun's elastic mode:
env:// initialisation (gloo) from the variables it is started with, its own
checkpoint (a file rank 0 replaces at every step), from which every start goes on,
whatever the number of ranks. Each rank of each start appends what it saw of its
environment, and the step it goes on from, to ROOT/starts.jsonl. A step is an
all-reduce of the ranks' gradients, 0.1 s apart; rank 0 reports it (import ddpd).
It ends, all ranks together, at the first step after ROOT/done exists.

Usage: elastic_torch.py ROOT"""
import json, os, sys, time

import torch
import torch.distributed as dist

import ddpd

SEEN = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
        "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
        "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS", "DDPD_RUN_ID"]


def main():
    root = sys.argv[1]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ckpt = os.path.join(root, "model.pt")
    state = torch.load(ckpt) if os.path.exists(ckpt) else {"step": 0, "w": torch.zeros(4)}
    with open(os.path.join(root, "starts.jsonl"), "a") as f:
        f.write(json.dumps({k: os.environ.get(k) for k in SEEN} | {"from_step": state["step"], "pid": os.getpid()})
                + "\n")
    dist.init_process_group("gloo", init_method="env://")
    step, w = state["step"], state["w"]
    while True:
        step += 1
        g = torch.full((4,), float(rank + 1))
        dist.all_reduce(g)
        w = w - 0.01 * g / world
        stop = torch.tensor([1.0 if rank == 0 and os.path.exists(os.path.join(root, "done")) else 0.0])
        dist.all_reduce(stop)
        if rank == 0:
            torch.save({"step": step, "w": w}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
            ddpd.log_step(step, loss=float(w.sum()))
            ddpd.flush()
        if stop.item() > 0:
            break
        time.sleep(0.1)
    print(f"rank {rank} of {world}: done at step {step}", flush=True)
    # os._exit: Debian torch 1.13's gloo teardown may abort a process that leaves otherwise
    os._exit(0)


if __name__ == "__main__":
    main()
