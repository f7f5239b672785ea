#!/usr/bin/env python3
"""PyTorch's eager DDP on the model and GPU bench_gpu_step measures, for comparison.

One process, world size 1, DistributedDataParallel over NCCL; the MLP 784-H-...-10
with ReLU, or with --model cnn the default CNN (Conv2d(1, 32, 5, padding 2), ReLU,
MaxPool2d(2), Conv2d(32, 64, 5, padding 2), ReLU, MaxPool2d(2), Linear(3136, 1024),
ReLU, Linear(1024, 10): ddp-trainer's model.type "cnn" default, cuDNN with its
autotuner on, as people run it), cross-entropy, Adam (torch's default implementation); uint8 images
resident on the GPU, gathered and scaled to [0, 1] each step as ddp-trainer does;
loss.item() every step (ddp-trainer reports every step's loss too). TF32 off, as
ddp-trainer runs by default. Prints one JSON line per batch size:
  torch_mlp_ddp: {"model": "mlp", "batch": 1024, "samples_per_s": ..., "step_ms": ...}

  torch_mlp_ddp.py [--model mlp|cnn] [--batch N]... [--hidden 4096,4096] [--steps 50] [--data DIR]"""
import argparse, gzip, json, os, socket, sys, time


def load_images(data_dir):
    """Fashion-MNIST's training set as (uint8 [N, 784], uint8 [N]), or None."""
    try:
        with gzip.open(os.path.join(data_dir, "train-images-idx3-ubyte.gz")) as f:
            images = f.read()[16:]
        with gzip.open(os.path.join(data_dir, "train-labels-idx1-ubyte.gz")) as f:
            labels = f.read()[8:]
        return images, labels
    except OSError:
        return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--batch", type=int, action="append")
    ap.add_argument("--hidden", default="4096,4096")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    batches = a.batch or [1024, 8192]

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    if not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device")
        sys.exit(77)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.cuda.set_device(0)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    dist.init_process_group("nccl", rank=0, world_size=1)
    dev = torch.device("cuda", 0)

    loaded = load_images(a.data)
    if loaded:
        images = torch.frombuffer(bytearray(loaded[0]), dtype=torch.uint8).view(-1, 784).to(dev)
        labels = torch.frombuffer(bytearray(loaded[1]), dtype=torch.uint8).to(dev)
    else:
        g = torch.Generator(device=dev).manual_seed(1)
        images = torch.randint(0, 256, (60000, 784), dtype=torch.uint8, device=dev, generator=g)
        labels = torch.randint(0, 10, (60000,), dtype=torch.uint8, device=dev, generator=g)
    n = images.shape[0]
    hidden = [int(h) for h in a.hidden.split(",") if h]

    for batch in batches:
        torch.manual_seed(42)
        if a.model == "cnn":
            layers = [nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Linear(1024, 10)]
        else:
            layers, width = [], 784
            for h in hidden:
                layers += [nn.Linear(width, h), nn.ReLU()]
                width = h
            layers.append(nn.Linear(width, 10))
        model = DDP(nn.Sequential(*layers).to(dev), device_ids=[0])
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        perm, k, per_epoch = torch.randperm(n, device=dev), 0, n // batch

        def step():
            nonlocal perm, k
            if k == per_epoch:
                perm, k = torch.randperm(n, device=dev), 0
            idx = perm[k * batch:(k + 1) * batch]
            k += 1
            x = images[idx].float().mul_(1.0 / 255.0)
            y = labels[idx].long()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        for _ in range(a.warmup):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        name = "CNN c32-c64-1024-10" if a.model == "cnn" else f"MLP 784-{'-'.join(map(str, hidden))}-10"
        print(f"PyTorch {torch.__version__} eager DDP, {name}, Adam, batch {batch}: "
              f"{a.steps * batch / secs:.0f} samples/s, {secs / a.steps * 1e3:.2f} ms/step, last loss {loss:.4f}")
        print("torch_mlp_ddp: " + json.dumps({"model": a.model, "batch": batch, "samples_per_s": a.steps * batch / secs,
                                              "step_ms": secs / a.steps * 1e3, "torch": torch.__version__}))
        del model, opt
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
