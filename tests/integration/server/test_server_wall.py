#!/usr/bin/env python3
"""The wall between accounts (docs/security.md), with real Unix accounts:
the test makes them (ddpdt-ROLE-PID, names no real user has) and removes them after,
even when a case fails. Every case but unix_user_cli needs root (CI runs as root);
without it a case says why and is skipped (exit 77).

  unix_user_cli      ddpd user add --unix-user, ddpd user set --unix-user/--no-unix-user,
                     list shows it; a bad account name is refused naming it
  runs_as_account    a mapped user's command run and built-in run run as her account
                     (uid, gid, groups, HOME, USER, LOGNAME, umask 077, no capability),
                     her run directory is hers (group: the server's, no other access);
                     a user without an account runs as --run-user
  escapee            a rank's grandchild that calls setsid is killed when its run ends
                     and when it is canceled; a 1-slot run's processes are on one CPU
  escapee_no_cgroups the same on a server that can make no cgroup: it is the runs'
                     subreaper and sweeps what they leave behind
  check              ddpd check: whether the server can switch, and each mapped user's
                     account there or not
  forged_end         a rank's own `end` and attempt events (its run's secret, its
                     account) are not taken: how a run ended is its launcher's to say
  refusals           command runs refused at submission, saying what the operator must
                     do: a root server with no account to run as, a server with users
                     and no way to switch; --unsafe-commands-as-server lets them run;
                     --run-user of no account stops serve
  hostile            bob's command run attacks alice's live run and the server: the
                     database, her run directory, her ranks' /proc environ, signals to
                     her ranks and to the server, forged events on the socket with her
                     run's secret, the token file; each fails with a permission error
                     seen in bob's log, and the database, her run and the users are as
                     they were. Links he leaves in his own directory (his log to the
                     database, his ranks and checkpoints to alice's) are not followed
                     when the server serves his run
  caps_only          hostile's attacks on a server that is not root and holds only its
                     capabilities (setpriv, ambient)
  caps_from_file     the same with the capabilities on ddpd's file (setcap +p, as the
                     Docker image has them), started as an account that has none

Usage: test_server_wall.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH --runner PATH"""
import grp, hashlib, json, os, pwd, shutil, signal, sqlite3, stat, subprocess, sys, tempfile, time

from ddpd_harness import Server, Accounts, check, cases_in, wait_until, args_for, main, fmnist_config, user, add_user, bearer  # noqa: E402

SKIP = 77
CAPS = "setuid,setgid,kill,chown,fowner,dac_override"


def needs_root(a):
    if os.geteuid() != 0:
        print(f"{a.case}: skipped: it makes Unix accounts and starts the server as root; run it as root (CI does)")
        sys.exit(SKIP)


def submit_as(s, token, cfg):
    s.read_headers = bearer(token)  # reads need a token once there are users: the submitter's
    r = s.post("/runs", cfg, headers=bearer(token))
    check(r.status == 201, f"POST /runs -> 201, got {r.status}: {r.body[:600]!r}")
    return r.json()["id"] if r.status == 201 else None


def run_log(s, rid):
    with open(os.path.join(s.run_dir(rid), "trainer.log"), errors="replace") as f:
        return f.read()


def command(script, *args, world_size=1):
    return {"name": "wall", "command": ["/usr/bin/python3", "-c", script, *args],
            "distributed": {"world_size": world_size}}


def state_dir_for(owner_uid=0):
    """A state dir (0700) of the server's account."""
    d = tempfile.mkdtemp(prefix="ddpd-wall-")
    os.chown(d, owner_uid, -1)
    return d


def token_file(owner_uid=0):
    fd, path = tempfile.mkstemp(prefix="ddpd-wall-token-")
    os.write(fd, hashlib.sha256(os.urandom(16)).hexdigest().encode() + b"\n")
    os.close(fd)
    os.chmod(path, 0o600)
    os.chown(path, owner_uid, -1)
    return path


# ---- unix_user_cli ----

def case_unix_user_cli(a):
    state = tempfile.mkdtemp(prefix="ddpd-wall-")
    try:
        add_user(a.ddpd, state, "alice", "--unix-user", "nobody")
        code, out, err = user(a.ddpd, state, "add", "bob", "--unix-user", "no such")
        check(code != 0 and '--unix-user "no such"' in err and "letters, digits" in err,
              f"a bad account name is refused naming it: {code} {err!r}")
        code, out, err = user(a.ddpd, state, "add", "bob", "--unix-user", "x" * 33)
        check(code != 0 and "at most 32 characters" in err, f"a too long account name is refused: {code} {err!r}")
        code, out, err = user(a.ddpd, state, "add", "bad name!")
        check(code != 0 and "a user's name holds only letters, digits" in err,
              f"a bad user name is refused, saying what a name holds: {code} {err!r}")
        add_user(a.ddpd, state, "bob")
        code, out, err = user(a.ddpd, state, "set", "bob", "--unix-user", "ddpdt-none-here")
        check(code == 0 and "run as the account ddpdt-none-here" in out and "has no account ddpdt-none-here" in err,
              f"set --unix-user maps bob, warning that the host has no such account: {code} {out!r} {err!r}")
        code, out, err = user(a.ddpd, state, "list")
        lines = {ln.split()[0]: ln for ln in out.splitlines()[1:]}
        check("UNIX-USER" in out and " nobody " in lines.get("alice", "") and "ddpdt-none-here" in lines.get("bob", ""),
              f"list shows each user's account: {out!r}")
        code, out, err = user(a.ddpd, state, "set", "alice", "--no-unix-user")
        check(code == 0 and "no account of its own" in out, f"--no-unix-user takes it off: {code} {out!r}")
        code, out, err = user(a.ddpd, state, "list")
        check(" nobody " not in out, f"alice has no account any more: {out!r}")
        code, out, err = user(a.ddpd, state, "set", "alice")
        check(code == 2 and "--unix-user ACCOUNT or --no-unix-user" in err, f"set without a change: {code} {err!r}")
        code, out, err = user(a.ddpd, state, "set", "carol", "--unix-user", "nobody")
        check(code == 1 and "there is no user carol" in err, f"set of no user: {code} {err!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


# ---- runs_as_account ----

WHO_AM_I = r"""
import json, os
status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in l)
old = os.umask(0); os.umask(old)
print('WHOAMI ' + json.dumps({'uid': os.getuid(), 'euid': os.geteuid(), 'gid': os.getgid(), 'groups': os.getgroups(),
      'home': os.environ.get('HOME'), 'user': os.environ.get('USER'), 'logname': os.environ.get('LOGNAME'),
      'umask': old, 'cap_eff': status['CapEff'].strip(), 'cap_prm': status['CapPrm'].strip(),
      'cap_amb': status['CapAmb'].strip(), 'token': [k for k in os.environ if 'TOKEN' in k]}), flush=True)
"""


def whoami_of(log):
    for line in log.splitlines():
        if "] WHOAMI " in line:
            return json.loads(line.split("WHOAMI ", 1)[1])
    return None


def case_runs_as_account(a):
    needs_root(a)
    with Accounts("alice", "runner") as acc:
        state = state_dir_for()
        tok = token_file()
        extra = ["--allow-commands", "--runner", a.runner, "--run-user", acc["runner"], "--token-file", tok]
        add_user(a.ddpd, state, "carol")
        alice = add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
        gid_alice = pwd.getpwnam(acc["alice"]).pw_gid
        try:
            with Server(a.ddpd, a.trainer, state_dir=state, extra_args=extra, env={"DDPD_TOKEN": "x" * 40}) as s:
                st = os.stat(state)
                check(stat.S_IMODE(st.st_mode) == 0o711, f"the state dir is 0711 (no listing): {oct(st.st_mode)}")
                for name in ("ddpd.db", "ddpd.lock"):
                    m = stat.S_IMODE(os.stat(os.path.join(state, name)).st_mode)
                    check(m == 0o600, f"{name} is the server's only: {oct(m)}")
                rid = submit_as(s, alice, command(WHO_AM_I, world_size=2))
                s.wait_status(rid, "succeeded", timeout=120)
                who = whoami_of(run_log(s, rid))
                want_groups = sorted(os.getgrouplist(acc["alice"], gid_alice))
                check(who and who["uid"] == acc.uid("alice") and who["euid"] == acc.uid("alice") and
                      who["gid"] == gid_alice and sorted(who["groups"]) == want_groups,
                      f"alice's ranks run as her account and its groups: {who}")
                check(who and who["home"] == f"/nonexistent/{acc['alice']}" and who["user"] == acc["alice"] and
                      who["logname"] == acc["alice"] and who["umask"] == 0o077,
                      f"with her HOME, USER, LOGNAME and umask 077: {who}")
                check(who and int(who["cap_eff"], 16) == 0 and int(who["cap_prm"], 16) == 0 and
                      int(who["cap_amb"], 16) == 0, f"and no capability: {who}")
                check(who and who["token"] == [], f"no token variable of the server reaches a run: {who}")
                d = os.stat(s.run_dir(rid))
                check(d.st_uid == acc.uid("alice") and d.st_gid == os.getegid() and stat.S_IMODE(d.st_mode) == 0o770,
                      f"her run directory is hers, its group the server's, no other access: {d.st_uid} {d.st_gid} "
                      f"{oct(d.st_mode)}")
                cfg = os.stat(os.path.join(s.run_dir(rid), "config.json"))
                check(cfg.st_uid == acc.uid("alice") and stat.S_IMODE(cfg.st_mode) == 0o600,
                      f"config.json is hers, 0600: {cfg.st_uid} {oct(cfg.st_mode)}")
                rank_log = os.stat(os.path.join(s.run_dir(rid), "ranks", "rank-0.log"))
                check(rank_log.st_uid == acc.uid("alice") and stat.S_IMODE(rank_log.st_mode) == 0o600,
                      f"what her run writes is hers, 0600: {oct(rank_log.st_mode)}")
                # the built-in trainer too: the launcher and every rank, checkpoints hers
                bid = submit_as(s, alice, fmnist_config(**{"name": "builtin", "data.limit": 1000,
                                                            "data.test_limit": 500, "train.epochs": 1,
                                                            "checkpoint.every_epochs": 1}))
                s.wait_status(bid, "succeeded", timeout=180)
                ck = os.path.join(s.run_dir(bid), "checkpoints")
                files = os.listdir(ck) if os.path.isdir(ck) else []
                check(files and all(os.stat(os.path.join(ck, f)).st_uid == acc.uid("alice") for f in files),
                      f"the built-in trainer's checkpoints are hers: {files}")
                r = s.get(f"/runs/{bid}", headers=bearer(alice)).json()
                check(r.get("checkpoints"), f"the server still serves them: {r.get('checkpoints')}")
                # a user without an account of its own: --run-user
                carol_tok = subprocess.run([a.ddpd, "user", "token", "carol", "--state-dir", state],
                                           capture_output=True, text=True).stdout.strip().splitlines()[-1]
                cid = submit_as(s, carol_tok, command(WHO_AM_I))
                s.wait_status(cid, "succeeded", timeout=120)
                who = whoami_of(run_log(s, cid))
                check(who and who["uid"] == acc.uid("runner") and who["user"] == acc["runner"],
                      f"carol, with no account, runs as --run-user: {who}")
            # started again: the state dir stays passable, the runs' directories their accounts'
            with Server(a.ddpd, a.trainer, state_dir=state, extra_args=extra) as s2:
                with open(s2.log_path) as f:
                    log = f.read()
                check("was mode 0711" not in log and "were readable by others" not in log,
                      f"no warning of a loose state dir at the next start: {log[-600:]}")
                check(stat.S_IMODE(os.stat(state).st_mode) == 0o711, "the state dir is still 0711")
                d = os.stat(s2.run_dir(rid))
                check(d.st_uid == acc.uid("alice") and stat.S_IMODE(d.st_mode) == 0o770,
                      f"alice's run directory is untouched: {d.st_uid} {oct(d.st_mode)}")
        finally:
            os.unlink(tok)
            shutil.rmtree(state, ignore_errors=True)


# ---- forged_end ----

FORGE_OWN_END = r"""
import json, os, socket, time
s = socket.socket(socket.AF_UNIX); s.connect(os.environ['DDPD_EVENTS_SOCKET'])
run = os.environ['DDPD_RUN_ID']
# seq numbers past the launcher's: the server takes the connection for the launcher's
# own, come back, and drops what its journal already holds (a forger picks numbers past it)
hello = {'run': run, 'rank': -1, 'seq': 10**9, 't': 1, 'type': 'hello', 'pid': os.getpid(), 'host': 'x', 'device': 'cpu',
         'world_size': 1, 'secret': os.environ['DDPD_RUN_SECRET']}
# the launcher's words of its attempts: a 51st attempt on another MASTER_PORT, a rank
# killed, the attempt failed
started = {'run': run, 'rank': -1, 'seq': 10**9 + 1, 't': 2, 'type': 'attempt', 'phase': 'started', 'attempt': 50,
           'max_restarts': 99, 'master_port': 1, 'log_offsets': {'0': 0}}
killed = {'run': run, 'rank': -1, 'seq': 10**9 + 2, 't': 3, 'type': 'rank_state', 'of': 0, 'state': 'killed',
          'pid': 1, 'exit_code': None, 'signal': 9, 'detail': 'FORGED kill'}
ended = {'run': run, 'rank': -1, 'seq': 10**9 + 3, 't': 4, 'type': 'attempt', 'phase': 'ended', 'attempt': 50,
         'status': 'failed', 'reason': 'FORGED attempt', 'failing_rank': 0, 'exit_code': 1, 'signal': None,
         'last_line': 'FORGED', 'restarting': False}
end = {'run': run, 'rank': -1, 'seq': 10**9 + 4, 't': 5, 'type': 'end', 'status': 'failed', 'reason': 'FORGED by a rank'}
s.sendall(''.join(json.dumps(e) + '\n' for e in (hello, started, killed, ended, end)).encode())
s.close()
print('sent a forged end', flush=True)
while not os.path.exists('release'):  # until the test has seen the server take it (and ignore it)
    time.sleep(0.05)
"""


def case_forged_end(a):
    """A rank of the run sends its own `end` and its launcher's words of its attempts
    (rank -1, with the run's secret, as its own account: a 51st attempt on another
    MASTER_PORT, its rank killed, the attempt failed): only the launcher's word counts, so
    the run that exits 0 succeeds in its one attempt, its rank's end its own."""
    with Server(a.ddpd, a.trainer, extra_args=["--allow-commands", "--runner", a.runner]) as s:
        rid = s.submit(command(FORGE_OWN_END))

        def server_log():
            with open(s.log_path) as f:
                return f.read()
        # the forged end is taken while the run still runs (its rank waits for it), then let go
        if not check(wait_until(lambda: f"an end event for run {rid} from pid" in server_log()
                                and "not its launcher: ignored" in server_log(), "the server to take the forged end", 60),
                     "the server's log says the forged end was ignored"):
            print("\n".join(ln for ln in server_log().splitlines() if "http " not in ln)[-3000:], file=sys.stderr)
        check(s.run(rid)["status"] == "running", f"the forged end did not end the run: {s.run(rid)['status']}")
        with open(os.path.join(s.run_dir(rid), "release"), "w"):
            pass
        run = s.wait_status(rid, ("succeeded", "failed"), timeout=120)
        check("sent a forged end" in run_log(s, rid), "the rank sent its forged end")
        check(run and run["status"] == "succeeded" and "FORGED" not in (run.get("reason") or ""),
              f"the run succeeded, its reason not the forged one: {run and (run['status'], run.get('reason'))}")
        if not check(f"an attempt event for run {rid} from pid" in server_log(),
                     "the server's log says the forged attempt words were ignored"):
            print("\n".join(ln for ln in server_log().splitlines() if "http " not in ln)[-3000:], file=sys.stderr)
        whole = s.get(f"/runs/{rid}")
        attempts = whole.json().get("attempts") if whole.status == 200 else None
        check(attempts and [x.get("attempt") for x in attempts] == [0] and attempts[0].get("status") == "succeeded",
              f"one attempt, the launcher's, succeeded: {attempts}")
        check(whole.status == 200 and "FORGED" not in json.dumps({k: v for k, v in whole.json().items() if k != "config"}),
              f"nothing forged in the run (but its script): {whole.body[:600]!r}")
        ranks = s.get(f"/runs/{rid}/ranks")
        check(ranks.status == 200 and b"FORGED" not in ranks.body and b'"killed"' not in ranks.body,
              f"its rank's end is its own, not the forged kill: {ranks.body[:400]!r}")


# ---- check ----

def case_check(a):
    """ddpd check says whether the server can switch accounts, and for --run-user and
    each mapped user whether the host has the account."""
    needs_root(a)
    with Accounts("alice", "runner") as acc:
        state = state_dir_for()
        try:
            add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
            add_user(a.ddpd, state, "bob", "--unix-user", "ddpdt-gone-here")
            p = subprocess.run([a.ddpd, "check", "--state-dir", state, "--gpus", "none", "--slots", "1",
                                "--data-root", "/usr/share/datasets", "--trainer", a.trainer or a.fake_trainer,
                                "--run-user", acc["runner"]], capture_output=True, text=True, timeout=120)
            lines = {ln[6:18].strip(): (ln[:5].strip(), ln[18:]) for ln in p.stdout.splitlines() if ln[:5].strip()
                     in ("ok", "warn", "FAIL")}
            check(lines.get("accounts", ("",))[0] == "ok" and "it runs as root" in lines["accounts"][1],
                  f"as root, it can switch: {lines.get('accounts')}")
            check(lines.get("run user", ("",))[0] == "ok" and acc["runner"] in lines["run user"][1],
                  f"--run-user's account is there: {lines.get('run user')}")
            check(lines.get("user alice", ("",))[0] == "ok" and acc["alice"] in lines["user alice"][1],
                  f"alice's account is there: {lines.get('user alice')}\n{p.stdout}")
            check(lines.get("user bob", ("",))[0] == "FAIL" and "no account \"ddpdt-gone-here\"" in lines["user bob"][1],
                  f"bob's account is not: FAIL: {lines.get('user bob')}")
            check(p.returncode == 1, f"check exits 1: {p.returncode}")
        finally:
            shutil.rmtree(state, ignore_errors=True)


# ---- escapee ----

ESCAPE = r"""
import os, sys, time
mode = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)  # a daemon's way: the rank's output pipe is not held open
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if os.fork() == 0:  # a grandchild in a session of its own, its parent gone: nobody's group
        with open('escapee.pid.tmp', 'w') as f:
            f.write(str(os.getpid()))
        os.rename('escapee.pid.tmp', 'escapee.pid')
        while True:
            time.sleep(1)
    os._exit(0)
while not os.path.exists('escapee.pid'):
    time.sleep(0.01)
print('AFFINITY', sorted(os.sched_getaffinity(0)), flush=True)
while mode == 'wait' or not os.path.exists('release'):  # 'end': until the test has looked at the escapee
    time.sleep(0.05)
"""


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def case_escapee(a):
    """A rank's child that leaves its session (setsid) and its parent dies with the
    run's end and with its cancel; a 1-slot run's processes run on one CPU. An empty
    cgroup a killed server left for its state dir is removed at the next start."""
    needs_root(a)
    state = tempfile.mkdtemp(prefix="ddpd-wall-")
    prefix = hashlib.sha256(os.path.realpath(state).encode()).hexdigest()[:12]
    base = "/sys/fs/cgroup/ddpd" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "/sys/fs/cgroup/pids/ddpd"
    stale = os.path.join(base, f"{prefix}-run-99-0")
    os.makedirs(stale, exist_ok=True)
    try:
        escapee(a, state_dir=state)
        check(not os.path.exists(stale), f"the stale empty cgroup {stale} was removed at start")
    finally:
        if os.path.isdir(stale):
            os.rmdir(stale)
        shutil.rmtree(state, ignore_errors=True)


def case_escapee_no_cgroups(a):
    """The same where no cgroup can be made (the cgroup filesystems read-only, in a
    mount namespace of the server's own): the server, the runs' subreaper, sweeps."""
    needs_root(a)
    fd, wrapper = tempfile.mkstemp(prefix="ddpd-nocg-", suffix=".sh")
    os.write(fd, ("#!/bin/sh\nexec unshare --mount --propagation private sh -c 'for m in /sys/fs/cgroup/*; do "
                  "mount -o remount,bind,ro \"$m\" || exit 1; done; exec \"$0\" \"$@\"' " + a.ddpd + ' "$@"\n').encode())
    os.close(fd)
    os.chmod(wrapper, 0o755)
    try:
        log = escapee(a, wrapper)
        check("cannot make the run's cgroup" in log and "killed process" in log,
              f"the server said it had no cgroup, and swept: {log[-1500:]}")
    finally:
        os.unlink(wrapper)


def escapee(a, ddpd=None, state_dir=None):
    with Accounts("runner") as acc:
        with Server(ddpd or a.ddpd, a.trainer, slots=2, state_dir=state_dir, extra_args=["--allow-commands", "--runner", a.runner,
                                                                    "--run-user", acc["runner"]]) as s:
            for mode in ("end", "wait"):
                rid = s.submit(command(ESCAPE, mode))
                pid_file = os.path.join(s.run_dir(rid), "escapee.pid")
                wait_until(lambda: os.path.exists(pid_file), f"run {rid}'s escapee", timeout=60)
                with open(pid_file) as f:
                    pid = int(f.read())
                check(alive(pid), f"the escapee {pid} runs")
                with open(f"/proc/{pid}/status") as f:
                    status = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
                check(status["Cpus_allowed_list"].strip() in ("0", "1"),
                      f"a 1-slot run's processes, the escapee too, are on one CPU: {status['Cpus_allowed_list'].strip()}")
                check(os.getsid(pid) != os.getpgid(s.run(rid)["pid"] or 1), "the escapee left the run's session")
                # the rank's own affinity line ("[rank 0] AFFINITY ...", not the launcher's banner
                # that quotes the script), before the run is let go or canceled: it is printed
                # after the escapee is there, and may not be in the log yet when it is
                wait_until(lambda: "] AFFINITY" in run_log(s, rid), "the rank's affinity line", timeout=60)
                if mode == "wait":
                    r = s.post(f"/runs/{rid}/cancel")
                    check(r.status in (200, 202), f"cancel: {r.status} {r.body[:200]!r}")
                    run = s.wait_status(rid, "canceled", timeout=60)
                else:
                    with open(os.path.join(s.run_dir(rid), "release"), "w"):
                        pass
                    run = s.wait_status(rid, "succeeded", timeout=60)
                check(run is not None, f"run {rid} ended ({mode})")
                wait_until(lambda: not alive(pid), f"the escapee {pid} of run {rid} is killed with its run ({mode})",
                           timeout=30)
                line = next((ln for ln in run_log(s, rid).splitlines() if "] AFFINITY" in ln), "")
                check(line.endswith("[0]") or line.endswith("[1]"), f"the rank sees one CPU: {line}")
            with open(s.log_path) as f:
                return f.read()


# ---- refusals ----

def refused(s, token, cfg, words, what):
    r = s.post("/runs", cfg, headers=bearer(token) if token else None)
    detail = r.body.decode(errors="replace")
    check(r.status == 403 and all(w in detail for w in words), f"{what}: {r.status} {detail[:700]}")


def case_refusals(a):
    needs_root(a)
    say = ["ddpd user set NAME --unix-user ACCOUNT", "--run-user ACCOUNT", "--unsafe-commands-as-server"]
    with Accounts("alice") as acc:
        state = state_dir_for()
        try:
            p = subprocess.Popen([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--gpus", "none",
                                  "--slots", "1", "--run-user", "ddpdt-nobody-here"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = p.communicate(timeout=60)
            check(p.returncode != 0 and "--run-user ddpdt-nobody-here" in err and "no account" in err,
                  f"serve refuses a --run-user the host has not: {p.returncode} {err!r}")
        finally:
            shutil.rmtree(state, ignore_errors=True)
        state = state_dir_for()
        try:
            alice = add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
            bob = add_user(a.ddpd, state, "bob")
            # run as root knowingly without the unsafe flag: the harness adds it only when neither is given
            with Server(a.ddpd, a.trainer, state_dir=state,
                        extra_args=["--allow-commands", "--runner", a.runner, "--run-user", ""]) as s:
                refused(s, bob, command("print(1)"), ["/command", "runs as root"] + say,
                        "a root server refuses bob's command run with no account to run as")
                rid = submit_as(s, alice, command("print('mapped')"))
                s.wait_status(rid, "succeeded", timeout=120)
                b2 = submit_as(s, bob, fmnist_config(**{"name": "b", "data.limit": 500, "data.test_limit": 200,
                                                         "train.epochs": 1}))
                run = s.wait_status(b2, ("succeeded", "failed"), timeout=180)
                check(run and run["status"] == "succeeded", "bob's built-in run still runs (as the server, as before)")
            with Server(a.ddpd, a.trainer, state_dir=state,
                        extra_args=["--allow-commands", "--runner", a.runner, "--unsafe-commands-as-server"]) as s:
                rid = submit_as(s, bob, command("import os; print('UID', os.getuid())"))
                s.wait_status(rid, "succeeded", timeout=120)
                check("UID 0" in run_log(s, rid), "--unsafe-commands-as-server: bob's command runs as the server")
        finally:
            shutil.rmtree(state, ignore_errors=True)
        # a server that cannot switch (not root, no capability), with users
        srv = Accounts("srv")
        with srv:
            state = state_dir_for(srv.uid("srv"))
            alice = add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
            bob = add_user(a.ddpd, state, "bob")
            for f in os.listdir(state):
                os.chown(os.path.join(state, f), srv.uid("srv"), -1)
            wrapper = as_account_wrapper(a.ddpd, srv["srv"], caps=None)
            try:
                with Server(wrapper, a.trainer, state_dir=state, extra_args=["--allow-commands", "--runner", a.runner,
                                                                             "--run-user", ""]) as s:
                    refused(s, bob, command("print(1)"), ["/command", "the server's own user"] + say,
                            "users and no way to switch: bob's command run is refused")
                    refused(s, alice, command("print(1)"), ["cannot switch accounts", acc["alice"], "CAP_SETUID"],
                            "alice's run (mapped) is refused: the server cannot switch")
            finally:
                os.unlink(wrapper)
                shutil.rmtree(state, ignore_errors=True)


def as_account_wrapper(ddpd, account, caps):
    """An executable that starts ddpd as `account` with only `caps` (setpriv): the
    harness runs it as if it were ddpd."""
    fd, path = tempfile.mkstemp(prefix="ddpd-as-", suffix=".sh")
    pw = pwd.getpwnam(account)
    capflags = f"--inh-caps=+{CAPS.replace(',', ',+')} --ambient-caps=+{CAPS.replace(',', ',+')}" if caps else \
        "--inh-caps=-all"
    os.write(fd, (f"#!/bin/sh\nexec setpriv --reuid={pw.pw_uid} --regid={pw.pw_gid} --init-groups {capflags} "
                  f"-- {ddpd} \"$@\"\n").encode())
    os.close(fd)
    os.chmod(path, 0o755)
    return path


# ---- hostile ----

ATTACKS = r"""
import json, os, signal, socket, sys
a = json.loads(sys.argv[1])
def attempt(name, fn):
    try:
        got = fn()
        print('ATTACK %s: SUCCEEDED %r' % (name, got)[:300], flush=True)
    except PermissionError as e:
        print('ATTACK %s: denied: PermissionError: %s' % (name, e), flush=True)
    except Exception as e:
        print('ATTACK %s: denied: %s: %s' % (name, type(e).__name__, e), flush=True)
def db_write():
    import sqlite3
    open(a['db'], 'r+b').close()
def db_sql():
    import sqlite3
    c = sqlite3.connect(a['db'])
    c.execute("UPDATE users SET admin = 1 WHERE name = 'bob'"); c.commit()
def forge():
    s = socket.socket(socket.AF_UNIX); s.connect(a['socket'])
    hello = {'run': str(a['run']), 'rank': -1, 'seq': 0, 't': 1, 'type': 'hello', 'pid': os.getpid(), 'host': 'x',
             'device': 'cpu', 'world_size': 2, 'secret': a['secret']}
    step = {'run': str(a['run']), 'rank': 0, 'seq': 1, 't': 2, 'type': 'step', 'epoch': 0, 'step': 999,
            'global_step': 999, 'loss': 42.0, 'lr': 0.1, 'samples_per_s': 1.0}
    end = {'run': str(a['run']), 'rank': -1, 'seq': 2, 't': 3, 'type': 'end', 'status': 'failed', 'reason': 'forged'}
    s.sendall(('\n'.join(json.dumps(x) for x in (hello, step, end)) + '\n').encode())
    s.settimeout(20)
    if s.recv(100) == b'':
        raise PermissionError('the server closed the connection: the hello was refused')
    return 'the connection stayed open'
attempt('open the database for writing', db_write)
attempt('change the database with SQL', db_sql)
attempt('list alice\'s run directory', lambda: os.listdir(a['dir']))
attempt('read alice\'s checkpoint', lambda: open(a['ckpt'], 'rb').read(10))
attempt('read alice\'s log', lambda: open(a['log'], 'rb').read(10))
attempt('write into alice\'s run directory', lambda: open(os.path.join(a['dir'], 'planted'), 'w').write('x'))
attempt('delete alice\'s checkpoint', lambda: os.unlink(a['ckpt']))
attempt('read alice\'s rank environ', lambda: open('/proc/%d/environ' % a['rank_pid'], 'rb').read(10))
attempt('read the server\'s environ', lambda: open('/proc/%d/environ' % a['server'], 'rb').read(10))
attempt('signal alice\'s rank', lambda: os.kill(a['rank_pid'], signal.SIGKILL))
attempt('signal the server', lambda: os.kill(a['server'], signal.SIGTERM))
attempt('read the token file', lambda: open(a['token'], 'rb').read(10))
attempt('list the state directory', lambda: os.listdir(a['state']))
attempt('send events for alice\'s run', forge)
# links in bob's own directory, for the server (root) to follow when it serves bob's run
os.unlink('trainer.log'); os.symlink(a['db'], 'trainer.log')
os.rename('ranks', 'ranks.own'); os.symlink(os.path.join(a['dir'], 'ranks'), 'ranks')
os.symlink(a['dir'], 'checkpoints')
print('ATTACKS DONE', flush=True)
"""

ATTACK_NAMES = ["open the database for writing", "change the database with SQL", "list alice's run directory",
                "read alice's checkpoint", "read alice's log", "write into alice's run directory",
                "delete alice's checkpoint", "read alice's rank environ", "read the server's environ",
                "signal alice's rank", "signal the server", "read the token file", "list the state directory",
                "send events for alice's run"]

ALICE = r"""
import ddpd, os, time
print('ALICE-PRIVATE-LINE', flush=True)
for g in range(1, 6):
    ddpd.log_step(g, loss=1.0 / g)
if os.environ['RANK'] == '0':
    with open('ckpt.bin', 'wb') as f:
        f.write(b'weights of alice' * 64)
    os.rename('ckpt.bin', 'ckpt-ready.bin')
while not os.path.exists('release'):
    time.sleep(0.05)
print('alice done', flush=True)
"""


def snapshot(state, rid):
    db = sqlite3.connect(f"file:{os.path.join(state, 'ddpd.db')}?mode=ro", uri=True)
    try:
        users = db.execute("SELECT name, admin, token_sha256, unix_user, removed_at FROM users ORDER BY name").fetchall()
        run = db.execute("SELECT owner, status, reason FROM runs WHERE id = ?", (rid,)).fetchone()
        steps = db.execute("SELECT count(*), max(global_step) FROM steps WHERE run_id = ?", (rid,)).fetchone()
        return {"users": users, "run": run, "steps": steps}
    finally:
        db.close()


def pids_of_uid(uid, mark):
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(name))
        except OSError:
            pass
    return found


def hostile(a, acc, wrapper=None, server_uid=0):
    state = state_dir_for(server_uid)
    tok = token_file(server_uid)
    alice = add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
    bob = add_user(a.ddpd, state, "bob", "--unix-user", acc["bob"])
    for f in os.listdir(state):
        os.chown(os.path.join(state, f), server_uid, -1)
    try:
        with Server(wrapper or a.ddpd, a.trainer, slots=3, state_dir=state,
                    extra_args=["--allow-commands", "--runner", a.runner, "--token-file", tok]) as s:
            with open(f"/proc/{s.proc.pid}/status") as f:
                status = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
            check(int(status["Uid"].split()[1]) == server_uid,
                  f"the server runs as uid {server_uid}: {status['Uid'].strip()}, capabilities {status['CapEff'].strip()}")
            rid = submit_as(s, alice, command(ALICE, world_size=2))
            ckpt = os.path.join(s.run_dir(rid), "ckpt-ready.bin")
            wait_until(lambda: os.path.exists(ckpt), "alice's checkpoint", timeout=120)
            wait_until(lambda: (snapshot(state, rid)["steps"][1] or 0) >= 5, "alice's 5 steps stored", timeout=60)
            ranks = wait_until(lambda: pids_of_uid(acc.uid("alice"), "python3"), "alice's ranks")
            rank_pid = ranks[0] if ranks else 1
            with open(f"/proc/{rank_pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            secret = env.get(b"DDPD_RUN_SECRET", b"").decode()
            check(len(secret) >= 32, "the test (root) took alice's secret to hand it to bob: the socket must still "
                  "refuse him")
            with open(ckpt, "rb") as f:
                ckpt_sum = hashlib.sha256(f.read()).hexdigest()
            before = snapshot(state, rid)
            args = json.dumps({"db": os.path.join(state, "ddpd.db"), "dir": s.run_dir(rid), "ckpt": ckpt,
                               "log": os.path.join(s.run_dir(rid), "trainer.log"), "rank_pid": rank_pid,
                               "server": s.proc.pid, "token": tok, "state": state, "run": rid, "secret": secret,
                               "socket": os.path.join(state, "events.sock")})
            bid = submit_as(s, bob, command(ATTACKS, args))
            s.wait_status(bid, ("succeeded", "failed"), timeout=120)
            with open(os.path.join(s.run_dir(bid), "ranks.own", "rank-0.log"), errors="replace") as f:
                log = f.read()  # trainer.log is now bob's link; the rank's own log is the same lines
            check("ATTACKS DONE" in log, f"bob's run went through every attack: {log[-3000:]}")
            for name in ATTACK_NAMES:
                line = next((ln for ln in log.splitlines() if f"ATTACK {name}:" in ln), "")
                print(f"  bob: {line.split('[rank 0] ', 1)[-1]}")
                # SQLite says its permission error in its own words
                denied = ": denied: PermissionError" in line or (
                    "OperationalError: unable to open database file" in line and "SQL" in name)
                check(denied, f"bob's attack fails with a permission error: {name}: {line}")
            # what bob's links would have the server serve him: nothing of the database or of alice's
            for path, what, status in ((f"/runs/{bid}/logs", "his log, a link to the database", 403),
                                       (f"/runs/{bid}/logs?rank=0", "his rank's log, through a link to alice's ranks", 403),
                                       (f"/runs/{bid}/checkpoints", "his checkpoints, a link to alice's directory", 200)):
                r = s.get(path, headers=bearer(bob))
                body = r.body.decode(errors="replace")
                leaked = "SQLite format" in body or "ALICE-PRIVATE-LINE" in body or "ckpt-ready" in body
                print(f"  bob: GET {path} ({what}): {r.status} {body[:160]!r}")
                check(not leaked, f"the server does not follow bob's link: {what}: {r.status} {body[:300]!r}")
                check(r.status == status and (status == 200 or "does not follow a run's links" in body),
                      f"a link is refused as one ({status}), the checkpoints listed without it: {what}: {r.status} {body[:300]!r}")
                if status == 200:
                    check(r.json()["checkpoints"] == [], f"no checkpoint of alice's listed as bob's: {body[:300]!r}")
            check(s.proc.poll() is None, "the server still runs")
            check(all(os.path.exists(f"/proc/{p}") for p in ranks), "alice's ranks still run")
            with open(os.path.join(s.run_dir(rid), "release"), "w"):
                pass
            run = s.wait_status(rid, ("succeeded", "failed"), timeout=120)
            check(run and run["status"] == "succeeded" and not run.get("reason"),
                  f"alice's run succeeded, no forged end taken: {run and (run['status'], run.get('reason'))}")
            after = snapshot(state, rid)
            check(after["users"] == before["users"], f"the users are unchanged: {before['users']} -> {after['users']}")
            check(after["steps"] == before["steps"], f"alice's points are unchanged: {before['steps']} -> {after['steps']}")
            check(after["run"][0] == "alice", f"alice's run is still hers: {after['run']}")
            with open(ckpt, "rb") as f:
                check(hashlib.sha256(f.read()).hexdigest() == ckpt_sum, "alice's checkpoint is unchanged")
            check(not os.path.exists(os.path.join(s.run_dir(rid), "planted")), "nothing was planted in her directory")
    finally:
        os.unlink(tok)
        shutil.rmtree(state, ignore_errors=True)


def case_hostile(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc:
        hostile(a, acc)


def case_caps_only(a):
    needs_root(a)
    if not shutil.which("setpriv"):
        print("caps_only: skipped: setpriv (util-linux) is not installed")
        sys.exit(SKIP)
    with Accounts("alice", "bob", "srv") as acc:
        wrapper = as_account_wrapper(a.ddpd, acc["srv"], caps=True)
        try:
            hostile(a, acc, wrapper=wrapper, server_uid=acc.uid("srv"))
        finally:
            os.unlink(wrapper)


def ddpd_with_file_caps(a, case):
    """A copy of ddpd whose file holds the capabilities as permitted ones (setcap ...+p,
    as the Docker image's), in a directory of its own; skips where that cannot be."""
    if not shutil.which("setpriv") or not shutil.which("setcap"):
        print(f"{case}: skipped: setpriv or setcap is not installed")
        sys.exit(SKIP)
    d = tempfile.mkdtemp(prefix="ddpd-wall-bin-")
    os.chmod(d, 0o755)
    ddpd = os.path.join(d, "ddpd")
    shutil.copy2(a.ddpd, ddpd)
    p = subprocess.run(["setcap", f"cap_{CAPS.replace(',', ',cap_')}+p", ddpd], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{case}: skipped: this filesystem keeps no file capabilities: {p.stderr.strip()}")
        shutil.rmtree(d)
        sys.exit(SKIP)
    return d, ddpd


def case_check_caps_from_file(a):
    """ddpd check, run as a plain account with the capabilities only on its file (the
    Docker image's `docker run ... ddpd check`), says it can switch as serve would;
    the same program without them says it cannot and which it lacks."""
    needs_root(a)
    with Accounts("alice", "srv") as acc:
        d, ddpd = ddpd_with_file_caps(a, "check_caps_from_file")
        state = state_dir_for(acc.uid("srv"))
        try:
            add_user(a.ddpd, state, "alice", "--unix-user", acc["alice"])
            for f in os.listdir(state):
                os.chown(os.path.join(state, f), acc.uid("srv"), -1)
            for caps in (True, False):
                if not caps:
                    subprocess.run(["setcap", "-r", ddpd], check=True)
                wrapper = as_account_wrapper(ddpd, acc["srv"], caps=None)
                try:
                    p = subprocess.run([wrapper, "check", "--state-dir", state, "--gpus", "none", "--slots", "1"],
                                       capture_output=True, text=True, timeout=120)
                finally:
                    os.unlink(wrapper)
                line = next((ln for ln in p.stdout.splitlines() if ln[6:18].strip() == "accounts"), "")
                if caps:
                    check(line.startswith("ok") and "it holds CAP_SETUID and CAP_SETGID" in line,
                          f"with the file's capabilities, check says runs can run as other accounts: {line!r}\n"
                          f"{p.stdout}{p.stderr}")
                else:
                    check(line.startswith("FAIL") and "lacks CAP_SETUID and CAP_SETGID" in line,
                          f"without them, check says it cannot switch and what it lacks: {line!r}")
        finally:
            shutil.rmtree(state, ignore_errors=True)
            shutil.rmtree(d, ignore_errors=True)


def case_caps_from_file(a):
    """As the Docker image: a ddpd whose file holds the capabilities as permitted ones
    (setcap ...+p), started as a plain account that has none."""
    needs_root(a)
    with Accounts("alice", "bob", "srv") as acc:
        d, ddpd = ddpd_with_file_caps(a, "caps_from_file")
        wrapper = as_account_wrapper(ddpd, acc["srv"], caps=None)
        try:
            hostile(a, acc, wrapper=wrapper, server_uid=acc.uid("srv"))
        finally:
            os.unlink(wrapper)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    cases = cases_in(globals())
    main(cases, args_for(cases, ["--runner"]))
