#!/usr/bin/env python3
"""What another local process can get at, against a real ddpd on a loopback port with
real trainers:
  state_dir_private        a state dir that was 0755 is tightened with a warning; after
                           a real ddp-trainer run (checkpoints, journal, logs) and a
                           command run reporting through `import ddpd`, every
                           directory in it is 0700 and every file the user's only
                           (the database with its -wal and -shm among them), and no
                           file holds a run's secret, while serving and after
  connection_bound_to_run  a connection that said hello with the run's secret is
                           closed when the run ends; afterwards the secret opens none,
                           and events for the finished, then deleted, run add no row
  data_swapped_while_queued  a queued run's data directory swapped for a symlink out
                           of its data root fails the run at open time, naming the
                           file and the data root, with nothing of the outside file

The secrets are taken where only this test puts them: the trainer is started through
a wrapper that copies DDPD_RUN_SECRET to a folder outside the state dir before it
hands over to ddp-trainer (which blanks it in its own environment); the command run's
script does the same.

Usage: test_server_secrets.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH] [--runner PATH]"""
import argparse, json, os, shutil, socket, sqlite3, stat, sys, tempfile, time

from ddpd_harness import Server, check, cases_in, wait_until, main, fmnist_config, DATA_ROOT  # noqa: E402

FMNIST = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
          "t10k-labels-idx1-ubyte.gz")


def walk_state(state_dir, secrets, what):
    """Every directory 0700, every file without group or other bits, no file but the
    database (0600) holding a secret. Returns the paths seen (relative)."""
    seen, loose, holding = [], [], []
    for dirpath, dirnames, filenames in os.walk(state_dir):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, state_dir)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                continue
            seen.append(rel)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode) and mode != 0o700 or not stat.S_ISDIR(st.st_mode) and mode & 0o077:
                loose.append(f"{rel} {mode:04o}")
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
                # the database keeps each active run's secret (a restarted server lets its
                # processes reconnect with it), behind its 0600 mode checked above; no
                # other file (journal, config, logs, checkpoints) holds one
                if not os.path.basename(rel).startswith("ddpd.db"):
                    holding += [rel for sec in secrets if sec.encode() in data]
    root_mode = stat.S_IMODE(os.stat(state_dir).st_mode)
    check(root_mode == 0o700, f"{what}: the state dir is 0700: {root_mode:04o}")
    check(not loose, f"{what}: every directory is 0700 and every file the server's user's only: loose: {loose}")
    check(not holding, f"{what}: no file holds a run's secret: {holding}")
    return seen


def secret_wrapper(work, trainer):
    """A trainer that leaves its run's secret in `work` (outside the state dir), then
    is ddp-trainer."""
    path = os.path.join(work, "trainer-wrapper.sh")
    with open(path, "w") as f:
        f.write('#!/bin/sh\nprintf %%s "$DDPD_RUN_SECRET" > "%s/secret-$DDPD_RUN_ID"\nexec "%s" "$@"\n' % (work, trainer))
    os.chmod(path, 0o755)
    return path


def case_state_dir_private(a):
    if not check(a.trainer, "needs --trainer (ddp-trainer)"):
        return
    work = tempfile.mkdtemp(prefix="ddpd-secrets-")
    state = os.path.join(work, "state")
    os.mkdir(state)
    os.chmod(state, 0o755)
    notes = os.path.join(state, "notes.txt")
    with open(notes, "w") as f:
        f.write("left by an operator\n")
    os.chmod(notes, 0o644)
    extra = ["--allow-commands", "--runner", a.runner] if a.runner else []
    with Server(a.ddpd, secret_wrapper(work, a.trainer), state_dir=state, extra_args=extra) as s:
        with open(s.log_path) as f:
            log = f.read()
        check("was mode 0755" in log and "it is now 0700" in log,
              f"the looser state dir is named in a warning, and tightened: {log[-800:]!r}")
        check("1 file(s) and directories in it were readable by others" in log,
              f"the loose file in it is counted in a warning: {log[-800:]!r}")
        check(stat.S_IMODE(os.stat(notes).st_mode) == 0o600, "the operator's file in it is now 0600")

        rid = s.submit(fmnist_config(**{"name": "private", "data.limit": 2000, "train.epochs": 2}))
        ids = [rid]
        if a.runner:
            script = ("import os, ddpd\n"
                      "with open(os.path.join(%r, 'secret-cmd-' + os.environ['RANK']), 'w') as f:\n"
                      "    f.write(os.environ['DDPD_RUN_SECRET'])\n"
                      "for g in range(1, 6):\n"
                      "    ddpd.log_step(g, loss=1.0 / g)\n"
                      "ddpd.log_epoch(0, train_loss=0.5)\n"
                      "print('rank', os.environ['RANK'], 'done', flush=True)\n" % work)
            ids.append(s.submit({"name": "reports", "command": ["/usr/bin/python3", "-c", script],
                                 "distributed": {"world_size": 2}}))
        for i in ids:
            run = s.wait_status(i, "succeeded", timeout=240)
            check(run is not None, f"run {i} succeeded")
        secrets = []
        for name in os.listdir(work):
            if name.startswith("secret-"):
                with open(os.path.join(work, name)) as f:
                    secrets.append(f.read())
        check(len(secrets) == 1 + 2 * bool(a.runner) and all(len(x) >= 32 for x in secrets),
              f"the runs' secrets were taken outside the state dir: {len(secrets)} of them")
        run = s.run(rid)
        check(run and len(run["checkpoints"]) == 2, f"the trainer wrote its checkpoints: {run and run['checkpoints']}")
        seen = walk_state(state, secrets, "while serving")
        for want in ("ddpd.db", "ddpd.db-wal", "ddpd.db-shm", "events.sock", f"runs/{rid}/events.jsonl",
                     f"runs/{rid}/trainer.log", f"runs/{rid}/config.json", f"runs/{rid}/checkpoints"):
            check(want in seen, f"{want} is among the files walked")
        if a.runner:
            check(f"runs/{ids[1]}/ranks/rank-1.log" in seen, f"the command run's rank logs were walked: {seen}")
        with open(os.path.join(state, "runs", str(rid), "events.jsonl")) as f:
            hellos = [json.loads(line) for line in f if '"hello"' in line]
        check(hellos and all(h.get("secret") is None for h in hellos),
              f"the journal's hellos carry \"secret\": null: {len(hellos)}")
    walk_state(state, secrets, "after the server stopped")
    shutil.rmtree(work, ignore_errors=True)


# ---- the event socket ----

def hello_line(run, rank, secret):
    return json.dumps({"run": str(run), "rank": rank, "seq": 0, "t": int(time.time() * 1000), "type": "hello",
                       "pid": os.getpid(), "host": "intruder", "device": "cpu", "world_size": 1, "secret": secret})


def events_line(run, rank, g):
    t = int(time.time() * 1000)
    base = {"run": str(run), "rank": rank, "t": t}
    return json.dumps([
        dict(base, seq=1, type="status", state="forged", detail="from a connection that outlived its run"),
        dict(base, seq=2, type="step", epoch=0, step=g, global_step=g, loss=42.0, lr=0.1, samples_per_s=1.0),
        dict(base, seq=3, type="epoch", epoch=7, lr=0.1, train_loss=42.0, test_loss=42.0, test_acc=0.0,
             seconds=1.0, samples_per_s=1.0),
        dict(base, seq=4, type="checkpoint", epoch=7, global_step=g, path="/tmp/forged.safetensors", bytes=1),
        dict(base, seq=5, type="heartbeat", global_step=g, step_ms=1.0),
    ])


def closed_by_server(sock, timeout=30):
    """Waits until the server closes `sock` (end of stream, or a reset)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def rows_of(state_dir, rid):
    db = sqlite3.connect(f"file:{os.path.join(state_dir, 'ddpd.db')}?mode=ro", uri=True)
    try:
        rows = {t: db.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", (rid,)).fetchone()[0]
                for t in ("ranks", "steps", "series", "epochs", "checkpoints")}
        rows["events"] = [t for (t,) in db.execute("SELECT type FROM events WHERE run_id = ? ORDER BY id", (rid,))]
        return rows
    finally:
        db.close()


def try_forged(path, rid, secret):
    """A new connection with the run's secret: its hello and events; True when the
    server closed it."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    try:
        c.sendall((hello_line(rid, 6, secret) + "\n" + events_line(rid, 6, 900) + "\n").encode())
    except OSError:
        pass  # closed already
    closed = closed_by_server(c)
    c.close()
    return closed


def case_connection_bound_to_run(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        rid = s.submit({"name": "hold", "distributed": {"world_size": 1}})
        s.wait_status(rid, "running", timeout=60)
        hold_path = os.path.join(s.run_dir(rid), "hold.json")
        wait_until(lambda: os.path.exists(hold_path), "the fake trainer's hold.json")
        with open(hold_path) as f:
            hold = json.load(f)
        mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mine.connect(hold["events"])
        mine.sendall((hello_line(rid, 5, hold["secret"]) + "\n" + events_line(rid, 5, 1) + "\n").encode())
        ranks = wait_until(lambda: [r for r in s.get(f"/runs/{rid}/ranks").json()["ranks"] if r["rank"] == 5],
                           "the connection's hello and status to be stored")
        check(ranks and ranks[0]["state"] == "forged", f"while the run is live the secret opens a connection: {ranks}")
        dropped = s.get("/healthz").json()["ingest"]["dropped_connections"]

        r = s.post(f"/runs/{rid}/cancel")
        check(r.status in (200, 202), f"cancel: {r.status} {r.body[:200]!r}")
        s.wait_status(rid, "canceled", timeout=60)
        check(closed_by_server(mine), "the connection is closed by the server once the run has ended")
        mine.close()
        with open(s.log_path) as f:
            log = f.read()
        check(f"run {rid} has ended: closed its 1 remaining connection" in log, f"and the log says so: {log[-600:]!r}")
        before = rows_of(s.state_dir, rid)
        check(before["steps"] == 1 and before["epochs"] == 1, f"what it sent while live is kept: {before}")

        check(try_forged(hold["events"], rid, hold["secret"]), "after the end the secret opens no connection")
        after = rows_of(s.state_dir, rid)
        check(after == before, f"and its events add no row to the finished run: {after} (before {before})")
        health = s.get("/healthz").json()["ingest"]
        check(health["dropped_connections"] == dropped + 1, f"the refused hello is counted as dropped: {health}")

        r = s.request("DELETE", f"/runs/{rid}")
        check(r.status in (200, 204), f"delete: {r.status} {r.body[:200]!r}")
        check(try_forged(hold["events"], rid, hold["secret"]), "after the delete the secret opens no connection")
        gone = rows_of(s.state_dir, rid)
        check(not any(n for t, n in gone.items() if t != "events") and gone["events"] == ["deleted"],
              f"and nothing of the deleted run is recreated (its feed keeps only the deletion): {gone}")
        check(s.get(f"/runs/{rid}").status == 404, "the deleted run stays deleted")


# ---- paths at open time ----

def case_data_swapped_while_queued(a):
    if not check(a.trainer, "needs --trainer (ddp-trainer)"):
        return
    work = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-swap-"))
    root, outside = os.path.join(work, "root"), os.path.join(work, "outside")
    os.makedirs(os.path.join(root, "fm"))
    os.makedirs(outside)
    for name in FMNIST:
        shutil.copy(os.path.join(DATA_ROOT, "fashion-mnist", name), os.path.join(root, "fm", name))
        with open(os.path.join(outside, name), "w") as f:
            f.write("OUTSIDE-THE-ROOT " * 64)  # what a trainer that followed the link would quote
    with Server(a.ddpd, a.trainer, slots=2, extra_args=["--data-root", root]) as s:
        blocker = s.submit(fmnist_config(**{"name": "blocker", "data.limit": 0, "train.epochs": 50,
                                            "checkpoint.every_epochs": 0}))
        s.wait_status(blocker, "running", timeout=120)
        cfg = fmnist_config(**{"name": "swapped", "distributed.world_size": 1,
                               "data.train.images": "fm/" + FMNIST[0], "data.train.labels": "fm/" + FMNIST[1],
                               "data.test.images": "fm/" + FMNIST[2], "data.test.labels": "fm/" + FMNIST[3]})
        rid = s.submit(cfg)
        run = s.run(rid)
        check(run and run["status"] == "queued", f"the run waits behind the one holding both slots: {run and run['status']}")
        # checked at submission; now swapped for a symlink out of the root
        os.rename(os.path.join(root, "fm"), os.path.join(work, "fm-moved"))
        os.symlink(outside, os.path.join(root, "fm"))
        check(s.post(f"/runs/{blocker}/cancel").status in (200, 202), "the blocker is canceled")
        run = s.wait_status(rid, ("failed", "succeeded"), timeout=120)
        reason = (run or {}).get("reason") or ""
        check(run and run["status"] == "failed", f"the swapped run fails: {run and run['status']}")
        check(f"fm/{FMNIST[0]}: leads out of its data root" in reason or f"fm/{FMNIST[2]}: leads out of its data root"
              in reason, f"the reason names the file and its data root: {reason!r}")
        check("OUTSIDE" not in reason, f"nothing of the outside file is in it: {reason!r}")
        check(root not in reason and outside not in reason, f"nor a server path: {reason!r}")
        m = s.get(f"/runs/{rid}/metrics?key=loss").json()
        check(not m["points"], f"nothing was trained from outside the root: {m['points'][:3]}")
    shutil.rmtree(work, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--fake-trainer", required=True)
    p.add_argument("--trainer")
    p.add_argument("--runner")
    main(CASES, p.parse_args())
