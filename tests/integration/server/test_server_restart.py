#!/usr/bin/env python3
"""A server killed with SIGKILL mid-run and started again, with the real ddp-trainer on
Fashion-MNIST: the run lives on and the restarted server takes it back (its journal
replayed, then read on), so the API ends with exactly what the trainer journaled; a
run that ended while the server was down gets its journal's end; one whose processes
were killed meanwhile fails saying so; and the checkpoints listed are the ones on disk.

Nothing here is timed: where the run must still be alive when the server comes back,
its process group is stopped (SIGSTOP) while the server is down and continued after.

Usage: test_server_restart.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import json, os, shutil, signal, sys, tempfile

from ddpd_harness import (Server, check, cases_in, wait_until, args_for, main, fmnist_config, pids_under,  # noqa: E402
                          needs_trainer)

# These cases hold the API against the whole journal of a run once it ended: the
# journals are kept whole (a finished run's is compacted otherwise: test_server_journal_compact.py).
KEEP = ["--keep-journals"]

# 3000 examples, 2 ranks, batch 128: 12 steps an epoch; a checkpoint every epoch, the
# newest 2 kept.
EPOCHS = 6
SHORT = {"train.epochs": EPOCHS, "checkpoint.every_epochs": 1, "checkpoint.keep": 2}
LONG = {"data.limit": 0, "train.epochs": 50, "checkpoint.every_epochs": 0}  # still running when the server comes back


def journal(run_dir):
    """The journal's events, whole lines only (a writer may be in the middle of one)."""
    try:
        with open(os.path.join(run_dir, "events.jsonl"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    events = []
    for line in data[:data.rfind(b"\n") + 1].splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass  # a torn piece
    return events


def journal_steps(events):
    return sorted({e["global_step"] for e in events if e.get("type") == "step"})


def wait_api_steps(s, rid, n):
    def there():
        run = s.run(rid)
        if run and run["status"] not in ("queued", "starting", "running"):
            return run
        return run if run and (run["progress"]["global_step"] or 0) >= n else None
    return wait_until(there, f"run {rid} to pass global step {n}", 120)


def api_steps(s, rid):
    return [pt[0] for pt in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]


def check_matches_journal(s, rid, run_dir, epochs):
    """The API holds what the trainer journaled: one loss point per step, every epoch,
    and the checkpoints that are on disk."""
    events = journal(run_dir)
    steps = journal_steps(events)
    got = api_steps(s, rid)
    check(steps and got == steps, f"one loss point per journaled step: API {len(got)} ({got[:3]}...{got[-3:]}), "
                                  f"journal {len(steps)} ({steps[:3]}...{steps[-3:]})")
    if epochs is not None:
        check(steps == list(range(1, len(steps) + 1)), f"the journal has every step from 1: {len(steps)}")
        got_epochs = [e["epoch"] for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]]
        check(got_epochs == list(range(epochs)), f"every epoch: {got_epochs}")
    on_disk = sorted(os.path.join(run_dir, "checkpoints", n) for n in os.listdir(os.path.join(run_dir, "checkpoints"))
                     if n.endswith(".safetensors")) if os.path.isdir(os.path.join(run_dir, "checkpoints")) else []
    listed = sorted(s.server_path(c["path"]) for c in s.run(rid)["checkpoints"])
    check(listed == on_disk, f"the checkpoints listed are the ones on disk: {listed} vs {on_disk}")
    return steps


def run_then_kill_server(a, config, at_step=3):
    """A server on a state dir of its own runs `config` until the API has at_step
    steps, then is SIGKILLed: (state dir, run id, run dir, the run as it last said)."""
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    s1 = Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP)
    s1.start()
    rid = s1.submit(fmnist_config(**config))
    try:
        run = wait_api_steps(s1, rid, at_step)
        check(run and run["status"] == "running", f"running before the kill: {run and run['status']}")
    finally:
        s1.kill()
    return state, rid, s1.run_dir(rid), run


def case_killed_mid_run(a):
    """SIGKILL the server mid-run; the run journals on; stopped while the server is down
    (so it is surely alive when it comes back), continued once it is: it ends succeeded
    with every step, epoch and checkpoint."""
    state, rid, run_dir, before = run_then_kill_server(a, SHORT)
    pgid = before["pid"]
    stored = before["progress"]["global_step"]
    # the trainer goes on without a server: its journal gets ahead of what was stored
    wait_until(lambda: len(journal_steps(journal(run_dir))) > stored + 5, "the journal to get ahead of the store", 120)
    os.killpg(pgid, signal.SIGSTOP)
    try:
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP) as s2:
            run = s2.run(rid)
            check(run["status"] == "running", f"taken back, still running: {run['status']}: {run['reason']}")
            check(sorted(run["devices"]) == ["cpu:0", "cpu:1"], f"with its devices: {run['devices']}")
            replayed = api_steps(s2, rid)
            check(len(replayed) > stored, f"the journal was replayed at start-up: {len(replayed)} > {stored} steps")
            # the slots stay the adopted run's: a new run waits for them
            other = s2.submit(fmnist_config(**{"train.epochs": 1}))
            check(s2.run(other)["status"] == "queued", "a new run waits for the adopted run's slots")
            os.killpg(pgid, signal.SIGCONT)
            run = s2.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=240)
            if not check(run and run["status"] == "succeeded", f"it ends succeeded: {run and run['status']}: "
                                                                f"{run and run['reason']}"):
                return
            check(run["exit_code"] == 0 and run["reason"] is None, f"exit 0, no reason: {run['exit_code']} {run['reason']}")
            steps = check_matches_journal(s2, rid, run_dir, EPOCHS)
            check(run["progress"]["global_step"] == run["progress"]["total_steps"] == len(steps),
                  f"progress at the end: {run['progress']}")
            check(len(run["checkpoints"]) == 2, f"keep 2: {[c['path'] for c in run['checkpoints']]}")
            nxt = s2.wait_status(other, ("succeeded", "failed", "canceled"), timeout=240)
            check(nxt and nxt["status"] == "succeeded", f"the waiting run ran after: {nxt and nxt['status']}")
    finally:
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass
        shutil.rmtree(state, ignore_errors=True)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def case_adopted_reconnects_and_cancels(a):
    """A long run taken back after a restart: its ranks reconnect with their secret and
    are let in, its journal keeps feeding the API, and cancel stops it (SIGTERM to its
    group though it is not the server's child)."""
    state, rid, run_dir, before = run_then_kill_server(a, LONG)
    pgid = before["pid"]
    os.killpg(pgid, signal.SIGSTOP)
    try:
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP) as s2:
            check(s2.run(rid)["status"] == "running", "taken back")
            at_restart = len(journal_steps(journal(run_dir)))
            os.killpg(pgid, signal.SIGCONT)
            log = os.path.join(run_dir, "trainer.log")
            wait_until(lambda: read(log).count("reconnected to the event socket") >= 2, "both ranks to reconnect", 120)
            wait_until(lambda: (s2.run(rid)["progress"]["global_step"] or 0) > at_restart + 20,
                       "the API to follow the run on", 120)
            slog = read(s2.log_path)
            check("connection dropped" not in slog, f"its reconnections were let in: {slog[-1500:]}")
            check(s2.post(f"/runs/{rid}/cancel").status == 202, "cancel is taken")
            run = s2.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=120)
            check(run and run["status"] == "canceled", f"canceled: {run and run['status']}: {run and run['reason']}")
            check(wait_until(lambda: not pids_under(run_dir), "its processes to be gone", 60) is not None, "none is left")
            got = api_steps(s2, rid)
            check(got == journal_steps(journal(run_dir)), f"every journaled step is in the API ({len(got)})")
    finally:
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass
        shutil.rmtree(state, ignore_errors=True)


def case_finished_while_down(a):
    """The run ends while no server runs: the restarted server gives it its journal's
    end (succeeded, exit 0) and everything it journaled."""
    state, rid, run_dir, _ = run_then_kill_server(a, SHORT, at_step=1)
    wait_until(lambda: not pids_under(run_dir), "the run to end without its server", 240)
    events = journal(run_dir)
    check(events and events[-1]["type"] == "end" and events[-1]["status"] == "succeeded",
          f"the journal ends with its end: {events[-1] if events else None}")
    try:
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP) as s2:
            run = s2.run(rid)
            check(run["status"] == "succeeded", f"succeeded, as its journal says: {run['status']}: {run['reason']}")
            check(run["exit_code"] == 0 and run["reason"] is None, f"exit 0: {run['exit_code']} {run['reason']}")
            steps = check_matches_journal(s2, rid, run_dir, EPOCHS)
            check(run["progress"]["global_step"] == len(steps), f"progress at the end: {run['progress']}")
            check(len(run["checkpoints"]) == 2, f"keep 2: {[c['path'] for c in run['checkpoints']]}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def case_killed_while_down(a):
    """The run's processes are killed while no server runs, and the journal's last line
    is torn: the restarted server fails the run saying so, with everything the journal
    has whole."""
    state, rid, run_dir, before = run_then_kill_server(a, LONG)
    wait_until(lambda: len(journal_steps(journal(run_dir))) > before["progress"]["global_step"] + 5,
               "the journal to get ahead of the store", 120)
    os.killpg(before["pid"], signal.SIGKILL)
    wait_until(lambda: not pids_under(run_dir), "the run's processes to be gone", 60)
    last = journal_steps(journal(run_dir))[-1]
    with open(os.path.join(run_dir, "events.jsonl"), "ab") as f:
        # a write cut short that a later one closed with its newline, and a last one cut short
        f.write(b'{"run":"%d","rank":0,"seq":999998,"t":1,"type":"epoch","epoch":49,"train_loss":0.\n' % rid)
        f.write(b'{"run":"%d","rank":0,"seq":999999,"t":1,"type":"step","global_step":%d,"loss":0.' % (rid, last + 1))
    try:
        with Server(a.ddpd, a.trainer, slots=2, state_dir=state, extra_args=KEEP) as s2:
            run = s2.run(rid)
            want = (f"the server restarted and the run's processes were gone; its journal ends at step {last} "
                    "without an end event; failure: infra")  # its class (docs/failures.md)
            check(run["status"] == "failed" and run["reason"] == want, f"failed, saying why: {run['status']}: {run['reason']}")
            check(run["exit_code"] is None, f"no exit code (nobody saw it exit): {run['exit_code']}")
            steps = check_matches_journal(s2, rid, run_dir, None)
            check(steps[-1] == last and last + 1 not in api_steps(s2, rid), "the torn last line was not taken as a step")
            epochs = [e["epoch"] for e in s2.get(f"/runs/{rid}/epochs").json()["epochs"]]
            check(49 not in epochs, f"nor the torn line before it as an epoch: {epochs}")
            check(s2.get("/runs?status=running,starting,canceling").json()["runs"] == [], "nothing stays active")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def case_killed_right_after_submit(a):
    """SIGKILL the server right after the 201 of two submissions queued behind a run
    that holds the one slot: both are there after the restart (the row is a
    submission's durable copy: its config.json is written without a flush), each with
    its one "submitted" entry; a power cut's damage done by hand, one's config.json torn
    and the other's gone, is mended at its start from the database, as the submission
    resolved it (the stand-in trainer records the config it read), and both succeed."""
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        s1 = Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state)
        s1.start()
        try:
            holder = s1.submit({"name": "sleep"})
            s1.wait_status(holder, "running")
            torn, gone = s1.submit({"name": "record"}), s1.submit({"name": "record"})
        finally:
            s1.kill()  # right after the second 201
        written = {}
        for rid in (torn, gone):
            with open(os.path.join(s1.run_dir(rid), "config.json"), "rb") as f:
                written[rid] = f.read()
        with open(os.path.join(s1.run_dir(torn), "config.json"), "wb") as f:
            f.write(written[torn][:len(written[torn]) // 2])
        os.unlink(os.path.join(s1.run_dir(gone), "config.json"))
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state) as s2:
            for rid in (torn, gone):
                run = s2.run(rid)
                check(run and run["status"] == "queued", f"run {rid} is there after the kill, queued: "
                                                        f"{run and run['status']}")
                kinds = [e["kind"] for e in s2.get(f"/runs/{rid}/timeline").json()["entries"]]
                check(kinds.count("submitted") == 1, f"run {rid}'s timeline has its one submitted entry: {kinds}")
            check(s2.post(f"/runs/{holder}/cancel").status == 202, "the holder is canceled")
            for rid in (torn, gone):
                run = s2.wait_status(rid, ("succeeded", "failed", "canceled"))
                check(run and run["status"] == "succeeded", f"run {rid} ran from a mended config.json: "
                                                           f"{run and run['status']}: {run and run['reason']}")
                with open(os.path.join(s2.run_dir(rid), "config.json"), "rb") as f:
                    now = f.read()
                check(json.loads(now) == json.loads(written[rid]), f"run {rid}'s config.json is made again as its "
                                                                   f"submission wrote it: {now[:300]!r}")
                with open(os.path.join(s2.run_dir(rid), "fake.json")) as f:
                    read = json.load(f)["config"]
                check(read == json.loads(written[rid]), f"run {rid}'s trainer read that config: {read}")
            with open(s2.log_path, errors="replace") as f:
                log = f.read()
            check(log.count("config.json was missing or torn") == 2, "the log says each was made again")
    finally:
        shutil.rmtree(state, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    args = args_for(CASES)
    needs_trainer(args)
    main(CASES, args)
