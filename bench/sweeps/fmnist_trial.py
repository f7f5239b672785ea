"""The one trial both tools run (bench_optuna.py): an MLP 784-W-10 with Adam on a
Fashion-MNIST subset, one thread, seeded, its test accuracy after each epoch given to
`report(epoch, acc)`, which says whether to stop (pruned). The same code, the same
data and the same configuration give the same accuracies in both; a trial ddpd's ASHA
pauses saves a snapshot and goes on from it when promoted (`snapshot`), as a user of
ddpd's pausing would write it (reporter/README.md), where Optuna's pruner ends it."""
import gzip, os, time

import numpy as np
import torch

DATA = os.environ.get("FMNIST_DIR", "/usr/share/datasets/fashion-mnist")


def _idx(name, n):
    with gzip.open(os.path.join(DATA, name)) as f:
        data = f.read()
    if name.endswith("labels-idx1-ubyte.gz"):
        return torch.from_numpy(np.frombuffer(data, np.uint8, offset=8)[:n].astype(np.int64))
    x = np.frombuffer(data, np.uint8, offset=16).reshape(-1, 784)[:n]
    return torch.from_numpy(x.astype(np.float32) / 255.0)


_loaded = {}  # (n_train, n_test) -> the tensors: a process that loaded them once keeps them


def load(n_train, n_test):
    if (n_train, n_test) not in _loaded:
        _loaded[(n_train, n_test)] = (
            _idx("train-images-idx3-ubyte.gz", n_train), _idx("train-labels-idx1-ubyte.gz", n_train),
            _idx("t10k-images-idx3-ubyte.gz", n_test), _idx("t10k-labels-idx1-ubyte.gz", n_test))
    return _loaded[(n_train, n_test)]


def train(data, lr, width, epochs, report, on_first=None, snapshot=None):
    """Returns (the time of the first step's end, the epochs trained, pruned); on_first(t) at that step.
    snapshot (a tool that pauses trials and starts them again, ddpd's ASHA): an object
    whose load() gives the state saved at a pause or None, whose pause_now() says at
    each step whether to save, and whose save(state) saves it and waits to be stopped.
    Resumed, a trial computes exactly what it would have without the pause."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y, xt, yt = data
    model = torch.nn.Sequential(torch.nn.Linear(784, width), torch.nn.ReLU(), torch.nn.Linear(width, 10))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    first = None
    e0, i0 = 0, 0
    saved = snapshot.load() if snapshot else None
    if saved:
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        e0, i0 = saved["epoch"], saved["batch"]
    for e in range(e0, epochs):
        for i in range(i0 if e == e0 else 0, len(x), 128):
            if snapshot and snapshot.pause_now():
                snapshot.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": e, "batch": i,
                               "step": e * ((len(x) + 127) // 128) + i // 128})
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i:i + 128]), y[i:i + 128]).backward()
            opt.step()
            if first is None:
                first = time.time()
                if on_first:
                    on_first(first)
        with torch.no_grad():
            acc = (model(xt).argmax(1) == yt).float().mean().item()
        if report(e, acc):
            return first, e + 1, True
    return first, epochs, False
