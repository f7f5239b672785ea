#!/usr/bin/env python3
"""ddpd's speed, measured against a real server on a loopback port; prints the figures.

  ingest   step events through the event socket into SQLite: bench_ingest_trainer
           (started by ddpd as its trainer) sends N steps as fast as the socket takes
           them; timed from its first send until GET /runs/{id} shows the last step
           committed. Each step is 3 metric points (loss, lr, samples_per_s).
  wrk      GET /runs/{id} under 64 concurrent connections (wrk) while a real 2-rank run
           trains: requests/s and latency percentiles, and the run's samples/s against
           the same run with no load (alternating, to spread the machine's noise).
  latency  POST /runs to the first step event of a 2-rank CPU run, with the server's
           part (POST to trainer started) and the trainer's (to hello, to first step).

Usage: bench_server.py [--build DIR] [--only ingest,wrk,latency] [--steps N]"""
import argparse, http.client, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, threading, time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
FMNIST = {"images": "fashion-mnist/train-images-idx3-ubyte.gz", "labels": "fashion-mnist/train-labels-idx1-ubyte.gz"}


def iso_s(t):
    return datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


class Server:
    def __init__(self, ddpd, trainer, slots=2):
        self.dir = tempfile.mkdtemp(prefix="ddpd-bench-")
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.proc = subprocess.Popen([ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", self.dir,
                                      "--slots", str(slots), "--gpus", "none", "--trainer", trainer],
                                     stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        if "listening on" not in line:
            sys.exit(f"ddpd did not start: {line!r}; see {self.dir}/server.log")
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def req(self, method, path, body=None):
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data and r.getheader("Content-Type", "").startswith("application") else data)

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

    def close(self):
        self.conn.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def bench_ingest(a):
    s = Server(a.ddpd, os.path.join(a.build, "bin", "bench_ingest_trainer"), slots=1)
    try:
        results = []
        for _ in range(a.repeat):
            rid = s.submit({"name": f"ingest-{a.steps}"})
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
    print(f"ingest: {a.steps} step events ({3 * a.steps} metric points) per run, {a.repeat} runs")
    for pts, evs, took, send_took in results:
        print(f"  {pts:12,.0f} metric points/s  ({evs:10,.0f} step events/s; {took:.2f} s from first send to last commit;"
              f" the sender finished after {send_took:.2f} s)")
    print(f"  best {best[0]:,.0f} points/s, median {statistics.median(r[0] for r in results):,.0f} points/s"
          f"  (target: at least 100,000); database {db / 1e6:.0f} MB")


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


def bench_latency(a):
    s = Server(a.ddpd, os.path.join(a.build, "bin", "ddp-trainer"), slots=2)
    rows = []
    try:
        for i in range(a.repeat_latency):
            cfg = {"name": f"latency-{i}", "data": {"train": FMNIST, "limit": 2048, "test_limit": 1000},
                   "train": {"epochs": 1, "batch_size": 128}, "distributed": {"world_size": 2},
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
            created, started = iso_s(run["created_at"]), iso_s(run["started_at"])
            hello = min(iso_s(r["connected_at"]) for r in ranks)
            rows.append({"post_to_step": first[2] / 1000 - t_post, "post_to_seen": t_seen - t_post,
                         "server": started - t_post, "to_hello": hello - started, "to_step": first[2] / 1000 - hello})
    finally:
        s.close()
    print(f"latency: POST /runs to the first step event, 2-rank CPU run (2,048 examples), {len(rows)} runs")
    for k, what in (("post_to_step", "POST sent -> first step event (its t)"),
                    ("post_to_seen", "POST sent -> first step readable over HTTP"),
                    ("server", "  of which POST sent -> trainer started (ddpd)"),
                    ("to_hello", "  trainer started -> first rank's hello (launcher loads data, forks)"),
                    ("to_step", "  hello -> first step (rank set-up, first step)")):
        v = sorted(r[k] * 1000 for r in rows)
        print(f"  {what:66s} median {statistics.median(v):7.1f} ms  (min {v[0]:.1f}, max {v[-1]:.1f})")
    print("  (target: under 300 ms)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--only", default="ingest,wrk,latency")
    p.add_argument("--steps", type=int, default=1000000, help="ingest: step events per run")
    p.add_argument("--repeat", type=int, default=3, help="ingest: runs")
    p.add_argument("--pairs", type=int, default=2, help="wrk: (no load, load) pairs")
    p.add_argument("--epochs", type=int, default=8, help="wrk: epochs of each training run")
    p.add_argument("--world", type=int, default=2, help="wrk: ranks of the training run")
    p.add_argument("--wrk-threads", type=int, default=2)
    p.add_argument("--repeat-latency", type=int, default=7)
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    a.ddpd = os.path.join(a.build, "bin", "ddpd")
    for part in a.only.split(","):
        {"ingest": bench_ingest, "wrk": bench_wrk, "latency": bench_latency}[part](a)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
