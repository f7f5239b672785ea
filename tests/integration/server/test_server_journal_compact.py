#!/usr/bin/env python3
"""A finished run's journal compacted once the database holds its events
(server/store/journal_compact.c), with a real server, real runs and the real SQLite
file:

  compacts_finished     a run of 2000 steps ends: its journal keeps every line but the
                        steps the database holds (hello, epochs, end ..., and the last
                        line of steps), stays the account's and 0600, and the database
                        keeps every step once
  crash_before_swap     the server SIGKILLs itself after reading the journal, before
                        the rewrite; started again, it compacts it: no step lost, none
                        doubled, every other line of the journal still there
  crash_after_swap      ... after the rewrite, before its row is deleted: the restart
                        compacts it again, which changes nothing
  keeps_unsent_steps    steps the journal has and the database never took are kept
  keep_journals         --keep-journals: the journal stays whole
  rebuild_after_compaction  the database lost: --rebuild-from-runs gives the run back
                        from its compacted journal (status, epochs, last step)
  planted_link          bob's command run leaves a link to alice's live journal in place
                        of its own: the server refuses it, saying so, and alice's journal
                        is not changed (its bytes, owner, mode)

Usage: test_server_journal_compact.py CASE --ddpd PATH --fake-trainer PATH --runner PATH"""
import json, os, shutil, signal, sqlite3, tempfile

from ddpd_harness import Server, Accounts, check, cases_in, wait_until, args_for, main  # noqa: E402
from test_server_wall import needs_root, command  # noqa: E402
from test_server_wall_files import Wall, ALICE_STEPS  # noqa: E402

STEPS = 2000
FINAL = ("succeeded", "failed", "canceled", "stopped")
# a command run that reports STEPS steps (1 ms apart: the store's newest event of the
# rank is a single one) and two epochs, through the real reporter into its journal
REPORTS = ("import time, ddpd\nfor g in range(1, %d + 1):\n    ddpd.log_step(g, loss=1.0 / g)\n    time.sleep(0.001)\n"
           "    if g %% 1000 == 0:\n        ddpd.log_epoch(g // 1000 - 1, train_loss=1.0 / g)\nddpd.flush()\n" % STEPS)


def server(a, **kw):
    extra = ["--allow-commands", "--runner", a.runner] + kw.pop("extra_args", [])
    return Server(a.ddpd, a.fake_trainer, extra_args=extra, **kw)


def submit(s):
    return s.submit(command(REPORTS))


def lines(path):
    with open(path, "rb") as f:
        return [ln for ln in f.read().split(b"\n") if ln.strip()]


def types(path):
    out = []
    for ln in lines(path):
        try:
            doc = json.loads(ln)
        except ValueError:
            out.append("?")
            continue
        for ev in doc if isinstance(doc, list) else [doc]:
            out.append(ev.get("type"))
    return out


def db_rows(state, sql, *params):
    con = sqlite3.connect(f"file:{os.path.join(state, 'ddpd.db')}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def pending(state):
    return [r[0] for r in db_rows(state, "SELECT run_id FROM journal_compact")]


def steps_stored(state, rid):
    n, distinct = db_rows(state, "SELECT count(*), count(DISTINCT global_step) FROM steps WHERE run_id = ?", rid)[0]
    return n, distinct


def journal_path(state, rid):
    return os.path.join(state, "runs", str(rid), "events.jsonl")


def is_step(e):
    """A step or heartbeat: the reporter's are metric events with a global_step."""
    return isinstance(e, dict) and (e.get("type") in ("step", "heartbeat") or
                                    (e.get("type") == "metric" and "global_step" in e))


def bulk_line(ln):
    """A line of steps and heartbeats only: what compaction may drop."""
    try:
        doc = json.loads(ln)
    except ValueError:
        return False
    evs = doc if isinstance(doc, list) else [doc]
    return bool(evs) and all(is_step(e) for e in evs)


def step_count(path):
    n = 0
    for ln in lines(path):
        try:
            doc = json.loads(ln)
        except ValueError:
            continue
        n += sum(1 for e in (doc if isinstance(doc, list) else [doc]) if is_step(e))
    return n


def wait_compacted(state, rid, timeout=60):
    # the last line of steps of each rank stays (where its journal ends): at most 50 steps here
    return wait_until(lambda: rid not in pending(state) and step_count(journal_path(state, rid)) <= 50,
                      f"run {rid}'s journal compacted", timeout)


def subsequence(small, big):
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def check_compacted(state, rid, before_lines=None):
    """The database holds every step once; the journal keeps every other line, and the
    last line of steps, whose last step is the run's last."""
    n, distinct = steps_stored(state, rid)
    check(n == distinct == STEPS, f"the database holds each of the {STEPS} steps once: {n} rows, {distinct} steps")
    path = journal_path(state, rid)
    t = types(path)
    left = step_count(path)
    check(0 < left <= 50, f"the last lines of steps are left in the journal, no more: {left} steps")
    for kind in ("hello", "attempt", "end"):
        check(kind in t, f"the journal keeps its {kind}: {sorted(set(t))}")
    epochs = [json.loads(ln).get("epoch") for ln in lines(path) if json.loads(ln).get("type") == "metric"
              and "epoch" in json.loads(ln)]
    check(epochs == [0, 1], f"the journal keeps the epochs: {epochs}")
    after = lines(path)
    last = [e.get("global_step") for ln in after if bulk_line(ln) for e in
            (json.loads(ln) if isinstance(json.loads(ln), list) else [json.loads(ln)]) if is_step(e)]
    check(last and max(last) == STEPS, f"the kept steps end at the run's last step: {last[-3:]}")
    if before_lines is not None:
        kept = [ln for ln in before_lines if not bulk_line(ln)]
        check([ln for ln in after if not bulk_line(ln)] == kept,
              f"every line but the steps and heartbeats is kept, in order: {len(after)} lines, {len(kept)} expected")
        check(subsequence(after, before_lines), "nothing in the compacted journal that the journal did not hold")
        check(len(after) < len(before_lines), f"lines dropped: {len(before_lines)} -> {len(after)}")
    st = os.stat(path)
    check(st.st_mode & 0o777 == 0o600, f"the journal stays 0600: {oct(st.st_mode & 0o777)}")
    check(st.st_uid == os.stat(os.path.dirname(path)).st_uid, "the journal stays the run directory's account's")
    leftovers = [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".events.jsonl.tmp")]
    check(not leftovers, f"no rewrite left behind: {leftovers}")


def case_compacts_finished(a):
    with server(a) as s:
        rid = submit(s)
        r = s.wait_status(rid, FINAL)
        check(r and r["status"] == "succeeded", f"the run succeeded: {r and r['status']}")
        if not check(wait_compacted(s.state_dir, rid), "the finished run's journal is compacted"):
            s.dump_log()
            return
        check_compacted(s.state_dir, rid)
        with open(s.log_path, errors="replace") as f:
            check("its journal compacted" in f.read(), "the log says the journal was compacted")
        run = s.run(rid)
        check(run["progress"]["global_step"] == STEPS, f"the API still says {STEPS} steps: {run['progress']}")


def crash_case(a, point):
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        s = server(a, state_dir=state, env={"DDPD_TEST_CRASH_AT": point})
        s.start()
        rid = submit(s)
        # the server kills itself at the point, once the run is finished and its journal read
        died = wait_until(lambda: s.proc.poll() is not None, f"the server to die at {point}", 120)
        check(died and s.proc.returncode == -signal.SIGKILL, f"killed at {point}: {s.proc.returncode}")
        s.log.close()
        with open(s.log_path, errors="replace") as f:
            check(f"DDPD_TEST_CRASH_AT={point}" in f.read(), "it died at that point")
        check(rid in pending(state), "the run's row is still there after the crash")
        t = types(journal_path(state, rid))
        whole = point == "journal-before-swap"
        n = step_count(journal_path(state, rid))
        check((n == STEPS) == whole, f"the journal is {'whole' if whole else 'compacted'} after the crash: {n} steps")
        before = lines(journal_path(state, rid)) if whole else None
        with server(a, state_dir=state) as s2:
            check(wait_compacted(state, rid), "the restart compacts it")
            r = s2.run(rid)
            check(r["status"] == "succeeded", f"the run stays succeeded: {r['status']}")
            check_compacted(state, rid, before)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def case_crash_before_swap(a):
    crash_case(a, "journal-before-swap")


def case_crash_after_swap(a):
    crash_case(a, "journal-after-swap")


# steps journaled but never sent (the socket lost them): only the journal has them
UNSENT = ("import json, os, time, ddpd\nfor g in range(1, 101):\n    ddpd.log_step(g, loss=1.0 / g)\nddpd.flush()\n"
          "time.sleep(0.05)\nt = int(time.time() * 1000) + 1000\n"
          "with open(os.environ.get('DDPD_EVENTS_JOURNAL') or 'events.jsonl', 'a') as j:\n"
          "    for g in range(101, 111):\n"
          "        j.write(json.dumps({'run': os.environ['DDPD_RUN_ID'], 'rank': 0, 'seq': 100000 + g, 't': t + g,"
          " 'type': 'metric', 'global_step': g, 'values': {'loss': 1.0 / g}}) + '\\n')\n")


def case_keeps_unsent_steps(a):
    """Steps the journal holds and the database never took stay in the journal."""
    with server(a) as s:
        rid = s.submit(command(UNSENT))
        r = s.wait_status(rid, FINAL)
        check(r and r["status"] == "succeeded", f"the run succeeded: {r and r['status']}")
        path = journal_path(s.state_dir, rid)
        check(wait_until(lambda: rid not in pending(s.state_dir), "the run's row done", 60), "compaction ran")
        n, _ = steps_stored(s.state_dir, rid)
        check(n == 100, f"the database took the 100 steps sent: {n}")
        kept = sorted(e["global_step"] for ln in lines(path) for e in [json.loads(ln)] if is_step(e))
        check([g for g in kept if g > 100] == list(range(101, 111)), f"the 10 unsent steps are kept: {kept}")
        check(len(kept) < 50, f"the sent steps are dropped: {len(kept)} steps left")


def case_keep_journals(a):
    with server(a, extra_args=["--keep-journals"]) as s:
        rid = submit(s)
        r = s.wait_status(rid, FINAL)
        check(r and r["status"] == "succeeded", f"the run succeeded: {r and r['status']}")
        s.get("/runs")  # a round trip: the compactor (were it on) was woken by the end long before
        n = step_count(journal_path(s.state_dir, rid))
        check(n == STEPS, f"the journal keeps its steps: {n}")
        check(rid in pending(s.state_dir), "the run waits in journal_compact for a server that compacts")


def case_rebuild_after_compaction(a):
    """The database lost: the rebuild from the compacted journal gives the run back with
    its status, its epochs and its last step."""
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        with server(a, state_dir=state) as s:
            rid = submit(s)
            r = s.wait_status(rid, FINAL)
            check(r and r["status"] == "succeeded", f"the run succeeded: {r and r['status']}")
            check(wait_compacted(state, rid), "its journal is compacted")
        for f in ("ddpd.db", "ddpd.db-wal", "ddpd.db-shm"):
            if os.path.exists(os.path.join(state, f)):
                os.unlink(os.path.join(state, f))
        with server(a, state_dir=state, extra_args=["--rebuild-from-runs"]) as s:
            r = s.run(rid)
            check(r["status"] == "succeeded", f"rebuilt succeeded: {r['status']}: {r['reason']}")
            check(r["progress"]["global_step"] == STEPS, f"rebuilt at its last step: {r['progress']}")
            ep = [e["epoch"] for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]]
            check(ep == [0, 1], f"rebuilt with its epochs: {ep}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


# bob's run reports steps, then leaves a link to alice's journal in place of its own
LINK_TO = ("import os, sys, ddpd\nfor g in range(1, 201):\n    ddpd.log_step(g, loss=1.0 / g)\nddpd.flush()\n"
           "j = os.environ.get('DDPD_EVENTS_JOURNAL') or 'events.jsonl'\nos.unlink(j)\nos.symlink(sys.argv[1], j)\n")


def case_planted_link(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        w = Wall(a, acc, slots=3)
        try:
            with w.server() as s:
                alice = w.submit("alice", command(ALICE_STEPS))
                wait_until(lambda: ((w.run(alice) or {}).get("progress") or {}).get("global_step"), "alice's steps")
                target = journal_path(w.state, alice)
                bob = w.submit("bob", command(LINK_TO, target))
                r = w.wait(bob)
                check(r and r["status"] == "succeeded", f"bob's run ended: {r and r['status']}: {r and r['reason']}")
                check(os.path.islink(journal_path(w.state, bob)), "bob left a link in place of his journal")
                said = wait_until(lambda: "left as it is" in open(s.log_path, errors="replace").read(),
                                  "the server to say it left bob's journal", 60)
                check(said, "the log says bob's journal is left as it is")
                check(wait_until(lambda: bob not in pending(w.state), "bob's row done", 60), "bob's row is done")
                # never read through the link: no copy of alice's journal in bob's directory
                check(os.path.islink(journal_path(w.state, bob)), "bob's journal is still his link, not rewritten")
                hers = lines(target)[0]
                bob_dir = os.path.dirname(journal_path(w.state, bob))
                for name in os.listdir(bob_dir):
                    p = os.path.join(bob_dir, name)
                    if os.path.isfile(p) and not os.path.islink(p):
                        with open(p, "rb") as f:
                            check(hers not in f.read(), f"bob's {name} holds nothing of alice's journal")
                st = os.lstat(target)
                check(st.st_uid == acc.uid("alice") and st.st_mode & 0o777 == 0o600,
                      f"alice's journal stays hers, 0600: uid {st.st_uid}, {oct(st.st_mode & 0o777)}")
                check(step_count(target) > 1, "alice's live journal keeps its steps")
                with open(os.path.join(s.run_dir(alice), "release"), "w"):
                    pass
                w.wait(alice)
        finally:
            w.close()


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES, required=("--runner",)))
