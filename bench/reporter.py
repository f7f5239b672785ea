#!/usr/bin/env python3
"""The reporter's cost to a training loop (issue targets: ddpd.log_step at most 2 µs
a call on the caller's thread, median; 1M calls slow a loop by at most 1%).

Runs the `ddpd` module (reporter/python) as a command run's rank would, against a
Unix socket that this script drains on a thread of its own (the server's ingest
stand-in: what happens to the lines past the socket is the server's benchmark), with
a journal in a temporary directory. Side by side in one run:
  - log_step alone: median and p99 of batches of 1000 calls, per call;
  - a loop whose step is a fixed arithmetic kernel (about 15 µs, and about 1 ms, the
    scale of a small model's step), run without, then with, one log_step per step:
    the slowdown in %. The reporter's sender thread formats and sends under the GIL,
    so its share shows here, not in the per-call figure.
Usage: bench/reporter.py [--calls N] [--steps N]. Report the load (it prints it)."""
import argparse, os, socket, statistics, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))


def drain(sock):
    while True:
        try:
            c, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=lambda: [None for _ in iter(lambda: c.recv(1 << 20), b"")], daemon=True).start()


def work(x, n):
    for _ in range(n):
        x = (x * 1.0000001 + 0.5) % 1000.0
    return x


def loop(steps, inner, report, start):
    x, step = 1.0, start
    t0 = time.perf_counter()
    for _ in range(steps):
        x = work(x, inner)
        if report is not None:
            step += 1
            report(step, loss=x, lr=1e-3)
    return time.perf_counter() - t0, step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1_000_000, help="log_step calls timed alone")
    ap.add_argument("--steps", type=int, default=20_000, help="steps of each loop")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ddpd-bench-reporter-")
    path = os.path.join(d, "events.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    threading.Thread(target=drain, args=(srv,), daemon=True).start()
    os.environ.update(DDPD_EVENTS_SOCKET=path, DDPD_EVENTS_JOURNAL=os.path.join(d, "events.jsonl"), DDPD_RUN_ID="1",
                      DDPD_RUN_SECRET="s" * 64, RANK="0", WORLD_SIZE="1")
    sys.path.insert(0, os.path.join(HERE, "..", "reporter", "python"))
    import ddpd
    assert ddpd.enabled(), "the reporter is not active"

    per_call = []
    step = 0
    for _ in range(max(1, a.calls // 1000)):
        t0 = time.perf_counter_ns()
        for _ in range(1000):
            step += 1
            ddpd.log_step(step, loss=0.25, lr=1e-3)
        per_call.append((time.perf_counter_ns() - t0) / 1000)
    per_call.sort()
    med, p99 = statistics.median(per_call), per_call[int(0.99 * (len(per_call) - 1))]

    ddpd.flush()
    print(f"log_step on the caller's thread: median {med / 1000:.2f} us/call, p99 {p99 / 1000:.2f} us "
          f"(batches of 1000, {len(per_call)} batches)")
    for inner in (200, 14000):
        plain, _ = loop(a.steps, inner, None, 0)
        reporting, step = loop(a.steps, inner, ddpd.log_step, step)
        ddpd.flush()
        print(f"a loop of {a.steps:,} steps of {plain / a.steps * 1e6:,.0f} us: {plain:.2f} s plain, {reporting:.2f} s "
              f"with a log_step each: {100 * (reporting - plain) / plain:+.2f}%")
    print(f"points dropped: {ddpd.dropped()}")
    print(f"load: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
