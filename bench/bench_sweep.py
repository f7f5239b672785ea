#!/usr/bin/env python3
"""Successive halving against the full grid, in one run: a sweep of 16 trials of the
default MLP (784-512-256-10 widened or narrowed by its first layer, Adam) over the
learning rate and the first layer's width, on a ddpd with 2 CPU slots, one trial per
slot, on Fashion-MNIST (its 60000 training examples by default; --limit for fewer):

  grid  every trial trains all its epochs;
  asha  the same 16 trials with ASHA (min_resource 1 epoch, reduction factor 3: rungs
        at 1 and 3 epochs of 9), a paused trial going on from its checkpoint.

For each: the wall time from submission to the end of the trial that is the sweep's
best, to the sweep's end, the best metric (test accuracy, maximized) and the epochs
trained in all. Each sweep runs on a fresh server, one after the other.

Usage: bench/bench_sweep.py --ddpd build/bin/ddpd --trainer build/bin/ddp-trainer
                            [--limit 60000] [--epochs 9] [--json OUT]"""
import argparse, calendar, json, os, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # the tests' harness
from ddpd_harness import Server, fmnist_config, wait_until  # noqa: E402

LRS = [0.0003, 0.001, 0.003, 0.03]
WIDTHS = [64, 128, 256, 512]


def iso_s(text):
    whole, frac = text.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + int(frac[:3].ljust(3, "0")) / 1000


def one(args, early_stopping):
    base = fmnist_config(**{"name": "bench", "data.limit": args.limit, "data.test_limit": 2000,
                            "train.epochs": args.epochs, "distributed.world_size": 1,
                            "model.hidden": [512, 256], "checkpoint.keep": 1})
    body = {"name": "asha" if early_stopping else "grid", "base": base, "parallel": 2,
            "parameters": {"train.optimizer.lr": {"values": LRS}, "model.hidden.0": {"values": WIDTHS}},
            "metric": {"key": "test_acc", "goal": "maximize"}}
    if early_stopping:
        body["early_stopping"] = early_stopping
    with Server(os.path.abspath(args.ddpd), os.path.abspath(args.trainer), slots=2) as s:
        r = s.post("/sweeps", body)
        if r.status != 201:
            sys.exit(f"the sweep was refused: {r.status} {r.body[:500]!r}")
        sid = r.json()["id"]
        submitted = iso_s(r.json()["created_at"])
        done = wait_until(lambda: (lambda w: w if w["status"] != "running" else None)(s.get(f"/sweeps/{sid}").json()),
                          "the sweep's end", 3600, interval=0.5)
        if not done or done["status"] != "succeeded":
            sys.exit(f"the sweep did not succeed: {done and (done['status'], done['reason'])}")
        best = done["best"]
        run = s.get(f"/runs/{best['run_id']}").json()
        epochs = sum(len(s.get(f"/runs/{t['run_id']}/epochs").json()["epochs"]) for t in done["trials"])
        return {"sweep": body["name"], "best_trial": best["trial"], "best_params": best["params"],
                "best_test_acc": best["metric"], "to_best_s": round(iso_s(run["finished_at"]) - submitted, 1),
                "to_end_s": round(iso_s(done["finished_at"]) - submitted, 1), "epochs_trained": epochs,
                "trials": {st: n for st, n in done["trial_counts"].items() if n}}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer", required=True)
    p.add_argument("--limit", type=int, default=60000)
    p.add_argument("--epochs", type=int, default=9)
    p.add_argument("--json")
    args = p.parse_args()
    results = [one(args, None), one(args, {"type": "asha", "min_resource": 1, "reduction_factor": 3})]
    print(f"16 trials (lr {LRS} x width {WIDTHS}), {args.limit} examples, {args.epochs} epochs, 2 slots")
    print(f"{'sweep':6} {'to best':>9} {'to end':>9} {'best test_acc':>14} {'epochs':>7}  best trial")
    for r in results:
        print(f"{r['sweep']:6} {r['to_best_s']:8.1f}s {r['to_end_s']:8.1f}s {r['best_test_acc']:14.4f} "
              f"{r['epochs_trained']:7d}  {r['best_trial']} {json.dumps(r['best_params'])} {r['trials']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
