#!/usr/bin/env python3
"""The gates a run passes, attacked by one member of a shared server against another:
a real ddpd as root, real Unix accounts alice and bob (the harness's Accounts, made
and removed by the test), the real ddp-trainer and ddp-run. Root only: without it a
case says why and is skipped (exit 77). The sweeps' side is tests/integration/sweeps/test_sweep_gates.py.

  resume_edited_config  bob's account edits checkpoint.load in its own run's
                        config.json to alice's checkpoint (straight, and through ".."
                        out of his own run), then bob (and an admin) resumes the run:
                        403 naming alice, the run stays as it was and nothing starts
  resume_source_deleted a run started from another run of its owner's, since
                        deleted, resumes from its own checkpoint (the gates refuse
                        no more than they should)
  resume_lowered_limit  a command run of bob's whose priority his limit no longer
                        allows (ddpd user set --max-priority) is not resumed: 403
                        naming the limit, and it stays canceled
  argv_hidden           a command run's arguments (a secret-looking one) are nowhere
                        in its log, its rank's log (a restart's banner included) or
                        GET /runs/{id}/logs for anybody, nor where its program cannot
                        be started; the program's name and how many arguments it had are
  proc_cmdline_hidepid  what the host still shows: another account reads a rank's
                        arguments in /proc/PID/cmdline, and none with /proc mounted
                        hidepid=2 (in a mount namespace of the test's own)

Usage: test_server_gates.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH --runner PATH"""
import hashlib, os, pwd, shutil, subprocess, sys, tempfile

from ddpd_harness import (Server, Accounts, check, cases_in, args_for, main, fmnist_config, add_user, user,  # noqa: E402
                          bearer, wait_until)
from openapi_contract import checker as openapi_checker  # noqa: E402  (answers against schema/openapi.json)

SKIP = 77
FINAL = ("succeeded", "failed", "canceled")


def needs_root(a):
    if os.geteuid() != 0:
        print(f"{a.case}: skipped: it makes Unix accounts and starts the server as root; run it as root (CI does)")
        sys.exit(SKIP)


class Team:
    """A root server with users alice and bob (each an account of their own; bob's
    --max-priority 5) and the server's token file."""

    def __init__(self, a, acc):
        self.state = tempfile.mkdtemp(prefix="ddpd-gates-")
        fd, self.token_path = tempfile.mkstemp(prefix="ddpd-gates-token-")
        self.token = hashlib.sha256(os.urandom(16)).hexdigest()
        os.write(fd, (self.token + "\n").encode())
        os.close(fd)
        os.chmod(self.token_path, 0o600)
        self.alice = add_user(a.ddpd, self.state, "alice", "--unix-user", acc["alice"])
        self.bob = add_user(a.ddpd, self.state, "bob", "--unix-user", acc["bob"], "--max-priority", "5")
        self.acc = acc
        self.server = Server(a.ddpd, a.trainer, slots=2, state_dir=self.state,
                             extra_args=["--allow-commands", "--runner", a.runner, "--token-file", self.token_path])

    def __enter__(self):
        self.server.__enter__()
        self.server.read_headers = bearer(self.token)
        return self

    def __exit__(self, *exc):
        try:
            return self.server.__exit__(*exc)
        finally:
            shutil.rmtree(self.state, ignore_errors=True)
            os.unlink(self.token_path)

    def submit(self, token, cfg):
        r = self.server.post("/runs", cfg, headers=bearer(token))
        check(r.status == 201, f"POST /runs -> 201, got {r.status}: {r.body[:600]!r}")
        return r.json()["id"] if r.status == 201 else None

    def as_account(self, role, script, *args):
        """Runs a Python script as the account (its uid and gid): what that account may do."""
        pw = pwd.getpwnam(self.acc[role])

        def become():
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
        return subprocess.run(["/usr/bin/python3", "-c", script, *args], capture_output=True, text=True, timeout=60,
                              preexec_fn=become)


def small(**over):
    return fmnist_config(**{"data.limit": 1000, "data.test_limit": 500, "train.epochs": 1,
                            "distributed.world_size": 1, "model.hidden": [32], **over})


def alice_checkpoint(t):
    """Alice's finished run and its checkpoint's absolute path."""
    rid = t.submit(t.alice, small(name="alice", **{"checkpoint.every_epochs": 1}))
    run = t.server.wait_status(rid, FINAL, timeout=180)
    check(run and run["status"] == "succeeded", f"alice's run succeeds: {run and (run['status'], run['reason'])}")
    d = os.path.join(t.server.run_dir(rid), "checkpoints")
    files = sorted(os.listdir(d))
    check(files, f"alice's run wrote a checkpoint: {files}")
    return rid, os.path.realpath(os.path.join(d, files[-1]))


EDIT = ("import json, sys\n"
        "p = sys.argv[1]\n"
        "c = json.load(open(p))\n"
        "c.setdefault('checkpoint', {})['load'] = sys.argv[2]\n"
        "json.dump(c, open(p, 'w'))\n")


def bob_canceled_run(t):
    """A run of bob's, canceled while it trains (no checkpoint of its own)."""
    rid = t.submit(t.bob, small(name="bob", **{"train.epochs": 200, "checkpoint.every_epochs": 0}))
    t.server.wait_status(rid, "running", timeout=120)
    r = t.server.post(f"/runs/{rid}/cancel", headers=bearer(t.bob))
    check(r.status == 202, f"bob cancels his run: {r.status} {r.body[:300]!r}")
    run = t.server.wait_status(rid, "canceled", timeout=120)
    return rid, run


def case_resume_edited_config(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        hers, ckpt = alice_checkpoint(t)
        rid, before = bob_canceled_run(t)
        if not before:
            return
        api = openapi_checker()
        cfg_path = os.path.join(t.server.run_dir(rid), "config.json")
        climbing = os.path.join(t.server.run_dir(rid), "..", str(hers), "checkpoints", os.path.basename(ckpt))
        for how, path in (("straight", ckpt), ("through .. out of his run", climbing)):
            p = t.as_account("bob", EDIT, cfg_path, path)
            check(p.returncode == 0, f"bob's account may edit its own run's config.json ({how}): {p.stderr[-300:]}")
            for who, token in (("bob", t.bob), ("the server's token", t.token)):
                r = t.server.post(f"/runs/{rid}/resume", headers=bearer(token))
                detail = r.json().get("detail", "") if r.status == 403 else ""
                check(r.status == 403 and "alice" in detail and "/checkpoint/load" in detail,
                      f"{who}'s resume of the edited run ({how}) is refused, 403 naming alice: {r.status} "
                      f"{r.body[:400]!r}")
                api.response("POST", "/runs/{id}/resume", r, "the resume's 403")
        after = t.server.run(rid)
        check(after["status"] == "canceled" and len(after.get("attempts") or []) == len(before.get("attempts") or []),
              f"the run is as it was, no attempt started: {after['status']} {len(after.get('attempts') or [])}")
        procs = [pid for pid in os.listdir("/proc") if pid.isdigit() and _uid_of(pid) == acc.uid("bob")]
        check(not procs, f"no process of bob's account runs: {procs}")


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _uid_of(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def case_resume_lowered_limit(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        rid = t.submit(t.bob, {"name": "prio", "priority": 5, "distributed": {"world_size": 1},
                               "command": ["/usr/bin/python3", "-c", "import time; time.sleep(600)"]})
        t.server.wait_status(rid, "running", timeout=120)
        t.server.post(f"/runs/{rid}/cancel", headers=bearer(t.bob))
        t.server.wait_status(rid, "canceled", timeout=120)
        code, out, err = user(a.ddpd, t.state, "set", "bob", "--max-priority", "0")
        check(code == 0, f"ddpd user set bob --max-priority 0: {code} {out!r} {err!r}")
        r = t.server.post(f"/runs/{rid}/resume", headers=bearer(t.bob))
        detail = r.json().get("detail", "") if r.status == 403 else ""
        check(r.status == 403 and "/priority" in detail and "at most 0" in detail,
              f"the resume is refused by bob's current limit: {r.status} {r.body[:400]!r}")
        check(t.server.run(rid)["status"] == "canceled", "the run stays canceled")


def case_resume_source_deleted(a):
    """The gates at a resume refuse no more than they should: a run that started from
    another of its owner's runs' checkpoint, since deleted, resumes from its own."""
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        first = t.submit(t.bob, small(name="first", **{"checkpoint.every_epochs": 1}))
        run = t.server.wait_status(first, FINAL, timeout=180)
        check(run and run["status"] == "succeeded", f"bob's first run succeeds: {run and run['reason']}")
        ckpt = sorted(os.listdir(os.path.join(t.server.run_dir(first), "checkpoints")))[-1]
        second = t.submit(t.bob, small(name="second", **{"train.epochs": 200, "checkpoint.every_epochs": 1,
                                                           "checkpoint.load": f"{first}/checkpoints/{ckpt}"}))
        # a checkpoint the run reported is whole on disk (a file being written is not one yet)
        wait_until(lambda: (t.server.run(second) or {}).get("checkpoints"), "the second run's own checkpoint", 180)
        t.server.post(f"/runs/{second}/cancel", headers=bearer(t.bob))
        t.server.wait_status(second, "canceled", timeout=120)
        r = t.server.request("DELETE", f"/runs/{first}", headers=bearer(t.bob))
        check(r.status in (200, 204), f"bob deletes his first run: {r.status} {r.body[:300]!r}")
        r = t.server.post(f"/runs/{second}/resume", headers=bearer(t.bob))
        check(r.status == 202, f"the second run resumes from its own checkpoint: {r.status} {r.body[:400]!r}")
        if r.status == 202:
            t.server.wait_status(second, ("running", "succeeded"), timeout=120)
            t.server.post(f"/runs/{second}/cancel", headers=bearer(t.bob))
            t.server.wait_status(second, FINAL, timeout=120)


SECRET = "sekrit-ARG-9f3c"
# fails in its first attempt, succeeds in its second: a restart's banner in the rank's log
FLAKY = ("import os, sys\n"
         "print('attempt', os.environ['TORCHELASTIC_RESTART_COUNT'], 'with', len(sys.argv) - 1, 'arguments', flush=True)\n"
         "sys.exit(1 if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0' else 0)\n")


def case_argv_hidden(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        rid = t.submit(t.bob, {"name": "argv", "command": ["/usr/bin/python3", "-c", FLAKY, f"--api-key={SECRET}"],
                               "distributed": {"world_size": 1, "max_restarts": 1}})
        run = t.server.wait_status(rid, FINAL, timeout=120)
        check(run and run["status"] == "succeeded" and run.get("restart_count") == 1,
              f"the run succeeds at its second attempt: {run and (run['status'], run['reason'], run.get('restart_count'))}")
        missing = t.submit(t.bob, {"name": "gone", "command": ["/nonexistent/ddpd-prog", f"--api-key={SECRET}"],
                                   "distributed": {"world_size": 1}})
        gone = t.server.wait_status(missing, FINAL, timeout=120)
        check(gone and gone["status"] == "failed" and SECRET not in (gone["reason"] or ""),
              f"a program that cannot start fails, its reason without the argument: {gone and gone['reason']}")
        for run_id, program in ((rid, "/usr/bin/python3"), (missing, "/nonexistent/ddpd-prog")):
            d = t.server.run_dir(run_id)
            with open(os.path.join(d, "trainer.log"), errors="replace") as f:
                log = f.read()
            check(SECRET not in log and program in log and "3 arguments" in log if run_id == rid else
                  SECRET not in log and program in log,
                  f"run {run_id}'s log names the program and how many arguments, not them: {log[-1500:]!r}")
            ranks = os.path.join(d, "ranks")
            for name in sorted(os.listdir(ranks)) if os.path.isdir(ranks) else []:
                with open(os.path.join(ranks, name), errors="replace") as f:
                    text = f.read()
                check(SECRET not in text, f"run {run_id}'s {name} holds no argument: {text[-800:]!r}")
                if run_id == rid:
                    check(text.count("--- ddp-run: ") >= 2 and "program /usr/bin/python3" in text,
                          f"the rank's log has each attempt's banner, naming the program: {text[-800:]!r}")
            for who, token in (("bob", t.bob), ("alice", t.alice), ("the server's token", t.token)):
                for q in ("", "?rank=0", "?rank=0&attempt=0", "?rank=0&attempt=1"):
                    if run_id == missing and "attempt=1" in q:
                        continue
                    r = t.server.get(f"/runs/{run_id}/logs{q}", headers=bearer(token))
                    body = r.body.decode(errors="replace")
                    check(r.status in (200, 404) and SECRET not in body,
                          f"GET /runs/{run_id}/logs{q} as {who} holds no argument: {r.status} {body[-600:]!r}")
        with open(os.path.join(t.state, "server.log"), errors="replace") as f:
            check(SECRET not in f.read(), "nor does the server's own log")


# Run as alice's account: how many processes' command lines (other than its own) hold argv[1].
LOOK = ("import os, sys\n"
        "hits = 0\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit() and p != str(os.getpid()):\n"
        "        try:\n"
        "            hits += sys.argv[1].encode() in open('/proc/%s/cmdline' % p, 'rb').read()\n"
        "        except OSError:\n"
        "            pass\n"
        "print(hits)\n")


def case_proc_cmdline_hidepid(a):
    """What docs/security.md says of the host's process table: another
    account reads a rank's arguments in /proc/PID/cmdline, unless /proc is mounted
    with hidepid=2. Shown in a mount namespace of the test's own (the machine's /proc
    is left as it is)."""
    needs_root(a)
    if not shutil.which("unshare") or not shutil.which("setpriv"):
        print("proc_cmdline_hidepid: skipped: unshare and setpriv (util-linux) are needed")
        sys.exit(SKIP)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        rid = t.submit(t.bob, {"name": "ps", "distributed": {"world_size": 1},
                               "command": ["/usr/bin/python3", "-c", "import time; time.sleep(600)",
                                           f"--api-key={SECRET}"]})
        t.server.wait_status(rid, "running", timeout=120)
        pw = pwd.getpwnam(acc["alice"])

        def seen_by_alice(hidepid):
            mount = "mount -t proc -o hidepid=2 proc /proc && " if hidepid else ""
            p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                f'{mount}exec setpriv --reuid={pw.pw_uid} --regid={pw.pw_gid} --clear-groups '
                                f'/usr/bin/python3 -c "$1" "$2"', "sh", LOOK, SECRET],
                               capture_output=True, text=True, timeout=60)
            return int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip().isdigit() else p.stderr[-300:]
        # bob's rank is there once root sees it (its launcher has forked it)
        wait_until(lambda: any(SECRET.encode() in _cmdline(pid) for pid in os.listdir("/proc") if pid.isdigit()),
                   "bob's rank", 60)
        plain, hidden = seen_by_alice(False), seen_by_alice(True)
        check(plain == 1, f"without hidepid, alice's account reads bob's rank's argument in /proc: {plain!r}")
        check(hidden == 0, f"with /proc mounted hidepid=2, it reads none: {hidden!r}")
        t.server.post(f"/runs/{rid}/cancel", headers=bearer(t.bob))
        t.server.wait_status(rid, FINAL, timeout=120)


if __name__ == "__main__":
    cases = cases_in(globals())
    main(cases, args_for(cases, ["--runner"]))
