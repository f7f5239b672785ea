#!/usr/bin/env python3
"""The GPU bundle (scripts/gpu-bundle.sh), made from this build and run here as it
would be on a bare GPU machine: under env -i, with nothing but its own libraries
beside the C library's and the CUDA toolkit's runtime, and no GPU visible
(CUDA_VISIBLE_DEVICES empty, so that a host with one answers the same).

Usage: test_gpu_bundle.py CASE --build BUILD --source SOURCE. The bundle is made in
BUILD/gpu-bundle once per build (its libraries' archive is kept), under a lock, so
the cases may run side by side."""
import argparse, fcntl, json, os, subprocess, sys, tempfile

import checks  # noqa: E402  (the one pass/fail count)
from checks import check, cases_in  # noqa: E402

BUILD = SOURCE = None
PROGRAMS = ["ddp-trainer", "ddp-trainer-nccl", "ddpd", "test_gpu_kernels", "test_gpu_engine", "bench_gpu_step",
            "optim_replay_nccl", "gpu_preflight"]
MAX_BYTES = 60 * 1024 * 1024


def bundle():
    """BUILD/gpu-bundle, made again when a program or a bundled file is newer than it."""
    path = os.path.join(BUILD, "gpu-bundle")
    inputs = [os.path.join(BUILD, "bin", p) for p in PROGRAMS] + [
        os.path.join(SOURCE, f) for f in ("scripts/gpu-bundle.sh", "scripts/gpu-bundle-run.sh", "scripts/gpu_check_steps.py",
                                          "tests/integration/gpu/test_gpu_e2e.py", "tests/integration/trainer/test_optim_torch.py")]
    with open(os.path.join(BUILD, "gpu-bundle.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        manifest = os.path.join(path, "MANIFEST.json")
        fresh = os.path.exists(manifest) and all(os.path.getmtime(f) <= os.path.getmtime(manifest) for f in inputs)
        if not fresh:
            p = subprocess.run([os.path.join(SOURCE, "scripts", "gpu-bundle.sh"), "--from-build", BUILD, path],
                               capture_output=True, text=True, timeout=540)
            print(p.stdout.strip())
            if not check(p.returncode == 0, f"gpu-bundle.sh exits 0: {p.returncode} {p.stderr.strip()[-2000:]}"):
                checks.finish("gpu_bundle")
    return path


def run_bare(path, out, **env):
    """DIR/run.sh OUTDIR under env -i: no variable but those given."""
    cmd = ["env", "-i", "CUDA_VISIBLE_DEVICES="] + [f"{k}={v}" for k, v in env.items()] + [
        "/bin/bash", os.path.join(path, "run.sh"), out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout + p.stderr


def size_of(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def listing(path):
    return sorted((os.path.relpath(os.path.join(d, f), path), os.path.getmtime(os.path.join(d, f)))
                  for d, _, files in os.walk(path) for f in files)


def case_without_gpu(work):
    """The bundle is at most 60 MiB; its run.sh, under env -i, finds CUDA's libraries,
    loads every program with nothing missing and every library not CUDA's or the C
    library's from the bundle, reports the versions, says there is no GPU and exits
    0, writing only under OUTDIR."""
    path = bundle()
    size = size_of(path)
    check(size <= MAX_BYTES, f"the bundle is at most 60 MiB: {size / 2**20:.1f} MiB")
    manifest = json.load(open(os.path.join(path, "MANIFEST.json")))
    check(set(manifest["programs"]) == set(PROGRAMS) and manifest["needs"]["glibc"],
          f"the manifest names the programs and the glibc needed: {manifest['programs']} {manifest['needs']}")
    check(all(lib["package"] != "?" for lib in manifest["libraries"]),
          f"each bundled library names its Debian package: {[lib['name'] for lib in manifest['libraries'] if lib['package'] == '?']}")
    before = listing(path)
    out = os.path.join(work, "out")
    rc, text = run_bare(path, out)
    print(text)
    check(rc == 0, f"run.sh exits 0 without a GPU: {rc}")
    check("no GPU: " in text, "it says there is no GPU")
    for p in PROGRAMS:
        check(f"ldd {p}: all found: " in text and "from the bundle" in text, f"{p} loads with every library found")
    check("STOP" not in text and "outside the bundle" not in text, "no library came from outside the bundle")
    check("cuBLAS " in text and "NCCL " in text and "glibc: " in text, "it reports glibc's, cuBLAS's and NCCL's versions")
    summary = json.load(open(os.path.join(out, "summary.json")))
    check(summary["failed"] == 0 and any(p["name"] == "gpu" and p["status"] == "skipped" for p in summary["phases"]),
          f"summary.json: nothing failed, the GPU phases skipped: {summary['phases']}")
    check(summary["preflight"] and summary["preflight"]["nccl"] and summary["preflight"]["cublas"],
          f"summary.json holds the pre-flight's versions: {summary['preflight']}")
    last = text.strip().splitlines()[-1]
    check(last == f"{summary['passed']} passed, 0 failed", f"the last line counts the phases: {last!r}")
    check(os.path.exists(os.path.join(out, "run.log")), "run.log is in OUTDIR")
    check(listing(path) == before, "run.sh wrote nothing into the bundle")


def case_missing_cuda_library(work):
    """Where CUDA's libraries are not found, the pre-flight says which in one line and
    the check ends with status 3, before anything runs."""
    path = bundle()
    out = os.path.join(work, "out")
    rc, text = run_bare(path, out, DDPD_BUNDLE_CUDA_SEARCH=os.path.join(work, "no-cuda-here"))
    print(text)
    stops = [line for line in text.splitlines() if line.startswith("STOP: ")]
    check(rc == 3, f"exit status 3: {rc}")
    check(len(stops) == 1 and "libcudart.so.13 is missing" in stops[0] and "DDPD_BUNDLE_CUDA_SEARCH" in stops[0],
          f"one line names the library and what to do: {stops}")
    check(text.strip().splitlines()[-1] == "0 passed, 1 failed", "the last line counts the failed pre-flight")


CASES = cases_in(globals())


def main():
    global BUILD, SOURCE
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    BUILD, SOURCE = os.path.abspath(a.build), os.path.abspath(a.source)
    with tempfile.TemporaryDirectory(prefix="ddpd-gpu-bundle-") as work:
        CASES[a.case](work)
    checks.finish(f"gpu_bundle_{a.case}")


if __name__ == "__main__":
    main()
