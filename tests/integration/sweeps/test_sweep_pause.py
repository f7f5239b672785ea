#!/usr/bin/env python3
"""Command trials paused, not killed (issue 50, "true ASHA for scripts"): a real ddpd on
a loopback port, ddp-run, and a 2-rank DDP torch script (gloo) on a Fashion-MNIST
subset that asks ddpd.should_pause() at every step (the ranks agree on it with an
all-reduce), saves a snapshot (model, optimizer, where it is in the epoch) and calls
ddpd.checkpoint_saved, and goes on from that snapshot when started again.

  asha_resume      an ASHA sweep of 4 trials (eta 2, one rung at epoch 1): trial 1 is
                   below the rung when it reaches it, so it is paused there with the
                   notice (its run stopped, its launcher's log and its attempt saying
                   "stopped by sweep N's ASHA at rung 0", never canceled), snapshots,
                   and is promoted once 4 trials reached the rung; it goes on from its
                   snapshot, and its final weights' sha256 is the same as a straight
                   run's of the same configuration; trials 2 and 3 end stopped. It
                   prints how long the rung's report took to reach the script as the
                   notice (a measure, not asserted)
  sweep_pause      a command trial paused with its sweep (POST /sweeps/{id}/pause)
                   gets the notice, snapshots, and its run, attempt and log read
                   "paused by sweep N", never "canceled by SIGTERM"; the resume goes
                   on from its snapshot
  notice_ignored   a trial that listens (should_pause) but never answers steps on
                   after the sweep's pause and is killed at the grace's end (3 s): its
                   attempt says no checkpoint came; the resume starts it again
  others_trial     bob may not pause or resume alice's sweep, nor resume or cancel her
                   paused trial's run (403s, nothing changes); alice resumes it, and it
                   goes on from its snapshot as her account

Usage: test_sweep_pause.py CASE --ddpd PATH --runner PATH"""
import argparse, json, os, shutil, sys, tempfile

from ddpd_harness import Server, check, cases_in, wait_until, main, add_user, bearer, Accounts  # noqa: E402

SKIP = 77
FINAL = ("succeeded", "failed", "canceled", "stopped")

# V picks the trial's lr and the score it reports (the sweep's metric): the order ASHA
# sees is fixed, so the test knows which trial is paused, promoted and stopped; the
# weights are the training's own. IGNORE=1: it listens but never answers the notice.
SCRIPT = r'''
import gzip, hashlib, json, os, signal, time
import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
import ddpd

DATA = "/usr/share/datasets/fashion-mnist"
V = int(os.environ["V"])
LR = [0.002, 0.001, 0.0005, 0.0002][V]
SCORE = [0.9, 0.8, 0.5, 0.4][V]
IGNORE = os.environ.get("IGNORE") == "1"
EPOCHS, LIMIT, BATCH = 4, 1024, 32
run = os.environ.get("DDPD_RUN_ID", "plain")
snap = f"snapshot-{run}.pt"


def idx(path, limit, offset, shape):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, dtype=np.uint8, offset=offset)[: limit * int(np.prod(shape))].reshape(limit, *shape)


def dump(name, obj):
    with open(name + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(name + ".tmp", name)


heard = {}
signal.signal(signal.SIGUSR1, lambda s, f: heard.setdefault("t", time.time()))  # ddpd's handler calls this one after
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method="env://")
torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.tensor(idx(f"{DATA}/train-images-idx3-ubyte.gz", LIMIT, 16, (784,)), dtype=torch.float32) / 255.0
y = torch.tensor(idx(f"{DATA}/train-labels-idx1-ubyte.gz", LIMIT, 8, ()), dtype=torch.int64)
xv = torch.tensor(idx(f"{DATA}/t10k-images-idx3-ubyte.gz", 256, 16, (784,)), dtype=torch.float32) / 255.0
yv = torch.tensor(idx(f"{DATA}/t10k-labels-idx1-ubyte.gz", 256, 8, ()), dtype=torch.int64)
data = TensorDataset(x, y)
sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
model = DDP(torch.nn.Sequential(torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)))
opt = torch.optim.Adam(model.parameters(), lr=LR)
epoch0, skip, step = 0, 0, 0
if os.path.exists(snap):  # paused before: go on from its snapshot
    s = torch.load(snap)
    model.module.load_state_dict(s["model"])
    opt.load_state_dict(s["opt"])
    epoch0, skip, step = s["epoch"], s["batch"], s["step"]
    if rank == 0:
        dump(f"resumed-{run}.json", {"epoch": epoch0, "batch": skip, "step": step})
reported = None
for epoch in range(epoch0, EPOCHS):
    sampler.set_epoch(epoch)
    for b, (xb, yb) in enumerate(loader):
        if epoch == epoch0 and b < skip:
            continue
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        step += 1
        ddpd.log_step(step, loss=loss.item())
        flag = torch.tensor(int(ddpd.should_pause()))
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() and not IGNORE:
            if rank == 0:
                state = {"model": model.module.state_dict(), "opt": opt.state_dict(), "epoch": epoch,
                         "batch": b + 1, "step": step}
                torch.save(state, snap + ".tmp")
                os.replace(snap + ".tmp", snap)
                dump(f"paused-{run}.json", {"epoch": epoch, "batch": b + 1, "step": step,
                                            "reported": reported, "heard": heard.get("t")})
                ddpd.checkpoint_saved(step, snap)
            while True:
                time.sleep(1)  # stopped here (SIGTERM) once ddpd has the snapshot
        time.sleep(0.1)
    with torch.no_grad():
        acc = (model(xv).argmax(1) == yv).float().mean().item()
    ddpd.log_epoch(epoch, score=SCORE, val_acc=acc)
    if epoch == 0:
        ddpd.flush()
        reported = time.time()
if rank == 0:
    h = hashlib.sha256()
    for k, t in model.module.state_dict().items():
        h.update(k.encode())
        h.update(t.detach().numpy().tobytes())
    dump(f"weights-{run}.json", {"sha256": h.hexdigest(), "step": step})
ddpd.flush()
dist.destroy_process_group()
'''


def work_root():
    """A work root holding proj/train.py; proj writable by the runs' accounts (snapshots)."""
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-sweep-pause-"))
    proj = os.path.join(root, "proj")
    os.mkdir(proj)
    with open(os.path.join(proj, "train.py"), "w") as f:
        f.write(SCRIPT)
    os.chmod(root, 0o755)
    os.chmod(proj, 0o777)
    return root, proj


def server(a, root, grace=60, state_dir=None):
    """A server for command runs (its MASTER_PORTs leased by the harness)."""
    return Server(a.ddpd, None, slots=2, state_dir=state_dir,
                  extra_args=["--allow-commands", "--work-root", root, "--runner", a.runner,
                              "--preempt-grace", str(grace)])


# max_restarts: a start whose gloo store finds its port still held by the attempt just
# stopped (EADDRINUSE) is started again by ddp-run on another port, as a user would ask
BASE = {"command": ["/usr/bin/python3", "train.py"], "working_dir": "proj",
        "distributed": {"world_size": 2, "max_restarts": 2}}


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sweep(s, sid, headers=None):
    r = s.get(f"/sweeps/{sid}", headers=headers)
    return r.json() if r.status == 200 else None


def wait_sweep(s, sid, timeout=600):
    w = wait_until(lambda: (lambda w: w if w and w["status"] in ("succeeded", "failed", "canceled") else None)(
        sweep(s, sid)), f"sweep {sid} to end", timeout, interval=0.2)
    if not w:
        print(json.dumps(sweep(s, sid), indent=1)[:4000], file=sys.stderr)
        s.dump_log()
    return w


def log_of(s, run_id, headers=None):
    return s.get(f"/runs/{run_id}/logs", headers=headers).body.decode(errors="replace")


def launcher_lines(log, *words):
    return [x for x in log.splitlines() if any(w in x for w in words)]


def straight_run(s, proj, v, headers=None):
    """The same configuration as a plain run, never paused: its final weights' sha256."""
    r = s.post("/runs", dict(BASE, name=f"straight-{v}", env={"V": str(v)}), headers=headers)
    if not check(r.status == 201, f"the straight run is accepted: {r.status} {r.body[:300]!r}"):
        return None
    rid = r.json()["id"]
    run = s.wait_status(rid, FINAL, timeout=300)
    check(run and run["status"] == "succeeded", f"the straight run succeeds: {run and (run['status'], run['reason'])}")
    return (read_json(os.path.join(proj, f"weights-{rid}.json")) or {}).get("sha256")


def case_asha_resume(a):
    root, proj = work_root()
    try:
        with server(a, root) as s:
            body = {"name": "pz", "parallel": 1, "base": BASE,
                    "parameters": {"env.V": {"values": [0, 1, 2, 3]}},
                    "metric": {"key": "score", "goal": "maximize"},
                    "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 2, "max_resource": 2}}
            r = s.post("/sweeps", body)
            if not check(r.status == 201, f"POST /sweeps -> 201: {r.status} {r.body[:300]!r}"):
                return
            sid = r.json()["id"]
            # trial 1 is below trial 0 at the rung: paused, its run stopped after its snapshot
            got = wait_until(lambda: (lambda w: w if w and len(w["trials"]) > 1 and
                                      w["trials"][1]["status"] == "paused" else None)(sweep(s, sid)),
                             "trial 1 to be paused at rung 0", 450, interval=0.1)
            if not check(got, f"trial 1 is paused at its rung: {sweep(s, sid)}"):
                s.dump_log()
                return
            t1 = got["trials"][1]
            check(f"stopped by sweep {sid}'s ASHA at rung 0" in (t1["reason"] or "") and "paused" in t1["reason"],
                  f"its reason says the sweep's ASHA paused it at rung 0: {t1['reason']}")
            run1 = t1["run_id"]
            stopped = s.wait_status(run1, ("stopped", "succeeded", "failed", "canceled", "queued", "running"),
                                    timeout=120)
            paused = wait_until(lambda: read_json(os.path.join(proj, f"paused-{run1}.json")),
                                "trial 1's script to snapshot at the notice", 120, interval=0.1)
            check(paused and paused["epoch"] >= 1 and paused["step"] > 16,
                  f"its script heard the notice past the rung (epoch 0's 16 steps a rank) and saved a snapshot "
                  f"there: {paused}")
            if paused and paused.get("heard") and paused.get("reported"):
                print(f"measured: trial 1's rung report (epoch 0, flushed) to the notice at its rank 0: "
                      f"{(paused['heard'] - paused['reported']) * 1000:.0f} ms")
            w = wait_sweep(s, sid)
            if not check(w and w["status"] == "succeeded", f"the sweep succeeds: {w and (w['status'], w['reason'])}"):
                return
            t = w["trials"]
            check([x["status"] for x in t] == ["succeeded", "succeeded", "stopped", "stopped"],
                  f"trial 0 ran through, trial 1 was promoted and ran to its end, 2 and 3 ended stopped: "
                  f"{[(x['status'], x['reason']) for x in t]}")
            for x in t[2:]:
                check(f"stopped by sweep {sid}'s ASHA at rung 0" in (x["reason"] or ""),
                      f"trial {x['trial']} reads stopped by the sweep's ASHA at rung 0: {x['reason']}")
            resumed = read_json(os.path.join(proj, f"resumed-{run1}.json"))
            check(resumed and paused and resumed["step"] == paused["step"] and resumed["batch"] == paused["batch"],
                  f"its second start went on from its snapshot: {resumed} (paused at {paused})")
            run = s.run(run1)
            atts = run.get("attempts") or []
            first = next((x for x in atts if x["status"] == "stopped"), {})
            check(run["status"] == "succeeded" and len(atts) >= 2 and
                  f"stopped by sweep {sid}'s ASHA at rung 0" in (first.get("reason") or "") and
                  "SIGTERM once ddpd had their checkpoint" in (first.get("reason") or "") and
                  "canceled" not in json.dumps(atts),
                  f"its run succeeded; its first attempt reads stopped by the sweep's ASHA after the notice, "
                  f"never canceled: {run['status']} {atts}")
            log = log_of(s, run1)
            check(launcher_lines(log, f"received SIGUSR1: stopped by sweep {sid}'s ASHA at rung 0") and
                  launcher_lines(log, f"run stopped: stopped by sweep {sid}'s ASHA at rung 0") and
                  "canceled by SIG" not in log and "preempted" not in log,
                  f"its launcher's log says the sweep's ASHA stopped it with the notice: "
                  f"{launcher_lines(log, 'SIGUSR1', 'SIGTERM', 'run stopped', 'canceled')}")
            mine = (read_json(os.path.join(proj, f"weights-{run1}.json")) or {}).get("sha256")
            straight = straight_run(s, proj, 1)
            check(mine and straight and mine == straight,
                  f"the paused and resumed trial's final weights are a straight run's: {mine} vs {straight}")
            if mine and straight and mine == straight and paused:
                print(f"sha256 of the final weights, paused at step {paused['step']} and resumed: {mine} "
                      f"(the straight run's: {straight})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def paused_sweep(s, proj, sid, what, headers=None):
    """Waits for the sweep's trial 0 to have stepped a little, pauses the sweep: the trial."""
    got = wait_until(lambda: (lambda w: w if w and w["trials"] and w["trials"][0]["run_id"] and
                              s.get(f"/runs/{w['trials'][0]['run_id']}/metrics?key=loss",
                                    headers=headers).json().get("count", 0) >= 3 else None)(sweep(s, sid, headers)),
                     f"{what}: trial 0 to step", 450, interval=0.1)
    if not check(got, f"{what}: trial 0 steps"):
        s.dump_log()
        return None
    r = s.post(f"/sweeps/{sid}/pause", headers=headers)
    check(r.status == 202 and r.json()["status"] == "paused", f"{what}: POST pause -> 202: {r.status} {r.body[:300]!r}")
    return got["trials"][0]


def case_sweep_pause(a):
    root, proj = work_root()
    try:
        with server(a, root) as s:
            body = {"name": "sp", "parallel": 1, "base": BASE, "parameters": {"env.V": {"values": [1]}},
                    "metric": {"key": "score", "goal": "maximize"}}
            sid = s.post("/sweeps", body).json()["id"]
            t0 = paused_sweep(s, proj, sid, "sweep_pause")
            if not t0:
                return
            rid = t0["run_id"]
            run = s.wait_status(rid, ("stopped", "succeeded", "failed", "canceled"), timeout=120)
            check(run and run["status"] == "stopped" and f"paused by sweep {sid}" in (run["reason"] or ""),
                  f"its run stops, paused by the sweep: {run and (run['status'], run['reason'])}")
            paused = read_json(os.path.join(proj, f"paused-{rid}.json"))
            check(paused and paused["step"] >= 3, f"its script saved a snapshot at the notice: {paused}")
            atts = (run or {}).get("attempts") or []
            check(atts and atts[-1]["status"] == "stopped" and f"paused by sweep {sid}" in (atts[-1]["reason"] or "")
                  and "canceled" not in json.dumps(atts), f"its attempt reads paused by the sweep: {atts}")
            log = wait_until(lambda: (lambda b: b if "run stopped:" in b else None)(log_of(s, rid)),
                             "its launcher to log its end", 60, interval=0.1) or log_of(s, rid)
            check(launcher_lines(log, f"received SIGUSR1: paused by sweep {sid}") and
                  launcher_lines(log, f"run stopped: paused by sweep {sid}") and "canceled by SIG" not in log,
                  f"its launcher's log reads paused by sweep {sid}, never canceled by SIGTERM: "
                  f"{launcher_lines(log, 'SIGUSR1', 'SIGTERM', 'run stopped', 'canceled')}")
            r = s.post(f"/sweeps/{sid}/resume")
            check(r.status == 202, f"POST resume -> 202: {r.status} {r.body[:300]!r}")
            w = wait_sweep(s, sid)
            check(w and w["status"] == "succeeded", f"the resumed sweep succeeds: {w and (w['status'], w['reason'])} "
                  f"{w and [(t['status'], t['reason']) for t in w['trials']]} {s.run(rid)['attempts']}")
            resumed = read_json(os.path.join(proj, f"resumed-{rid}.json"))
            check(resumed and paused and resumed["step"] == paused["step"],
                  f"the trial went on from its snapshot: {resumed} (paused at {paused})")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def case_notice_ignored(a):
    root, proj = work_root()
    try:
        with server(a, root, grace=3) as s:
            body = {"name": "ni", "parallel": 1, "base": dict(BASE, env={"IGNORE": "1"}),
                    "parameters": {"env.V": {"values": [1]}}, "metric": {"key": "score", "goal": "maximize"}}
            sid = s.post("/sweeps", body).json()["id"]
            t0 = paused_sweep(s, proj, sid, "notice_ignored")
            if not t0:
                return
            rid = t0["run_id"]
            run = s.wait_status(rid, ("stopped", "succeeded", "failed", "canceled"), timeout=120)
            atts = (run or {}).get("attempts") or []
            check(run and run["status"] == "stopped" and atts and
                  "no checkpoint came by the grace's end" in (atts[-1]["reason"] or ""),
                  f"the trial that never answers is stopped at the grace's end, saying so: "
                  f"{run and (run['status'], run['reason'])} {atts}")
            log = log_of(s, rid)
            check([x for x in launcher_lines(log, f"received SIGUSR1: paused by sweep {sid}")
                   if "the notice (SIGUSR1) to 2 ranks" in x],
                  f"its ranks got the notice: {launcher_lines(log, 'SIGUSR1', 'SIGKILL')}")
            check(not os.path.exists(os.path.join(proj, f"paused-{rid}.json")), "it saved no snapshot")
            r = s.post(f"/sweeps/{sid}/resume")
            check(r.status == 202, f"POST resume -> 202: {r.status} {r.body[:300]!r}")
            w = wait_sweep(s, sid)
            check(w and w["status"] == "succeeded" and not os.path.exists(os.path.join(proj, f"resumed-{rid}.json")),
                  f"resumed, it starts again from the beginning (no snapshot) and succeeds: "
                  f"{w and (w['status'], w['reason'], [(t['status'], t['reason']) for t in w['trials']])} "
                  f"{s.run(rid)['attempts']}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def case_others_trial(a):
    if os.geteuid() != 0:
        print(f"{a.case}: skipped: it makes Unix accounts and starts the server as root; run it as root (CI does)")
        sys.exit(SKIP)
    root, proj = work_root()
    state = tempfile.mkdtemp(prefix="ddpd-sweep-pause-state-")
    try:
        with Accounts("alice", "bob") as acc:
            alice = add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
            bob = add_user(a.ddpd, state, "bob", "--unix-user", acc["bob"])
            with server(a, root, state_dir=state) as s:
                s.read_headers = bearer(alice)
                body = {"name": "ot", "parallel": 1, "base": BASE, "parameters": {"env.V": {"values": [1]}},
                        "metric": {"key": "score", "goal": "maximize"}}
                r = s.post("/sweeps", body, headers=bearer(alice))
                if not check(r.status == 201, f"alice's sweep: {r.status} {r.body[:300]!r}"):
                    return
                sid = r.json()["id"]
                r = s.post(f"/sweeps/{sid}/pause", headers=bearer(bob))
                check(r.status == 403 and "alice" in r.json().get("detail", ""),
                      f"bob may not pause alice's sweep: {r.status} {r.body[:300]!r}")
                t0 = paused_sweep(s, proj, sid, "others_trial", headers=bearer(alice))
                if not t0:
                    return
                rid = t0["run_id"]
                run = s.wait_status(rid, ("stopped", "succeeded", "failed", "canceled"), timeout=120)
                check(run and run["status"] == "stopped", f"alice's trial is paused: {run and run['status']}")
                paused = read_json(os.path.join(proj, f"paused-{rid}.json"))
                for path, what in ((f"/sweeps/{sid}/resume", "resume alice's sweep"),
                                   (f"/runs/{rid}/resume", "resume alice's paused trial's run")):
                    r = s.post(path, headers=bearer(bob))
                    check(r.status == 403, f"bob may not {what}: {r.status} {r.body[:300]!r}")
                r = s.request("DELETE", f"/runs/{rid}", headers=bearer(bob))
                check(r.status in (403, 404), f"bob may not cancel alice's paused trial's run: {r.status} {r.body[:300]!r}")
                w = sweep(s, sid, bearer(alice))
                check(w["status"] == "paused" and w["trials"][0]["status"] == "running" and
                      s.run(rid)["status"] == "stopped",
                      f"nothing changed: {w['status']} {w['trials'][0]['status']} {s.run(rid)['status']}")
                r = s.post(f"/sweeps/{sid}/resume", headers=bearer(alice))
                check(r.status == 202, f"alice resumes her sweep: {r.status} {r.body[:300]!r}")
                w = wait_until(lambda: (lambda w: w if w and w["status"] in ("succeeded", "failed", "canceled")
                                        else None)(sweep(s, sid, bearer(alice))), "alice's sweep to end", 300,
                               interval=0.2)
                check(w and w["status"] == "succeeded", f"her sweep succeeds: {w and (w['status'], w['reason'])}")
                resumed = read_json(os.path.join(proj, f"resumed-{rid}.json"))
                check(resumed and paused and resumed["step"] == paused["step"],
                      f"her trial went on from its snapshot: {resumed} (paused at {paused})")
                snap = os.path.join(proj, f"snapshot-{rid}.pt")
                check(os.path.exists(snap) and os.stat(snap).st_uid == acc.uid("alice"),
                      f"its snapshot is her account's: {os.path.exists(snap) and os.stat(snap).st_uid}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--runner", required=True)
    main(CASES, p.parse_args())
