#!/usr/bin/env python3
"""ddpd's speed, measured against a real server on a loopback port; prints the figures.

  ingest   step events through the event socket into SQLite: bench_ingest_trainer
           (started by ddpd as its trainer) sends N steps as fast as the socket takes
           them; timed from its first send until GET /runs/{id} shows the last step
           committed. Each step is 3 metric points (loss, lr, samples_per_s).
  wrk      GET /runs/{id} under 64 concurrent connections (wrk) while a real 2-rank run
           trains: requests/s and latency percentiles, and the run's samples/s against
           the same run with no load (alternating, to spread the machine's noise).
  latency  POST /runs to the first step event of a CPU run (--latency-world ranks, 1 and
           2 by default), with the server's part (POST to trainer started) and the
           trainer's (to hello, to first step); with --baseline-trainer, another
           ddp-trainer build's runs alternate with this one's, on the same server.
  queue    --queued runs (1000) of 10 users (ddpd user add) behind 2 busy CPU slots
           (the tests' stand-in trainer, which waits): what a submission costs with
           the queue at its longest, the time from a run's end to the next run's
           start (finished_at -> started_at) as slots are freed one at a time, what
           GET /queue and GET /runs/{id} of a queued run (plain and 304) take
           (--queue-reads of each, 20 ms apart, so that some meet the tick's
           decisions), as the client saw them and as the server's log says (its own
           time), medians and p90s, and bench_queue_policy's in-process figure for
           one decision; with
           --baseline-ddpd, the same on that build after this one's, side by side.
  get      GET /runs/{id} of a finished run (config and checkpoints in its answer):
           the server's own CPU per request (its utime+stime from /proc/PID/stat around
           each measurement), requests/s and latency, over one keep-alive connection
           (--get-requests GETs in a row) and over 64 (wrk for --get-seconds, or a
           Python asyncio client where wrk is not installed: --get-client), plain and
           with If-None-Match (304s); with --baseline-ddpd, the plain GET of another
           ddpd build measured in the same rounds (each kind once a round, alternating),
           and the ratios. --get-users: each server has a user first, and every GET
           carries its token (a server with users reads nothing without one).
           --get-queued: a queued run's GET instead (one slot held by a command run
           that sleeps), whose cached answer is checked against the scheduler's
           place, waiting_for and pending on every request.
  chart    GET /runs/{id}/metrics of one run of --chart-steps steps (bench_ingest_trainer:
           --chart-kind ingest, the steps table's loss; metric, a reporter's own series
           acc): charts of 60 and 2,000 points (the newest 2,000 steps too, as a live
           chart polls), a page of 10,000 points; the server's own CPU per request
           (utime+stime) and the median wall time; and the database's bytes per point
           (3 points a step). With --baseline-ddpd the run is written by that build first
           and measured there, then the same state dir is started by this build (its
           start migrates and rolls up the points: timed) and measured again; then a
           fresh run of this build, for its ingest time and bytes per point.

Usage: bench_server.py [--build DIR] [--only ingest,metric,command,wrk,latency,queue,get,chart] [--steps N]
                       [--baseline-ddpd PATH] [--baseline-trainer PATH] [--latency-world 1,2]
                       [--get-requests N] [--get-seconds S] [--get-rounds R] [--get-client auto|wrk|python]
                       [--get-users] [--get-queued] [--chart-steps N] [--chart-kind ingest|metric]"""
import argparse, http.client, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, threading, time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = {"images": "fashion-mnist/train-images-idx3-ubyte.gz", "labels": "fashion-mnist/train-labels-idx1-ubyte.gz"}


def iso_s(t):
    return datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


class Server:
    def __init__(self, ddpd, trainer, slots=2, extra=(), state_dir=None, headers=None):
        self.dir = state_dir or tempfile.mkdtemp(prefix="ddpd-bench-")
        self.headers = dict(headers or {})  # sent with every request (a user's token)
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.proc = subprocess.Popen([ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", self.dir,
                                      "--slots", str(slots), "--gpus", "none", "--trainer", trainer, *extra],
                                     stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        if "listening on" not in line:
            sys.exit(f"ddpd did not start: {line!r}; see {self.dir}/server.log")
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def req(self, method, path, body=None, headers=None, with_headers=False):
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        hdrs.update(self.headers)
        hdrs.update(headers or {})
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
        r = self.conn.getresponse()
        data = r.read()
        out = (r.status, (json.loads(data) if data and r.getheader("Content-Type", "").startswith("application") else data))
        return out + (dict(r.getheaders()),) if with_headers else out

    def submit(self, cfg):
        status, run = self.req("POST", "/runs", cfg)
        if status != 201:
            sys.exit(f"POST /runs: {status} {run}")
        return run["id"]

    def run(self, rid):
        return self.req("GET", f"/runs/{rid}")[1]

    def wait(self, rid, pred, timeout=600, interval=0.01):
        deadline = time.time() + timeout
        while time.time() < deadline:
            run = self.run(rid)
            if pred(run):
                return run
            if run["status"] in ("failed", "canceled"):
                sys.exit(f"run {rid} {run['status']}: {run['reason']}")
            time.sleep(interval)
        sys.exit(f"run {rid}: timed out")

    def close(self, keep=False):
        self.conn.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(600)
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def bench_ingest(a, kind="ingest"):
    """kind "ingest": the built-in trainer's step events; "metric": a command run's
    reporter's metric events (loss, lr and a series of its own: 3 points each)."""
    s = Server(a.ddpd, os.path.join(a.build, "bin", "bench_ingest_trainer"), slots=1)
    try:
        results = []
        for _ in range(a.repeat):
            rid = s.submit({"name": f"{kind}-{a.steps}"})
            run = s.wait(rid, lambda r: (r["progress"]["global_step"] or 0) >= a.steps, interval=0.005)
            done = time.time()
            with open(os.path.join(s.dir, "runs", str(rid), "bench.json")) as f:
                sent = json.load(f)
            s.wait(rid, lambda r: r["status"] == "succeeded")
            took = done - sent["first_sent_ms"] / 1000
            send_took = (sent["last_sent_ms"] - sent["first_sent_ms"]) / 1000
            count = s.req("GET", f"/runs/{rid}/metrics?key=loss&max_points=3")[1]["count"]
            if count != a.steps:
                sys.exit(f"ingest: {count} steps stored of {a.steps}")
            results.append((a.steps * 3 / took, a.steps / took, took, send_took))
        db = os.path.getsize(os.path.join(s.dir, "ddpd.db")) + os.path.getsize(os.path.join(s.dir, "ddpd.db-wal"))
    finally:
        s.close()
    best = max(results)
    what = "step" if kind == "ingest" else "reporter metric"
    print(f"{kind}: {a.steps} {what} events ({3 * a.steps} metric points) per run, {a.repeat} runs")
    for pts, evs, took, send_took in results:
        print(f"  {pts:12,.0f} metric points/s  ({evs:10,.0f} step events/s; {took:.2f} s from first send to last commit;"
              f" the sender finished after {send_took:.2f} s)")
    print(f"  best {best[0]:,.0f} points/s, median {statistics.median(r[0] for r in results):,.0f} points/s"
          f"  (target: at least 100,000); database {db / 1e6:.0f} MB")


def db_bytes(state_dir):
    """The database's bytes on disk, its WAL included."""
    return sum(os.path.getsize(os.path.join(state_dir, f)) for f in ("ddpd.db", "ddpd.db-wal")
               if os.path.exists(os.path.join(state_dir, f)))


CHART_ROOM = ["--max-points-per-run", "2000000000"]  # a 10M-step run is past the default cap


def chart_fill(s, kind, steps):
    """One run of `steps` steps through the event socket: (its id, seconds to the last commit)."""
    t0 = time.time()
    rid = s.submit({"name": f"{kind}-{steps}"})
    s.wait(rid, lambda r: (r["progress"]["global_step"] or 0) >= steps, timeout=3600, interval=0.05)
    took = time.time() - t0
    s.wait(rid, lambda r: r["status"] == "succeeded")
    return rid, took


def chart_measure(s, rid, key, steps, label, page=True):
    """Each read's server CPU per request and median wall, over enough requests (2 s or 300)."""
    reads = [("chart of 60 points", f"max_points=60"), ("chart of 2,000 points", f"max_points=2000"),
             ("newest 2,000 steps, chart of 2,000", f"max_points=2000&after={steps - 2000}")]
    if page:
        reads.append(("a page of 10,000 points", "limit=10000"))
    rows = []
    for what, q in reads:
        path = f"/runs/{rid}/metrics?key={key}&{q}"
        status, body = s.req("GET", path)  # warm: the pages it reads are in the cache
        if status != 200:
            sys.exit(f"{path}: {status} {body}")
        n = len(body["points"])
        walls, cpu0, start = [], cpu_seconds(s.proc.pid), time.time()
        while (time.time() - start < 2.0 and len(walls) < 300) or len(walls) < 3:
            t = time.perf_counter()
            s.req("GET", path)
            walls.append(time.perf_counter() - t)
        cpu = (cpu_seconds(s.proc.pid) - cpu0) / len(walls)
        rows.append((label, what, n, len(walls), cpu * 1000, statistics.median(walls) * 1000))
    return rows


def bench_chart(a):
    trainer = os.path.join(a.build, "bin", "bench_ingest_trainer")
    steps, kind = a.chart_steps, a.chart_kind
    key = "loss" if kind == "ingest" else "acc"
    rows, sizes = [], []
    if a.baseline_ddpd:
        s = Server(a.baseline_ddpd, trainer, slots=1, extra=CHART_ROOM)
        rid, took = chart_fill(s, kind, steps)
        print(f"chart: baseline {a.baseline_ddpd}: {steps:,} steps ingested in {took:.1f} s", flush=True)
        rows += chart_measure(s, rid, key, steps, "baseline", page=False)
        s.close(keep=True)
        sizes.append(("baseline", db_bytes(s.dir)))
        t0 = time.time()
        s2 = Server(a.ddpd, trainer, slots=1, extra=CHART_ROOM, state_dir=s.dir)
        print(f"chart: this build started on the baseline's state dir in {time.time() - t0:.1f} s"
              " (migration 0017 and the rollups of its points)", flush=True)
        rows += chart_measure(s2, rid, key, steps, "this build, migrated")
        s2.close(keep=True)
        sizes.append(("this build, migrated", db_bytes(s.dir)))
        shutil.rmtree(s.dir, ignore_errors=True)
    s = Server(a.ddpd, trainer, slots=1, extra=CHART_ROOM)
    rid, took = chart_fill(s, kind, steps)
    print(f"chart: this build: {steps:,} steps ingested in {took:.1f} s", flush=True)
    rows += chart_measure(s, rid, key, steps, "this build")
    s.close(keep=True)
    sizes.append(("this build", db_bytes(s.dir)))
    shutil.rmtree(s.dir, ignore_errors=True)
    print(f"chart: GET /runs/{{id}}/metrics?key={key} of a {steps:,}-step run ({kind}: 3 points a step)")
    print(f"  {'server':22s} {'read':36s} {'points':>7s} {'reqs':>5s} {'server CPU ms':>14s} {'wall ms':>9s}")
    for label, what, n, reqs, cpu, wall in rows:
        print(f"  {label:22s} {what:36s} {n:7d} {reqs:5d} {cpu:14.2f} {wall:9.2f}")
    for label, size in sizes:
        print(f"  {label:22s} database {size / 1e6:8.1f} MB: {size / (3 * steps):5.1f} bytes per point")


def training_config(name, epochs, world):
    return {"name": name, "model": {"hidden": [512, 256]},
            "data": {"train": FMNIST, "limit": 0, "test_limit": 1000},
            "train": {"epochs": epochs, "batch_size": 128}, "distributed": {"world_size": world},
            "checkpoint": {"every_epochs": 0}}


def train_throughput(s, rid):
    """samples/s over the whole training: samples trained / seconds spent training."""
    epochs = s.req("GET", f"/runs/{rid}/epochs")[1]["epochs"]
    secs = sum(e["seconds"] for e in epochs)
    samples = sum(e["samples_per_s"] * e["seconds"] for e in epochs)
    return samples / secs


def bench_wrk(a):
    if not shutil.which("wrk"):
        print("wrk: not installed (scripts/install-deps.sh --bench); skipped")
        return
    s = Server(a.ddpd, os.path.join(a.build, "bin", "ddp-trainer"), slots=2)
    rows = []
    try:
        for i in range(a.pairs):
            for loaded in (False, True):
                rid = s.submit(training_config(f"wrk-{i}-{int(loaded)}", a.epochs, a.world))
                s.wait(rid, lambda r: r["status"] == "running" and (r["progress"]["global_step"] or 0) > 0)
                w = None
                if loaded:
                    w = subprocess.Popen(["wrk", f"-t{a.wrk_threads}", "-c64", "-d600s", "--latency",
                                          f"http://127.0.0.1:{s.port}/runs/{rid}"],
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                s.wait(rid, lambda r: r["status"] == "succeeded", interval=0.2)
                out = ""
                if w:
                    w.send_signal(signal.SIGINT)
                    out = w.communicate(60)[0]
                sps = train_throughput(s, rid)
                rows.append((loaded, sps, out))
    finally:
        s.close()
    base = [r[1] for r in rows if not r[0]]
    load = [r[1] for r in rows if r[0]]
    print(f"wrk: GET /runs/{{id}}, 64 connections, {a.wrk_threads} wrk thread(s), while a {a.world}-rank MLP trains on"
          f" 60,000 Fashion-MNIST images ({a.epochs} epochs); {os.cpu_count()} cores in all")
    for loaded, sps, out in rows:
        if loaded:
            rps = re.search(r"Requests/sec:\s*([\d.]+)", out)
            lat = {p: re.search(rf"\s{p}%\s+([\d.]+\w+)", out) for p in ("50", "90", "99")}
            print(f"  under load: {sps:9,.0f} samples/s; {float(rps.group(1)) if rps else 0:,.0f} requests/s;"
                  f" latency p50 {lat['50'].group(1) if lat['50'] else '?'}, p90 {lat['90'].group(1) if lat['90'] else '?'},"
                  f" p99 {lat['99'].group(1) if lat['99'] else '?'}")
            errors = re.search(r"Socket errors:.*|Non-2xx.*", out)
            if errors:
                print(f"    {errors.group(0)}")
        else:
            print(f"  no load:    {sps:9,.0f} samples/s")
    slow = 1 - statistics.mean(load) / statistics.mean(base)
    print(f"  the run under load is {100 * slow:.1f}% slower (mean of {len(load)} against mean of {len(base)};"
          f" target: at most 5%)")


def latency_row(s, trainer_label, world, i):
    """One run: POST -> its first step, and the parts of it."""
    cfg = {"name": f"latency-{trainer_label}-{world}-{i}", "data": {"train": FMNIST, "limit": 2048, "test_limit": 1000},
           "train": {"epochs": 1, "batch_size": 128}, "distributed": {"world_size": world},
           "checkpoint": {"every_epochs": 0}}
    t_post = time.time()
    rid = s.submit(cfg)
    while True:
        m = s.req("GET", f"/runs/{rid}/metrics?key=loss&max_points=3")[1]
        if m["count"]:
            break
        time.sleep(0.002)
    t_seen = time.time()
    run = s.wait(rid, lambda r: r["status"] == "succeeded")
    first = s.req("GET", f"/runs/{rid}/metrics?key=loss")[1]["points"][0]
    ranks = s.req("GET", f"/runs/{rid}/ranks")[1]["ranks"]
    started = iso_s(run["started_at"])
    hello = min(iso_s(r["connected_at"]) for r in ranks)
    return {"post_to_step": first[2] / 1000 - t_post, "post_to_seen": t_seen - t_post,
            "server": started - t_post, "to_hello": hello - started, "to_step": first[2] / 1000 - hello}


def bench_latency(a):
    """Each world size's runs, this trainer's and (with --baseline-trainer) another's
    alternating on one server (the trainer is a setting of the server: two servers,
    one request each in turn), so the machine's load falls on both alike."""
    trainers = [("this", os.path.join(a.build, "bin", "ddp-trainer"))]
    if a.baseline_trainer:
        trainers.append(("baseline", os.path.abspath(a.baseline_trainer)))
    servers = {label: Server(a.ddpd, path, slots=2) for label, path in trainers}
    rows = {}
    try:
        for world in [int(w) for w in a.latency_world.split(",")]:
            for i in range(a.repeat_latency):
                for label, _ in trainers:
                    rows.setdefault((label, world), []).append(latency_row(servers[label], label, world, i))
    finally:
        for s in servers.values():
            s.close()
    load = os.getloadavg()
    print(f"latency: POST /runs to the first step event of a CPU run (2,048 examples), {a.repeat_latency} runs each; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    for (label, world), rs in rows.items():
        print(f"  {world}-rank run, {label} trainer ({dict(trainers)[label]}):")
        for k, what in (("post_to_step", "POST sent -> first step event (its t)"),
                        ("post_to_seen", "POST sent -> first step readable over HTTP"),
                        ("server", "  of which POST sent -> trainer started (ddpd)"),
                        ("to_hello", "  trainer started -> first rank's hello (launcher loads data, forks)"),
                        ("to_step", "  hello -> first step (rank set-up, first step)")):
            v = sorted(r[k] * 1000 for r in rs)
            print(f"    {what:66s} median {statistics.median(v):7.1f} ms  (min {v[0]:.1f}, max {v[-1]:.1f})")
    print("  (target: a 1-rank run under 300 ms)")


def server_times(s, offset):
    """The server's own time of each request its log holds from byte `offset` on
    ("http CLIENT METHOD PATH STATUS BYTES 1.4ms"): {"all": [(path, status, ms)]}."""
    out = []
    with open(os.path.join(s.dir, "server.log"), "rb") as log:
        log.seek(offset)
        for line in log.read().decode(errors="replace").splitlines():
            m = re.search(r" http \S+ (GET|POST) (\S+) (\d+) \d+B ([\d.]+)ms", line)
            if m:
                out.append((m.group(2), int(m.group(3)), float(m.group(4))))
    return {"all": out}


def queue_figures(a, ddpd):
    """One server (`ddpd`): a.queued runs of 10 users queued behind 2 busy slots;
    what submitting, reading the queue and freeing slots cost. Returns the figures."""
    fake = os.path.join(HERE, "..", "..", "tests", "support", "fake_trainer.py")
    state = tempfile.mkdtemp(prefix="ddpd-bench-queue-")
    tokens = []
    for u in range(10):
        p = subprocess.run([ddpd, "user", "add", f"user{u}", "--state-dir", state], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"ddpd user add: {p.stderr}")
        tokens.append(p.stdout.strip().splitlines()[-1])
    # reads too need a token on a server with users: user0's, unless a request names its own
    s = Server(ddpd, fake, slots=2, extra=["--cancel-grace", "5"], state_dir=state,
               headers={"Authorization": f"Bearer {tokens[0]}"})
    f = {"posts": [], "gets": [], "gets_304": [], "queue_gets": [], "gaps": [], "cancel_to_start": []}
    try:
        t0 = time.time()
        ids = []
        for i in range(a.queued):
            t = time.time()
            status, run = s.req("POST", "/runs", {"name": "sleep", "priority": 0},
                                headers={"Authorization": f"Bearer {tokens[i % 10]}"})
            if i >= a.queued - 200:  # the last 200: the queue at its longest
                f["posts"].append((time.time() - t) * 1000)
            if status != 201:
                sys.exit(f"POST /runs: {status} {run}")
            ids.append(run["id"])
        f["submit_s"] = time.time() - t0
        running = [r for r in ids[:2]]
        for rid in running:
            s.wait(rid, lambda r: r["status"] == "running", timeout=60)
        f["server"] = server_times(s, 0)
        f["server"]["posts"] = [ms for path, status, ms in f["server"]["all"] if path == "/runs" and status == 201][-200:]
        log_at = os.path.getsize(os.path.join(s.dir, "server.log"))
        tag = s.req("GET", f"/runs/{ids[-1]}", with_headers=True)[2].get("ETag")
        # spread over some seconds, so that reads meet the tick's decisions as users' reads do
        for _ in range(a.queue_reads):
            t = time.time()
            s.req("GET", f"/runs/{ids[-1]}")
            f["gets"].append((time.time() - t) * 1000)
            if tag:
                t = time.time()
                s.req("GET", f"/runs/{ids[-1]}", headers={"If-None-Match": tag})
                f["gets_304"].append((time.time() - t) * 1000)
            t = time.time()
            s.req("GET", "/queue")
            f["queue_gets"].append((time.time() - t) * 1000)
            time.sleep(0.02)
        reads = server_times(s, log_at)["all"]
        f["server"]["gets"] = [ms for path, status, ms in reads if path == f"/runs/{ids[-1]}" and status == 200]
        f["server"]["gets_304"] = [ms for path, status, ms in reads if path == f"/runs/{ids[-1]}" and status == 304]
        f["server"]["queue_gets"] = [ms for path, status, ms in reads if path == "/queue"]

        def started_now(before):
            """The run that started in place of the ones in `before` (the queue's head
            before the cancel need not be it: the canceled run's usage counts now)."""
            deadline = time.time() + 60
            while time.time() < deadline:
                page = s.req("GET", "/runs?status=starting,running&limit=10")[1]["runs"]
                new = [r["id"] for r in page if r["id"] not in before]
                if new:
                    return s.run(new[0])
                time.sleep(0.005)
            sys.exit("no run started after a slot was freed")

        for k in range(a.queue_rounds):
            victim = running.pop(0)
            t = time.time()
            owner = s.run(victim)["owner"]
            s.req("POST", f"/runs/{victim}/cancel", headers={"Authorization": f"Bearer {tokens[int(owner[4:])]}"})
            run = started_now(set(running) | {victim})
            nxt = run["id"]
            f["cancel_to_start"].append((time.time() - t) * 1000)
            ended = s.wait(victim, lambda r: r["status"] == "canceled", timeout=60)
            f["gaps"].append((iso_s(run["started_at"]) - iso_s(ended["finished_at"])) * 1000)
            running.append(nxt)
    finally:
        s.close()
        shutil.rmtree(state, ignore_errors=True)
    return f


def bench_queue(a):
    """a.queued queued runs of 10 users behind 2 busy slots; slots freed one at a time;
    with --baseline-ddpd, the same on another build, one after the other."""
    builds = [("this build", a.ddpd)] + ([("baseline", os.path.abspath(a.baseline_ddpd))] if a.baseline_ddpd else [])
    figures = [(name, queue_figures(a, ddpd)) for name, ddpd in builds]
    load = os.getloadavg()
    print(f"queue: {a.queued} queued runs of 10 users behind 2 busy CPU slots; load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f} on {os.cpu_count()} CPUs")
    rows = (("POST /runs, the last 200 (the queue at its longest)", "posts"),
            ("a slot freed (run's finished_at) -> the next run started (its started_at)", "gaps"),
            ("  POST cancel sent -> the next run seen starting over HTTP", "cancel_to_start"),
            ("GET /runs/{id} of a queued run (its place and what it waits for)", "gets"),
            ("  the same with its ETag (304)", "gets_304"),
            ("GET /queue (every queued run in start order, each with its reason)", "queue_gets"))
    print(f"  {'client side: median ms (p90, max)':72s}" + "".join(f"{name:>26s}" for name, _ in figures)
          + ("      ratio" if len(figures) == 2 else ""))

    def p90(v):
        return v[min(len(v) - 1, int(len(v) * 0.9))]

    for side in ("client", "server"):
        if side == "server":
            print(f"  {'server side (its log, 0.1 ms steps): median ms (p90, max)':72s}")
        for what, key in rows:
            cells, medians = "", []
            for _, f in figures:
                v = sorted((f if side == "client" else f["server"]).get(key, []))
                medians.append(statistics.median(v) if v else None)
                cells += f"{statistics.median(v):9.2f} ({p90(v):.1f}, {v[-1]:.1f})".rjust(26) if v else "-".rjust(26)
            ratio = f"{medians[1] / medians[0]:10.1f}x" if len(medians) == 2 and medians[0] and medians[1] else ""
            if side == "client" or key in figures[0][1]["server"]:
                print(f"  {what:72s}{cells}{ratio}")
    for name, f in figures:
        print(f"  {name}: {a.queued} submissions took {f['submit_s']:.1f} s")
    print("  (ratio: baseline / this build; target: a freed device starts the next run within 50 ms)")
    bq = os.path.join(a.build, "bin", "bench_queue_policy")
    if os.path.exists(bq):
        print("  " + subprocess.run([bq, str(a.queued)], capture_output=True, text=True).stdout.replace("\n", "\n  ").rstrip())


def bench_command_latency(a):
    """A command run: POST /runs -> ddp-run started (the server's share, from the
    run's started_at) and -> every rank's process started (the ranks write their
    start time; a 2-rank run of a program that only does that)."""
    runner = os.path.join(a.build, "bin", "ddp-run")
    s = Server(a.ddpd, os.path.join(a.build, "bin", "ddp-trainer"), slots=2,
               extra=["--allow-commands", "--runner", runner])
    rows = []
    mark = "import os, time; open('start-%s' % os.environ['RANK'], 'w').write(repr(time.time()))"
    try:
        for i in range(a.repeat_latency):
            t_post = time.time()
            rid = s.submit({"name": f"cmd-{i}", "command": ["/usr/bin/python3", "-S", "-c", mark],
                            "distributed": {"world_size": 2}})
            run = s.wait(rid, lambda r: r["status"] in ("succeeded", "failed"))
            if run["status"] != "succeeded":
                sys.exit(f"command latency: run {rid} {run['status']}: {run['reason']}")
            rd = os.path.join(s.dir, "runs", str(rid))
            starts = [float(open(os.path.join(rd, f"start-{r}")).read()) for r in (0, 1)]
            rows.append({"server": iso_s(run["started_at"]) - t_post, "ranks": max(starts) - t_post})
    finally:
        s.close()
    print(f"command latency: POST /runs of a 2-rank command run, {len(rows)} runs")
    for k, what in (("server", "POST sent -> ddp-run started (ddpd's share; target under 5 ms)"),
                    ("ranks", "POST sent -> both ranks running (python3 -S started, its first line)")):
        v = sorted(r[k] * 1000 for r in rows)
        print(f"  {what:66s} median {statistics.median(v):7.1f} ms  (min {v[0]:.1f}, max {v[-1]:.1f})")


def cpu_seconds(pid):
    """A process's utime + stime so far (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk_to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[m.group(2)] if m else float("nan")


def wrk_get(server, path, seconds, threads, headers=()):
    """wrk on one path, 64 connections: (requests, requests/s, p50 ms, p99 ms, server CPU s,
    non-2xx/3xx answers, socket errors)."""
    cmd = ["wrk", f"-t{threads}", "-c64", f"-d{seconds}s", "--latency"]
    for h in headers:
        cmd += ["-H", h]
    before = cpu_seconds(server.proc.pid)
    out = subprocess.run(cmd + [f"http://127.0.0.1:{server.port}{path}"], capture_output=True, text=True,
                         timeout=seconds + 60).stdout
    cpu = cpu_seconds(server.proc.pid) - before
    n = re.search(r"(\d+) requests in", out)
    rps = re.search(r"Requests/sec:\s*([\d.]+)", out)
    lat = {p: re.search(rf"\s{p}%\s+([\d.]+\w+)", out) for p in ("50", "99")}
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    errs = re.search(r"Socket errors:.*", out)
    if not n or not rps:
        sys.exit(f"wrk said nothing useful:\n{out}")
    return {"n": int(n.group(1)), "rps": float(rps.group(1)), "p50": wrk_to_ms(lat["50"].group(1)) if lat["50"] else float("nan"),
            "p99": wrk_to_ms(lat["99"].group(1)) if lat["99"] else float("nan"), "cpu": cpu,
            "bad": int(bad.group(1)) if bad else 0, "errors": errs.group(0) if errs else ""}


def finished_run(s):
    """A small real run, finished: its answer holds a config and two checkpoints."""
    rid = s.submit({"name": "get-bench", "data": {"train": FMNIST, "limit": 2048, "test_limit": 500},
                    "train": {"epochs": 2, "batch_size": 128}, "distributed": {"world_size": 1},
                    "checkpoint": {"every_epochs": 1}})
    s.wait(rid, lambda r: r["status"] == "succeeded", interval=0.1)
    return rid


def queued_run(s):
    """A run that waits: the server's one slot held by a command run that sleeps (no CPU
    taken from the measurement), and a small run queued behind it."""
    s.submit({"name": "get-bench-hold", "command": ["/bin/sleep", "3600"], "working_dir": "."})
    rid = s.submit({"name": "get-bench", "data": {"train": FMNIST, "limit": 2048, "test_limit": 500},
                    "train": {"epochs": 2, "batch_size": 128}, "distributed": {"world_size": 1}})
    time.sleep(1.5)  # the holder started, the queued run's place and reason settled
    if s.run(rid)["status"] != "queued":
        sys.exit(f"get: run {rid} should wait behind the holder: {s.run(rid)['status']}")
    return rid


def one_connection_get(server, path, count, headers=()):
    """`count` GETs one after another on one keep-alive connection (http.client): the server's
    CPU per request and the requests' latency."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    hdrs = dict(h.split(": ", 1) for h in headers)
    took, bad = [], 0
    before, t0 = cpu_seconds(server.proc.pid), time.monotonic()
    for _ in range(count):
        t = time.monotonic()
        conn.request("GET", path, headers=hdrs)
        r = conn.getresponse()
        r.read()
        took.append(time.monotonic() - t)
        bad += r.status not in (200, 304)
    cpu, wall = cpu_seconds(server.proc.pid) - before, time.monotonic() - t0
    conn.close()
    took.sort()
    return {"n": count, "rps": count / wall, "p50": 1000 * took[len(took) // 2], "p99": 1000 * took[int(len(took) * 0.99)],
            "cpu": cpu, "bad": bad, "errors": ""}


def python_get(server, path, seconds, connections=64, headers=()):
    """wrk's stand-in where it is not installed: `connections` keep-alive connections (asyncio,
    one thread), each sending its next GET when its answer is in, for `seconds`."""
    import asyncio
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{h}\r\n" for h in headers) + "\r\n").encode()
    took, counts = [], {"bad": 0, "errors": 0}

    async def client(deadline):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        except OSError:
            counts["errors"] += 1
            return
        try:
            while time.monotonic() < deadline:
                t = time.monotonic()
                writer.write(request)
                status = int((await reader.readline()).split()[1])
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                took.append(time.monotonic() - t)
                counts["bad"] += status not in (200, 304)
        except (OSError, IndexError, ValueError, asyncio.IncompleteReadError):
            counts["errors"] += 1
        writer.close()

    async def all_clients():
        deadline = time.monotonic() + seconds
        await asyncio.gather(*(client(deadline) for _ in range(connections)))

    before, t0 = cpu_seconds(server.proc.pid), time.monotonic()
    asyncio.run(all_clients())
    cpu, wall = cpu_seconds(server.proc.pid) - before, time.monotonic() - t0
    took.sort()
    if not took:
        sys.exit("get: the Python client got no answer")
    return {"n": len(took), "rps": len(took) / wall, "p50": 1000 * took[len(took) // 2],
            "p99": 1000 * took[int(len(took) * 0.99)], "cpu": cpu, "bad": counts["bad"],
            "errors": f"{counts['errors']} connections broke" if counts["errors"] else ""}


def bench_get(a):
    """Each build's finished run, asked over one connection (a.get_requests GETs) and over
    64 (wrk, or the Python client without it), every kind of request once a round,
    the rounds alternating so that the machine's load falls on all alike."""
    many = "wrk" if a.get_client == "wrk" or (a.get_client == "auto" and shutil.which("wrk")) else "python"
    if many == "wrk" and not shutil.which("wrk"):
        sys.exit("get: --get-client wrk, but wrk is not installed (scripts/install-deps.sh --bench)")
    trainer = os.path.join(a.build, "bin", "ddp-trainer")
    # 64 connections and this script's own: above the default per-address cap (64),
    # whose refusals (503s) would be counted among the requests
    room = ["--max-connections-per-address", "128"]
    if a.get_queued:  # a command run holds the slot: command runs on, under a work root of its own
        work = tempfile.mkdtemp(prefix="ddpd-bench-work-")
        room += ["--allow-commands", "--work-root", work, "--runner", os.path.join(a.build, "bin", "ddp-run")]
        room += ["--unsafe-commands-as-server"] if os.geteuid() == 0 else []

    def server(ddpd):
        """A server of that build; with --get-users, on a state dir that has a user, its
        token sent with every request."""
        if not a.get_users:
            return Server(ddpd, trainer, slots=1, extra=room), []
        state = tempfile.mkdtemp(prefix="ddpd-bench-")
        p = subprocess.run([ddpd, "user", "add", "bench", "--state-dir", state], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"get: ddpd user add: {p.stderr}")
        token = p.stdout.strip().splitlines()[-1]
        return (Server(ddpd, trainer, slots=1, extra=room, state_dir=state, headers={"Authorization": f"Bearer {token}"}),
                [f"Authorization: Bearer {token}"])

    this, auth = server(a.ddpd)
    servers, auths = [("this build", this)], {"this build": auth}
    if a.baseline_ddpd:
        base, auths["baseline"] = server(os.path.abspath(a.baseline_ddpd))
        servers.append(("baseline", base))
    rows = {}
    load_before = os.getloadavg()
    try:
        runs = {name: (queued_run if a.get_queued else finished_run)(s) for name, s in servers}
        s0, rid = servers[0][1], runs["this build"]
        status, body, hdrs = s0.req("GET", f"/runs/{rid}", with_headers=True)
        tag = hdrs.get("ETag")
        size = len(json.dumps(body))
        if status != 200 or not tag:
            sys.exit(f"get: GET /runs/{rid} -> {status}, ETag {tag}: this build has no ETag")
        status304 = s0.req("GET", f"/runs/{rid}", headers={"If-None-Match": tag})[0]
        if status304 != 304:
            sys.exit(f"get: If-None-Match with the current tag -> {status304}, not 304")
        mine = auths["this build"]
        modes = [("this build", "plain", s0, mine), ("this build", "If-None-Match", s0, mine + [f"If-None-Match: {tag}"])]
        if a.baseline_ddpd:
            modes.append(("baseline", "plain", servers[1][1], auths["baseline"]))
        for i in range(a.get_rounds):  # alternating, to spread the machine's noise over all
            order = modes if i % 2 == 0 else modes[::-1]  # and none always first after a pause
            for name, mode, s, headers in order:
                path = f"/runs/{runs[name]}"
                rows.setdefault((name, mode, 1), []).append(one_connection_get(s, path, a.get_requests, headers))
            for name, mode, s, headers in order:
                path = f"/runs/{runs[name]}"
                rows.setdefault((name, mode, 64), []).append(
                    wrk_get(s, path, a.get_seconds, a.wrk_threads, headers) if many == "wrk"
                    else python_get(s, path, a.get_seconds, 64, headers))
    finally:
        for _, s in servers:
            s.close()
    load = os.getloadavg()
    client = (f"wrk, {a.wrk_threads} thread(s)" if many == "wrk" else
              f"a Python asyncio client ({'wrk is not installed' if a.get_client == 'auto' else '--get-client python'})")
    what = "a queued run (behind a command run that sleeps)" if a.get_queued else "a finished run"
    print(f"get: GET /runs/{{id}} of {what} ({size} bytes of JSON: config{'' if a.get_queued else ', 2 checkpoints'}); one connection:"
          f" {a.get_requests} GETs in a row (Python http.client); 64 connections: {client}, {a.get_seconds} s;"
          f" {a.get_rounds} rounds alternating;{' each server with a user, every GET with its token;' if a.get_users else ''}"
          f" {os.cpu_count()} cores; load average before"
          f" {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if a.baseline_ddpd:
        print(f"  baseline: {os.path.abspath(a.baseline_ddpd)}")
    med = {}
    for conns in (1, 64):
        print(f"  {conns} connection{'s' if conns > 1 else ''}:")
        for (name, mode, c), rs in rows.items():
            if c != conns:
                continue
            per = [1e6 * r["cpu"] / r["n"] for r in rs]
            med[(name, mode, c)] = statistics.median(per)
            print(f"    {name:10s} {mode:14s} server CPU {statistics.median(per):6.1f} µs/request (min {min(per):.1f},"
                  f" max {max(per):.1f});  {statistics.median(r['rps'] for r in rs):8,.0f} requests/s;"
                  f"  p50 {statistics.median(r['p50'] for r in rs):6.2f} ms, p99 {statistics.median(r['p99'] for r in rs):6.2f}"
                  f" ms (worst p99 {max(r['p99'] for r in rs):.2f})")
            for r in rs:
                if r["bad"] or r["errors"]:
                    print(f"      non-2xx/3xx {r['bad']}; {r['errors']}")
        plain, cond = med[("this build", "plain", conns)], med[("this build", "If-None-Match", conns)]
        print(f"    If-None-Match (304) / plain (200): {cond / plain:.2f}x the CPU per request")
        if ("baseline", "plain", conns) in med:
            base = med[("baseline", "plain", conns)]
            print(f"    this build / baseline, plain GET: {plain / base:.2f}x the CPU per request"
                  f" ({plain - base:+.1f} µs); 304s: {cond / base:.2f}x")
    print("  (target: at most 20 µs of server CPU per request under 64 connections, and no more than the baseline's)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--only", default="ingest,metric,command,wrk,latency,queue,get")
    p.add_argument("--steps", type=int, default=1000000, help="ingest: step events per run")
    p.add_argument("--repeat", type=int, default=3, help="ingest: runs")
    p.add_argument("--pairs", type=int, default=2, help="wrk: (no load, load) pairs")
    p.add_argument("--epochs", type=int, default=8, help="wrk: epochs of each training run")
    p.add_argument("--world", type=int, default=2, help="wrk: ranks of the training run")
    p.add_argument("--wrk-threads", type=int, default=2)
    p.add_argument("--repeat-latency", type=int, default=7)
    p.add_argument("--latency-world", default="1,2", help="latency: the runs' world sizes")
    p.add_argument("--baseline-trainer", help="latency: another ddp-trainer build whose runs alternate with this one's")
    p.add_argument("--queued", type=int, default=1000, help="queue: runs queued")
    p.add_argument("--queue-rounds", type=int, default=10, help="queue: slots freed one at a time")
    p.add_argument("--queue-reads", type=int, default=100,
                   help="queue: reads of each kind (GET /queue, a queued run's GET, its 304), 20 ms apart")
    p.add_argument("--get-seconds", type=int, default=10, help="get: seconds of each 64-connection measurement")
    p.add_argument("--get-requests", type=int, default=20000,
                   help="get: GETs of each one-connection measurement (CPU times come in 10 ms ticks: enough of them)")
    p.add_argument("--get-client", choices=("auto", "wrk", "python"), default="auto",
                   help="get: what makes the 64 connections (auto: wrk when installed, else Python)")
    p.add_argument("--get-rounds", type=int, default=3, help="get: rounds (each mode once a round)")
    p.add_argument("--baseline-ddpd", help="get: another ddpd binary measured in the same rounds (same trainer);"
                   " chart: the build that writes the run first and is measured before this one")
    p.add_argument("--get-queued", action="store_true",
                   help="get: measure a queued run's GET (its place, waiting_for and pending) instead of a finished run's")
    p.add_argument("--get-users", action="store_true",
                   help="get: each server has a user, and every GET sends its token")
    p.add_argument("--chart-steps", type=int, default=10000000, help="chart: steps of the run charted")
    p.add_argument("--chart-kind", choices=("ingest", "metric"), default="ingest",
                   help="chart: the steps table's loss (ingest) or a reporter's own series (metric)")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.ddpd = os.path.join(a.build, "bin", "ddpd")
    for part in a.only.split(","):
        {"ingest": bench_ingest, "metric": lambda a: bench_ingest(a, "metric"), "command": bench_command_latency,
         "wrk": bench_wrk,
         "latency": bench_latency, "queue": bench_queue, "get": bench_get, "chart": bench_chart}[part](a)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
