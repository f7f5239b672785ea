#!/usr/bin/env python3
"""A run's event connections break while the server stays up, with the real ddp-trainer
on Fashion-MNIST: its processes journal on, reconnect, and the server catches up from
the journal what the broken connections lost, so the API ends with exactly what the
trainer journaled (one loss point per step), nothing stored twice.

The connections are broken for real, from outside both processes: the test takes a
copy of the server's end of each connection (pidfd_getfd, Linux 5.6; the test is the
server's parent, so it may) and shuts it down, as a crash of the reading side would.
Nothing here is timed: the run's process group is stopped (SIGSTOP) while its
connections are broken, so it is surely mid-run, and continued after.

Usage: test_server_reconnect.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import ctypes, os, signal, socket, sqlite3, sys

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, fmnist_config, needs_trainer  # noqa: E402
from test_server_restart import journal, journal_steps, api_steps, wait_api_steps  # noqa: E402

EPOCHS = 6
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438
libc = ctypes.CDLL(None, use_errno=True)


def connection_inodes(sock_path):
    """The socket inodes of the connections accepted on the Unix socket at sock_path
    (the listening one is unconnected: state 01)."""
    inodes = set()
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            cols = line.split()
            if len(cols) >= 8 and cols[7] == sock_path and cols[5] == "03":
                inodes.add(int(cols[6]))
    return inodes


def break_connections(server_pid, sock_path):
    """Shuts down the server's end of every connection on its event socket; how many."""
    inodes = connection_inodes(sock_path)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, server_pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    broken = 0
    try:
        fd_dir = f"/proc/{server_pid}/fd"
        for name in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, name))
            except OSError:
                continue
            if not (target.startswith("socket:[") and int(target[8:-1]) in inodes):
                continue
            mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if mine < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"pidfd_getfd of the server's fd {name}: {os.strerror(err)} (it needs Linux 5.6 "
                                   "and the right to ptrace ddpd: kernel.yama.ptrace_scope 0 or 1, the test its parent)")
            s = socket.socket(fileno=mine)
            s.shutdown(socket.SHUT_RDWR)  # the connection itself, for both ends
            s.close()
            broken += 1
    finally:
        os.close(pidfd)
    return broken


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def case_dropped_connections_catch_up(a):
    """Every connection of a running run is broken; its ranks and launcher reconnect and
    the server takes from the journal what each journaled meanwhile: the run ends
    succeeded with one loss point per journaled step and every epoch, nothing twice."""
    with Server(a.ddpd, a.trainer, slots=2, extra_args=["--keep-journals"]) as s:  # (its journal read at the end)
        rid = s.submit(fmnist_config(**{"train.epochs": EPOCHS}))
        run = wait_api_steps(s, rid, 3)
        if not check(run and run["status"] == "running", f"running: {run and run['status']}"):
            return
        pgid = run["pid"]
        run_dir = s.run_dir(rid)
        sock_path = os.path.join(s.state_dir, "events.sock")
        os.killpg(pgid, signal.SIGSTOP)
        try:
            broken = break_connections(s.proc.pid, sock_path)
            # the launcher and its 2 ranks each hold one
            check(broken == 3, f"the run's 3 connections were broken: {broken}")
            wait_until(lambda: not connection_inodes(sock_path), "the server to close the broken connections", 30)
        finally:
            os.killpg(pgid, signal.SIGCONT)
        run = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=240)
        if not check(run and run["status"] == "succeeded", f"it ends succeeded: {run and run['status']}: "
                                                            f"{run and run['reason']}"):
            s.dump_log()
            return
        log = read(os.path.join(run_dir, "trainer.log"))
        check("lost the event socket" in log and "reconnected to the event socket" in log,
              f"its processes lost the socket and reconnected: {log[-2000:]!r}")
        check("reconnected to the event socket:" in read(s.log_path) and "journaled meanwhile were taken from its journal"
              in read(s.log_path), "the server says it took what a reconnected process journaled meanwhile")
        steps = journal_steps(journal(run_dir))
        got = api_steps(s, rid)
        check(steps == list(range(1, len(steps) + 1)), f"the journal has every step from 1: {len(steps)}")
        check(got == steps, f"one loss point per journaled step: API {len(got)} ({got[:3]}...{got[-3:]}), "
                            f"journal {len(steps)}")
        epochs = [e["epoch"] for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]]
        check(epochs == list(range(EPOCHS)), f"every epoch: {epochs}")
        check(run["progress"]["global_step"] == run["progress"]["total_steps"] == len(steps),
              f"progress at the end: {run['progress']}")
        # nothing stored twice: one durable epoch event per epoch in the run's history
        # (the feed's events table, in the server's real database)
        db = sqlite3.connect(f"file:{os.path.join(s.state_dir, 'ddpd.db')}?mode=ro", uri=True)
        try:
            n = db.execute("SELECT count(*) FROM events WHERE run_id = ? AND type = 'epoch'", (rid,)).fetchone()[0]
            twice = db.execute("SELECT type, data, count(*) FROM events WHERE run_id = ? GROUP BY type, data"
                               " HAVING count(*) > 1", (rid,)).fetchall()
        finally:
            db.close()
        check(n == EPOCHS, f"one epoch event per epoch in the feed's history: {n}")
        check(not twice, f"no event of the feed's history is there twice: {twice}")

CASES = cases_in(globals())

if __name__ == "__main__":
    args = args_for(CASES)
    needs_trainer(args)
    main(CASES, args)
