#!/usr/bin/env python3
"""Integration tests of ddpd against hostile and careless clients, each on a real
server on a loopback port: a body with a huge number of bad items gets a small answer
(the first violations and their count), the token read from a file instead of the
command line, run ids and static paths only in their canonical spelling, and strict
request framing (duplicate or conflicting length headers, unknown transfer codings)
checked on raw sockets.

Usage: test_server_hostile.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import json, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddpd_harness import Server, check, cases_in, args_for, main, fmnist_config  # noqa: E402


def vm_kib(pid, field):
    """A VmXXX line of /proc/PID/status, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def case_errors_capped(a):
    """262 000 bad items in a body of about 1 MiB: the answer lists the first 100 and
    counts them all; it stays small, and so does the server's memory."""
    n_bad = 262_000
    hidden = "[" + ",".join(["-1"] * n_bad) + "]"
    cfg = fmnist_config()
    body = json.dumps(cfg).replace('"hidden": [128, 64]', '"hidden": ' + hidden)
    check(len(body) > 700_000 and len(body) < 1024 * 1024, f"the body is just under 1 MiB ({len(body)} bytes)")
    with Server(a.ddpd, a.fake_trainer) as s:
        peak_before = vm_kib(s.proc.pid, "VmHWM")
        for attempt in range(3):  # more than once: nothing is kept from one to the next
            r = s.post("/runs", body, headers={"Content-Type": "application/json"}, timeout=120)
            check(r.status == 400, f"attempt {attempt}: 400, got {r.status}")
            check(len(r.body) < 64 * 1024, f"attempt {attempt}: an answer under 64 KiB, got {len(r.body)} bytes")
            p = r.json()
            errors = p.get("errors") or []
            check(len(errors) == 100, f"100 errors listed, got {len(errors)}")
            check(p.get("error_count", 0) >= n_bad, f"error_count counts every bad item ({n_bad}+), got {p.get('error_count')}")
            check(f"{p.get('error_count')} violations; the first 100 are listed" in p.get("detail", ""),
                  f"the detail says how many and that the first 100 are listed: {p.get('detail')!r}")
            check(errors and errors[0].get("pointer", "").startswith("/model/hidden"),
                  f"the first listed is at /model/hidden/...: {errors[:1]}")
        grown = vm_kib(s.proc.pid, "VmHWM") - peak_before
        check(grown < 150 * 1024, f"the server's peak memory grew by less than 150 MiB, grew by {grown // 1024} MiB")
        # A config with a few problems still lists them all, with their count.
        r = s.post("/runs", fmnist_config(**{"train.epochs": 0, "train.batch_size": 0}))
        p = r.json()
        check(r.status == 400 and p.get("error_count") == len(p.get("errors", [])) == 2,
              f"two problems: both listed and error_count 2: {p}")
        check(s.get("/runs").json().get("runs") == [], "nothing was stored")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
