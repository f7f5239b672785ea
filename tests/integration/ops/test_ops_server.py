#!/usr/bin/env python3
"""Integration tests of ddpd's operations side against a real server on a loopback
port: GET /metrics (checked by promtool, and its numbers against what the test
did), the token (reading open, changing needs it, 401 with WWW-Authenticate), the
rule that a server without a token listens only on loopback unless --insecure, the
event socket's permissions, the log file (one line per request, rotation by size
and by day, only the newest files kept), log levels, `ddpd check`,
`ddpd --version` and `ddpd agent`'s start-up errors.

Usage: test_ops_server.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import datetime, glob, json, os, re, shutil, signal, socket, sqlite3, stat, subprocess, sys, tempfile, time

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, DATA_ROOT  # noqa: E402

LINE_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ddpd (debug|info|warning|error): ")
REQUEST_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ddpd (info|warning): http (\S+) ([A-Z]+) (\S+) "
                        r"(\d{3}) (\d+)B (\d+\.\d)ms$")


# ---- /metrics ----

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """{(name, ((label, value), ...)): float}, and the families' types. Checks that
    each family has HELP then TYPE before its samples."""
    samples, types, helps = {}, {}, set()
    current, problems = None, []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            current = line.split()[2]
            helps.add(current)
        elif line.startswith("# TYPE "):
            _, _, name, typ = line.split()
            if name not in helps:
                problems.append(f"TYPE before HELP for {name}")
            types[name] = typ
        elif line:
            m = SAMPLE_RE.match(line)
            if not m:
                problems.append(f"not a sample line: {line!r}")
                continue
            name, _, labels, value = m.groups()
            if current is None or not name.startswith(current):
                problems.append(f"{name} does not follow its family's HELP ({current})")
            key = (name, tuple(sorted(LABEL_RE.findall(labels or ""))))
            if key in samples:
                problems.append(f"a duplicate series: {line}")
            samples[key] = float(value)
    check(not problems, f"the exposition is well formed: {problems[:5]}")
    return samples, types


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def promtool_check(text):
    promtool = shutil.which("promtool")
    if not check(promtool is not None, "promtool is installed (Debian's prometheus: scripts/install-deps.sh)"):
        return
    p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    out = (p.stdout + p.stderr).decode(errors="replace")
    check(p.returncode == 0 and not out.strip(), f"promtool check metrics passes cleanly: rc {p.returncode}: {out[:2000]}")


def scrape(s):
    r = s.get("/metrics")
    check(r.status == 200, f"GET /metrics: {r.status}")
    ct = r.header("Content-Type") or ""
    check(ct.startswith("text/plain") and "version=0.0.4" in ct, f"the Prometheus text content type: {ct}")
    text = r.body.decode()
    return text, parse_exposition(text)[0]


def case_metrics(a):
    # promtool itself: it must reject what it should, or passing it proves nothing
    promtool = shutil.which("promtool")
    if promtool:
        bad = b"# HELP x_total a\n# TYPE x_total counter\nx_total{a=\"b} 1\n"
        p = subprocess.run([promtool, "check", "metrics"], input=bad, capture_output=True, timeout=60)
        check(p.returncode != 0, "promtool rejects a broken label value")

    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        text, m = scrape(s)
        promtool_check(text)
        _, types = parse_exposition(text)
        for name, typ in {"ddpd_runs": "gauge", "ddpd_queue_length": "gauge", "ddpd_devices": "gauge",
                          "ddpd_event_streams": "gauge",
                          "ddpd_ingest_events_total": "counter", "ddpd_http_requests_total": "counter",
                          "ddpd_http_request_duration_seconds": "histogram",
                          "ddpd_store_write_batch_seconds": "histogram"}.items():
            check(types.get(name) == typ, f"{name} is a {typ}: {types.get(name)}")
        check(value(m, "ddpd_devices", kind="cpu", state="free") == 1, "one free CPU slot at start")
        check(all(value(m, "ddpd_runs", status=st) == 0 for st in
                  ("queued", "starting", "running", "canceling", "succeeded", "failed", "canceled")),
              "every status is there, at 0")

        # 404s by route: three to one route, one to no route
        before = value(m, "ddpd_http_requests_total", route="/runs/{id}", method="GET", code="404") or 0
        for _ in range(3):
            check(s.get("/runs/999").status == 404, "GET /runs/999 -> 404")
        s.get("/no/such/path")
        def counted():
            _, m2 = scrape(s)
            n = value(m2, "ddpd_http_requests_total", route="/runs/{id}", method="GET", code="404") or 0
            u = value(m2, "ddpd_http_requests_total", route="unmatched", method="GET", code="404") or 0
            return m2 if n - before == 3 and u >= 1 else None
        m = wait_until(counted, "the three 404s and the unmatched one counted", timeout=30) or m

        # a run that finishes, one that holds the only slot, one queued behind it
        done = s.submit({"name": "steps-300", "distributed": {"world_size": 1}})
        s.wait_status(done, "succeeded", timeout=120)
        live = s.submit({"name": "sleep", "distributed": {"world_size": 1}})
        s.wait_status(live, "running", timeout=60)
        waiting = s.submit({"name": "steps-5", "distributed": {"world_size": 1}})

        def settled():
            text2, m2 = scrape(s)
            ok = (value(m2, "ddpd_queue_length") == 1 and value(m2, "ddpd_runs", status="queued") == 1
                  and value(m2, "ddpd_runs", status="running") == 1 and value(m2, "ddpd_runs", status="succeeded") == 1
                  and value(m2, "ddpd_devices", kind="cpu", state="in_use") == 1
                  and value(m2, "ddpd_devices", kind="cpu", state="free") == 0)
            return (text2, m2) if ok else None
        got = wait_until(settled, "metrics: 1 queued, 1 running, 1 succeeded, the slot in use", timeout=30)
        if got:
            text, m = got
            promtool_check(text)
        health = s.get("/healthz").json()
        events = value(m, "ddpd_ingest_events_total") or 0
        check(events >= 300 and events <= health["ingest"]["events"],
              f"events ingested: {events} (healthz says {health['ingest']['events']})")
        check((value(m, "ddpd_store_write_batch_seconds_count") or 0) >= 1
              and (value(m, "ddpd_store_write_ops_total") or 0) >= 300, "the store's write batches are measured")
        # each histogram: cumulative buckets, +Inf == _count == the route's requests
        for (name, labels), v in m.items():
            if name != "ddpd_http_request_duration_seconds_count":
                continue
            lab = dict(labels)
            buckets = sorted(((float(dict(l)["le"]), val) for (n, l), val in m.items()
                              if n == "ddpd_http_request_duration_seconds_bucket"
                              and {k: x for k, x in l if k != "le"} == lab), key=lambda b: b[0])
            counts = [c for _, c in buckets]
            check(counts == sorted(counts) and buckets[-1][0] == float("inf") and buckets[-1][1] == v,
                  f"{lab}: buckets cumulative, +Inf equals _count ({buckets[-3:]}, {v})")
            total = sum(val for (n, l), val in m.items() if n == "ddpd_http_requests_total"
                        and dict(l)["route"] == lab["route"] and dict(l)["method"] == lab["method"])
            check(total >= v and total - v <= 2, f"{lab}: durations counted for every request ({v} of {total})")
        # an open event stream is counted
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as sock:
            sock.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            while b"event: ready" not in got:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                got += chunk
            streams = wait_until(lambda: (value(scrape(s)[1], "ddpd_event_streams") or 0) >= 1,
                                 "ddpd_event_streams counts the open stream", timeout=30)
            check(streams, "an open event stream shows in ddpd_event_streams")
        check(s.post(f"/runs/{live}/cancel").status == 202, "cancel the sleeping run")
        s.wait_status(waiting, "succeeded", timeout=60)


# ---- the token ----

def case_auth(a):
    token = "t0ken-" + "x" * 26
    with Server(a.ddpd, a.fake_trainer, extra_args=["--token", token]) as s:
        for path in ("/healthz", "/metrics", "/openapi.json", "/runs", "/runs?status=queued"):
            r = s.get(path)
            check(r.status == 200, f"GET {path} needs no token: {r.status}")
        check(s.request("HEAD", "/runs").status == 200, "HEAD needs no token")

        def refused(r, what):
            ok = check(r.status == 401, f"{what}: 401, got {r.status} {r.body[:200]!r}")
            check((r.header("Content-Type") or "").startswith("application/problem+json"), f"{what}: problem+json")
            check((r.header("WWW-Authenticate") or "").startswith("Bearer"), f"{what}: WWW-Authenticate: Bearer")
            check(token.encode() not in r.body, f"{what}: the answer does not give the token away")
            return ok

        refused(s.post("/runs", {"name": "steps-5"}), "POST /runs without a token")
        for bad in ("Bearer " + token[:-1], "Bearer " + token + "x", "Bearer " + token[:-1] + "y", "Bearer",
                    "Basic " + token, token, "Bearer  "):
            refused(s.post("/runs", {"name": "steps-5"}, headers={"Authorization": bad}), f"Authorization: {bad[:20]}…")
        refused(s.post("/runs", body="x", headers={"Content-Type": "text/plain"}),
                "an unauthenticated body is refused before it is read (401, not 415)")
        check(s.get("/runs").json()["runs"] == [], "nothing was submitted")
        r = s.post("/runs", {"name": "sleep"}, headers={"Authorization": "bearer " + token})
        check(r.status == 201, f"with the token (the scheme in any case): {r.status} {r.body[:200]!r}")
        rid = r.json()["id"]
        s.wait_status(rid, "running", timeout=60)
        refused(s.post(f"/runs/{rid}/cancel"), "cancel without a token")
        check(s.run(rid)["status"] == "running", "and the run goes on")
        check(s.request("PUT", "/runs").status == 405, "a method no route takes is 405, token or not")
        r = s.post(f"/runs/{rid}/cancel", headers={"Authorization": "Bearer " + token})
        check(r.status == 202, f"cancel with the token: {r.status}")
        s.wait_status(rid, "canceled", timeout=60)
        refused(s.request("DELETE", f"/runs/{rid}"), "DELETE without a token")
        check(s.run(rid) is not None, "and the run is still there")
        r = s.request("DELETE", f"/runs/{rid}", headers={"Authorization": "Bearer " + token})
        check(r.status == 204, f"DELETE with the token: {r.status}")
    with Server(a.ddpd, a.fake_trainer, env={"DDPD_TOKEN": "from-the-environment"}) as s:
        check(s.post("/runs", {"name": "steps-5"}).status == 401, "DDPD_TOKEN sets the token")
        check(s.post("/runs", {"name": "steps-5"}, headers={"Authorization": "Bearer from-the-environment"}).status == 201,
              "and it is accepted")


# ---- no token: loopback only ----

def start_raw(a, args, env=None):
    """Starts ddpd by hand, with no DDPD_* settings but `env`; returns (process, state dir)."""
    state = tempfile.mkdtemp(prefix="ddpd-ops-")
    e = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_")}
    e.update(env or {})
    p = subprocess.Popen([a.ddpd, "serve", "--state-dir", state, "--gpus", "none", "--slots", "1",
                          "--trainer", a.fake_trainer] + args,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)
    return p, state


def case_listen_rule(a):
    for args, env, what in ((["--listen", "0.0.0.0:0"], {}, "0.0.0.0"),
                            (["--listen", ":0"], {}, "an empty host"),
                            ([], {"DDPD_LISTEN": "0.0.0.0:0"}, "DDPD_LISTEN=0.0.0.0")):
        p, state = start_raw(a, args, env)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        err = err.decode(errors="replace")
        check(p.returncode == 2, f"{what} without a token: ddpd refuses (exit 2), got {p.returncode}")
        check("refusing to listen" in err and "--insecure" in err and "DDPD_TOKEN" in err,
              f"{what}: it says why and what to do: {err[-400:]!r}")
        check(b"listening" not in out, f"{what}: it never listened")
        shutil.rmtree(state, ignore_errors=True)

    # explicitly insecure, or with a token, or on loopback: it serves
    for extra, env, what in ((["--listen", "0.0.0.0:0", "--insecure"], {}, "--insecure"),
                             (["--listen", "0.0.0.0:0"], {"DDPD_INSECURE": "1"}, "DDPD_INSECURE=1"),
                             (["--listen", "0.0.0.0:0", "--token", "a-long-enough-token"], {}, "a token"),
                             (["--listen", "localhost:0"], {}, "localhost")):
        with Server(a.ddpd, a.fake_trainer, extra_args=extra, env=env) as s:
            check(s.get("/healthz").status == 200, f"{what}: serving")
            s.stop()
            with open(s.log_path) as f:
                log = f.read()
            if "insecure" in what.lower() or "INSECURE" in what:
                check("without a token (--insecure)" in log, f"{what}: the log warns: {log[-500:]!r}")
            else:
                check("without a token" not in log, f"{what}: no warning")


def case_busy_port(a):
    """A port another program holds: one message, the right one, and what to do."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        p, state = start_raw(a, ["--listen", f"127.0.0.1:{port}"])
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        err = err.decode(errors="replace")
        check(p.returncode != 0 and b"listening" not in out, f"a busy port: ddpd exits ({p.returncode}) without listening")
        trouble = [l for l in err.splitlines() if " info: " not in l]
        check(len(trouble) == 1, f"one line says what went wrong (no library's line before it): {trouble}")
        check(trouble and f"cannot listen on 127.0.0.1:{port}: Address already in use" in trouble[0]
              and "--listen" in trouble[0] and "DDPD_LISTEN" in trouble[0],
              f"it names the address, the cause and what to do: {trouble}")
        check("Failed to bind" not in err and "port 0" not in err, f"no \"Failed to bind to port 0\": {err[-600:]!r}")
        shutil.rmtree(state, ignore_errors=True)
    finally:
        holder.close()


def case_event_socket(a):
    # a state dir ddpd makes itself is its user's alone
    base = tempfile.mkdtemp(prefix="ddpd-ops-")
    made = os.path.join(base, "new", "state")
    p = subprocess.Popen([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", made, "--gpus", "none",
                          "--trainer", a.fake_trainer], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        line = p.stdout.readline().decode()
        check("listening on" in line, f"ddpd started on a state dir it made: {line!r}")
        mode = stat.S_IMODE(os.stat(made).st_mode)
        check(mode == 0o700, f"the state dir ddpd made is 0700: {oct(mode)}")
    finally:
        p.terminate()
        p.wait(60)
        shutil.rmtree(base, ignore_errors=True)

    with Server(a.ddpd, a.fake_trainer) as s:
        sock = os.path.join(s.state_dir, "events.sock")
        st = os.stat(sock)
        check(stat.S_ISSOCK(st.st_mode), "events.sock is a socket")
        check(stat.S_IMODE(st.st_mode) == 0o600, f"events.sock is 0600: {oct(stat.S_IMODE(st.st_mode))}")
        check(st.st_uid == os.getuid(), "and the server's user owns it")
        if os.getuid() == 0:
            # another user may not connect (root may: try as nobody)
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    c.connect(sock)
                    code = 0
                except PermissionError:
                    code = 1
                except OSError:
                    code = 2
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            check(os.WEXITSTATUS(status) == 1, f"another user cannot connect to the event socket "
                                               f"(child exit {os.WEXITSTATUS(status)}: 0 connected, 2 another error)")
        rid = s.submit({"name": "steps-20"})
        check(s.wait_status(rid, "succeeded", timeout=60) is not None, "and the server's own trainers can")


# ---- the log ----

def rotated_files(path):
    pat = re.compile(re.escape(os.path.basename(path)) + r"\.(\d{4}-\d\d-\d\d)(\.(\d+))?$")
    found = []
    for name in os.listdir(os.path.dirname(path)):
        m = pat.match(name)
        if m:
            found.append((m.group(1), int(m.group(3) or 0), os.path.join(os.path.dirname(path), name)))
    return sorted(found)


def case_log_file(a):
    logs = tempfile.mkdtemp(prefix="ddpd-ops-logs-")
    path = os.path.join(logs, "ddpd.log")
    try:
        # a log left from two days ago: the first line of today rotates it under its own date
        old_day = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=2))
        with open(path, "w") as f:
            f.write(old_day.strftime("%Y-%m-%dT%H:%M:%S.000Z") + " ddpd info: a line from before\n")
        t = old_day.timestamp()
        os.utime(path, (t, t))
        args = ["--log-file", path, "--log-max-bytes", "4k", "--log-keep", "3"]
        with Server(a.ddpd, a.fake_trainer, extra_args=args) as s:
            n = 150
            for i in range(n):
                check(s.get(f"/nope-{i}").status == 404, f"GET /nope-{i}")
            s.stop()
            with open(s.log_path, "rb") as f:
                stderr = f.read().decode(errors="replace")
        check("http " not in stderr and "ddpd info" not in stderr,
              f"with --log-file, nothing of the log goes to stderr: {stderr[:300]!r}")

        rotated = rotated_files(path)
        names = [os.path.basename(r[2]) for r in rotated]
        check(1 <= len(rotated) <= 3, f"rotated by size, the newest 3 kept: {names}")
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        old = old_day.strftime("%Y-%m-%d")
        check(all(d in (today, old) for d, _, _ in rotated), f"rotated files are named by their day: {names}")
        # the old day's file was the first rotated: with 150 requests it has been pruned since,
        # so check the daily rotation with a fresh directory below
        files = [r[2] for r in rotated] + [path]
        for f in files:
            size = os.path.getsize(f)
            check(size <= 4096, f"{os.path.basename(f)} is within --log-max-bytes: {size}")
        seen = {}
        for f in files:
            with open(f) as fh:
                for line in fh.read().splitlines():
                    check(LINE_RE.match(line) is not None, f"a log line: {line!r}")
                    m = REQUEST_RE.match(line)
                    if m and m.group(4).startswith("/nope-"):
                        check(m.group(2) == "127.0.0.1" and m.group(3) == "GET" and m.group(5) == "404"
                              and int(m.group(6)) > 0, f"the request line says who, what, status, bytes: {line}")
                        i = int(m.group(4)[len("/nope-"):])
                        seen[i] = seen.get(i, 0) + 1
        check(seen and all(c == 1 for c in seen.values()), "each request is logged once")
        if seen:
            lo = min(seen)
            check(sorted(seen) == list(range(lo, n)) and n - lo >= 20,
                  f"the newest requests are all there, in one run: {lo}..{max(seen)} ({len(seen)})")

        # by day: a fresh directory, an old file, a generous size limit
        shutil.rmtree(logs)
        os.makedirs(logs)
        with open(path, "w") as f:
            f.write("2020-01-01T00:00:00.000Z ddpd info: a line from before\n")
        os.utime(path, (t, t))
        with Server(a.ddpd, a.fake_trainer, extra_args=["--log-file", path]) as s:
            s.get("/healthz")
            s.stop()
        rotated = rotated_files(path)
        check([(d, k) for d, k, _ in rotated] == [(old, 0)], f"the old file became ddpd.log.{old}: {rotated}")
        if rotated:
            with open(rotated[0][2]) as f:
                check("a line from before" in f.read(), "holding the old lines")
        with open(path) as f:
            now = f.read()
        check("a line from before" not in now and "GET /healthz 200" in now, "and today's file only today's")
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def case_log_levels(a):
    def run_with(extra, env=None):
        with Server(a.ddpd, a.fake_trainer, extra_args=extra, env=env) as s:
            s.get("/healthz")
            s.get("/nope")
            s.stop()
            with open(s.log_path) as f:
                return f.read()

    log = run_with([])
    check(re.search(r"ddpd info: http 127\.0\.0\.1 GET /healthz 200 \d+B \d+\.\dms", log) is not None,
          f"info: a line per request: {log[-600:]!r}")
    check("ddpd debug:" not in log, "info: no debug lines")
    log = run_with(["--log-level", "debug"])
    check("ddpd debug: log: stderr at level debug" in log and "GET /nope 404" in log, f"debug: debug lines too: {log[-600:]!r}")
    log = run_with([], env={"DDPD_LOG_LEVEL": "debug"})
    check("ddpd debug:" in log, "DDPD_LOG_LEVEL sets the level")
    # a warning at start-up: the trainer is not there
    log = run_with(["--log-level", "warn", "--trainer", "/nonexistent/ddp-trainer"])
    check("http " not in log and "ddpd info:" not in log, f"warn: no request or info lines: {log[-600:]!r}")
    check("ddpd warning: the trainer /nonexistent/ddp-trainer is not there" in log, "warn: warnings stay")
    log = run_with(["--log-level", "error", "--trainer", "/nonexistent/ddp-trainer"])
    check("ddpd warning:" not in log, "error: warnings go too")
    p = subprocess.run([a.ddpd, "serve", "--log-level", "loud"], capture_output=True, timeout=30)
    check(p.returncode == 2 and b"--log-level" in p.stderr, f"an unknown level is refused: {p.returncode} {p.stderr!r}")
    p = subprocess.run([a.ddpd, "serve", "--log-file", "/nonexistent/dir/ddpd.log"], capture_output=True, timeout=30)
    check(p.returncode == 2 and b"/nonexistent/dir/ddpd.log" in p.stderr,
          f"a log file that cannot be written is refused: {p.returncode} {p.stderr!r}")


# ---- ddpd check, --version ----

def run_check(a, *args, env=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("DDPD_"):
            del e[k]
    e.update(env or {})
    p = subprocess.run([a.ddpd, "check", *args], capture_output=True, timeout=120, env=e)
    out = p.stdout.decode(errors="replace")
    verdicts = {}
    for line in out.splitlines():
        m = re.match(r"^(ok|warn|FAIL)\s+(config|state dir|runs dir|modes|database|data roots|GPUs|trainer|limits|accounts|run user|user \S+|disk use|commands|work roots|runner)\s+(.*)$",
                     line)
        if m:
            verdicts[m.group(2)] = (m.group(1), m.group(3))
    return p.returncode, verdicts, out


def case_check(a):
    trainer = a.trainer or a.fake_trainer
    base = tempfile.mkdtemp(prefix="ddpd-ops-check-")
    state = os.path.join(base, "state")
    common = ["--state-dir", state, "--data-root", DATA_ROOT, "--trainer", trainer, "--gpus", "none", "--slots", "2"]
    not_executable = os.path.join(base, "ddp-trainer")
    with open(not_executable, "w") as f:
        f.write("not a program\n")
    os.chmod(not_executable, 0o644)
    try:
        rc, v, out = run_check(a, *common)
        check(rc == 0, f"a good box: exit 0, got {rc}:\n{out}")
        check(set(v) == {"config", "state dir", "runs dir", "modes", "database", "data roots", "GPUs", "trainer",
                         "limits", "accounts", "commands"}, f"one verdict per part: {sorted(v)}\n{out}")
        check(all(verdict == "ok" for verdict, _ in v.values()), f"all ok:\n{out}")
        check(re.search(r"^ddpd check: 11 ok, 0 warnings, 0 failed$", out, re.M) is not None, f"the summary:\n{out}")
        check("off (no --allow-commands)" in v.get("commands", ("", ""))[1], f"command runs off, said: {v.get('commands')}")
        # command runs: --allow-commands, the work roots, the runner (ddp-run beside ddpd by default)
        rc, v2, out = run_check(a, *common, "--allow-commands", "--work-root", base)
        check(rc == 0 and [v2.get(k, ("missing",))[0] for k in ("work roots", "runner")] == ["ok"] * 2 and
              base in v2["work roots"][1] and "ddp-run" in v2["runner"][1],
              f"--allow-commands with a work root: work roots and the runner ok:\n{out}")
        # as root, a command run of a user without an account would run as root: it is refused, and check warns
        want = ("warn", "give --run-user ACCOUNT") if os.geteuid() == 0 else ("ok", "as its user's account")
        check(v2.get("commands", ("", ""))[0] == want[0] and want[1] in v2["commands"][1],
              f"commands: {want}: {v2.get('commands')}")
        rc, v2, out = run_check(a, *common, "--allow-commands")
        check(rc == 0 and v2.get("work roots", ("",))[0] == "warn" and "--work-root" in v2["work roots"][1],
              f"--allow-commands without a work root: a warning that says what to give:\n{out}")
        rc, v2, out = run_check(a, *common, "--allow-commands", "--work-root", base, "--runner", "/nonexistent/ddp-run")
        check(rc == 1 and v2.get("runner", ("",))[0] == "FAIL" and "not there" in v2["runner"][1] and
              "--runner" in v2["runner"][1], f"a runner that is not there FAILs:\n{out}")
        check("does not exist yet" in v.get("state dir", ("", ""))[1] and not os.path.exists(state),
              "check changes nothing: the state dir is not created")
        check("fashion-mnist" in v.get("data roots", ("", ""))[1], f"the data root's Fashion-MNIST is seen: {v.get('data roots')}")
        if a.trainer:
            check("ddp-trainer" in v.get("trainer", ("", ""))[1], f"the trainer answers --version: {v.get('trainer')}")
            # where GPU runs go, said truly: ddp-trainer-nccl beside it when it is built, else no
            beside = os.path.join(os.path.dirname(os.path.abspath(a.trainer)), "ddp-trainer-nccl")
            line = v.get("trainer", ("", ""))[1]
            if os.access(beside, os.X_OK):
                check(f"(nccl backend: {beside}), which starts" in line, f"the GPU backend beside it is named: {line}")
            else:
                check("(nccl backend: no;" in line, f"no GPU backend, said so: {line}")
            broken = os.path.join(base, "ddp-trainer-nccl")
            with open(broken, "w") as f:
                f.write("#!/bin/sh\necho 'error while loading shared libraries: libnccl.so.2' >&2\nexit 127\n")
            os.chmod(broken, 0o755)
            rc, v2, out = run_check(a, *common, env={"DDPD_TRAINER_NCCL": broken})
            verdict = v2.get("trainer", ("", ""))
            check(rc == 0 and verdict[0] == "warn" and f"{broken} cannot start: error while loading shared libraries" in verdict[1]
                  and "GPU runs will fail" in verdict[1], f"a GPU backend that cannot start is a warning that says why: {verdict}")

        # each part failing, one at a time, with a reason
        for args, env, part, needle in (
                (["--trainer", "/nonexistent/ddp-trainer"], None, "trainer", "not there"),
                (["--trainer", not_executable], None, "trainer", "not executable"),
                (["--listen", "0.0.0.0:8080"], None, "config", "--insecure"),
                (["--listen", "nonsense"], None, "config", "HOST:PORT"),
                (["--data-root", "/nonexistent/data"], None, "data roots", "/nonexistent/data"),
                (["--slots", "0"], None, "GPUs", "could never run anything"),
                (["--log-level", "loud"], None, "config", "--log-level"),
                ([], {"DDPD_LISTEN": "0.0.0.0:8080"}, "config", "refuse")):
            rc, v2, out = run_check(a, *(common + args), env=env)
            verdict = v2.get(part, ("missing", ""))
            check(rc == 1 and verdict[0] == "FAIL" and needle in verdict[1],
                  f"{args or env}: {part} FAILs saying {needle!r} (exit {rc}):\n{out}")
        rc, v2, out = run_check(a, *(common + ["--listen", "0.0.0.0:8080", "--insecure"]))
        check(rc == 0 and v2.get("config", ("", ""))[0] == "warn", f"--insecure on every interface: a warning:\n{out}")
        rc, v2, out = run_check(a, *(common + ["--listen", "0.0.0.0:8080"]), env={"DDPD_TOKEN": "x" * 32})
        check(rc == 0 and v2.get("config", ("", ""))[0] == "ok", f"with a token: ok:\n{out}")

        # a database: after a server has run, while it runs, and newer than this ddpd
        os.makedirs(state)
        with Server(a.ddpd, a.fake_trainer, state_dir=state) as s:
            s.submit({"name": "steps-5"})
            rc, v2, out = run_check(a, *common)
            check(f"a ddpd (pid {s.proc.pid}) is serving it" in v2.get("state dir", ("", ""))[1],
                  f"a serving ddpd is named: {v2.get('state dir')}")
            check(rc == 0, f"and that is fine:\n{out}")
        rc, v2, out = run_check(a, *common)
        check(rc == 0 and re.search(r"schema version (\d+) of \1, 1 runs, quick_check ok", v2.get("database", ("", ""))[1]),
              f"the database after a run: {v2.get('database')}")
        db = sqlite3.connect(os.path.join(state, "ddpd.db"))
        db.execute("PRAGMA user_version = 999")
        db.commit()
        db.close()
        rc, v2, out = run_check(a, *common)
        check(rc == 1 and v2.get("database", ("", ""))[0] == "FAIL" and "newer" in v2["database"][1],
              f"a newer database FAILs: {v2.get('database')}")
        with open(os.path.join(state, "ddpd.db"), "r+b") as f:
            f.write(b"this is not a database" * 10)
        for leftover in ("ddpd.db-wal", "ddpd.db-shm"):
            try:
                os.unlink(os.path.join(state, leftover))
            except OSError:
                pass
        rc, v2, out = run_check(a, *common)
        check(rc == 1 and v2.get("database", ("", ""))[0] == "FAIL", f"a damaged database FAILs: {v2.get('database')}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def foreign_database(path, user_version):
    """An SQLite file of someone else's: a table of its own, no runs table."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    db.execute("INSERT INTO notes (body) VALUES ('not ddpd')")
    db.execute(f"PRAGMA user_version = {user_version}")
    db.commit()
    db.close()


def case_check_odd_databases(a):
    """`ddpd check` on a 0-byte ddpd.db and on foreign SQLite files: a verdict line,
    the summary, no crash (it used to finalize a statement twice and die of it)."""
    trainer = a.trainer or a.fake_trainer
    base = tempfile.mkdtemp(prefix="ddpd-ops-check-db-")
    try:
        def check_on(name, make):
            state = os.path.join(base, name)
            os.makedirs(state)
            path = os.path.join(state, "ddpd.db")
            make(path)
            before = open(path, "rb").read()
            p = subprocess.run([a.ddpd, "check", "--state-dir", state, "--data-root", DATA_ROOT, "--trainer", trainer,
                                "--gpus", "none", "--slots", "2"], capture_output=True, timeout=120,
                               env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
            out = p.stdout.decode(errors="replace")
            check(p.returncode in (0, 1), f"{name}: ddpd check exits 0 or 1, not by a signal: {p.returncode}\n"
                                          f"{out}{p.stderr.decode(errors='replace')[-2000:]}")
            check(re.search(r"^ddpd check: \d+ ok, \d+ warnings?, \d+ failed$", out, re.M) is not None,
                  f"{name}: the summary line is printed:\n{out}")
            m = re.search(r"^(ok|warn|FAIL)\s+database\s+(.*)$", out, re.M)
            check(m is not None and path in m.group(2), f"{name}: a database verdict naming {path}:\n{out}")
            check(open(path, "rb").read() == before, f"{name}: check changed nothing in the file")
            return p.returncode, (m.group(1), m.group(2)) if m else ("missing", "")

        rc, (verdict, line) = check_on("zero-bytes", lambda p: open(p, "wb").close())
        check(rc == 0 and verdict == "ok" and "empty (0 bytes)" in line and "creates the schema" in line,
              f"a 0-byte database (no runs beside it) is ok: serve creates the schema in it: {verdict} {line}")
        for uv in (0, 99):
            rc, (verdict, line) = check_on(f"foreign-{uv}", lambda p, uv=uv: foreign_database(p, uv))
            check(rc == 1 and verdict == "FAIL" and "not ddpd's" in line and "notes" in line
                  and "no runs table" in line and "--state-dir" in line,
                  f"a foreign database at user_version {uv} FAILs, naming its tables and what to do: {verdict} {line}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def damage_pages(path, page_size=4096):
    """Garbage over every page but the first (the header and the schema's page stay
    whole, so SQLite opens it and only its integrity check finds the damage)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for off in range(page_size, size, page_size):
            f.seek(off)
            f.write(bytes((i * 37 + off) & 0xFF for i in range(page_size)))


def serve_refusal(a, state):
    """`ddpd serve` on `state`: (exit status, stderr lines, stdout). One that starts
    (expected or not) is stopped by SIGTERM once it says it listens."""
    p = subprocess.Popen([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--data-root", DATA_ROOT,
                          "--trainer", a.fake_trainer, "--gpus", "none", "--slots", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
    first = p.stdout.readline()  # its "listening on" line, or nothing when it exits
    if b"listening on" in first:
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    return p.returncode, err.decode(errors="replace").splitlines(), (first + out).decode(errors="replace")


def journal_rows(state):
    """The runs whose journal is still to be compacted (journal_compact)."""
    db = sqlite3.connect(f"file:{os.path.join(state, 'ddpd.db')}?mode=ro", uri=True)
    try:
        return db.execute("SELECT run_id FROM journal_compact").fetchall()
    finally:
        db.close()


def serve_traced(a, state, trace):
    """`ddpd serve` on `state` under strace (the calls that name a file, in every
    thread), stopped once it listens: (whether it listened, GET /runs's ids, its stderr)."""
    p = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=%file", "-o", trace, a.ddpd, "serve", "--listen",
                          "127.0.0.1:0", "--state-dir", state, "--data-root", DATA_ROOT, "--trainer", a.fake_trainer,
                          "--gpus", "none", "--slots", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
    line = p.stdout.readline().decode()
    ids = []
    if "listening on" in line:
        port = int(line.strip().rsplit(":", 1)[1])
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs", timeout=30) as r:
            ids = [run["id"] for run in json.loads(r.read())["runs"]]
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            child = int(f.read().split()[0])  # ddpd, strace's child
        os.kill(child, signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    return "listening on" in line, ids, err.decode(errors="replace")


def case_start_reads_little(a):
    """A start reads neither every page of the database nor every run directory: a
    damaged page deep in a table and a run directory loosened by hand are not seen
    (strace: no call names a finished run's directory) and the server starts; ddpd
    check reads it all and FAILs the database (quick_check) and warns of the loose
    entries; a database from before 0019 is walked once, at the start that migrates it."""
    if not shutil.which("strace"):
        check(False, "needs strace")
        return
    base = tempfile.mkdtemp(prefix="ddpd-ops-start-")
    try:
        state = os.path.join(base, "state")
        os.mkdir(state, 0o700)
        with Server(a.ddpd, a.fake_trainer, state_dir=state) as s:
            ids = [s.submit({"name": "steps-5"}) for _ in range(3)]
            for rid in ids:
                check(s.wait_status(rid, "succeeded", timeout=60) is not None, f"run {rid} succeeds")
            # their journals done with (journal_compact.c): the start below has nothing left of them to compact
            check(wait_until(lambda: not journal_rows(state), "the finished runs' journals compacted", 60),
                  "no finished run is left to compact")
        db_path = os.path.join(state, "ddpd.db")
        db = sqlite3.connect(db_path)
        # a long series, so that the steps table has pages no start reads
        db.executemany("INSERT INTO steps (run_id, global_step, epoch, step, loss, lr, t) VALUES (?, ?, 0, ?, ?, 0.1, ?)",
                       [(ids[0], g, g, 1.0 / g, 1700000000000 + g) for g in range(1000, 21000)])
        db.commit()
        leaves = [r[0] for r in db.execute("SELECT pageno FROM dbstat WHERE name = 'step_rows' AND pagetype = 'leaf' "
                                           "ORDER BY pageno")]
        db.close()
        check(len(leaves) > 20, f"the steps table (step_rows) spans pages: {len(leaves)} leaves")
        page = leaves[len(leaves) // 2]
        with open(db_path, "r+b") as f:
            f.seek((page - 1) * 4096 + 8)  # past the page's header: its cells' bytes
            f.write(bytes((i * 53 + 7) & 0xFF for i in range(4000)))
        # a run directory an operator loosened, and a file in it
        loose_dir = os.path.join(state, "runs", str(ids[1]))
        loose_file = os.path.join(loose_dir, "notes.txt")
        with open(loose_file, "w") as f:
            f.write("left by an operator\n")
        os.chmod(loose_file, 0o644)
        os.chmod(loose_dir, 0o755)

        trace = os.path.join(base, "trace")
        listened, listed, err = serve_traced(a, state, trace)
        check(listened and sorted(listed) == sorted(ids), f"the server starts and lists the runs: {listed}\n{err[-800:]}")
        touched = []
        with open(trace, errors="replace") as f:
            for line in f:
                for rid in ids:
                    if f"/runs/{rid}" in line:
                        touched.append(line.strip())
        check(touched == [], f"no call of the start names a finished run's directory: {touched[:5]}")
        check(stat.S_IMODE(os.stat(loose_file).st_mode) == 0o644 and stat.S_IMODE(os.stat(loose_dir).st_mode) == 0o755,
              "the loosened run directory is left as it was (not walked)")

        rc, v, out = run_check(a, "--state-dir", state, "--data-root", DATA_ROOT, "--trainer", a.fake_trainer,
                               "--gpus", "none")
        verdict, line = v.get("database", ("", ""))
        check(rc == 1 and verdict == "FAIL" and "quick_check says" in line and "damaged" in line,
              f"ddpd check reads every page and FAILs the database: {v.get('database')}")
        verdict, line = v.get("modes", ("", ""))
        check(verdict == "warn" and "2 file(s)" in line and loose_dir in line and "chmod -R go-rwx" in line,
              f"ddpd check warns of the loose run directory and file, and says what to do: {v.get('modes')}")

        # the same history as a ddpd before 0019 left it: walked once, at the start that migrates it
        os.unlink(db_path)
        for extra in ("-wal", "-shm"):
            if os.path.exists(db_path + extra):
                os.unlink(db_path + extra)
        with Server(a.ddpd, a.fake_trainer, state_dir=state, extra_args=["--rebuild-from-runs"]) as s:
            check(sorted(r["id"] for r in s.get("/runs").json()["runs"]) == sorted(ids), "the history rebuilt")
        modes = (stat.S_IMODE(os.stat(loose_file).st_mode), stat.S_IMODE(os.stat(loose_dir).st_mode))
        check(modes == (0o600, 0o711), "the rebuild's start (schema from none to the newest) walked the run directories "
              f"and tightened them (a directory keeps its pass-through bits): {modes[0]:o} {modes[1]:o}")
        os.chmod(loose_file, 0o644)
        db = sqlite3.connect(db_path)
        db.executescript("DROP INDEX runs_live_sweep;"  # (0023's)
                         " DROP TABLE journal_compact;"  # (0022's)
                         # (0021's: the steps table as it was, from its rows)
                         " CREATE TABLE steps_table (run_id INTEGER NOT NULL, global_step INTEGER NOT NULL,"
                         " epoch INTEGER, step INTEGER, loss REAL, lr REAL, samples_per_s REAL, t INTEGER NOT NULL,"
                         " PRIMARY KEY (run_id, global_step)) WITHOUT ROWID;"
                         " INSERT INTO steps_table SELECT * FROM steps;"
                         " DROP VIEW steps; DROP TABLE step_rows; ALTER TABLE steps_table RENAME TO steps;"
                         " DROP INDEX runs_by_owner; DROP INDEX runs_by_owner_status; DROP INDEX runs_by_sweep_id;"
                         " DROP INDEX runs_by_name; DROP INDEX runs_by_created; DROP INDEX runs_disk;"
                         " ALTER TABLE run_attempts DROP COLUMN first_global_step;"  # (0020's)
                         " PRAGMA user_version = 18;")
        db.close()
        with Server(a.ddpd, a.fake_trainer, state_dir=state) as s:
            log = open(s.log_path, errors="replace").read()
        check(stat.S_IMODE(os.stat(loose_file).st_mode) == 0o600 and "were readable by others" in log,
              f"the start that migrates past 0018 walks once and says so: {log[-600:]!r}")
        os.chmod(loose_file, 0o644)
        with Server(a.ddpd, a.fake_trainer, state_dir=state) as s:
            pass
        check(stat.S_IMODE(os.stat(loose_file).st_mode) == 0o644, "and the next start does not walk again")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def case_start_counts_disk_use_at_once(a):
    """A start does not wait to read every run's disk use (its thread reads it while
    the server answers), yet the first submission after it is judged on all of it: a
    user whose finished runs hold more than her quota is refused at once."""
    from ddpd_harness import add_user, bearer
    base = tempfile.mkdtemp(prefix="ddpd-ops-disk-")
    try:
        state = os.path.join(base, "state")
        os.mkdir(state, 0o700)
        alice = add_user(a.ddpd, state, "alice", "--max-disk-gb", "0.001")
        with Server(a.ddpd, a.fake_trainer, state_dir=state) as s:
            r = s.post("/runs", {"name": "steps-5"}, headers=bearer(alice))
            check(r.status == 201, f"alice's run: {r.status} {r.body[:200]!r}")
            rid = r.json()["id"] if r.status == 201 else 0
            s.read_headers = bearer(alice)
            check(s.wait_status(rid, "succeeded", timeout=60) is not None, "it succeeds")
        db = sqlite3.connect(os.path.join(state, "ddpd.db"))
        # a history of many runs, one of them (as measured) past her quota of about 1 MB
        db.executemany("INSERT INTO runs (name, status, config, world_size, device_kind, created_at, owner, disk_bytes)"
                       " VALUES ('old', 'succeeded', '{}', 1, 'cpu', 1700000000000, ?, ?)",
                       [("bob", 1000)] * 40000 + [("alice", 50 << 20)])
        db.commit()
        db.close()
        p = subprocess.Popen([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--data-root", DATA_ROOT,
                              "--trainer", a.fake_trainer, "--gpus", "none", "--slots", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
        try:
            line = p.stdout.readline().decode()
            check("listening on" in line, f"it starts: {line!r}")
            port = int(line.strip().rsplit(":", 1)[1]) if "listening on" in line else 0
            import http.client
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("POST", "/runs", body=json.dumps({"name": "steps-5"}),
                      headers={"Content-Type": "application/json", **bearer(alice)})
            r = c.getresponse()
            body = r.read().decode(errors="replace")
            check(r.status >= 400 and "past the quota" in body, f"her first submission is refused: {r.status} {body[:300]!r}")
        finally:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=60)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def case_serve_refuses_bad_database(a):
    """serve goes by check's verdict on the database: a damaged one, someone else's, a
    newer one, and an empty or missing one beside run directories each make it refuse
    with one line naming the file and what to do, leaving the files as they were; a
    fresh state dir and a 0-byte database with no runs still start."""
    base = tempfile.mkdtemp(prefix="ddpd-ops-serve-db-")
    try:
        # a real history: one run, then the server stops
        good = os.path.join(base, "good")
        os.makedirs(good)
        with Server(a.ddpd, a.fake_trainer, state_dir=good) as s:
            rid = s.submit({"name": "steps-5"})
            check(s.wait_status(rid, "succeeded", timeout=60) is not None, "the fake trainer's run succeeds")
        check(os.path.isdir(os.path.join(good, "runs", str(rid))), f"its run directory runs/{rid} is there")

        def refused(name, prepare, needles):
            state = os.path.join(base, name)
            shutil.copytree(good, state, ignore=shutil.ignore_patterns("events.sock", "server.log", "ddpd.db-*"))
            db = os.path.join(state, "ddpd.db")
            prepare(db)
            before = open(db, "rb").read() if os.path.exists(db) else None
            rc, err, out = serve_refusal(a, state)
            check(rc != 0 and rc > 0, f"{name}: serve exits non-zero (not by a signal): {rc}")
            check("listening" not in out, f"{name}: it never listened: {out!r}")
            check(len(err) == 1, f"{name}: one line on stderr: {err}")
            line = err[0] if err else ""
            check(line.startswith("ddpd: ") and db in line and all(n in line for n in needles),
                  f"{name}: the line names {db} and says {needles}: {line!r}")
            after = open(db, "rb").read() if os.path.exists(db) else None
            check(after == before, f"{name}: the database file is as it was")
            check(os.path.isdir(os.path.join(state, "runs", str(rid))), f"{name}: the run directory is still there")
            # ddpd check says the same
            p = subprocess.run([a.ddpd, "check", "--state-dir", state, "--data-root", DATA_ROOT,
                                "--trainer", a.fake_trainer, "--gpus", "none"], capture_output=True, timeout=120)
            m = re.search(r"^FAIL\s+database\s+(.*)$", p.stdout.decode(errors="replace"), re.M)
            check(p.returncode == 1 and m is not None and line.endswith(m.group(1)),
                  f"{name}: ddpd check FAILs the database with the same sentence: {m.group(1) if m else p.stdout!r}")

        # every page but the first: a start's own look (the schema, the runs table's ends) finds it
        refused("damaged", damage_pages, ["damaged", "cannot be read", "backup", "runs aside"])
        refused("garbage", lambda db: open(db, "r+b").write(b"this is not a database" * 10),
                ["not an SQLite database", "backup"])

        def newer(db):
            c = sqlite3.connect(db)
            c.execute("PRAGMA user_version = 999")
            c.commit()
            c.close()
        refused("newer", newer, ["schema version 999", "newer ddpd"])

        def foreign(uv):
            def make(db):
                os.unlink(db)
                foreign_database(db, uv)
            return make
        refused("foreign-0", foreign(0), ["not ddpd's", "notes", "--state-dir"])
        refused("foreign-99", foreign(99), ["not ddpd's", "notes", "--state-dir"])
        runs = "runs aside to start a new history"
        refused("zero-bytes-beside-runs", lambda db: open(db, "wb").close(),
                ["is empty (0 bytes)", f"run directory ({rid})", "Restore ddpd.db from a backup", runs])
        refused("missing-beside-runs", os.unlink, ["is missing", f"run directory ({rid})", runs])

        # these still start: a fresh state dir (there or not), a 0-byte database with no runs
        fresh = os.path.join(base, "fresh")
        os.makedirs(fresh)
        with Server(a.ddpd, a.fake_trainer, state_dir=fresh) as s:
            check(s.get("/runs").json()["runs"] == [], "a fresh, empty state dir starts with no runs")
        rc, err, out = serve_refusal(a, os.path.join(base, "not-yet", "state"))
        check("listening on" in out and rc == 0, f"a state dir that does not exist yet is made, and it starts: "
                                                  f"{rc} {out!r} {err}")
        empty = os.path.join(base, "empty-db")
        os.makedirs(empty)
        open(os.path.join(empty, "ddpd.db"), "wb").close()
        with Server(a.ddpd, a.fake_trainer, state_dir=empty) as s:
            rid = s.submit({"name": "steps-5"})
            check(s.wait_status(rid, "succeeded", timeout=60) is not None, "a 0-byte database with no runs starts and works")
        # and the good one still starts, with its run
        with Server(a.ddpd, a.fake_trainer, state_dir=good) as s:
            check(s.run(rid) is not None and s.run(rid)["status"] == "succeeded", "the good history starts as it was")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def case_version(a):
    for arg in ("--version", "version"):
        p = subprocess.run([a.ddpd, arg], capture_output=True, timeout=30)
        out = p.stdout.decode()
        check(p.returncode == 0 and re.match(r"^ddpd \d+\.\d+\.\d+ \(cuda: (yes|no); libmicrohttpd [\d.]+, SQLite [\d.]+, "
                                             r"Jansson [\d.]+\)\n$", out) is not None,
              f"ddpd {arg}: one line with the version and what it was built with: {out!r}")
    with Server(a.ddpd, a.fake_trainer) as s:
        check(out.split()[1] == s.get("/healthz").json()["version"], "the same version /healthz says")
    p = subprocess.run([a.ddpd, "--help"], capture_output=True, timeout=30)
    text = p.stdout.decode()
    for flag in ("--insecure", "--log-level", "--log-file", "--log-max-bytes", "--log-keep", "ddpd check"):
        check(flag in text, f"--help mentions {flag}")


def case_agent_start_errors(a):
    """`ddpd agent` started wrongly says so on stderr in its own name ("ddpd agent:",
    base/die.c's die after die_set_program) and exits 2, before it registers anywhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_")}
    for args, words in ((["--no-such-flag", "x"], "unknown option --no-such-flag"),
                        ([], "--coordinator http://HOST:PORT is needed"),
                        (["--coordinator", "http://127.0.0.1:9", "--advertise", "127.0.0.1", "--slots", "999"],
                         "--slots 999: a whole number from 0 to 256")):
        p = subprocess.run([a.ddpd, "agent"] + args, capture_output=True, timeout=30, env=env)
        err = p.stderr.decode(errors="replace")
        last = (err.strip().splitlines() or [""])[-1]  # (after the log's warnings, if any)
        check(p.returncode == 2 and last.startswith("ddpd agent: ") and words in last,
              f"ddpd agent {' '.join(args)}: exit 2 and 'ddpd agent: {words}...': {p.returncode} {err!r}")


def case_agent_default_state_dir(a):
    """`ddpd agent` with no --state-dir on a fresh account (no ~/.local yet) makes its
    default state dir, parents and all, its own only (0700), and says where it is."""
    home = tempfile.mkdtemp(prefix="ddpd-agent-home-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_") and k != "XDG_STATE_HOME"}
    env["HOME"] = home
    state = os.path.join(home, ".local", "state", "ddpd-agent")
    p = subprocess.Popen([a.ddpd, "agent", "--coordinator", "http://127.0.0.1:9", "--advertise", "127.0.0.1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    said = []
    try:
        def started():
            line = p.stderr.readline().decode(errors="replace")
            said.append(line)
            return "state in" in line or not line
        wait_until(started, "the agent's first lines", 30, interval=0)
        check(any(f"state in {state}" in line for line in said), f"the agent says where its state is: {said}")
        check(os.path.isdir(state) and stat.S_IMODE(os.stat(state).st_mode) == 0o700,
              f"{state} made, 0700: {os.path.isdir(state) and oct(os.stat(state).st_mode)}")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(home, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
