"""ddpctl against a real ddpd and the real trainer:

  submit_follow  submit --follow: plain lines off a terminal, a progress bar on one
                 (a pty), exit 0 when the run succeeds; follow of a failed run says
                 why and exits 1
  list_show      list (table, --status, --json), show (its epochs)
  queue_owners   queue: the queued runs in the order they will start, with their
                 owners and what they wait for, and the owners' usage; list and show
                 name each run's owner
  cancel         cancel a running run (follow then exits 5); cancel a finished one: 4
  follow_reconnects  follow of a run there is not: refused at once (4); the server
                 stopping under a follow: "reconnecting" said once, tried again
                 without end of output, SIGINT exits 130
  resume         resume a canceled run (--follow to its end, exit 0); resuming a
                 succeeded run or none: exit 4 and why
  metrics_csv    metrics --csv: every step, the API's values; --max-points; --key lr
  errors         a refused config names the field and the problem (exit 4); an
                 unreachable server is one clear line (exit 3); usage (exit 2); the
                 token: refused without it, accepted with --token and DDPD_TOKEN
  logs           logs prints the trainer's log; logs -f follows it to the run's end

Usage: test_ddpctl.py CASE --ddpd PATH --trainer PATH --ddpctl PATH"""
import argparse, atexit, csv, io, json, os, pty, re, select, socket, subprocess, sys, tempfile, time

import ddpd_harness as H  # noqa: E402

ENDS = ("succeeded", "failed", "canceled")


def succeeded(s, rid, timeout=240):
    """Waits for the run to end; it must have succeeded."""
    run = s.wait_status(rid, ENDS, timeout)
    H.check(run is not None and run["status"] == "succeeded",
            f"run {rid} succeeded: {run and run['status']} {run and run['reason']}")
    return run if run and run["status"] == "succeeded" else None
from ddpd_harness import check, cases_in, wait_until  # noqa: E402

A = None


def quick_run(**over):
    return H.fmnist_config(**{"train.epochs": 3, "train.batch_size": 32, "data.limit": 3000,
                              "train.lr_schedule": {"type": "step", "step_epochs": 1, "gamma": 0.3}, **over})


def long_run():
    return quick_run(**{"name": "long", "train.epochs": 500, "model.hidden": [512, 256]})


def config_file(cfg):
    """cfg written to a file of its own, removed when the case ends."""
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(cfg, f)
    f.close()
    atexit.register(lambda: os.path.exists(f.name) and os.unlink(f.name))
    return f.name


def ctl(s, *args, env=None, timeout=300, server=True):
    """Runs ddpctl; returns (exit status, stdout, stderr)."""
    e = dict(os.environ)
    e.pop("DDPD_TOKEN", None)
    e.pop("DDPD_TOKEN_FILE", None)
    if server:
        e["DDPD_URL"] = f"http://127.0.0.1:{s.port}"
    e.update(env or {})
    p = subprocess.run([A.ddpctl, *args], capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def ctl_pty(s, *args, timeout=300):
    """Runs ddpctl on a pseudo-terminal; returns (exit status, everything it wrote)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["DDPD_URL"] = f"http://127.0.0.1:{s.port}"
        os.execv(A.ddpctl, [A.ddpctl, *args])
    out, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 1.0)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def run_id(out):
    m = re.search(r"run (\d+) submitted", out)
    return int(m.group(1)) if m else None


def case_submit_follow(a):
    with H.Server(a.ddpd, a.trainer) as s:
        path = config_file(quick_run(name="followed"))
        rc, out, err = ctl(s, "submit", path, "--follow")
        rid = run_id(out)
        check(rc == 0, f"submit --follow exits 0 when the run succeeds (got {rc}; stderr {err!r})")
        check(rid is not None and (s.run(rid) or {}).get("status") == "succeeded", f"the run succeeded: {out[-300:]!r}")
        check(re.search(r"run \d+ starting on cpu:0, cpu:1", out) is not None, "it says where the run started")
        epochs = re.findall(r"^epoch (\d+) \((\d+) of 3\) done in .* test accuracy [\d.]+%, lr ([\d.e+-]+)$", out, re.M)
        check([e[:2] for e in epochs] == [("0", "1"), ("1", "2"), ("2", "3")],
              f"a line per epoch, numbered from 0 as the API numbers them, the count after: {epochs}")
        api = [e["epoch"] for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]] if rid else []
        check([int(e[0]) for e in epochs] == api, f"the same numbers as GET /runs/{{id}}/epochs: {api}")
        check(len({e[2] for e in epochs}) == 3, f"the LR steps down each epoch: {[e[2] for e in epochs]}")
        check(re.search(r"epoch \d+/\d+", out) is None, f"no epoch counted from 1 (\"epoch 3/3\"): {out[-400:]!r}")
        check(re.search(r"^run \d+ succeeded in \d+s: test accuracy [\d.]+% after 3 epochs$", out, re.M) is not None,
              f"it ends with how the run went: {out.splitlines()[-1:]}")
        check("\r" not in out and "\x1b[" not in out, "off a terminal: plain lines, no bar drawing")

        rc, out = ctl_pty(s, "submit", path, "--follow")
        check(rc == 0, f"on a terminal too, exit 0 (got {rc})")
        check("\r\x1b[K" in out, "on a terminal the bar is redrawn in place")
        bars = re.findall(r"epoch (\d+) \((\d+) of 3\) \[[#-]+\] +\d+%  step \d+/\d+  loss [\d.e+-]+  lr [\d.e+-]+  [\d,]+ samples/s  ETA \S+", out)
        check(all(int(n) + 1 == int(c) for n, c in bars), f"the bar's epoch is numbered from 0, its count from 1: {bars[:5]}")
        check(len(bars) >= 1, f"the bar shows epoch, step/total, loss, lr, samples/s and ETA: {out[:600]!r}")

        bad = quick_run(name="bad-data")
        bad["data"]["train"]["images"] = "fashion-mnist/train-labels-idx1-ubyte.gz"  # a labels file: the trainer refuses it
        rc, out, err = ctl(s, "submit", config_file(bad), "--follow")
        check(rc == 1, f"a failed run: exit 1 (got {rc})")
        check(re.search(r"run \d+ failed in \d+s: cannot load the training data: .*labels file", out) is not None,
              f"and why it failed: {out[-400:]!r}")
        rc, out, err = ctl(s, "follow", str(run_id(out) or 0))
        check(rc == 1 and "failed" in out, f"follow of a run that already failed: exit 1 ({rc})")


def case_list_show(a):
    with H.Server(a.ddpd, a.trainer) as s:
        rc, out, err = ctl(s, "list")
        check(rc == 0 and "no runs yet" in out, f"an empty list says so: {out!r}")
        ids = [s.submit(quick_run(name=f"r{i}")) for i in range(2)]
        for i in ids:
            succeeded(s, i)
        rc, out, err = ctl(s, "list")
        lines = out.splitlines()
        check(rc == 0 and lines[0].split()[:5] == ["ID", "NAME", "OWNER", "STATUS", "PROGRESS"], f"list: a table: {lines[:1]}")
        check("STEP LOSS" in lines[0], f"the loss column says it is the newest step's: {lines[0]!r}")
        rows = [l.split() for l in lines[1:]]
        check([r[0] for r in rows] == [str(i) for i in reversed(ids)], f"newest first: {rows}")
        check(all(r[2] == "-" and r[3] == "succeeded" and "cpu:0,cpu:1" in r for r in rows),
              f"no owner (no users), status and devices: {rows}")
        for i, line in zip(reversed(ids), lines[1:]):
            p = s.run(i)["progress"]
            want = f"epoch {p['epoch']} ({p['epoch'] + 1} of {p['epochs']}) 100%"
            check(p["epoch"] == 2 and want in line, f"progress numbered as the API numbers it ({want!r}): {line!r}")
            check(f"{p['loss']:.4g}".rstrip("0").rstrip(".") in line or f"{p['loss']:.4f}".rstrip("0") in line,
                  f"the step loss is the API's newest step's ({p['loss']}): {line!r}")
        rc, out, err = ctl(s, "list", "--status", "failed")
        check(rc == 0 and "no runs that pass these filters" in out, f"--status filters: {out!r}")
        rc, out, err = ctl(s, "list", "--json")
        check(rc == 0 and [r["id"] for r in json.loads(out)["runs"]] == list(reversed(ids)), "list --json is the API's JSON")
        rc, out, err = ctl(s, "show", str(ids[0]))
        check(rc == 0 and out.startswith(f"run {ids[0]} (r0): succeeded"), f"show: {out[:200]!r}")
        check([int(n) for n in re.findall(r"^\s+(\d+)\s+[\d.]+e-0\d", out, re.M)] == [0, 1, 2],
              f"show lists the epochs, numbered from 0: {out!r}")
        check(re.search(r"^  progress:  epoch 2 \(3 of 3\) 100%", out, re.M) is not None, f"and its progress so: {out!r}")
        check(re.search(r"^  latest:    step loss ", out, re.M) is not None, f"the loss it shows is the newest step's: {out!r}")
        rc, out, err = ctl(s, "show", str(ids[0]), "--json")
        check(rc == 0 and json.loads(out)["config"]["name"] == "r0", "show --json")
        rc, out, err = ctl(s, "show", "999")
        check(rc == 4 and err.strip() == "ddpctl: there is no run 999 (GET /runs lists them)", f"show of no run: {rc} {err!r}")


def case_list_pages(a):
    """list reaches any run: a page of --limit N says the cursor of the next (never a
    --limit the API refuses), --before ID gives it, --all every page; the filters go to
    the server (--name PREFIX, --status); --all and --before together are refused."""
    with H.Server(a.ddpd, a.trainer, slots=2) as s:
        holder = s.submit(long_run())  # both slots: the rest stay queued behind it
        s.wait_status(holder, "running", timeout=120)
        ids = [s.submit(quick_run(name=f"page-{i}")) for i in range(7)]
        newest_first = list(reversed([holder] + ids))
        rc, out, err = ctl(s, "list", "--limit", "3")
        rows = [l.split()[0] for l in out.splitlines()[1:] if l and l.split()[0].isdigit()]
        check(rc == 0 and rows == [str(i) for i in newest_first[:3]], f"a page of 3, newest first: {out!r}")
        m = re.search(r"the next page is --before (\d+) with the same filters; --all lists every page", out)
        check(m is not None and "--limit 6" not in out and m.group(1) == str(newest_first[2]),
              f"the next page's cursor is said: {out!r}")
        rc, out, err = ctl(s, "list", "--limit", "3", "--before", m.group(1) if m else "1")
        rows = [l.split()[0] for l in out.splitlines()[1:] if l and l.split()[0].isdigit()]
        check(rc == 0 and rows == [str(i) for i in newest_first[3:6]], f"--before: the next page: {out!r}")
        rc, out, err = ctl(s, "list", "--limit", "3", "--all", "--json")
        got = [r["id"] for r in json.loads(out)["runs"]] if rc == 0 else []
        check(got == newest_first and json.loads(out)["next"] is None, f"--all: every page in one list: {got}")
        rc, out, err = ctl(s, "list", "--name", "page-", "--all", "--limit", "2", "--json")
        got = [r["id"] for r in json.loads(out)["runs"]] if rc == 0 else []
        check(got == list(reversed(ids)), f"--name filters on the server: {got}")
        rc, out, err = ctl(s, "list", "--status", "running", "--json")
        check(rc == 0 and [r["id"] for r in json.loads(out)["runs"]] == [holder], f"--status running: {out[:200]!r}")
        rc, out, err = ctl(s, "list", "--all", "--before", "3")
        check(rc == 2 and "not both" in err, f"--all with --before is refused: {rc} {err!r}")
        rc, out, err = ctl(s, "list", "--since", "later")
        check(rc == 4 and "since" in err, f"a bad --since: the server's 400 naming it: {rc} {err!r}")


def case_queue_owners(a):
    state = tempfile.mkdtemp(prefix="ddpd-ddpctl-users-")
    tokens = {}
    for name in ("alice", "bob"):
        p = subprocess.run([a.ddpd, "user", "add", name, "--state-dir", state], capture_output=True, text=True)
        tokens[name] = p.stdout.strip().splitlines()[-1]
    with H.Server(a.ddpd, a.trainer, state_dir=state) as s:
        s.read_headers = {"Authorization": f"Bearer {tokens['alice']}"}
        as_alice, as_bob = {"DDPD_TOKEN": tokens["alice"]}, {"DDPD_TOKEN": tokens["bob"]}
        # with users, reading needs a token too: ddpctl says what to do without one
        rc, out, err = ctl(s, "queue")
        check(rc == 4 and "ddpd needs a token for this" in err and "DDPD_TOKEN" in err,
              f"a read without a token: refused, saying what to do: {rc} {err!r}")
        rc, out, err = ctl(s, "queue", env=as_bob)
        check(rc == 0 and out.startswith("nothing is queued"), f"an empty queue says so: {out!r}")
        # or from a file only its owner reads (DDPD_TOKEN_FILE, --token-file)
        token_path = os.path.join(state, "bob.token")
        with open(os.open(token_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(tokens["bob"] + "\n")
        rc, out, err = ctl(s, "queue", env={"DDPD_TOKEN_FILE": token_path})
        check(rc == 0 and out.startswith("nothing is queued"), f"DDPD_TOKEN_FILE: the token read from it: {rc} {err!r}")
        rc, out, err = ctl(s, "--token-file", token_path, "list")
        check(rc == 0, f"--token-file: the token read from it: {rc} {err!r}")
        os.chmod(token_path, 0o644)
        rc, out, err = ctl(s, "queue", env={"DDPD_TOKEN_FILE": token_path})
        check(rc == 2 and "may be read by others (mode 644): chmod 600" in err,
              f"a token file others may read is refused, saying what to do: {rc} {err!r}")
        rc, out, err = ctl(s, "submit", config_file(long_run()), env=as_alice)
        busy = run_id(out)
        s.wait_status(busy, "running", timeout=60)
        time.sleep(1)  # alice uses the box
        rc, out, err = ctl(s, "submit", config_file(quick_run(name="hers")), env=as_alice)
        hers = run_id(out)
        rc, out, err = ctl(s, "submit", config_file(quick_run(name="his")), env=as_bob)
        his = run_id(out)
        check(rc == 0 and "position 1 in the queue" in out, f"bob's run is first in the queue: {out!r}")
        rc, out, err = ctl(s, "queue", env=as_bob)
        lines = out.splitlines()
        check(rc == 0 and lines[0].split()[:5] == ["#", "ID", "OWNER", "PRIORITY", "NEEDS"], f"queue: a table: {lines[:1]}")
        rows = [l.split() for l in lines[1:3]]
        check([r[:3] for r in rows] == [["1", str(his), "bob"], ["2", str(hers), "alice"]],
              f"bob's first, alice's second: {rows}")
        check("2 CPU slots on this host (0 free of 2)" in lines[1], f"what it waits for: {lines[1]!r}")
        check(any(l.split()[:1] == ["alice"] and l.split()[2] == "2" for l in lines if l.startswith("  alice")),
              f"the owners: alice holds 2 devices: {out!r}")
        rc, out, err = ctl(s, "queue", "--json", env=as_bob)
        check(rc == 0 and [r["id"] for r in json.loads(out)["runs"]] == [his, hers], "queue --json is the API's")
        rc, out, err = ctl(s, "list", env=as_bob)
        owners = {l.split()[0]: l.split()[2] for l in out.splitlines()[1:]}
        check(owners == {str(busy): "alice", str(hers): "alice", str(his): "bob"}, f"list names the owners: {owners}")
        rc, out, err = ctl(s, "show", str(his), env=as_alice)
        check(re.search(r"^  owner:     bob   priority: 0$", out, re.M) and "waits for: 2 CPU slots" in out,
              f"show names the owner and what it waits for: {out!r}")
        rc, out, err = ctl(s, "cancel", str(busy), env=as_bob)
        check(rc == 4 and f"run {busy} is alice's" in err, f"bob may not cancel alice's run: {rc} {err!r}")
        for rid, env in ((his, as_bob), (hers, as_alice), (busy, as_alice)):
            ctl(s, "cancel", str(rid), env=env)
            s.wait_status(rid, ENDS, timeout=60)
    import shutil
    shutil.rmtree(state, ignore_errors=True)


def case_cancel(a):
    with H.Server(a.ddpd, a.trainer) as s:
        rc, out, err = ctl(s, "submit", config_file(long_run()))
        rid = run_id(out)
        check(rc == 0 and rid, f"submit without --follow returns at once: {out!r}")
        wait_until(lambda: ((s.run(rid) or {}).get("progress") or {}).get("global_step"), "the run to take steps", 120)
        rc, out, err = ctl(s, "cancel", str(rid))
        check(rc == 0 and re.match(rf"run {rid}: cancel(ing|ed)", out), f"cancel: {rc} {out!r} {err!r}")
        rc, out, err = ctl(s, "follow", str(rid))
        check(rc == 5, f"follow of a canceled run exits 5 (got {rc})")
        check(re.search(rf"run {rid} was canceled in \d+s: canceled by request", out) is not None, f"and says so: {out[-200:]!r}")
        rc, out, err = ctl(s, "cancel", str(rid))
        check(rc == 4 and "already finished (canceled)" in err, f"canceling a finished run: exit 4 and why: {rc} {err!r}")


def case_follow_reconnects(a):
    with H.Server(a.ddpd, a.trainer) as s:
        rc, out, err = ctl(s, "follow", "424242")
        check(rc == 4 and "424242" in err and "reconnecting" not in err,
              f"following a run there is not: refused at once, naming it (exit 4): {rc} {err!r}")
        rc, out, err = ctl(s, "submit", config_file(long_run()))
        rid = run_id(out)
        check(rc == 0 and rid, f"submitted: {out!r}")
        e = dict(os.environ, DDPD_URL=f"http://127.0.0.1:{s.port}")
        e.pop("DDPD_TOKEN", None)
        e.pop("DDPD_TOKEN_FILE", None)
        with tempfile.TemporaryFile("w+") as stderr:
            p = subprocess.Popen([a.ddpctl, "follow", str(rid)], stdout=subprocess.DEVNULL, stderr=stderr, env=e, text=True)
            try:
                wait_until(lambda: ((s.run(rid) or {}).get("progress") or {}).get("global_step"), "the run to take steps", 120)
                s.stop()  # its stream ends, then nothing answers
                said = wait_until(lambda: (stderr.seek(0), "reconnecting" in stderr.read())[1] or None,
                                  "ddpctl to say it reconnects", 30)
                check(said, "the stream's end is said once, and ddpctl reads on")
                time.sleep(3)  # the server is gone: it tries again, a second apart, and says nothing more
                check(p.poll() is None, f"still trying 3 s after the break (it gives up after a minute): {p.poll()}")
                p.send_signal(2)  # SIGINT
                rc = p.wait(30)
            finally:
                if p.poll() is None:
                    p.kill()
            stderr.seek(0)
            said = stderr.read()
        check(rc == 130 and "stopped following" in said and said.count("reconnecting") == 1,
              f"interrupted while it reconnects: exit 130, the break said once: {rc} {said!r}")


def case_resume(a):
    with H.Server(a.ddpd, a.trainer) as s:
        rc, out, err = ctl(s, "submit", config_file(quick_run(**{"name": "resumed", "train.epochs": 8})))
        rid = run_id(out)
        check(rc == 0 and rid, f"submitted: {out!r}")
        wait_until(lambda: s.get(f"/runs/{rid}/checkpoints").json()["checkpoints"] or s.run(rid)["status"] in ENDS,
                   "its first checkpoint", 120, interval=0.01)
        rc, out, err = ctl(s, "cancel", str(rid))
        run = s.wait_status(rid, ENDS, 60)
        if not check(run and run["status"] == "canceled", f"canceled mid-run: {run and run['status']}"):
            return
        rc, out, err = ctl(s, "resume", str(rid), "--follow")
        check(rc == 0, f"resume --follow exits 0 once the run succeeds: {rc} {out[-300:]!r} {err!r}")
        check(re.match(rf"run {rid} resumed from \S+/checkpoints/epoch-\d{{4}}\.safetensors \(after epoch \d+, step \d+\), "
                       r"at attempt 1: (queued|starting|running)", out) is not None,
              f"it says from where, and which attempt: {out[:300]!r}")
        check(s.run(rid)["status"] == "succeeded" and len(s.run(rid)["resumes"]) == 1, "the run succeeded, resumed once")
        rc, out, err = ctl(s, "resume", str(rid))
        check(rc == 4 and f"only a failed or canceled run can be resumed; run {rid} is succeeded" in err,
              f"resuming a succeeded run: exit 4 and why: {rc} {err!r}")
        rc, out, err = ctl(s, "resume", "99999")
        check(rc == 4 and "there is no run 99999" in err, f"no such run: exit 4: {rc} {err!r}")
        rc, out, err = ctl(s, "resume")
        check(rc == 2 and "resume takes a run ID" in err, f"usage: exit 2: {rc} {err!r}")


def case_metrics_csv(a):
    with H.Server(a.ddpd, a.trainer) as s:
        rid = s.submit(quick_run())
        run = succeeded(s, rid)
        total = run["progress"]["total_steps"]
        rc, out, err = ctl(s, "metrics", str(rid), "--csv")
        rows = list(csv.reader(io.StringIO(out)))
        check(rc == 0 and rows[0] == ["step", "loss", "time"], f"CSV with a header: {rows[:1]}")
        api = s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]
        check(len(rows) - 1 == total == len(api), f"every step: {len(rows) - 1} rows for {total} steps")
        check(all(int(r[0]) == p[0] and float(r[1]) == p[1] for r, p in zip(rows[1:], api)),
              "steps and values are the API's, exactly")
        check(all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r[2]) for r in rows[1:]), "times are ISO 8601 UTC")
        rc, out, err = ctl(s, "metrics", str(rid), "--csv", "--max-points", "10")
        n = len(out.splitlines()) - 1
        check(rc == 0 and 3 <= n <= 10, f"--max-points downsamples ({n} rows)")
        rc, out, err = ctl(s, "metrics", str(rid), "--key", "lr", "--csv")
        lrs = {float(r[1]) for r in list(csv.reader(io.StringIO(out)))[1:]}
        check(rc == 0 and len(lrs) == 3, f"--key lr: the three LRs of the step schedule ({sorted(lrs)})")
        rc, out, err = ctl(s, "metrics", str(rid))
        check(rc == 0 and out.splitlines()[0].split() == ["STEP", "LOSS", "TIME"], "without --csv: a table")
        rc, out, err = ctl(s, "metrics", str(rid), "--key", "accuracy")
        check(rc == 4 and 'its series are ["loss","lr","samples_per_s"]' in err, f"an unknown key: the server's words: {err!r}")


def case_errors(a):
    with H.Server(a.ddpd, a.trainer) as s:
        bad = quick_run(**{"train.batch_size": 7, "model.activation": "sigmoid"})
        path = config_file(bad)
        rc, out, err = ctl(s, "submit", path)
        check(rc == 4, f"a refused config exits 4 (got {rc})")
        check("  /train/batch_size: must be a multiple of /distributed/world_size (2)" in err.splitlines(),
              f"the field and the problem: {err!r}")
        check(any(l.startswith("  /model/activation: must be one of") for l in err.splitlines()), "every field refused")
        check(err.splitlines()[0].startswith(f"ddpctl: {path}: the server refused it (2 problems)"), f"{err.splitlines()[:1]}")
        rc, out, err = ctl(s, "submit", "/nonexistent/run.json")
        check(rc == 2 and "cannot read /nonexistent/run.json" in err, f"an unreadable file: exit 2 ({rc} {err!r})")
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        rc, out, err = ctl(s, "--server", f"http://127.0.0.1:{port}", "list", server=False)
        lines = err.strip().splitlines()
        check(rc == 3 and len(lines) == 1 and lines[0].startswith(f"ddpctl: cannot reach ddpd at http://127.0.0.1:{port}")
              and "curl" not in err.lower() and "error" not in err.lower(),
              f"an unreachable server is one clear line, exit 3: {rc} {err!r}")
        rc, out, err = ctl(s, "list", env={"DDPD_URL": f"127.0.0.1:{port}"})
        check(rc == 3 and len(err.strip().splitlines()) == 1, "DDPD_URL is the default server (a bare host:port works)")
        rc, out, err = ctl(s, "frobnicate")
        check(rc == 2 and "unknown command" in err, f"usage: exit 2 ({rc})")
        rc, out, err = ctl(s, "list", "--csv")
        check(rc == 2 and "list does not take --csv" in err, f"an option a command does not take: exit 2 ({err!r})")
        rc, out, err = ctl(s, "--help")
        check(rc == 0 and "Exit status" in out, "--help")

    with H.Server(a.ddpd, a.trainer, extra_args=["--token", "s3cret"]) as s:
        path = config_file(quick_run())
        rc, out, err = ctl(s, "submit", path)
        check(rc == 4 and "needs a token" in err and "--token" in err, f"no token: refused, and how to give it: {err!r}")
        rc, out, err = ctl(s, "--token", "s3cret", "submit", path)
        check(rc == 0 and run_id(out), f"--token: accepted ({rc} {err!r})")
        rc, out, err = ctl(s, "submit", path, "--follow", env={"DDPD_TOKEN": "s3cret"})
        check(rc == 0, f"DDPD_TOKEN: accepted and followed ({rc} {err!r})")
        rc, out, err = ctl(s, "list")
        check(rc == 0 and len(out.splitlines()) == 3, "reading needs no token")


def case_logs(a):
    with H.Server(a.ddpd, a.trainer) as s:
        rid = s.submit(quick_run())
        succeeded(s, rid)
        rc, out, err = ctl(s, "logs", str(rid))
        check(rc == 0 and "launcher: run succeeded" in out and "epoch 2:" in out, f"logs: the trainer's log: {out[-300:]!r}")
        check("ddpd gave this run CPU slots" in out and "set but empty" not in out,
              f"a CPU run's log names its placement, with no warning about CUDA_VISIBLE_DEVICES: "
              f"{[l for l in out.splitlines() if 'backend' in l]}")
        rc, out2, err = ctl(s, "logs", str(rid), "--tail", "1")
        check(rc == 0 and len(out2.splitlines()) == 1 and "run succeeded" in out2, f"--tail 1: {out2!r}")

        rid = s.submit(quick_run(**{"train.epochs": 8, "model.hidden": [512, 256], "train.batch_size": 16}))
        wait_until(lambda: (s.run(rid) or {}).get("status") == "running", "the run to start", 120)
        rc, out, err = ctl(s, "logs", str(rid), "-f")
        check(rc == 0, f"logs -f ends when the run does ({rc} {err!r})")
        lines = out.splitlines()
        check(lines and "run succeeded" in lines[-1], f"and prints the end: {lines[-2:]}")
        check(len(lines) == len(set(lines)), "no line twice")
        final = s.get(f"/runs/{rid}/logs?tail=10000").body.decode().splitlines()
        check(lines == final, f"exactly the log ({len(lines)} lines vs {len(final)})")


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer", required=True)
    p.add_argument("--ddpctl", required=True)
    A = p.parse_args()
    A.ddpd, A.trainer, A.ddpctl = (os.path.abspath(x) for x in (A.ddpd, A.trainer, A.ddpctl))
    H.main(CASES, A)
