#!/usr/bin/env python3
"""ddpd on a real full disk: the state directory on a small tmpfs of its own, filled
with a file while a run is active, then emptied again.

- mid_run: a `hold` run (the fake trainer says hello and falls silent; this test
  speaks for its rank 0 and its launcher over the event socket) gets steps while the
  disk fills, until the store cannot write. Meanwhile GET /healthz answers 503 with
  a problem naming the reason and the writes waiting, /metrics says the store is not
  writable, a new run is refused with 503, and the run's end (its last steps, `end
  succeeded`, the trainer's exit) is kept, not lost: the scheduler has let the run go
  while the database still says running. Once the filler is removed, everything is
  written in order: the run is succeeded with every step, /healthz is 200, and a new
  run goes through. The 503 answers are validated against schema/openapi.json.
- start_full: `ddpd serve` on a full disk, with no database yet and with one made
  by an earlier server, says "no space left on DIR" in one line (not "disk I/O
  error") and exits non-zero; once there is space it serves again.

Mounting needs root (CAP_SYS_ADMIN); where it is not possible the cases are skipped
(exit 77, ctest's SKIP_RETURN_CODE) with a message saying why. The tmpfs is unmounted
whatever happens.

Usage: test_server_full_disk.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import errno, json, os, shutil, signal, subprocess, sys, tempfile

from ddpd_harness import cases_in, Server, check, wait_until, args_for, main  # noqa: E402
from fake_trainer import Conn  # noqa: E402
import openapi_contract  # noqa: E402  (answers against schema/openapi.json)

SKIP = 77
HOLD = {"name": "hold", "distributed": {"world_size": 1}}


def skip(why):
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


class Tmpfs:
    """A tmpfs of `size` on a fresh directory, unmounted and removed on exit."""

    def __init__(self, size):
        self.size = size
        self.dir = None
        self.filler = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="ddpd-full-disk-")
        try:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0700", "tmpfs", self.dir],
                               capture_output=True, text=True)
            failed = r.returncode != 0 and (r.stderr.strip() or f"exit status {r.returncode}")
        except OSError as e:
            failed = str(e)
        if failed:
            os.rmdir(self.dir)
            skip(f"cannot mount a tmpfs here ({failed}): these tests fill a real disk and need root with mount "
                 "(CAP_SYS_ADMIN)")
        self.filler = os.path.join(self.dir, "filler")
        return self

    def __exit__(self, *exc):
        r = subprocess.run(["umount", self.dir], capture_output=True, text=True)
        if r.returncode != 0:  # still busy (a process left behind): detach it anyway
            check(False, f"the tmpfs unmounts: {r.stderr.strip()}")
            subprocess.run(["umount", "-l", self.dir])
        os.rmdir(self.dir)
        return False

    def free_bytes(self):
        v = os.statvfs(self.dir)
        return v.f_bfree * v.f_frsize

    def fill(self):
        """Writes the filler until the disk has no room left."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for chunk in (1 << 20, 4096):
                block = b"\0" * chunk
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)
        return check(self.free_bytes() == 0, f"the disk is full: {self.free_bytes()} bytes free")

    def unfill(self):
        os.unlink(self.filler)


def metric(s, name):
    for line in s.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Speaker:
    """This test speaking for a `hold` run's rank 0 and its launcher."""

    def __init__(self, s, rid):
        self.info = wait_until(lambda: read_json(os.path.join(s.run_dir(rid), "hold.json")),
                               f"run {rid}'s trainer to write hold.json", timeout=60)
        self.rank = Conn(self.info["events"], self.info["run"], 0)
        self.rank.hello(self.info["secret"], epochs=1, steps_per_epoch=1000000, total_steps=1000000)
        self.g = 0

    def steps(self, n):
        """n more steps, in arrays of 250."""
        for start in range(0, n, 250):
            batch = []
            for _ in range(min(250, n - start)):
                self.g += 1
                batch.append(self.rank.ev("step", epoch=0, step=self.g - 1, global_step=self.g, loss=1.0 / self.g,
                                          lr=0.001, samples_per_s=1000.0))
            self.rank.send(*batch)

    def end(self):
        self.rank.send(self.rank.ev("status", state="done", detail=""))
        self.rank.close()
        launcher = Conn(self.info["events"], self.info["run"], -1)
        launcher.hello(self.info["secret"])
        launcher.send(launcher.ev("end", status="succeeded", reason=""))
        launcher.close()


def case_mid_run(a):
    logs = tempfile.mkdtemp(prefix="ddpd-full-disk-log-")
    try:
        with Tmpfs("48m") as disk:
            state = os.path.join(disk.dir, "state")
            with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state, log_dir=logs) as s:
                mid_run(s, disk, openapi_contract.checker())
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def mid_run(s, disk, api):
    rid = s.submit(HOLD)
    if not s.wait_status(rid, "running", timeout=60):
        return
    pid = s.run(rid)["pid"]
    t = Speaker(s, rid)
    t.steps(100)
    wait_until(lambda: (s.run(rid)["progress"]["global_step"] or 0) >= 100, "the first 100 steps to be stored")
    r = s.get("/healthz")
    check(r.status == 200 and r.json()["store"]["writable"] is True and r.json()["store"]["pending"] == 0,
          f"healthz: 200, the store writable: {r.status} {r.body[:300]!r}")
    api.response("GET", "/healthz", r, "GET /healthz before the disk fills")

    if not disk.fill():
        return

    # Steps keep coming: sooner or later a commit needs room the disk does not have.
    def unwritable():
        r = s.get("/healthz")
        if r.status == 503:
            return r
        if t.g < 150000:
            t.steps(2000)
        return None

    r = wait_until(unwritable, "GET /healthz to say 503 while the disk is full", timeout=120)
    if not r:
        return
    body = r.json()
    check((r.header("Content-Type") or "").startswith("application/problem+json"), f"a problem: {r.header('Content-Type')}")
    detail = body.get("detail", "")
    check("the database cannot be written: database or disk is full" in detail and "writes waiting" in detail
          and "<state-dir>/ddpd.db" in detail and "free space" in detail,
          f"the detail names the reason, the file, what waits and what to do: {detail}")
    store = body.get("store", {})
    check(store.get("writable") is False and store.get("pending", 0) > 0 and "full" in store.get("reason", ""),
          f"the store's state: {store}")
    api.response("GET", "/healthz", r, "GET /healthz while the disk is full")
    check(metric(s, "ddpd_store_writable") == 0, "/metrics: ddpd_store_writable 0")
    check((metric(s, "ddpd_store_pending_writes") or 0) > 0,
          f"/metrics: writes pending: {metric(s, 'ddpd_store_pending_writes')}")
    check((metric(s, "ddpd_store_unwritable_seconds") or 0) >= 0, "/metrics: how long it has not been writable")

    refused = s.post("/runs", HOLD)
    check(refused.status == 503 and "the database cannot be written" in refused.json().get("detail", ""),
          f"a new run is refused with 503 naming why: {refused.status} {refused.body[:300]!r}")
    api.response("POST", "/runs", refused, "POST /runs while the disk is full")
    check((metric(s, "ddpd_store_refused_writes_total") or 0) >= 1, "/metrics: the refused run is counted")
    gone = s.request("DELETE", "/runs/999")
    check(gone.status == 404, f"a delete of no run is still 404 (reads work): {gone.status}")
    check(s.run(rid)["status"] == "running", "the run reads as running: the reads still work")

    # The run ends while nothing can be written: its last steps, its end, its exit.
    t.steps(500)
    last = t.g
    t.end()
    os.kill(pid, signal.SIGUSR1)
    wait_until(lambda: s.get("/healthz").json()["devices"]["active"] == 0,
               "the scheduler to let the run go (the trainer exited)", timeout=60)
    r = s.get("/healthz")
    check(r.status == 503, f"still 503 while the disk is full: {r.status}")
    check(s.run(rid)["status"] == "running", "its final status is not written yet (kept, not lost)")

    disk.unfill()
    back = wait_until(lambda: s.get("/healthz").status == 200, "GET /healthz to be 200 once there is space", timeout=120)
    if not back:
        return
    run = s.wait_status(rid, "succeeded", timeout=60)
    if not run:
        return
    check(run["progress"]["global_step"] == last, f"its progress is its last step {last}: {run['progress']}")
    m = s.get(f"/runs/{rid}/metrics?key=loss").json()
    steps = [p[0] for p in m["points"]]
    check(m["count"] == last and steps == list(range(1, last + 1)),
          f"every step is written, once, in order: {m['count']} points, first {steps[:3]}, last {steps[-3:]}")
    ranks = s.get(f"/runs/{rid}/ranks").json()
    rank0 = [x for x in (ranks if isinstance(ranks, list) else ranks.get("ranks", [])) if x.get("rank") == 0]
    check(rank0 and rank0[0].get("state") == "done", f"rank 0's last status is written: {rank0}")
    h = s.get("/healthz")
    check(h.json()["store"]["writable"] is True and h.json()["store"]["pending"] == 0,
          f"nothing waits any more: {h.json()['store']}")
    api.response("GET", "/healthz", h, "GET /healthz after space came back")
    check(metric(s, "ddpd_store_writable") == 1 and metric(s, "ddpd_store_pending_writes") == 0,
          "/metrics: writable, nothing pending")
    again = s.submit({"name": "steps-20", "distributed": {"world_size": 1}})
    check(s.wait_status(again, "succeeded", timeout=60) is not None, "a new run goes through once there is space")


def start(a, state, logs):
    """ddpd serve on `state`: (exit status, its stderr), or (None, stderr) when it
    started listening (then it is stopped)."""
    cmd = [a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--slots", "1", "--gpus", "none",
           "--trainer", a.fake_trainer]
    err_path = os.path.join(logs, "start.err")
    with open(err_path, "wb") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        line = p.stdout.readline().decode()
        if "listening on" in line:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
            rc = None
        else:
            rc = p.wait(60)
    with open(err_path, errors="replace") as f:
        return rc, f.read()


def case_start_full(a):
    logs = tempfile.mkdtemp(prefix="ddpd-full-disk-log-")
    try:
        with Tmpfs("8m") as disk:
            fresh, made = os.path.join(disk.dir, "fresh"), os.path.join(disk.dir, "made")
            os.mkdir(fresh, 0o700)  # this user's only, as ddpd keeps it: no tightening warning
            rc, err = start(a, made, logs)  # an earlier server makes its database, and stops
            check(rc is None and os.path.exists(os.path.join(made, "ddpd.db")), f"a server starts on {made}: {err}")
            if not disk.fill():
                return
            for state, what in ((fresh, "no database yet"), (made, "its database made before")):
                rc, err = start(a, state, logs)
                lines = [ln for ln in err.splitlines() if ln.strip()]
                check(rc is not None and rc != 0, f"{what}: serve exits non-zero on a full disk: {rc}")
                check(lines and lines[-1].startswith(f"ddpd: no space left on {state} "),
                      f"{what}: it says no space left on {state}: {lines[-1:] }")
                said = [ln for ln in lines if "no space" in ln or "disk I/O" in ln or "full" in ln]
                check(len(said) == 1 and "disk I/O error" not in err,
                      f"{what}: one line about it, not 'disk I/O error': {said}")
            disk.unfill()
            for state, what in ((fresh, "no database yet"), (made, "its database made before")):
                rc, err = start(a, state, logs)
                check(rc is None, f"{what}: once there is space, it serves again: {rc} {err[-500:]}")
    finally:
        shutil.rmtree(logs, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
