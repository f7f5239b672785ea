#!/usr/bin/env python3
"""A team's history built through the product, then what it costs: ddpd started with
bench_ingest_trainer as its trainer (--slots of them at once), --runs runs submitted
by POST /runs, each reporting --steps step events over the event socket (3 points a
step: loss, lr, samples_per_s), every tenth of them --long-steps instead (the long
runs a history has); then the server stopped and:
  bytes per point   the database (its WAL included) over the points it holds
  start             ddpd started again on that state dir: seconds to "listening on"
                    (median of --starts)
  charts            GET /runs/{id}/metrics?key=loss of the longest run: charts of 60 and
                    2,000 points, and the runs page's first page (GET /runs?limit=50):
                    the server's CPU per request (utime+stime) and the median wall
The issue's size is 50,000 runs and about 100M points; the defaults take a few minutes
on a 2-core machine.

Usage: bench_team.py [--build DIR] [--runs N] [--steps N] [--long-steps N] [--slots N] [--starts N]"""
import argparse, os, shutil, statistics, sys, time

from bench_server import CHART_ROOM, Server, cpu_seconds, db_bytes


def measure(s, path, n_min=3, seconds=2.0, cap=300):
    status, body = s.req("GET", path)
    if status != 200:
        sys.exit(f"{path}: {status} {body}")
    walls, cpu0, start = [], cpu_seconds(s.proc.pid), time.time()
    while (time.time() - start < seconds and len(walls) < cap) or len(walls) < n_min:
        t = time.perf_counter()
        s.req("GET", path)
        walls.append(time.perf_counter() - t)
    return (cpu_seconds(s.proc.pid) - cpu0) / len(walls) * 1000, statistics.median(walls) * 1000, len(walls)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"))
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--steps", type=int, default=2000, help="step events of most runs")
    p.add_argument("--long-steps", type=int, default=50000, help="step events of every tenth run")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--starts", type=int, default=3)
    a = p.parse_args()
    ddpd, trainer = os.path.join(a.build, "bin", "ddpd"), os.path.join(a.build, "bin", "bench_ingest_trainer")
    s = Server(ddpd, trainer, slots=a.slots, extra=CHART_ROOM)
    t0 = time.time()
    ids, steps = [], 0
    for i in range(a.runs):
        n = a.long_steps if i % 10 == 9 else a.steps
        ids.append((s.submit({"name": f"ingest-{n}"}), n))
        steps += n
    for rid, n in ids:
        s.wait(rid, lambda r: r["status"] == "succeeded", timeout=3600, interval=0.2)
    built = time.time() - t0
    longest = max(ids, key=lambda x: x[1])[0]
    s.close(keep=True)
    size, points = db_bytes(s.dir), 3 * steps
    starts = []
    for _ in range(a.starts):
        t = time.time()
        s2 = Server(ddpd, trainer, slots=a.slots, extra=CHART_ROOM, state_dir=s.dir)
        starts.append(time.time() - t)
        reads = [(what, measure(s2, path)) for what, path in (
            ("chart of 60 points", f"/runs/{longest}/metrics?key=loss&max_points=60"),
            ("chart of 2,000 points", f"/runs/{longest}/metrics?key=loss&max_points=2000"),
            ("runs page (limit=50)", "/runs?limit=50"))]
        s2.close(keep=True)
    shutil.rmtree(s.dir, ignore_errors=True)
    print(f"team history: {a.runs} runs, {steps:,} steps ({points:,} points), built through POST /runs and the"
          f" event socket in {built:.1f} s")
    print(f"  database {size / 1e6:.1f} MB: {size / points:.2f} bytes per point")
    print(f"  start on it: median {statistics.median(starts):.3f} s of {a.starts} ({', '.join(f'{x:.3f}' for x in starts)})")
    for what, (cpu, wall, n) in reads:
        print(f"  {what:24s} server CPU {cpu:7.2f} ms, wall median {wall:7.2f} ms ({n} requests)")


if __name__ == "__main__":
    sys.exit(main())
