#!/usr/bin/env python3
"""The wall's second course: what the server does inside a run's directory, which
belongs to the run's Unix account, never goes where the account could not, never
blocks on what it finds there, and never holds the server's memory hostage. Real
accounts (alice and bob), the server as root (and, in caps_only_sweep_pause_links,
caps_only_delete_race and caps_only_fifo_log, as an account of its own holding only its
six capabilities, which pass every file mode as root does); bob plants things in his
own run directories, as his account, while the server works in them (run_files.h):

  sweep_pause_links   while bob's ASHA trial is paused, his config.json becomes a link
                      to alice's run's config (which holds her API key) and, in a second
                      sweep, config.json.tmp a link to a root-only file: the promotion
                      writes through neither (the root file is unchanged, no file of bob's
                      holds alice's key) and the trial fails saying it met a link
  delete_race         DELETE /runs/X while bob's other run renames X's subdirectories into
                      his third run and puts links to a root-only directory in their place,
                      three rounds: every file of that directory and alice's is still there
  fifo_log            a FIFO where bob's trainer.log was: the run's end (read on the
                      supervisor's thread) and GET /runs/{id}/logs (an HTTP thread) refuse
                      it at once; runs still start and end, /healthz answers
  fifo_catch_up       a FIFO where bob's events.jsonl was, then the same hello on a second
                      connection (a reconnection: ingest catches up from the journal):
                      alice's steps keep being stored
  fifo_recovery       FIFOs where bob's live run's config.json and events.jsonl were, and the
                      server killed with SIGKILL: it starts again, serves, and alice's run,
                      taken back, succeeds
  sparse_journal      a 3 GiB sparse line in bob's live run's journal, the server killed and
                      started again: the replay skips the line without reading or holding
                      it (the server's peak memory stays small), the lines after it are taken
  resume_spawn_ckpt   a FIFO as the checkpoint a new run's checkpoint.load names (POST /runs),
                      as the config a resume reads, and as the log a resumed run's launcher
                      is given; config.json a link to alice's config: each refused at once,
                      saying what was found, nothing of alice's quoted

Every case needs root (it makes accounts); without it the case says why and exits 77.

Usage: test_server_wall_files.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH --runner PATH"""
import json, os, pwd, shutil, signal, stat, subprocess, sys, tempfile, threading, time

from ddpd_harness import Server, Accounts, check, cases_in, wait_until, args_for, main, fmnist_config, add_user, bearer  # noqa: E402
from test_server_wall import (needs_root, submit_as, command, state_dir_for, token_file, as_account_wrapper,  # noqa: E402
                              SKIP)

ALICE_KEY = "sk-alice-0123456789abcdef"
FINAL = ("succeeded", "failed", "canceled", "stopped")


class Wall:
    """A server with alice and bob mapped to their accounts, command runs on: as root, or
    (caps) as an account of its own ("srv", which `acc` must hold) with only the
    capabilities a server needs (setpriv, ambient), which still pass every file mode."""

    def __init__(self, a, acc, slots=3, caps=False):
        self.a, self.acc = a, acc
        self.server_uid = acc.uid("srv") if caps else 0
        self.state = state_dir_for(self.server_uid)
        self.tok = token_file(self.server_uid)
        self.alice = add_user(a.ddpd, self.state, "alice", "--unix-user", acc["alice"])
        self.bob = add_user(a.ddpd, self.state, "bob", "--unix-user", acc["bob"])
        self.admin = add_user(a.ddpd, self.state, "warden", "--admin")
        for f in os.listdir(self.state):
            os.chown(os.path.join(self.state, f), self.server_uid, -1)
        self.wrapper = as_account_wrapper(a.ddpd, acc["srv"], caps=True) if caps else None
        self.slots = slots
        self.s = None

    def server(self):
        self.s = Server(self.wrapper or self.a.ddpd, self.a.trainer, slots=self.slots, state_dir=self.state,
                        extra_args=["--allow-commands", "--runner", self.a.runner, "--token-file", self.tok])
        return self.s

    def submit(self, who, cfg):
        return submit_as(self.s, getattr(self, who), cfg)

    def run(self, rid):
        r = self.s.get(f"/runs/{rid}", headers=bearer(self.admin))
        return r.json() if r.status == 200 else None

    def wait(self, rid, statuses=FINAL, timeout=180):
        statuses = set(statuses)
        got = wait_until(lambda: (lambda r: r if r and r["status"] in statuses else None)(self.run(rid)),
                         f"run {rid} to be {'/'.join(sorted(statuses))}", timeout, interval=0.1)
        if not got:
            self.s.dump_log()
        return got

    def close(self):
        os.unlink(self.tok)
        if self.wrapper:
            os.unlink(self.wrapper)
        shutil.rmtree(self.state, ignore_errors=True)


def accounts(a, caps):
    """The accounts a case makes: alice and bob, and the server's own when it runs with
    capabilities only (setpriv needed: the case is skipped, saying so, without it)."""
    if caps and not shutil.which("setpriv"):
        print(f"{a.case}: skipped: setpriv (util-linux) is not installed")
        sys.exit(SKIP)
    return Accounts("alice", "bob", "srv") if caps else Accounts("alice", "bob")


def server_is(w, s):
    """Checks the server runs as whom the case said: root, or its account with only its
    capabilities."""
    with open(f"/proc/{s.proc.pid}/status") as f:
        status = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
    print(f"  the server: uid {status['Uid'].split()[1]}, effective capabilities {status['CapEff'].strip()}")
    check(int(status["Uid"].split()[1]) == w.server_uid, f"the server runs as uid {w.server_uid}: {status['Uid']}")


def as_account(acc, role, code, *args, timeout=60):
    """Python `code` run as the account (its uid, gid, no groups): what bob's own process
    could do. Its CompletedProcess."""
    pw = pwd.getpwnam(acc[role])

    def become():
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)

    return subprocess.run(["/usr/bin/python3", "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=become)


def root_only(words):
    """A directory of root's alone (0700) holding f0..f9 (0600) with `words`."""
    d = tempfile.mkdtemp(prefix="ddpd-wall-root-")
    os.chmod(d, 0o700)
    for i in range(10):
        with open(os.path.join(d, f"f{i}"), "w") as f:
            f.write(words)
        os.chmod(os.path.join(d, f"f{i}"), 0o600)
    return d


def files_holding(top, needle):
    """Regular files beneath top (links never followed) whose bytes hold needle."""
    found = []
    for root, dirs, files in os.walk(top):
        for n in files:
            p = os.path.join(root, n)
            try:
                if stat.S_ISREG(os.lstat(p).st_mode):
                    with open(p, "rb") as f:
                        if needle.encode() in f.read():
                            found.append(p)
            except OSError:
                pass
    return found


# alice's live run: her config holds her API key; she waits for `release`
ALICE_WAITS = "import os, time\nwhile not os.path.exists('release'):\n    time.sleep(0.05)\nprint('alice done')\n"


def alice_waits(w):
    cfg = command(ALICE_WAITS)
    cfg["env"] = {"OPENAI_API_KEY": ALICE_KEY}
    rid = w.submit("alice", cfg)
    w.wait(rid, ("running",))
    return rid


def release(w, rid):
    with open(os.path.join(w.s.run_dir(rid), "release"), "w"):
        pass
    r = w.wait(rid)
    check(r and r["status"] == "succeeded", f"alice's run succeeded: {r and (r['status'], r['reason'])}")


# ---- sweep_pause_links ----

def case_sweep_pause_links(a):
    sweep_pause_links(a, caps=False)


def case_caps_only_sweep_pause_links(a):
    sweep_pause_links(a, caps=True)


def sweep_pause_links(a, caps):
    needs_root(a)
    with accounts(a, caps) as acc:
        w = Wall(a, acc, slots=3, caps=caps)
        secret_dir = root_only("root's own words")
        target = os.path.join(secret_dir, "f0")
        try:
            with w.server() as s:
                server_is(w, s)
                rid = alice_waits(w)
                alice_cfg = os.path.join(s.run_dir(rid), "config.json")
                base = fmnist_config(**{"name": "asha", "data.limit": 2000, "data.test_limit": 500, "train.epochs": 3,
                                        "distributed.world_size": 1, "model.hidden": [64]})
                sweeps = []
                for name in ("leak", "overwrite"):
                    body = {"name": name, "base": base, "parallel": 1,
                            "parameters": {"train.optimizer.lr": {"values": [0.003, 0.3, 5.0]}},
                            "metric": {"key": "test_loss", "goal": "minimize"},
                            "early_stopping": {"type": "asha", "min_resource": 1, "reduction_factor": 3}}
                    r = s.post("/sweeps", body, headers=bearer(w.bob))
                    check(r.status == 201, f"bob's sweep {name} is accepted: {r.status} {r.body[:300]!r}")
                    sweeps.append(r.json()["id"])

                def first_trial_paused(sid):
                    t = s.get(f"/sweeps/{sid}", headers=bearer(w.bob)).json()["trials"]
                    t0 = next((x for x in t if x["trial"] == 0), None)
                    return t0 if t0 and t0["run_id"] and (w.run(t0["run_id"]) or {}).get("status") == "stopped" else None

                planted = {}
                for sid, name in zip(sweeps, ("leak", "overwrite")):
                    t0 = wait_until(lambda: first_trial_paused(sid), f"sweep {sid}'s first trial paused at its rung",
                                    timeout=240, interval=0.05)
                    if not t0:
                        return
                    tdir = s.run_dir(t0["run_id"])
                    code = ("import os, sys\nd, alice, target, both = sys.argv[1:5]\n"
                            "os.unlink(os.path.join(d, 'config.json'))\n"
                            "os.symlink(alice, os.path.join(d, 'config.json'))\n"
                            "if both == '1': os.symlink(target, os.path.join(d, 'config.json.tmp'))\n"
                            "print('planted')\n")
                    p = as_account(acc, "bob", code, tdir, alice_cfg, target, "1" if name == "overwrite" else "0")
                    check(p.returncode == 0 and "planted" in p.stdout, f"bob plants his links: {p.stdout} {p.stderr}")
                    planted[sid] = t0["run_id"]
                for sid, trial_run in planted.items():
                    sw = wait_until(lambda: (lambda x: x if x["status"] in ("succeeded", "failed", "canceled") else None)(
                        s.get(f"/sweeps/{sid}", headers=bearer(w.bob)).json()), f"sweep {sid} ends", timeout=300)
                    run = w.run(trial_run)
                    trial = next(t for t in (sw or {}).get("trials", []) if t["run_id"] == trial_run) if sw else {}
                    print(f"  sweep {sid}: {sw and (sw['status'], sw.get('reason'))}; its promoted trial's run "
                          f"{trial_run}: {run['status']}: {run['reason']}")
                    check(trial.get("status") == "failed" and "link" in (trial.get("reason") or ""),
                          f"the promotion did not go through bob's link: the trial failed saying so: {trial}")
                    check(run["status"] == "stopped" and "could not continue it" in (run["reason"] or "") and
                          "link" in (run["reason"] or ""), f"its run says why it will not go on: {run['reason']!r}")
                    leaks = files_holding(s.run_dir(trial_run), ALICE_KEY)
                    check(not leaks, f"no file of bob's trial holds alice's key: {leaks}")
                with open(target) as f:
                    words = f.read()
                print(f"  the root-only file: {words[:60]!r}")
                check(words == "root's own words", f"the root-only file bob's link named is unchanged: {words[:200]!r}")
                check(ALICE_KEY not in json.dumps(s.get(f"/sweeps/{sweeps[0]}", headers=bearer(w.bob)).json()),
                      "alice's key is in nothing bob is served")
                check(s.get("/healthz").status == 200, "the server answers")
                release(w, rid)
        finally:
            w.close()
            shutil.rmtree(secret_dir, ignore_errors=True)


# ---- delete_race ----

MAKE_TREE = ("import os\nfor k in range(200):\n    d = 'sub%d' % k\n    os.mkdir(d)\n"
             "    for i in range(50):\n        open(os.path.join(d, 'f%d' % i), 'w').write('bob')\nprint('tree made')\n")

# bob's live run: once the server's walk of X has begun (a subdirectory of X is gone),
# renames every subK left into his run Y and puts a link to the root-only directory
# in its place, so that the walk, inside one of them, goes on through the link
SWAPPER = r"""
import os, sys, time
x, y, outside = sys.argv[1:4]
open('swapping', 'w').close()
deadline = time.time() + 60
while os.path.exists(x) and time.time() < deadline:
    try:
        if len(os.listdir(x)) >= 200:
            continue
    except OSError:
        break
    n = 0
    for name in os.listdir(x):
        sub = os.path.join(x, name)
        try:
            os.rename(sub, os.path.join(y, 'moved-%s-%d' % (name, time.monotonic_ns())))
            os.symlink(outside, sub)
            n += 1
        except OSError:
            pass
    print('swapped', n, flush=True)
    break
"""


def case_delete_race(a):
    delete_race(a, caps=False)


def case_caps_only_delete_race(a):
    delete_race(a, caps=True)


def delete_race(a, caps):
    needs_root(a)
    with accounts(a, caps) as acc:
        w = Wall(a, acc, slots=3, caps=caps)
        outside = root_only("root's own words")
        try:
            with w.server() as s:
                server_is(w, s)
                alice = w.submit("alice", command("open('alice-file', 'w').write('alice')"))
                w.wait(alice)
                y = w.submit("bob", command("print('my other run')"))
                w.wait(y)
                swapped = 0
                for rnd in range(3):
                    x = w.submit("bob", command(MAKE_TREE))
                    r = w.wait(x)
                    check(r and r["status"] == "succeeded", f"round {rnd}: bob's run made its tree: {r and r['reason']}")
                    z = w.submit("bob", command(SWAPPER, s.run_dir(x), s.run_dir(y), outside))
                    wait_until(lambda: os.path.exists(os.path.join(s.run_dir(z), "swapping")), "the swapper runs")
                    d = s.request("DELETE", f"/runs/{x}", headers=bearer(w.bob))
                    check(d.status in (200, 204), f"round {rnd}: bob deletes his run {x}: {d.status} {d.body[:200]!r}")
                    w.wait(z, timeout=120)
                    with open(os.path.join(s.run_dir(z), "trainer.log"), errors="replace") as f:
                        said = [ln.split("swapped ", 1)[1] for ln in f.read().splitlines() if "swapped " in ln]
                    swapped += int(said[0]) if said and said[0].isdigit() else 0
                    left = sorted(os.listdir(outside))
                    print(f"  round {rnd}: bob swapped {said[0] if said else 'no'} subdirectories mid-walk; the "
                          f"root-only directory holds {len(left)} of 10 files")
                    check(len(left) == 10, f"round {rnd}: no file of the root-only directory was deleted: {left}")
                check(swapped > 0, f"bob's swaps met the server's walk (else the attack was not made): {swapped}")
                check(os.path.exists(os.path.join(s.run_dir(alice), "alice-file")), "alice's run's file is still there")
                check(s.get("/healthz").status == 200, "the server answers")
        finally:
            w.close()
            shutil.rmtree(outside, ignore_errors=True)


# ---- fifo_log ----

PLANT_LOG_FIFO_AND_FAIL = ("import os, sys\nos.unlink('trainer.log')\nos.mkfifo('trainer.log', 0o600)\n"
                           "print('fifo planted', flush=True)\nsys.exit(3)\n")
PLANT_LOG_FIFO_AND_WAIT = ("import os, time\nos.unlink('trainer.log')\nos.mkfifo('trainer.log', 0o600)\n"
                           "open('planted', 'w').close()\nwhile not os.path.exists('release'):\n    time.sleep(0.05)\n")


def case_fifo_log(a):
    fifo_log(a, caps=False)


def case_caps_only_fifo_log(a):
    fifo_log(a, caps=True)


def fifo_log(a, caps):
    needs_root(a)
    with accounts(a, caps) as acc:
        w = Wall(a, acc, slots=3, caps=caps)
        try:
            with w.server() as s:
                server_is(w, s)
                b1 = w.submit("bob", command(PLANT_LOG_FIFO_AND_FAIL))
                r = w.wait(b1, timeout=120)
                print(f"  bob's run {b1} ended: {r and (r['status'], r['reason'])}")
                check(r and r["status"] == "failed", f"bob's run ends failed, its end read on the supervisor's thread: "
                      f"{r and (r['status'], r['reason'])}")
                after = w.submit("alice", command("print('alice ran')"))
                r = w.wait(after, timeout=120)
                check(r and r["status"] == "succeeded", f"a run started and reaped after it: the supervisor's thread "
                      f"is not held: {r and (r['status'], r['reason'])}")

                b2 = w.submit("bob", command(PLANT_LOG_FIFO_AND_WAIT))
                wait_until(lambda: os.path.exists(os.path.join(s.run_dir(b2), "planted")), "bob's FIFO planted")
                got = {}

                def read_logs():
                    try:
                        got["r"] = s.get(f"/runs/{b2}/logs", headers=bearer(w.bob), timeout=60)
                    except Exception as e:  # a timeout: the HTTP thread was held
                        got["e"] = e
                reader = threading.Thread(target=read_logs, daemon=True)
                reader.start()
                reader.join(70)
                r = got.get("r")
                print(f"  GET /runs/{b2}/logs: {r.status if r else got.get('e')} {r.body[:200] if r else b''!r}")
                check(r is not None and r.status == 403 and b"FIFO" in r.body,
                      f"GET logs of a FIFO: a 403 saying so, at once: {r and r.status} {r and r.body[:300]!r} "
                      f"{got.get('e')}")
                check(s.get("/healthz", timeout=20).status == 200, "/healthz answers")
                with open(os.path.join(s.run_dir(b2), "release"), "w"):
                    pass
                w.wait(b2, timeout=120)
        finally:
            w.close()


# ---- fifo_catch_up ----

ALICE_STEPS = ("import os, time, ddpd\ng = 0\nwhile not os.path.exists('release'):\n    g += 1\n"
               "    ddpd.log_step(g, loss=1.0 / g)\n    time.sleep(0.05)\nddpd.flush()\n")

RECONNECT_ON_FIFO = r"""
import json, os, socket, time
env = os.environ
hello = {"run": env["DDPD_RUN_ID"], "rank": int(env.get("RANK", "0")), "seq": 0, "t": int(time.time() * 1000),
         "type": "hello", "pid": os.getpid(), "host": "bob", "device": "cpu", "world_size": 1,
         "secret": env["DDPD_RUN_SECRET"]}
line = (json.dumps(hello) + "\n").encode()
s1 = socket.socket(socket.AF_UNIX); s1.connect(env["DDPD_EVENTS_SOCKET"]); s1.sendall(line)
time.sleep(1); s1.close()
journal = env.get("DDPD_EVENTS_JOURNAL") or "events.jsonl"
os.unlink(journal); os.mkfifo(journal, 0o600)
s2 = socket.socket(socket.AF_UNIX); s2.connect(env["DDPD_EVENTS_SOCKET"]); s2.sendall(line)
open('planted', 'w').close()
print('reconnected over a FIFO', flush=True)
while not os.path.exists('release'):
    time.sleep(0.05)
"""


def case_fifo_catch_up(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        w = Wall(a, acc, slots=3)
        try:
            with w.server() as s:
                alice = w.submit("alice", command(ALICE_STEPS))
                wait_until(lambda: ((w.run(alice) or {}).get("progress") or {}).get("global_step"), "alice's steps")
                bob = w.submit("bob", command(RECONNECT_ON_FIFO))
                wait_until(lambda: os.path.exists(os.path.join(s.run_dir(bob), "planted")), "bob's reconnection")
                time.sleep(1)  # ingest has the second hello by now, and (before the fix) sat on the FIFO
                step = lambda: ((w.run(alice) or {}).get("progress") or {}).get("global_step") or 0  # noqa: E731
                first = step()
                later = wait_until(lambda: step() if step() >= first + 20 else None,
                                   "alice's later steps stored (ingest not held by bob's FIFO)", timeout=60)
                print(f"  alice's stored step: {first} when bob reconnected over his FIFO, then {later}")
                check(later, "ingest goes on")
                check(s.get("/healthz", timeout=20).status == 200, "/healthz answers")
                for rid in (alice, bob):
                    with open(os.path.join(s.run_dir(rid), "release"), "w"):
                        pass
                r = w.wait(alice)
                check(r and r["status"] == "succeeded", f"alice's run succeeded: {r and r['reason']}")
                w.wait(bob)
        finally:
            w.close()


# ---- fifo_recovery and sparse_journal: the server killed under bob's planted files ----

PLANT_FIFOS_AND_WAIT = ("import os, time\nfor f in ('config.json', 'events.jsonl'):\n    os.unlink(f)\n"
                        "    os.mkfifo(f, 0o600)\nopen('planted', 'w').close()\n"
                        "while not os.path.exists('release'):\n    time.sleep(0.05)\n")

SPARSE_LINE_AND_WAIT = r"""
import os, time, ddpd
ddpd.log_step(1, loss=1.0); ddpd.flush()
journal = os.environ.get("DDPD_EVENTS_JOURNAL") or "events.jsonl"
fd = os.open(journal, os.O_WRONLY)
end = os.lseek(fd, 0, os.SEEK_END)
os.lseek(fd, end + (3 << 30), os.SEEK_SET)  # 3 GiB of nothing, then the line's end
os.write(fd, b"\n")
os.close(fd)
open('planted', 'w').close()
while not os.path.exists('go-on'):
    time.sleep(0.05)
ddpd.log_step(2, loss=0.5); ddpd.flush()
while not os.path.exists('release'):
    time.sleep(0.05)
"""


def peak_memory_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def restarted(w, a, acc, bob_script, after_restart):
    """alice's run and bob's `bob_script` live; the server killed (SIGKILL) once bob
    planted his files; started again on the same state dir; after_restart(s2, alice, bob)."""
    s1 = w.server()
    s1.start()
    try:
        alice = w.submit("alice", command(ALICE_WAITS))
        w.wait(alice, ("running",))
        bob = w.submit("bob", command(bob_script))
        wait_until(lambda: os.path.exists(os.path.join(s1.run_dir(bob), "planted")), "bob's files planted")
    finally:
        s1.kill()
    with w.server() as s2:
        check(s2.get("/healthz", timeout=20).status == 200, "the restarted server answers")
        after_restart(s2, alice, bob)
        for rid in (alice, bob):
            for f in ("go-on", "release"):
                with open(os.path.join(s2.run_dir(rid), f), "w"):
                    pass
        r = w.wait(alice)
        check(r and r["status"] == "succeeded", f"alice's run, taken back, succeeded: {r and (r['status'], r['reason'])}")
        w.wait(bob)


def case_fifo_recovery(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        w = Wall(a, acc, slots=3)
        try:
            def after(s, alice, bob):
                r = w.run(bob)
                print(f"  after the restart: bob's run {bob} is {r and r['status']}, /healthz "
                      f"{s.get('/healthz').status}")
                check(r is not None, "bob's run is served")
            restarted(w, a, acc, PLANT_FIFOS_AND_WAIT, after)
        finally:
            w.close()


def case_sparse_journal(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        w = Wall(a, acc, slots=3)
        try:
            def after(s, alice, bob):
                with open(os.path.join(s.run_dir(bob), "go-on"), "w"):
                    pass
                wait_until(lambda: ((w.run(bob) or {}).get("progress") or {}).get("global_step") == 2,
                           "bob's step after the sparse line is stored", timeout=120)
                with open(s.log_path, errors="replace") as f:
                    log = f.read()
                check("longer than 16 MiB skipped" in log, "the replay says it skipped the overlong line")
                peak = peak_memory_kib(s.proc.pid)
                print(f"  the restarted server's peak memory: {peak} KiB")
                check(peak is not None and peak < 512 * 1024,
                      f"the 3 GiB line was never held: the server's peak memory is {peak} KiB")
            restarted(w, a, acc, SPARSE_LINE_AND_WAIT, after)
        finally:
            w.close()


# ---- resume_spawn_ckpt ----

def case_resume_spawn_ckpt(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        w = Wall(a, acc, slots=3)
        try:
            with w.server() as s:
                alice = alice_waits(w)
                alice_cfg = os.path.join(s.run_dir(alice), "config.json")
                cfg = fmnist_config(**{"name": "paused", "data.limit": 1000, "data.test_limit": 200, "train.epochs": 2,
                                       "train.stop_after_epochs": 1, "checkpoint.every_epochs": 1,
                                       "distributed.world_size": 1, "model.hidden": [32]})
                r1 = w.submit("bob", cfg)
                r = w.wait(r1)
                check(r and r["status"] == "stopped", f"bob's run stopped after its first epoch: {r and r['reason']}")
                d = s.run_dir(r1)
                ckpt = os.path.join(d, "checkpoints", "epoch-0000.safetensors")
                shutil.copy2(ckpt, ckpt + ".kept")

                def fifo_in_place(path):
                    p = as_account(acc, "bob", "import os, sys\nos.rename(sys.argv[1], sys.argv[1] + '.real')\n"
                                   "os.mkfifo(sys.argv[1], 0o600)\n", path)
                    check(p.returncode == 0, f"bob puts a FIFO at {os.path.basename(path)}: {p.stderr}")

                def put_back(path):
                    p = as_account(acc, "bob", "import os, sys\nos.unlink(sys.argv[1])\n"
                                   "os.rename(sys.argv[1] + '.real', sys.argv[1])\n", path)
                    check(p.returncode == 0, f"bob puts {os.path.basename(path)} back: {p.stderr}")

                def timed(method, path, body=None):
                    got = {}

                    def go():
                        try:
                            got["r"] = s.request(method, path, body=body, headers=bearer(w.bob), timeout=60)
                        except Exception as e:
                            got["e"] = e
                    t = threading.Thread(target=go, daemon=True)
                    t.start()
                    t.join(70)
                    return got.get("r"), got.get("e")

                # the checkpoint reader: a new run's checkpoint.load names a FIFO
                fifo_in_place(ckpt)
                load = dict(cfg, name="from-fifo", checkpoint={"load": f"{r1}/checkpoints/epoch-0000.safetensors"})
                load["train"] = dict(cfg["train"])
                del load["train"]["stop_after_epochs"]
                r, e = timed("POST", "/runs", load)
                print(f"  POST /runs loading a FIFO: {r.status if r else e} {r.body[:200] if r else b''!r}")
                check(r is not None and r.status == 400 and (b"FIFO" in r.body or b"not a readable regular file" in r.body),
                      f"a checkpoint.load of a FIFO is refused at once, saying so: {r and r.status} "
                      f"{r and r.body[:300]!r} {e}")
                # ... and the newest checkpoint a resume reads
                r, e = timed("POST", f"/runs/{r1}/resume")
                print(f"  resume with a FIFO as its checkpoint: {r.status if r else e} {r.body[:200] if r else b''!r}")
                check(r is not None and r.status == 409, f"a resume from a FIFO is refused at once: {r and r.status} {e}")
                put_back(ckpt)

                # the config a resume reads
                cfg_path = os.path.join(d, "config.json")
                fifo_in_place(cfg_path)
                r, e = timed("POST", f"/runs/{r1}/resume")
                print(f"  resume with a FIFO as its config: {r.status if r else e} {r.body[:200] if r else b''!r}")
                check(r is not None and r.status == 409 and b"FIFO" in r.body,
                      f"a resume whose config is a FIFO is refused at once, saying so: {r and r.status} "
                      f"{r and r.body[:300]!r} {e}")
                put_back(cfg_path)

                # a link to alice's config: refused as a link, nothing of hers quoted
                p = as_account(acc, "bob", "import os, sys\nos.rename(sys.argv[1], sys.argv[1] + '.real')\n"
                               "os.symlink(sys.argv[2], sys.argv[1])\n", cfg_path, alice_cfg)
                check(p.returncode == 0, f"bob links his config to alice's: {p.stderr}")
                r, e = timed("POST", f"/runs/{r1}/resume")
                print(f"  resume with a link to alice's config: {r.status if r else e} {r.body[:200] if r else b''!r}")
                check(r is not None and r.status == 409 and b"link" in r.body and ALICE_KEY.encode() not in r.body,
                      f"a resume through a link is refused, nothing of alice's quoted: {r and r.status} "
                      f"{r and r.body[:300]!r}")
                put_back(cfg_path)

                # the log a resumed run's launcher is given (on the supervisor's thread)
                fifo_in_place(os.path.join(d, "trainer.log"))
                r, e = timed("POST", f"/runs/{r1}/resume")
                check(r is not None and r.status == 202, f"the resume is queued: {r and r.status} {r and r.body[:300]!r}")
                got = w.wait(r1, ("failed", "succeeded"), timeout=120)
                print(f"  the resumed run with a FIFO as its log: {got and (got['status'], got['reason'])}")
                check(got and got["status"] == "failed" and "FIFO" in (got["reason"] or ""),
                      f"its start fails saying the log is a FIFO: {got and (got['status'], got['reason'])}")
                after = w.submit("alice", command("print('alice ran')"))
                r2 = w.wait(after, timeout=120)
                check(r2 and r2["status"] == "succeeded", "a run starts and ends after it: the supervisor is not held")
                release(w, alice)
        finally:
            w.close()


if __name__ == "__main__":
    cases = cases_in(globals())
    main(cases, args_for(cases, ["--runner"]))
