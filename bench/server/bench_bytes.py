#!/usr/bin/env python3
"""Bytes per point of a run's series, through the product: ddpd started with
bench_ingest_trainer as its trainer, one run of --steps step events (3 points each:
loss, lr, samples_per_s) or, with --kind metric, a command run's metric events (loss,
lr and a series of its own, acc); then the server stopped and the database's size
(its WAL included, as bench_server.py's chart bench counts it) divided by the points,
and where the bytes are (each table's and index's pages, from SQLite's dbstat).

Usage: bench_bytes.py [--build DIR] [--steps N] [--kind ingest|metric] [--runs R]"""
import argparse, os, shutil, sqlite3, sys

from bench_server import CHART_ROOM, Server, chart_fill, db_bytes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
    p.add_argument("--steps", type=int, default=1000000, help="step events per run")
    p.add_argument("--runs", type=int, default=1, help="runs, one after the other")
    p.add_argument("--kind", choices=("ingest", "metric"), default="ingest")
    a = p.parse_args()
    ddpd = os.path.join(a.build, "bin", "ddpd")
    s = Server(ddpd, os.path.join(a.build, "bin", "bench_ingest_trainer"), slots=1, extra=CHART_ROOM)
    took = 0.0
    for _ in range(a.runs):
        took += chart_fill(s, a.kind, a.steps)[1]
    s.close(keep=True)
    size, points = db_bytes(s.dir), 3 * a.steps * a.runs
    db = sqlite3.connect(os.path.join(s.dir, "ddpd.db"))
    try:
        rows = db.execute("SELECT name, count(*), sum(pgsize), sum(unused) FROM dbstat GROUP BY name"
                          " ORDER BY sum(pgsize) DESC LIMIT 8").fetchall()
    except sqlite3.OperationalError:
        rows = []
    db.close()
    shutil.rmtree(s.dir, ignore_errors=True)
    print(f"{a.runs} run(s) of {a.steps:,} {a.kind} steps ({points:,} points), ingested in {took:.1f} s")
    print(f"  database {size / 1e6:.1f} MB: {size / points:.2f} bytes per point")
    for name, pages, b, unused in rows:
        print(f"  {name:28s} {pages:8d} pages {b / points:6.2f} bytes per point, {100.0 * unused / b:4.1f}% unused")


if __name__ == "__main__":
    sys.exit(main())
