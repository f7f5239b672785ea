#!/usr/bin/env python3
"""End-to-end tests of ddp-trainer with model.type "cnn": the real binary, real
Fashion-MNIST, a small CNN (conv 4, pool, conv 8, pool, fc 32) on ~1000 examples so
that each case takes seconds.

Usage: test_cnn_e2e.py CASE --trainer PATH. Shares test_trainer_e2e.py's helpers."""
import json, os, signal, struct, sys

import test_trainer_e2e as e2e  # noqa: E402
from test_trainer_e2e import Run, check, cases_in, losses, sha, all_gone, no_noise  # noqa: E402

SMALL = {"type": "cnn", "cnn": {"conv": [{"channels": 4, "kernel": 5, "padding": 2, "pool": 2},
                                         {"channels": 8, "kernel": 5, "padding": 2, "pool": 2}],
                                "fc": [32]}}


def config(model=None, **over):
    cfg = e2e.config(**over)
    cfg["model"] = json.loads(json.dumps(model or SMALL))
    cfg["data"]["limit"] = over.get("data.limit", 1024)
    return cfg


def with_bn(stats="per_rank", dropout=0.0, conv_dropout=0.0):
    m = json.loads(json.dumps(SMALL))
    m["cnn"]["conv"][1]["batch_norm"] = True
    m["cnn"]["conv"][0]["dropout"] = conv_dropout
    m["cnn"]["batch_norm_stats"] = stats
    m["cnn"]["dropout"] = dropout
    return m


def tensors(path):
    """name -> (shape, raw bytes) of a safetensors file, and its metadata."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {k: (v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in header.items()}
    return out, meta


def worst_relative(a, b):
    return max(abs(a[s] - b[s]) / abs(b[s]) for s in b)


# --- cases -------------------------------------------------------------------------

def case_determinism(t, w):
    runs = [Run(t, w, f"det{i}", config()) for i in range(2)]
    for r in runs:
        check(r.wait() == 0, f"run exits 0: {r.stderr}")
        no_noise(r.stderr, "cnn run")
    a, b = losses(runs[0]), losses(runs[1])
    check(len(a) == 2 * 8 and sorted(a) == list(range(1, 17)), f"one step event per step: {sorted(a)}")
    check(a == b, "the same config and seed give bit-identical losses")
    check(sha(runs[0].checkpoint(1)) == sha(runs[1].checkpoint(1)), "and bit-identical final weights")
    check(a[16] < a[1], f"the loss goes down: {a[1]} -> {a[16]}")
    ts, meta = tensors(runs[0].checkpoint(1))
    shapes = {k: v[0] for k, v in ts.items() if not k.startswith("optimizer.")}
    want = {"layers.0.weight": [4, 1, 5, 5], "layers.0.bias": [4], "layers.1.weight": [8, 4, 5, 5],
            "layers.1.bias": [8], "layers.2.weight": [32, 7 * 7 * 8], "layers.2.bias": [32],
            "layers.3.weight": [10, 32], "layers.3.bias": [10]}
    check(shapes == want, f"PyTorch's names and shapes (conv [out, in, k, k]): {shapes}")
    check("optimizer.exp_avg.layers.1.weight" in ts and meta.get("model") == "cnn", f"optimizer state, model: {meta}")
    log = "".join(e.get("msg", "") for e in runs[0].of_type("log"))
    check("conv2d 1->4 5x5/1 pad 2" in log and "maxpool2d 2 (7x7)" in log, f"the log describes the model: {log[:300]}")
    other = Run(t, w, "det_seed", config(seed=43))
    other.wait()
    check(losses(other) != a, "another seed gives other losses")


def case_world_sizes(t, w):
    # distributed.world_size is the logical width: 4 batch shards of 32, each computed
    # on its own (its own batch norm statistics with per_rank, the sums over all 4 in
    # shard order with sync), their gradients summed in shard order: on 4, 2 or 1 ranks
    # the same bits. The plain run has a bucket per layer (bucket_mb 0.005).
    cases = (("plain", SMALL, 0.005), ("per-rank batch norm", with_bn("per_rank"), 25),
             ("sync batch norm", with_bn("sync"), 25),
             ("sync batch norm and dropout", with_bn("sync", dropout=0.5, conv_dropout=0.2), 0.005),
             ("per-rank batch norm and dropout", with_bn("per_rank", dropout=0.3), 25))
    for name, model, buckets in cases:
        cfg = config(model, **{"distributed.world_size": 4, "distributed.bucket_mb": buckets})
        e2e.same_across_ranks(t, w, "cnn " + name, cfg)


def case_widths(t, w):
    # Different logical widths (1 and 2 shards of the same batch) are different runs:
    # only float rounding differs with sync statistics (the gradient's terms summed in
    # another grouping); per-shard statistics (each shard normalises its own 64) do not.
    for name, model, buckets in (("plain", SMALL, 0.005), ("sync batch norm", with_bn("sync"), 25)):
        tol = 1e-5
        runs = {n: Run(t, w, f"ws{n}-{name.replace(' ', '_')}",
                       config(model, **{"distributed.world_size": n, "distributed.bucket_mb": buckets}))
                for n in (1, 2)}
        for n, r in runs.items():
            check(r.wait() == 0, f"{name}, width {n} exits 0: {r.stderr}")
        base, other = losses(runs[1]), losses(runs[2])
        check(sorted(other) == sorted(base) and len(base) == 16, f"{name}: the same 16 steps")
        worst = worst_relative(other, base)
        print(f"{name}: width 2 vs 1: largest relative loss difference {worst:.2e}")
        check(worst < tol, f"{name}: width 2 follows width 1 (worst {worst:.2e})")
        acc = [r.of_type("epoch")[-1]["test_acc"] for r in runs.values()]
        check(abs(acc[0] - acc[1]) < 0.01, f"{name}: test accuracy agrees: {acc}")
    per_rank = {n: Run(t, w, f"ws{n}-per_rank", config(with_bn("per_rank"), **{"distributed.world_size": n}))
                for n in (1, 2)}
    for n, r in per_rank.items():
        check(r.wait() == 0, f"per-rank batch norm, width {n} exits 0: {r.stderr}")
    worst = worst_relative(losses(per_rank[2]), losses(per_rank[1]))
    print(f"per-rank batch norm: width 2 vs 1: largest relative loss difference {worst:.2e} (statistics differ)")
    check(worst > 1e-4, f"per-shard statistics do differ from the whole batch's ({worst:.2e})")


def case_resume_other_ranks(t, w):
    # Sync batch norm and dropout, width 4: stopped after epoch 0 on 1 rank and resumed
    # on 2, the bytes of a run straight through on 4.
    cfg = config(with_bn("sync", dropout=0.5), **{"distributed.world_size": 4, "distributed.min_world_size": 1,
                                                  "train.epochs": 2,
                                                  "train.stop_after_epochs": 1, "checkpoint.keep": 5})
    straight = Run(t, w, "straight", cfg, args=("--ranks", "4"))
    check(straight.wait() == 4, f"stops after epoch 0: {straight.stderr}")
    straight = Run(t, w, "straight", cfg, resume=True, args=("--ranks", "4"))
    check(straight.wait() == 0, f"and ends: {straight.stderr}")
    first = Run(t, w, "elastic", cfg, args=("--ranks", "1"))
    check(first.wait() == 4, f"on 1 rank it stops after epoch 0: {first.stderr}")
    second = Run(t, w, "elastic", cfg, resume=True, args=("--ranks", "2"))
    check(second.wait() == 0, f"resumed on 2 ranks it ends: {second.stderr}")
    check(losses(second) == losses(straight), "every step's loss is the straight run's")
    digest = sha(second.checkpoint(1))
    check(digest == sha(straight.checkpoint(1)), "and so are the final checkpoint's bytes")
    print(f"cnn sync batch norm + dropout, resumed from 1 rank on 2: final checkpoint sha256 {digest}")


def case_dropout(t, w):
    m = json.loads(json.dumps(SMALL))
    m["cnn"]["dropout"] = 0.5
    m["cnn"]["conv"][1]["dropout"] = 0.2
    a, b = Run(t, w, "d1", config(m)), Run(t, w, "d2", config(m))
    plain = Run(t, w, "d0", config())
    for r in (a, b, plain):
        check(r.wait() == 0, f"exits 0: {r.stderr}")
    check(losses(a) == losses(b), "dropout runs repeat bit for bit")
    check(losses(a) != losses(plain), "dropout changes the losses")
    # Masks follow (seed, step, example, element), not the rank: world 1 sees them too.
    one = Run(t, w, "d_ws1", config(m, **{"distributed.world_size": 1}))
    check(one.wait() == 0, one.stderr)
    worst = worst_relative(losses(a), losses(one))
    print(f"dropout: world 2 vs 1: largest relative loss difference {worst:.2e}")
    check(worst < 1e-5, f"dropout masks do not depend on the world size (worst {worst:.2e})")


def case_conv_backends(t, w):
    # The convolutions' forward on oneDNN (the default, where the build has it) and on
    # im2col + GEMM (DDPD_CPU_CONV=im2col, the reference): the same training up to
    # float rounding, each deterministic, and the log says which ran.
    built = os.environ.get("DDPD_BUILT_WITH_ONEDNN") == "1"
    cfg = config(**{"distributed.world_size": 2})
    runs = {name: [Run(t, w, f"{name}{i}", cfg, extra_env=env) for i in range(2)]
            for name, env in (("onednn", {}), ("im2col", {"DDPD_CPU_CONV": "im2col"}))}
    for name, pair in runs.items():
        for r in pair:
            check(r.wait() == 0, f"{name} run exits 0: {r.stderr}")
        check(losses(pair[0]) == losses(pair[1]), f"{name}: bit-identical losses run to run")
        check(sha(pair[0].checkpoint(1)) == sha(pair[1].checkpoint(1)), f"{name}: bit-identical weights run to run")
    logs = {name: "\n".join(e.get("msg", "") for e in pair[0].of_type("log")) for name, pair in runs.items()}
    check("im2col + GEMM (DDPD_CPU_CONV=im2col)" in logs["im2col"] and "oneDNN" not in logs["im2col"],
          f"the im2col run says so: {logs['im2col'][:400]}")
    a, b = losses(runs["onednn"][0]), losses(runs["im2col"][0])
    check(sorted(a) == sorted(b) == list(range(1, 17)), "16 steps each")
    if built:
        check("convolutions on oneDNN (" in logs["onednn"], f"the default run says oneDNN: {logs['onednn'][:400]}")
        worst = worst_relative(a, b)
        print(f"oneDNN vs im2col: largest relative loss difference over 16 steps {worst:.2e}")
        check(worst < 1e-4, f"oneDNN follows im2col (worst {worst:.2e})")
        check(a != b, "the two paths really differ in rounding (else the test shows nothing)")
    else:
        check(a == b, "without oneDNN both runs take im2col")
    bogus = Run(t, w, "bogus", config(**{"train.epochs": 1}), extra_env={"DDPD_CPU_CONV": "fast"})
    check(bogus.wait() == 0, bogus.stderr)
    check(any("DDPD_CPU_CONV=fast is neither" in e.get("msg", "") for e in bogus.of_type("log")),
          "an unknown DDPD_CPU_CONV is named in a warning")


def case_bad_shape(t, w):
    m = {"type": "cnn", "cnn": {"conv": [{"channels": 4, "kernel": 5, "pool": 2}, {"channels": 4, "kernel": 5,
                                                                                   "pool": 2},
                                         {"channels": 4, "kernel": 5}]}}
    r = Run(t, w, "deep", config(m))
    check(r.wait() == 1, f"a stack that leaves no pixels fails (exit {r.proc.returncode})")
    check("/model/cnn/conv/2" in r.stderr and "does not fit" in r.stderr, f"and says which block: {r.stderr!r}")
    check(not r.rank_pids(), "before any rank starts")
    no_noise(r.stderr, "bad shape")
    r = Run(t, w, "badcfg", config({"type": "cnn", "cnn": {"conv": [{"kernel": 3}], "batch_norm_stats": "all"}}))
    check(r.wait() == 2, f"bad cnn config: exit 2 (got {r.proc.returncode})")
    for needle in ("/model/cnn/conv/0/channels: is required", "/model/cnn/batch_norm_stats"):
        check(needle in r.stderr, f"names {needle}: {r.stderr!r}")


CASES = cases_in(globals())

if __name__ == "__main__":
    e2e.main(CASES, "cnn_e2e")
