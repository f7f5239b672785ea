#!/usr/bin/env python3
"""A team's history, and what it costs a start and a list page: ddpd's start and
GET /runs at 1k, 10k and 50k runs, for this build and a baseline build side by side.

The history is made by the baseline ddpd (its own schema: it creates the database),
then written straight into SQLite as the store writes a finished run (a row in runs
with its config, 20 steps of loss, an epoch), with each run's directory as the server
leaves it (config.json, events.jsonl, trainer.log): the product's POST /runs would
take hours at 50k on 2 cores (about 190 submissions/s) and its runs minutes each. The
runs: 10 owners, finished (most succeeded, 1 in 11 failed, 1 in 97 canceled: a rare one), names of
4 prefixes (one in 500 "rare-"), 1 in 10 a trial of one of 20 sweeps, created a
second apart.

Each build serves a copy of that state dir (this build migrates its copy first, once:
that start is the one-time walk and not counted). Then, alternating between the two:

  start   from spawn to its "listening on" line, --starts times each (median, max);
  pages   GET /runs's own time as the server logs it ("... 200 812B 1.4ms"), median of
          --requests requests over one keep-alive connection, for the newest page, a
          rare status, a deep page (before= near the oldest), and this build's new
          filters (owner, a name prefix, a sweep, a time window, combinations), which
          the baseline ignores (it answers its newest page: shown as "-");
  walk    the whole history through next, pages of 1000 (the server's time summed).

Usage: bench_history.py --ddpd PATH --baseline-ddpd PATH [--sizes 1000,10000,50000]
                        [--starts 3] [--requests 20] [--keep DIR]"""
import argparse, http.client, json, os, re, shutil, signal, sqlite3, statistics, subprocess, sys, tempfile, time

CONFIG = json.dumps({"name": "x", "mode": "train", "seed": 42, "model": {"type": "mlp", "hidden": [512, 256]},
                     "data": {"format": "idx", "train": {"images": "fashion-mnist/train-images-idx3-ubyte.gz",
                                                         "labels": "fashion-mnist/train-labels-idx1-ubyte.gz"}},
                     "train": {"epochs": 1, "batch_size": 128, "optimizer": {"type": "adam", "lr": 0.001}},
                     "distributed": {"world_size": 1}})
T0 = 1767225600000  # 2026-01-01


def status_of(i):
    """A finished run's (a live status would be recovered at the first start)."""
    return "canceled" if i % 97 == 0 else "failed" if i % 11 == 0 else "succeeded"


def name_of(i):
    return ("rare-" if i % 500 == 0 else ("mnist-", "resnet-", "bert-")[i % 3]) + str(i)


def start_once(ddpd, state, trainer):
    """Spawn to "listening on": (seconds, the process, its port)."""
    t = time.monotonic()
    p = subprocess.Popen([ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--gpus", "none",
                          "--slots", "2", "--trainer", trainer, "--log-file", os.path.join(state, "bench.log")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
    line = p.stdout.readline().decode()
    took = time.monotonic() - t
    if "listening on" not in line:
        sys.exit(f"{ddpd} did not start on {state}: {line!r}; see {state}/bench.log")
    return took, p, int(line.strip().rsplit(":", 1)[1])


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=120)


def build_history(baseline, state, n, trainer):
    os.makedirs(state, mode=0o700)
    _, p, _ = start_once(baseline, state, trainer)  # the baseline's schema
    stop(p)
    db = sqlite3.connect(os.path.join(state, "ddpd.db"))
    db.execute("PRAGMA journal_mode = WAL")
    rows, steps, epochs = [], [], []
    for i in range(1, n + 1):
        t = T0 + i * 1000
        sweep = (1 + i % 20) if i % 10 == 0 else None
        rows.append((i, name_of(i), status_of(i), CONFIG, t, t + 100, t + 900, f"user{i % 10}", t,
                     sweep, i if sweep else None, 4096, 20, 0.5))
        steps += [(i, g, 0, g - 1, 1.0 / g, 0.001, 100.0, t + 100 + g) for g in range(1, 21)]
        epochs.append((i, 0, 0.001, 0.5, 0.4, 0.9, 1.0, 100.0, t + 800))
        if len(steps) > 200000 or i == n:
            db.executemany("INSERT INTO runs (id, name, status, config, world_size, device_kind, created_at, started_at,"
                           " finished_at, owner, queued_at, sweep_id, trial, disk_bytes, global_step, loss) VALUES"
                           " (?, ?, ?, ?, 1, 'cpu', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany("INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)", steps)
            db.executemany("INSERT INTO epochs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", epochs)
            db.commit()
            rows, steps, epochs = [], [], []
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    runs = os.path.join(state, "runs")
    os.makedirs(runs, mode=0o700, exist_ok=True)
    for i in range(1, n + 1):
        d = os.path.join(runs, str(i))
        os.mkdir(d, 0o700)
        for name, text in (("config.json", CONFIG), ("events.jsonl", '{"type":"end"}\n'), ("trainer.log", "done\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)


def server_ms(state, path):
    """The server's own time for its newest logged request of `path` (the log names the
    path without its query: the requests are made one at a time)."""
    path = path.split("?")[0]
    with open(os.path.join(state, "bench.log"), errors="replace") as f:
        lines = f.readlines()
    for line in reversed(lines):
        if f" GET {path} " in line:
            m = re.search(r" (\d+)B ([\d.]+)ms", line)
            if m:
                return float(m.group(2))
    return None


def get(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    return r.status, json.loads(body) if r.status == 200 else body


def page_ms(state, port, path, requests):
    """(the server's median ms, the client's median ms from request to its answer read)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    times, walls, first = [], [], None
    for _ in range(requests):
        t = time.perf_counter()
        status, page = get(conn, path)
        walls.append((time.perf_counter() - t) * 1000)
        if status != 200:
            sys.exit(f"GET {path}: {status} {page!r}")
        first = first or page
        time.sleep(0.01)  # the log line is written after the answer
        ms = server_ms(state, path)
        if ms is not None:
            times.append(ms)
    conn.close()
    return (statistics.median(times) if times else float("nan")), statistics.median(walls)


def walk_ms(state, port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    path, total, n = "/runs?limit=1000", 0.0, 0
    while path:
        status, page = get(conn, path)
        time.sleep(0.01)
        total += server_ms(state, path) or 0.0
        n += len(page["runs"])
        path = page["next"]
    conn.close()
    return total, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ddpd", required=True)
    ap.add_argument("--baseline-ddpd", required=True)
    ap.add_argument("--trainer", default="/bin/true")
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--keep")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="ddpd-bench-history-")
    out = []
    for n in [int(x) for x in a.sizes.split(",")]:
        base_state = os.path.join(work, f"base-{n}")
        t = time.monotonic()
        build_history(a.baseline_ddpd, base_state, n, a.trainer)
        new_state = os.path.join(work, f"new-{n}")
        shutil.copytree(base_state, new_state)
        _, p, _ = start_once(a.ddpd, new_state, a.trainer)  # the migration, and its one walk: not counted
        stop(p)
        db_mb = os.path.getsize(os.path.join(base_state, "ddpd.db")) / 1e6
        print(f"# {n} runs built in {time.monotonic() - t:.0f} s (database {db_mb:.0f} MB)", flush=True)
        starts = {"baseline": [], "this": []}
        for _ in range(a.starts):
            for who, ddpd, state in (("baseline", a.baseline_ddpd, base_state), ("this", a.ddpd, new_state)):
                took, p, _ = start_once(ddpd, state, a.trainer)
                stop(p)
                starts[who].append(took)
        low = max(1, n // 500)
        since = T0 + (n - n // 10) * 1000
        until = T0 + (n // 10) * 1000
        queries = [("newest page", "/runs?limit=50", True),
                   ("rare status (canceled)", "/runs?limit=50&status=canceled", True),
                   ("deep page (before=%d)" % low, f"/runs?limit=50&before={low}", True),
                   ("status=failed,canceled deep", f"/runs?limit=50&status=failed,canceled&before={n // 5}", True),
                   ("owner=user3", "/runs?limit=50&owner=user3", False),
                   ("owner+status deep", f"/runs?limit=50&owner=user3&status=failed&before={n // 5}", False),
                   ("name=rare-", "/runs?limit=50&name=rare-", False),
                   ("name=mnist- (common)", "/runs?limit=50&name=mnist-", False),
                   ("sweep_id=7", "/runs?limit=50&sweep_id=7", False),
                   ("until= oldest 10%", f"/runs?limit=50&until={until // 1000}", False),
                   ("since= newest 10% + status", f"/runs?limit=50&since={since // 1000}&status=failed", False)]
        results = {}
        for who, ddpd, state in (("baseline", a.baseline_ddpd, base_state), ("this", a.ddpd, new_state)):
            _, p, port = start_once(ddpd, state, a.trainer)
            try:
                for label, path, both in queries:
                    if who == "baseline" and not both:
                        results[(who, label)] = None
                        continue
                    results[(who, label)] = page_ms(state, port, path, a.requests)
                results[(who, "walk")] = walk_ms(state, port)
            finally:
                stop(p)
        out.append(f"\n{n} runs (database {db_mb:.0f} MB, {n} run directories)")
        out.append(f"  {'(GET: server ms as logged / client ms)':38} {'baseline':>14} {'this build':>14}")
        med = lambda v: f"{statistics.median(v):.3f} s"
        out.append(f"  {'start (median of %d)' % a.starts:38} {med(starts['baseline']):>14} {med(starts['this']):>14}")
        out.append(f"  {'start (max)':38} {max(starts['baseline']):>12.3f} s {max(starts['this']):>12.3f} s")
        fmt = lambda v: "-" if v is None else "%.1f / %.2f" % v
        for label, _, _ in queries:
            out.append(f"  {'GET ' + label:38} {fmt(results[('baseline', label)]):>14} {fmt(results[('this', label)]):>14}")
        (bw, bn), (tw, tn) = results[("baseline", "walk")], results[("this", "walk")]
        out.append(f"  {'walk all pages of 1000 (%d runs)' % tn:38} {'%.1f ms' % bw:>14} {'%.1f ms' % tw:>14}")
        print("\n".join(out[-(len(queries) + 5):]), flush=True)
        if not a.keep:
            shutil.rmtree(base_state, ignore_errors=True)
            shutil.rmtree(new_state, ignore_errors=True)
    print("\n".join(out))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
