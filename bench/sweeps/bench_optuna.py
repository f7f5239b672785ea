#!/usr/bin/python3
"""ddpd's sweep against Optuna on the issue-50 search, side by side in one run: 16
trials, lr log-uniform 1e-4..1e-1, width in {64, 128, 256, 512}, ASHA / Optuna's
SuccessiveHalvingPruner (min_resource 1, reduction factor 3; ddpd's max_resource the
trial's epochs), two trials at a time, on a Fashion-MNIST subset. Both run the same
trial (fmnist_trial.py: the same code, data and seed), on the same 16 configurations:
ddpd's seeded random search draws them, and Optuna gets them with enqueue_trial in
the same order, its two workers processes sharing a journal file.

Printed: wall time (submission to the sweep's end; the study's start to its workers'
end), the time to the best (from the same start to the first epoch that reported the
best accuracy), the epochs trained by all trials (retrained ones too), trials stopped
early (stopped by ASHA; pruned), the best accuracy, and the per-trial overhead (the trial's
start, as the tool records it, to its first step's
end: ddpd's run started_at; Optuna's datetime_start), each as ddpd/Optuna.

Setup (the bench's own): bench/sweeps/setup.sh (Debian's python3-optuna).
Usage: bench/sweeps/bench_optuna.py --ddpd build/bin/ddpd --runner build/bin/ddp-run
                                    [--n-train 3000] [--n-test 1000] [--epochs 9] [--warm-start] [--json OUT]"""
import argparse, calendar, json, multiprocessing, os, shutil, statistics, sys, tempfile, time, warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "support"))  # the tests' harness
sys.path.insert(0, HERE)
from ddpd_harness import Server, wait_until  # noqa: E402
import fmnist_trial  # noqa: E402

WIDTHS = [64, 128, 256, 512]


def iso_s(text):
    whole, frac = text.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + int(frac[:3].ljust(3, "0")) / 1000


def to_best(epochs, best):
    """When the best accuracy was first reached: the earliest epoch that reported it."""
    return min((t for t, acc in epochs if acc == best), default=float("nan"))


def run_ddpd(a):
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-bench-optuna-"))
    out = os.path.join(root, "out")
    os.makedirs(os.path.join(root, "proj"))
    os.mkdir(out)
    for f in ("fmnist_trial.py", "ddpd_trial.py", "fmnist_preload.py"):
        shutil.copy(os.path.join(HERE, f), os.path.join(root, "proj", f))
    os.chmod(root, 0o755)
    os.chmod(out, 0o777)
    body = {"name": "bench-optuna", "method": "random", "seed": a.seed, "max_trials": 16, "parallel": 2,
            "base": {"command": ["/usr/bin/python3", "ddpd_trial.py"], "working_dir": "proj",
                     "distributed": {"world_size": 1},
                     "env": {"EPOCHS": str(a.epochs), "N_TRAIN": str(a.n_train), "N_TEST": str(a.n_test),
                             "BENCH_OUT": out, "FMNIST_DIR": fmnist_trial.DATA}},
            "parameters": {"env.LR": {"min": 1e-4, "max": 1e-1, "log": True}, "env.WIDTH": {"values": WIDTHS}},
            "metric": {"key": "val_acc", "goal": "maximize"},
            "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 3, "max_resource": a.epochs}}
    if a.warm_start:
        # the data too, once for the sweep, as each Optuna worker loads it once
        body["base"]["warm_start"] = {"imports": ["torch", "numpy", "gzip", "fmnist_trial", "fmnist_preload"]}
    try:
        with Server(os.path.abspath(a.ddpd), None, slots=2,
                    extra_args=["--allow-commands", "--work-root", root, "--runner", os.path.abspath(a.runner)]) as s:
            r = s.post("/sweeps", body)
            if r.status != 201:
                sys.exit(f"the sweep was refused: {r.status} {r.body[:500]!r}")
            sid = r.json()["id"]
            w = wait_until(lambda: (lambda w: w if w["status"] != "running" else None)(s.get(f"/sweeps/{sid}").json()),
                           "the sweep's end", 1800, interval=0.2)
            if not w or w["status"] != "succeeded":
                sys.exit(f"the ddpd sweep did not succeed: {w and (w['status'], w['reason'])}")
            overheads, configs = [], []
            for t in w["trials"]:
                configs.append({"lr": float(t["params"]["env.LR"]), "width": int(t["params"]["env.WIDTH"])})
                run = s.get(f"/runs/{t['run_id']}").json()
                path = os.path.join(out, f"ddpd-{t['run_id']}.json")
                if os.path.exists(path) and run.get("started_at"):
                    with open(path) as f:
                        overheads.append(json.load(f)["first_step"] - iso_s(run["started_at"]))
                if a.trials and run.get("started_at") and run.get("finished_at"):  # each trial's life, from the sweep's start
                    t0 = iso_s(w["created_at"])
                    epochs = len(s.get(f"/runs/{t['run_id']}/epochs").json()["epochs"])
                    trained = os.path.join(out, f"epochs-{t['run_id']}.txt")
                    trained = sum(1 for _ in open(trained)) if os.path.exists(trained) else 0
                    print(f"  trial {t['trial']:2}: created {iso_s(run['created_at']) - t0:6.2f}  started "
                          f"{iso_s(run['started_at']) - t0:6.2f}  ended {iso_s(run['finished_at']) - t0:6.2f}  "
                          f"{run['status']}  epochs {epochs} (trained {trained}, retrained ones too)  "
                          f"promoted from rung {t.get('promoted')}",
                          file=sys.stderr)
            epochs = []  # (when, accuracy) of every epoch every trial trained
            for name in os.listdir(out):
                if name.startswith("epochs-"):
                    with open(os.path.join(out, name)) as f:
                        epochs += [(float(t), float(acc)) for t, acc in (line.split() for line in f)]
            t0 = iso_s(w["created_at"])
            return {"wall_s": iso_s(w["finished_at"]) - t0,
                    "stopped_early": w["trial_counts"].get("stopped", 0), "best_acc": w["best"]["metric"],
                    "best_params": configs[w["best"]["trial"]], "overhead_s": overheads,
                    "epochs": len(epochs), "to_best_s": to_best(epochs, w["best"]["metric"]) - t0}, configs
    finally:
        shutil.rmtree(root, ignore_errors=True)


def optuna_worker(storage_path, a, results, epochs):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from optuna.storages import JournalFileStorage, JournalStorage
    study = optuna.load_study(study_name="bench", storage=JournalStorage(JournalFileStorage(storage_path)),
                              sampler=optuna.samplers.RandomSampler(seed=a.seed),
                              pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3))
    data = fmnist_trial.load(a.n_train, a.n_test)  # once per worker, as an Optuna user's script does

    def objective(trial):
        lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
        width = trial.suggest_categorical("width", WIDTHS)
        start = trial.datetime_start.timestamp()
        last = []

        def report(e, acc):
            epochs.append((time.time(), acc))
            last.append(acc)
            trial.report(acc, e + 1)  # the epochs trained, from 1: rungs at 1 and 3 epochs, as ddpd
            return trial.should_prune()

        first, _, pruned = fmnist_trial.train(data, lr, width, a.epochs, report)
        results.append(first - start)
        if pruned:
            raise optuna.TrialPruned()
        return last[-1]

    def enqueued_all_taken(study, trial):
        # stop once no enqueued trial waits (MaxTrialsCallback(16, states=None) counts the
        # 16 waiting ones too: it stopped both workers after their first trial)
        if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            study.stop()

    study.optimize(objective, callbacks=[enqueued_all_taken])


def run_optuna(a, configs):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from optuna.storages import JournalFileStorage, JournalStorage
    d = tempfile.mkdtemp(prefix="optuna-bench-")
    path = os.path.join(d, "journal.log")
    try:
        t0 = time.time()
        study = optuna.create_study(study_name="bench", direction="maximize",
                                    storage=JournalStorage(JournalFileStorage(path)))
        for c in configs:
            study.enqueue_trial(c)
        with multiprocessing.Manager() as m:
            overheads, epochs = m.list(), m.list()
            workers = [multiprocessing.Process(target=optuna_worker, args=(path, a, overheads, epochs)) for _ in range(2)]
            for p in workers:
                p.start()
            for p in workers:
                p.join()
            wall = time.time() - t0
            overheads, epochs = list(overheads), list(epochs)
        study = optuna.load_study(study_name="bench", storage=JournalStorage(JournalFileStorage(path)))
        done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        best = max(done, key=lambda t: t.value)
        pruned = sum(t.state == optuna.trial.TrialState.PRUNED for t in study.trials)
        if len(study.trials) != len(configs) or len(done) + pruned != len(configs):
            print(f"Optuna ran {len(study.trials)} trials, {len(done)} complete and {pruned} pruned, for "
                  f"{len(configs)} configurations", file=sys.stderr)
        return {"wall_s": wall, "stopped_early": pruned, "best_acc": best.value, "best_params": best.params,
                "overhead_s": overheads, "trials": len(study.trials), "epochs": len(epochs),
                "to_best_s": to_best(epochs, best.value) - t0}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    warnings.filterwarnings("ignore", message="JournalStorage is experimental")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ddpd", required=True)
    p.add_argument("--runner", required=True)
    p.add_argument("--n-train", type=int, default=3000)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warm-start", action="store_true",
                   help="ddpd's trials name warm_start.imports (torch, numpy, the data: fmnist_preload): forked "
                        "from the sweep's zygote")
    p.add_argument("--trials", action="store_true", help="print each ddpd trial's times (created, started, ended)")
    p.add_argument("--json")
    a = p.parse_args()
    dd, configs = run_ddpd(a)
    op = run_optuna(a, configs)
    for r in (dd, op):
        r["overhead_median_s"] = statistics.median(r["overhead_s"]) if r["overhead_s"] else float("nan")
    rows = [("wall time (s)", "wall_s", "{:.1f}"), ("time to the best (s)", "to_best_s", "{:.1f}"),
            ("epochs trained", "epochs", "{}"), ("trials stopped early", "stopped_early", "{}"),
            ("best accuracy", "best_acc", "{:.4f}"), ("trial overhead, median (s)", "overhead_median_s", "{:.3f}")]
    print(f"16 trials, {a.n_train} examples, {a.epochs} epochs, ASHA 1/3, 2 at a time; load: {os.getloadavg()}")
    print(f"{'':28} {'ddpd':>9} {'Optuna':>9} {'ddpd/Optuna':>12}")
    for label, key, fmt in rows:
        ratio = dd[key] / op[key] if op[key] else float("nan")
        print(f"{label:28} {fmt.format(dd[key]):>9} {fmt.format(op[key]):>9} {ratio:>12.2f}")
    print(f"best: ddpd {dd['best_params']}, Optuna {op['best_params']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"ddpd": dd, "optuna": op, "configs": configs}, f, indent=1)


if __name__ == "__main__":
    main()
