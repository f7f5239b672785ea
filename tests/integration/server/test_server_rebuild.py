#!/usr/bin/env python3
"""ddpd serve --rebuild-from-runs, with the real ddp-trainer on Fashion-MNIST: a real
server makes a history (a run that succeeded, one that failed when a rank was killed,
one canceled), then its database is lost (missing), emptied (0 bytes) or overwritten
with garbage. serve refuses and offers the rebuild; with --rebuild-from-runs the damaged
file is moved aside (never deleted), and the history rebuilt from the run directories
answers as the server did before: GET /runs and each run's status, exit code, progress,
loss points (one per step), epochs and checkpoints. A run whose journal lost its `end`
is failed, saying it was rebuilt without one.

Usage: test_server_rebuild.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import glob, json, os, shutil, signal, subprocess, sys, tempfile

from ddpd_harness import (Server, check, cases_in, wait_until, args_for, main, fmnist_config, needs_trainer,  # noqa: E402
                          pids_under, DATA_ROOT)

# The rebuild is held against every step of the journals: they are kept whole (a
# finished run's is compacted otherwise, and a rebuild gets its last step only:
# test_server_journal_compact.py).
KEEP = ["--keep-journals"]

SHORT = {"train.epochs": 3, "checkpoint.every_epochs": 1, "checkpoint.keep": 2}
LONG = {"data.limit": 0, "train.epochs": 50, "checkpoint.every_epochs": 0}
FINAL = ("succeeded", "failed", "canceled")
RUN_FIELDS = ("id", "name", "status", "exit_code", "world_size", "device_kind", "kind")
PROGRESS_FIELDS = ("global_step", "total_steps", "epoch", "epochs", "step", "loss")


def wait_steps(s, rid, n):
    return wait_until(lambda: (s.run(rid)["progress"]["global_step"] or 0) >= n and s.run(rid), f"run {rid} at step {n}",
                      120)


def make_history(a, state):
    """Three runs on a real server: succeeded, failed (a rank SIGKILLed), canceled."""
    with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP) as s:
        ok = s.submit(fmnist_config(**SHORT))
        check(s.wait_status(ok, FINAL, timeout=240)["status"] == "succeeded", "the first run succeeds")
        bad = s.submit(fmnist_config(**LONG))
        run = wait_steps(s, bad, 3)
        ranks = [p for p in pids_under(s.run_dir(bad)) if p != run["pid"]]
        check(ranks, f"the failing run has rank processes: {ranks}")
        os.kill(ranks[0], signal.SIGKILL)
        check(s.wait_status(bad, FINAL, timeout=240)["status"] == "failed", "a killed rank fails the second run")
        stop = s.submit(fmnist_config(**LONG))
        wait_steps(s, stop, 3)
        check(s.post(f"/runs/{stop}/cancel").status in (200, 202), "the third run is canceled")
        check(s.wait_status(stop, FINAL, timeout=240)["status"] == "canceled", "the third run ends canceled")
        return [ok, bad, stop], answers(s, [ok, bad, stop])


def answers(s, ids):
    """What the API says of the runs: the list, and per run its fields, progress,
    loss points, epochs and checkpoints."""
    listed = [{k: r[k] for k in ("id", "name", "status")} for r in s.get("/runs").json()["runs"]]
    per_run = {}
    for rid in ids:
        run = s.run(rid)
        per_run[rid] = {
            "run": {k: run.get(k) for k in RUN_FIELDS},
            "progress": {k: run["progress"].get(k) for k in PROGRESS_FIELDS},
            "loss": s.get(f"/runs/{rid}/metrics?key=loss").json()["points"],
            "epochs": s.get(f"/runs/{rid}/epochs").json()["epochs"],
            # the state dir's own path aside (the rebuilt copies lie elsewhere)
            "checkpoints": json.loads(json.dumps(s.get(f"/runs/{rid}/checkpoints").json()).replace(s.state_dir, "STATE")),
            "reason": run["reason"],
        }
    return {"runs": sorted(listed, key=lambda r: r["id"]), "per_run": per_run}


def serve_once(a, state, *extra):
    """`ddpd serve` on state: (exit status, stderr). One that starts is stopped."""
    p = subprocess.Popen([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--data-root", DATA_ROOT,
                          "--trainer", a.trainer, "--gpus", "none", "--slots", "2", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
    if b"listening on" in p.stdout.readline():
        p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    return p.returncode, err.decode(errors="replace")


def rebuilt_matches(a, state, before, ids, how, damage):
    """state's database damaged by `damage`: refused with the offer, then rebuilt with
    --rebuild-from-runs, the damaged file moved aside: the API answers as before."""
    db = os.path.join(state, "ddpd.db")
    for extra in ("-wal", "-shm"):
        if os.path.exists(db + extra):
            os.unlink(db + extra)
    damage(db)
    damaged = open(db, "rb").read() if os.path.exists(db) else None
    rc, err = serve_once(a, state)
    check(rc not in (0, None) and "--rebuild-from-runs" in err,
          f"{how}: serve refuses and offers --rebuild-from-runs: {rc} {err.strip()!r}")
    with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP + ["--rebuild-from-runs"]) as s:
        log = open(s.log_path, errors="replace").read()
        aside = glob.glob(db + ".damaged-*")
        if damaged is None:
            check(aside == [], f"{how}: nothing to move aside: {aside}")
        else:
            check(len(aside) == 1 and open(aside[0], "rb").read() == damaged,
                  f"{how}: the damaged database is moved aside, as it was: {aside}")
            check(aside and f"was moved aside to {aside[0]}" in log, f"{how}: the log says where it went")
        check("the history of 3 runs rebuilt" in log and "1 succeeded, 1 failed, 1 canceled" in log,
              f"{how}: the log counts what was rebuilt: {log[-1500:]!r}")
        after = answers(s, ids)
        check(after["runs"] == before["runs"], f"{how}: GET /runs as before: {after['runs']} vs {before['runs']}")
        for rid in ids:
            b, g = before["per_run"][rid], after["per_run"][rid]
            for part in ("run", "progress", "epochs", "checkpoints"):
                check(g[part] == b[part], f"{how}: run {rid}'s {part} as before: {g[part]} vs {b[part]}")
            steps = [pt[0] for pt in g["loss"]]
            check(g["loss"] == b["loss"] and steps == list(range(1, len(steps) + 1)),
                  f"{how}: run {rid}: the same loss points, one per step: {len(g['loss'])} vs {len(b['loss'])}")
            # a cancel's reason is the server's words ("canceled by request"); the journal
            # has the trainer's ("canceled by TERM")
            same = g["reason"] == b["reason"] or (b["run"]["status"] == "canceled" and
                                                  (g["reason"] or "").startswith("canceled"))
            check(same, f"{how}: run {rid}'s reason as before: {g['reason']!r} vs {b['reason']!r}")
        # new runs come after the rebuilt ones
        nxt = s.submit(fmnist_config(**{"train.epochs": 1}))
        check(nxt == max(ids) + 1, f"{how}: a new run gets the next id: {nxt}")
        check(s.wait_status(nxt, FINAL, timeout=240)["status"] == "succeeded", f"{how}: and runs")


def with_history(a, body):
    base = tempfile.mkdtemp(prefix="ddpd-test-rebuild-")
    try:
        state = os.path.join(base, "made")
        os.makedirs(state, mode=0o700)
        ids, before = make_history(a, state)
        body(base, state, ids, before)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def case_rebuilt_from_runs(a):
    """The same history rebuilt three times: the database missing, 0 bytes, garbage."""
    def body(base, state, ids, before):
        for how, damage in (("missing", os.unlink), ("zero-bytes", lambda db: open(db, "wb").close()),
                            ("garbage", lambda db: open(db, "wb").write(b"this is not a database\n" * 500))):
            copy = os.path.join(base, how)
            shutil.copytree(state, copy)
            rebuilt_matches(a, copy, before, ids, how, damage)
    with_history(a, body)


def case_rebuilt_without_end(a):
    """A journal that lost its `end` (cut before it): the run is rebuilt failed, saying
    so and where its journal ends; a sound database is not replaced."""
    def body(base, state, ids, before):
        rc, err = serve_once(a, state, "--rebuild-from-runs")
        check(rc not in (0, None) and "nothing to rebuild" in err,
              f"a sound database with its history is not rebuilt: {rc} {err.strip()!r}")
        ok = ids[0]
        journal = os.path.join(state, "runs", str(ok), "events.jsonl")
        lines = open(journal, "rb").read().splitlines(keepends=True)
        kept = [ln for ln in lines if json.loads(ln).get("type") != "end"]
        check(len(kept) == len(lines) - 1, "the journal had one end")
        open(journal, "wb").write(b"".join(kept))
        last = max(e["global_step"] for e in map(json.loads, kept) if e.get("type") == "step")
        os.unlink(os.path.join(state, "ddpd.db"))
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP + ["--rebuild-from-runs"]) as s:
            run = s.run(ok)
            want = f"rebuilt from its run directory without an end event: its journal ends at step {last}"
            check(run["status"] == "failed" and run["reason"] == want, f"failed, saying why: {run['status']} "
                                                                        f"{run['reason']!r}")
            check(s.get(f"/runs/{ok}/metrics?key=loss").json()["points"] == before["per_run"][ok]["loss"],
                  "with its loss points all the same")
            check(s.run(ids[2])["status"] == "canceled", "the others as they were")
    with_history(a, body)


def case_rebuilt_while_running(a):
    """The server is SIGKILLed mid-run and its database lost: the rebuild cannot take
    the run's processes back (their secret was in the database), so they are killed
    and the run is failed, saying so and where its journal ends."""
    base = tempfile.mkdtemp(prefix="ddpd-test-rebuild-")
    try:
        state = os.path.join(base, "state")
        os.makedirs(state, mode=0o700)
        s1 = Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP)
        s1.start()
        rid = s1.submit(fmnist_config(**LONG))
        run_dir = s1.run_dir(rid)
        try:
            wait_steps(s1, rid, 3)
        finally:
            s1.kill()
        check(pids_under(run_dir), "the run trains on without its server")
        os.unlink(os.path.join(state, "ddpd.db"))
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP + ["--rebuild-from-runs"]) as s:
            wait_until(lambda: not pids_under(run_dir), "what ran of the run to be gone", 30)
            run = s.run(rid)
            steps = [e["global_step"] for e in journal_events(run_dir) if e.get("type") == "step"]
            want = (f"rebuilt from its run directory without an end event: its journal ends at step {max(steps)}; "
                    "what still ran of it was killed")
            check(run["status"] == "failed" and (run["reason"] or "").startswith(want),
                  f"failed, saying why: {run['status']} {run['reason']!r}")
            got = [pt[0] for pt in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
            check(got == sorted(set(steps)) and got == list(range(1, len(got) + 1)),
                  f"one loss point per journaled step: {len(got)} vs {len(set(steps))}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def journal_events(run_dir):
    """The journal's whole lines that parse (its writers were killed mid-line, perhaps)."""
    data = open(os.path.join(run_dir, "events.jsonl"), "rb").read()
    events = []
    for line in data[:data.rfind(b"\n") + 1].splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


CASES = cases_in(globals())

if __name__ == "__main__":
    args = args_for(CASES)
    needs_trainer(args)
    main(CASES, args)
