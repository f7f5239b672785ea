#!/usr/bin/env python3
"""Bytes on disk of a small history, the database and the runs' journals, with the
journals kept whole (--keep-journals: what every ddpd before the compaction kept) and
compacted (the default: server/store/journal_compact.c), in one run of the same build.

Each history is built through the product: --runs command runs, one after the other,
each a Python script that reports --steps steps (loss, lr and a series of its own)
and an epoch every 1,000 steps through the real reporter (reporter/python/ddpd), as a
user's training script does, so its journal is the one ddp-run and the reporter
write. Then the server waits until no run is left to compact, stops, and the bytes
are counted: ddpd.db with its WAL, and every runs/ID/events.jsonl.

Usage: bench_journal_bytes.py [--build DIR] [--runs R] [--steps N]"""
import argparse, os, shutil, sqlite3, subprocess, sys, time

from bench_server import Server, db_bytes

SCRIPT = ("import ddpd\nfor g in range(1, {n} + 1):\n    ddpd.log_step(g, loss=1.0 / g, lr=0.1, acc=g / {n})\n"
          "    if g % 1000 == 0:\n        ddpd.log_epoch(g // 1000 - 1, train_loss=1.0 / g)\nddpd.flush()\n")


def journals(state):
    runs = os.path.join(state, "runs")
    total = 0
    for d in os.listdir(runs):
        p = os.path.join(runs, d, "events.jsonl")
        if os.path.isfile(p):
            total += os.path.getsize(p)
    return total


def pending(state):
    con = sqlite3.connect(f"file:{os.path.join(state, 'ddpd.db')}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM journal_compact").fetchone()[0]
    finally:
        con.close()


def history(a, keep):
    extra = ["--allow-commands", "--runner", os.path.join(a.build, "bin", "ddp-run"),
             "--max-points-per-run", "2000000000"]
    if os.geteuid() == 0:
        extra.append("--unsafe-commands-as-server")
    if keep:
        extra.append("--keep-journals")
    s = Server(os.path.join(a.build, "bin", "ddpd"), "/bin/false", slots=1, extra=extra)
    t0 = time.time()
    cfg = {"name": "bytes", "command": [sys.executable, "-c", SCRIPT.format(n=a.steps)],
           "distributed": {"world_size": 1}}
    for _ in range(a.runs):
        rid = s.submit(cfg)
        s.wait(rid, lambda r: r["status"] in ("succeeded", "failed", "canceled"), timeout=3600, interval=0.1)
        status = s.run(rid)["status"]
        if status != "succeeded":
            sys.exit(f"run {rid} {status}: see {s.dir}/runs/{rid}/trainer.log")
    if not keep:
        deadline = time.time() + 600
        while pending(s.dir) and time.time() < deadline:
            time.sleep(0.2)
    took = time.time() - t0
    left = pending(s.dir)
    s.close(keep=True)
    out = db_bytes(s.dir), journals(s.dir), left, took
    shutil.rmtree(s.dir, ignore_errors=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--steps", type=int, default=20000, help="steps per run")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    points = a.runs * a.steps * 3
    print(f"{a.runs} command runs of {a.steps:,} steps ({points:,} points), same build")
    print(f"{'journals':10s} {'database':>12s} {'journals':>12s} {'in all':>12s} {'B/point':>8s} {'to compact':>10s}")
    for keep in (True, False):
        db, jr, left, took = history(a, keep)
        print(f"{'kept whole' if keep else 'compacted':10s} {db / 1e6:10.2f} MB {jr / 1e6:10.2f} MB "
              f"{(db + jr) / 1e6:10.2f} MB {(db + jr) / points:8.2f} {left:10d}   ({took:.0f} s)")


if __name__ == "__main__":
    main()
