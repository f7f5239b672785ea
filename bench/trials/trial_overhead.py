#!/usr/bin/python3
"""Where a command trial's start goes: N command runs of a 2-rank PyTorch script
(overhead_probe.py: gloo, a DDP model), one after another, as a Unix account of their
own (root: `ddpd user add --unix-user`; with --warm-start, the trials of one grid
sweep, one at a time, whose base names warm_start.imports), each rank writing the time of each phase. For
each phase, the median over runs of its time from the one before:

  queued      the run's created_at to its started_at (the scheduler's decision)
  launcher    started_at to ddp-run's hello (fork, cgroup, account switch, exec)
  rank fork   the hello to the rank's process start (ddp-run's setup, the fork)
  python      the process start to the script's first line (the interpreter)
  torch       `import torch`;   ddpd   `import torch.distributed, ddpd`
  data        the script's data;   rendezvous   gloo's init_process_group
  first step  a DDP step (forward, backward, allreduce)

and the total: started_at to the first step's end (bench/sweeps' "trial overhead",
less the data); "submitted": the run's created_at to it (a warm trial that waits for
its sweep's zygote is started once it is there: that wait is in "queued"). Rank 0's times; the load average is printed beside them.

Usage: bench/trials/trial_overhead.py --ddpd build/bin/ddpd --runner build/bin/ddp-run [--runs 5]
                                      [--warm-start]"""
import argparse, calendar, json, os, pwd, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "support"))  # the tests' harness
from ddpd_harness import Server, Accounts, add_user, bearer, wait_until  # noqa: E402

PHASES = ["queued", "launcher", "rank fork", "python", "torch", "ddpd", "data", "rendezvous", "first step"]


def iso_s(text):
    whole, frac = text.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + int(frac[:3].ljust(3, "0")) / 1000


def journal_times(run_dir):
    """The launcher's hello and rank 0's `started` (ms since the epoch) from the run's journal."""
    hello = started = None
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("rank") == -1 and e.get("type") == "hello" and hello is None:
                hello = e["t"] / 1000
            if e.get("type") == "rank_state" and e.get("state") == "started" and e.get("of") == 0:
                started = e["t"] / 1000
    return hello, started


def base_config(out, a):
    cfg = {"command": ["/usr/bin/python3", "overhead_probe.py"], "working_dir": "proj",
           "distributed": {"world_size": 2}, "env": {"PROBE_OUT": out}}
    if a.warm_start:
        cfg["warm_start"] = {"imports": ["torch", "torch.distributed", "ddpd"]}
    return cfg


def warm_sweep(s, token, out, a):
    """The runs of a sweep (a warm start is a sweep's): a grid of a.runs trials, one at a time."""
    body = {"name": "overhead", "method": "grid", "parallel": 1, "base": base_config(out, a),
            "parameters": {"env.PROBE_TRIAL": {"values": [str(i) for i in range(a.runs)]}},
            "metric": {"key": "loss", "goal": "minimize"}}
    r = s.post("/sweeps", body, headers=bearer(token))
    if r.status != 201:
        sys.exit(f"the sweep was refused: {r.status} {r.body[:400]!r}")
    sid = r.json()["id"]
    wait_until(lambda: s.get(f"/sweeps/{sid}", headers=bearer(token)).json()["status"]
               in ("succeeded", "failed", "canceled"), f"sweep {sid} to end", 900, interval=0.2)
    w = s.get(f"/sweeps/{sid}", headers=bearer(token)).json()
    return [t["run_id"] for t in w["trials"]], iso_s(w["created_at"])


def one_run(s, token, root, out, a, rid=None):
    if rid is None:
        r = s.post("/runs", base_config(out, a), headers=bearer(token))
        if r.status != 201:
            sys.exit(f"the run was refused: {r.status} {r.body[:400]!r}")
        rid = r.json()["id"]
    run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=300)
    if not run or run["status"] != "succeeded":
        print(s.dump_run_log(rid))
        sys.exit(f"run {rid} did not succeed: {run and (run['status'], run.get('reason'))}")
    with open(os.path.join(out, f"probe-{rid}-0.json")) as f:
        t = json.load(f)
    hello, started = journal_times(s.run_dir(rid))
    marks = [iso_s(run["created_at"]), iso_s(run["started_at"]), hello, t["process"], t["script"], t["torch"],
             t["ddpd"], t["data"], t["rendezvous"], t["first_step"]]
    phases = {p: marks[i + 1] - marks[i] for i, p in enumerate(PHASES)}
    phases["rank fork"] = t["process"] - hello  # the fork's time is to a clock tick (10 ms)
    phases["total"] = t["first_step"] - iso_s(run["started_at"])
    phases["submitted"] = t["first_step"] - iso_s(run["created_at"])  # a start that waits for its zygote: in queued
    phases["_created"], phases["_finished"], phases["_first_step"] = (iso_s(run["created_at"]), iso_s(run["finished_at"]),
                                                                      t["first_step"])
    return phases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ddpd", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warm-start", action="store_true", help="the runs name warm_start.imports")
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run it as root: the runs run as a Unix account of their own")
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-bench-trials-"))
    out, state = os.path.join(root, "out"), os.path.join(root, "state")
    for d in ("proj", "out", "state"):
        os.mkdir(os.path.join(root, d))
    shutil.copy(os.path.join(HERE, "overhead_probe.py"), os.path.join(root, "proj"))
    os.chmod(root, 0o755)
    os.chmod(out, 0o777)
    rows = []
    try:
        with Accounts("bench") as acc:
            token = add_user(os.path.abspath(a.ddpd), state, "bench", "--unix-user", acc["bench"])
            with Server(os.path.abspath(a.ddpd), None, slots=2, state_dir=state,
                        extra_args=["--allow-commands", "--work-root", root, "--runner",
                                    os.path.abspath(a.runner)]) as s:
                s.read_headers = bearer(token)
                if a.warm_start:
                    rids, sweep_created = warm_sweep(s, token, out, a)
                    rows = [one_run(s, token, root, out, a, rid) for rid in rids]
                else:
                    rows = [one_run(s, token, root, out, a) for _ in range(a.runs)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"{a.runs} runs of 2 ranks, {'warm start' if a.warm_start else 'cold'}; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'phase':<12} {'median (s)':>10} {'min':>8} {'max':>8}")
    for p in PHASES + ["total", "submitted"]:
        v = [r[p] for r in rows]
        print(f"{p:<12} {statistics.median(v):>10.3f} {min(v):>8.3f} {max(v):>8.3f}")
    print("total of each run, in order: " + " ".join(f"{r['total']:.3f}" for r in rows))
    print("submission to first step, in order: " + " ".join(f"{r['submitted']:.3f}" for r in rows))
    if a.warm_start and len(rows) > 1:
        print(f"warm start: the first trial {rows[0]['total']:.3f} s; the later ones' median "
              f"{statistics.median(r['total'] for r in rows[1:]):.3f} s")
        # what the sweep itself adds: its submission to its first trial's run and first step,
        # and between trials (one at a time) a run's end to the next one's run
        gaps = [b["_created"] - p["_finished"] for p, b in zip(rows, rows[1:])]
        print(f"sweep submitted to the first trial's run {rows[0]['_created'] - sweep_created:.3f} s, to its first "
              f"step {rows[0]['_first_step'] - sweep_created:.3f} s; a trial's end to the next trial's run: median "
              f"{statistics.median(gaps):.3f} s (" + " ".join(f"{g:.3f}" for g in gaps) + ")")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": rows, "load": load, "warm_start": a.warm_start}, f, indent=1)


if __name__ == "__main__":
    main()
