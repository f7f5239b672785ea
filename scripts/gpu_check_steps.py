#!/usr/bin/env python3
"""The steps of the GPU check that are more than a command: what scripts/gpu-check.sh
(in a CUDA build on a GPU host) and the GPU bundle's run.sh (scripts/gpu-bundle-run.sh,
on a bare GPU machine) both do, written once. Standard library only: the bundle's
target may have no numpy.

  gpu_check_steps.py figures LOG REGEX         the GPU tests' figures from a ctest -V log
  gpu_check_steps.py run-config DATA_DIR       the 3-epoch Fashion-MNIST config (JSON)
  gpu_check_steps.py summarize-events EVENTS   a run's events.jsonl in lines; status 0 when
                                               it succeeded with test accuracy >= 0.80
  gpu_check_steps.py server-run --ddpd D --data DATA_DIR --work W [--timeout S]
                                               the 3-epoch run through a real ddpd
  gpu_check_steps.py fork-safety --trainer T --data DATA_DIR --work W
                                               the launcher holds no CUDA context; its rank does
  gpu_check_steps.py bench-table OURS THEIRS TARGET [--json OUT]
                                               ddp-trainer's samples/s beside PyTorch's
  gpu_check_steps.py summary OUTDIR            OUTDIR/summary.json from the phases; prints
                                               the last line, "N passed, M failed"
Each exits 0 when its check holds."""
import argparse, glob, json, os, re, signal, socket, subprocess, sys, time, urllib.error, urllib.request


def figures(log, pattern):
    """The lines of the GPU tests (not the stand-in's) that match `pattern`, by test."""
    names, pat = {}, re.compile(pattern)
    lines = open(log, errors="replace").read().splitlines()
    for line in lines:
        m = re.search(r"Test +#(\d+): (\S+)", line)
        if m:
            names[m.group(1)] = m.group(2)
    for line in lines:
        m = re.match(r"(\d+): (.*)", line)
        if m and pat.search(m.group(2)) and "fake" not in names.get(m.group(1), "fake"):
            print(f"  {names[m.group(1)]}: {m.group(2).strip()}")
    return 0


def run_config(data_dir, name="gpu-check"):
    """An MLP 1024-512 on the whole of Fashion-MNIST, 3 epochs, Adam, one GPU."""
    return {"name": name, "seed": 42, "model": {"hidden": [1024, 512], "activation": "relu"},
            "data": {"train": {"images": f"{data_dir}/train-images-idx3-ubyte.gz",
                               "labels": f"{data_dir}/train-labels-idx1-ubyte.gz"},
                     "test": {"images": f"{data_dir}/t10k-images-idx3-ubyte.gz",
                              "labels": f"{data_dir}/t10k-labels-idx1-ubyte.gz"}},
            "train": {"epochs": 3, "batch_size": 256, "optimizer": {"type": "adam", "lr": 0.001}},
            "distributed": {"world_size": 1, "backend": "nccl"}, "checkpoint": {"every_epochs": 1, "keep": 1}}


def read_events(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]
    except OSError:
        return []


def summarize_events(path):
    ev = read_events(path)
    for e in ev:
        if e["type"] == "hello" and e["rank"] >= 0:
            print(f"  rank {e['rank']} on {e['device']}")
    for e in ev:
        if e["type"] == "epoch":
            print(f"  epoch {e['epoch']}: train loss {e['train_loss']:.4f}, test loss {e['test_loss']:.4f}, "
                  f"test accuracy {e['test_acc']:.4f}, {e['seconds']:.1f} s, {e['samples_per_s']:.0f} samples/s")
    beats = [e for e in ev if e["type"] == "heartbeat" and "gpu_mem_used_bytes" in e]
    if beats:
        print(f"  GPU memory in use (last heartbeat): {beats[-1]['gpu_mem_used_bytes'] / 2**30:.2f} GiB")
    end = [e for e in ev if e["type"] == "end"]
    acc = [e["test_acc"] for e in ev if e["type"] == "epoch"]
    print(f"  end: {end[-1]['status'] if end else '?'} {end[-1]['reason'] if end else ''}")
    return 0 if end and end[-1]["status"] == "succeeded" and acc and acc[-1] >= 0.80 else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc):
    """SIGTERM, and SIGKILL when it is still there 30 s later."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def server_run(ddpd, data_dir, work, timeout):
    """A real ddpd on a loopback port, the 3-epoch run submitted through its API and
    followed to its end; the server is stopped after."""
    os.makedirs(work, exist_ok=True)
    port = free_port()
    log = open(os.path.join(work, "ddpd.log"), "w")
    server = subprocess.Popen([ddpd, "serve", "--listen", f"127.0.0.1:{port}", "--state-dir",
                               os.path.join(work, "state"), "--data-root", os.path.dirname(data_dir)],
                              stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    print(f"  ddpd exited {server.returncode} at start: see {log.name}")
                    return 1
                time.sleep(0.1)
        body = json.dumps(run_config(os.path.basename(data_dir))).encode()
        req = urllib.request.Request(base + "/runs", data=body, headers={"Content-Type": "application/json"},
                                     method="POST")
        try:
            resp = urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as e:
            print(f"  POST /runs: {e.code} {e.read().decode()[:500]}")
            return 1
        created = json.loads(resp.read() or b"{}")
        location = resp.headers.get("Location") or f"/runs/{created.get('id')}"
        print(f"  POST /runs: {resp.status}, {location}")
        deadline, run = time.time() + timeout, {}
        while time.time() < deadline:
            run = json.loads(urllib.request.urlopen(base + location, timeout=10).read())
            if run.get("status") in ("succeeded", "failed", "canceled"):
                break
            time.sleep(1)
        p = run.get("progress") or {}
        print(f"  status {run.get('status')}, reason {run.get('reason')!r}, devices {run.get('devices')}, "
              f"epoch {p.get('epoch')}/{p.get('epochs')}, loss {p.get('loss')}, samples/s {p.get('samples_per_s')}")
        events = glob.glob(os.path.join(work, "state", "runs", "*", "events.jsonl"))
        ok = run.get("status") == "succeeded"
        if events:
            ok = summarize_events(events[0]) == 0 and ok
        return 0 if ok else 1
    finally:
        stop(server)


def cuda_mapped(pid):
    """Whether the process has the NVIDIA driver's CUDA library mapped (a context is
    made through it), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return None


def compute_apps():
    """The pids nvidia-smi lists as holding a CUDA context, or None without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {int(t) for t in out.split() if t.strip().isdigit()}


def fork_safety(trainer, data_dir, work):
    """A run on the GPU, looked at while it trains: the launcher (which forks the ranks)
    must never have made a CUDA context, its rank must have; by nvidia-smi's list of
    compute processes, and by which of them map libcuda."""
    os.makedirs(work, exist_ok=True)
    cfg = run_config(data_dir, "fork-safety")
    cfg["train"]["epochs"] = 2
    cfg["checkpoint"]["every_epochs"] = 0
    path = os.path.join(work, "run.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    run_dir = os.path.join(work, "run")
    proc = subprocess.Popen([trainer, "--config", path, "--run-dir", run_dir], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "stderr.log"), "w"))
    events = os.path.join(run_dir, "events.jsonl")
    ok = False
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and not any(e["type"] == "step" for e in read_events(events)):
            time.sleep(0.1)
        hellos = {e["rank"]: e["pid"] for e in read_events(events) if e["type"] == "hello"}
        launcher, rank = hellos.get(-1), hellos.get(0)
        if launcher is None or rank is None or proc.poll() is not None:
            print(f"  the run did not start training (exit {proc.poll()}; see {work}/stderr.log)")
            return 1
        apps, in_launcher, in_rank = compute_apps(), cuda_mapped(launcher), cuda_mapped(rank)
        print(f"  launcher pid {launcher}, rank 0 pid {rank}; nvidia-smi compute processes: "
              f"{sorted(apps) if apps is not None else 'no nvidia-smi'}")
        print(f"  libcuda mapped: launcher {in_launcher}, rank 0 {in_rank}")
        ok = in_launcher is False and in_rank is True
        if apps:  # (in a container's PID namespace nvidia-smi may list none)
            ok = ok and rank in apps and launcher not in apps
            print(f"  nvidia-smi lists the rank: {rank in apps}; the launcher: {launcher in apps}")
        else:
            print("  nvidia-smi lists no process by pid here (a PID namespace?): judged by libcuda's mapping alone")
        print(f"  fork safety: {'the launcher holds no CUDA context, its rank does' if ok else 'FAILED'}")
        return 0 if ok else 1
    finally:
        stop(proc)


def bench_rows(path, tag):
    try:
        return {r["batch"]: r for r in (json.loads(line.split(": ", 1)[1]) for line in open(path)
                                        if line.startswith(tag))}
    except OSError:
        return {}


def bench_table(ours_path, theirs_path, target, json_out=None):
    ours, torch = bench_rows(ours_path, "bench_gpu_step:"), bench_rows(theirs_path, "torch_mlp_ddp:")
    target = float(target) if target else None
    print()
    print(f"{'batch':>6} {'ddp-trainer':>14} {'PyTorch DDP':>14} {'ratio':>7} {'TFLOP/s':>8} {'of SGEMM peak':>14}")
    rows = []
    for b in sorted(ours):
        o, t = ours[b], torch.get(b)
        theirs = f"{t['samples_per_s']:.0f}/s" if t else "n/a"
        ratio = o["samples_per_s"] / t["samples_per_s"] if t else None
        print(f"{b:>6} {o['samples_per_s']:>12.0f}/s {theirs:>14} {f'{ratio:.2f}x' if ratio else 'n/a':>7} "
              f"{o['tflops']:>8.1f} {100 * o['efficiency']:>13.0f}%")
        if ratio and target:
            print(f"       target: at least {target}x PyTorch's samples/s: {'met' if ratio >= target else 'MISSED'}")
        rows.append({"model": o["model"], "batch": b, "samples_per_s": o["samples_per_s"], "tflops": o["tflops"],
                     "torch_samples_per_s": t["samples_per_s"] if t else None, "ratio": ratio,
                     "sgemm_peak_tflops": o["sgemm_peak_tflops"], "torch": t.get("torch") if t else None})
    if ours:
        print(f"SGEMM peak (cuBLAS 8192^3, FP32, random data): {next(iter(ours.values()))['sgemm_peak_tflops']:.1f} TFLOP/s")
    if json_out:
        with open(json_out, "w") as f:
            json.dump(rows, f)
    return 0 if ours else 1


def summary(outdir):
    """summary.json from run.sh's records: phases.tsv (name, status, seconds, note), the
    pre-flight's JSON and the benchmark's rows; the last line says N passed, M failed."""
    phases = []
    try:
        with open(os.path.join(outdir, "phases.tsv")) as f:
            for line in f:
                name, status, seconds, note = (line.rstrip("\n").split("\t") + ["", "", "", ""])[:4]
                phases.append({"name": name, "status": status, "seconds": int(seconds or 0), "note": note})
    except OSError:
        pass

    def load(name):
        try:
            with open(os.path.join(outdir, name)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    bench = [r for name in ("bench-mlp.json", "bench-cnn.json") for r in (load(name) or [])]
    passed = sum(p["status"] == "passed" for p in phases)
    failed = sum(p["status"] == "failed" for p in phases)
    doc = {"preflight": load("preflight.json"), "host": load("host.json"), "phases": phases, "bench": bench,
           "passed": passed, "failed": failed, "skipped": sum(p["status"] == "skipped" for p in phases)}
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(doc, f, indent=2)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("figures")
    p.add_argument("log")
    p.add_argument("pattern")
    p = sub.add_parser("run-config")
    p.add_argument("data")
    p = sub.add_parser("summarize-events")
    p.add_argument("events")
    p = sub.add_parser("server-run")
    p.add_argument("--ddpd", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--timeout", type=float, default=300)
    p = sub.add_parser("fork-safety")
    p.add_argument("--trainer", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    p = sub.add_parser("bench-table")
    p.add_argument("ours")
    p.add_argument("theirs")
    p.add_argument("target")
    p.add_argument("--json")
    p = sub.add_parser("summary")
    p.add_argument("outdir")
    a = ap.parse_args()
    if a.step == "figures":
        return figures(a.log, a.pattern)
    if a.step == "run-config":
        print(json.dumps(run_config(a.data)))
        return 0
    if a.step == "summarize-events":
        return summarize_events(a.events)
    if a.step == "server-run":
        return server_run(a.ddpd, a.data, a.work, a.timeout)
    if a.step == "fork-safety":
        return fork_safety(a.trainer, a.data, a.work)
    if a.step == "bench-table":
        return bench_table(a.ours, a.theirs, a.target, a.json)
    return summary(a.outdir)


if __name__ == "__main__":
    sys.exit(main())
