#!/usr/bin/env python3
"""Integration tests of ddpd against hostile and careless clients, each on a real
server on a loopback port: a body with a huge number of bad items gets a small answer
(the first violations and their count), the token read from a file instead of the
command line, run ids and static paths only in their canonical spelling, and strict
request framing (duplicate or conflicting length headers, unknown transfer codings)
checked on raw sockets.

Usage: test_server_hostile.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import http.client, json, os, re, shutil, socket, subprocess, sys, tempfile

from ddpd_harness import (Server, check, cases_in, args_for, main, fmnist_config, sanitized, wait_until,  # noqa: E402
                          DATA_ROOT)


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
    # ASan keeps freed memory in a quarantine (256 MiB) that the peak would count:
    # the sanitizer build's server runs without it here.
    env = {"ASAN_OPTIONS": "quarantine_size_mb=0:thread_local_quarantine_size_kb=0"} if sanitized(a.ddpd) else None
    with Server(a.ddpd, a.fake_trainer, env=env) as s:
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


def refused_start(a, extra, env=None):
    """ddpd serve that is expected to refuse: (exit status, stdout, stderr)."""
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        p = subprocess.run([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--gpus", "none"] + extra,
                           capture_output=True, timeout=60, env=dict(os.environ, **(env or {})))
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def ddpd_check(a, extra, env=None):
    """ddpd check: (exit status, its config line)."""
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        p = subprocess.run([a.ddpd, "check", "--state-dir", state, "--gpus", "none"] + extra, capture_output=True,
                           timeout=60, env=dict(os.environ, **(env or {})))
        out = p.stdout.decode(errors="replace")
        config = [line for line in out.splitlines() if line.split()[1:2] == ["config"]]
        return p.returncode, config[0] if config else out
    finally:
        shutil.rmtree(state, ignore_errors=True)


def case_token_file(a):
    """--token-file (and DDPD_TOKEN_FILE): the token is read from a file only its
    owner can read, and never appears on the command line; a file others can read is
    refused naming its mode; --token still works and warns."""
    token = "t0k-" + os.urandom(12).hex()
    work = tempfile.mkdtemp(prefix="ddpd-token-")
    try:
        path = os.path.join(work, "token")
        with open(path, "w") as f:
            f.write(token + "\n")  # as `openssl rand -hex 16 > file` writes it
        os.chmod(path, 0o600)
        for extra, env, what in ((["--token-file", path], {}, "--token-file"), ([], {"DDPD_TOKEN_FILE": path}, "DDPD_TOKEN_FILE")):
            with Server(a.ddpd, a.fake_trainer, extra_args=extra, env=env) as s:
                with open(f"/proc/{s.proc.pid}/cmdline", "rb") as f:
                    cmdline = f.read()
                check(token.encode() not in cmdline, f"{what}: the token is not in /proc/PID/cmdline")
                r = s.post("/runs", {"name": "record"})
                check(r.status == 401, f"{what}: without the token: 401, got {r.status}")
                check(s.post("/runs", {"name": "record"}, headers={"Authorization": "Bearer " + token + "x"}).status == 401,
                      f"{what}: a wrong token: 401")
                r = s.post("/runs", {"name": "record"}, headers={"Authorization": "Bearer " + token})
                check(r.status == 201, f"{what}: with the file's token (its line end not part of it): 201, got {r.status} {r.body[:200]!r}")
                if r.status == 201:
                    s.wait_status(r.json()["id"], "succeeded", timeout=60)
                s.stop()
                with open(s.log_path) as f:
                    log = f.read()
                check(token not in log, f"{what}: the token is not in the log")
                check("can be read by every user" not in log, f"{what}: no warning about the command line: {log[-400:]!r}")

        for mode in (0o644, 0o640, 0o604, 0o620):
            os.chmod(path, mode)
            rc, out, err = refused_start(a, ["--token-file", path])
            check(rc == 2 and "listening" not in out, f"mode {mode:04o}: ddpd refuses to start (exit 2), got {rc}: {out!r}")
            check(f"has mode {mode:04o}" in err and "chmod 600" in err and path in err,
                  f"mode {mode:04o}: the line names the file, its mode and what to do: {err[-300:]!r}")
            rc, out = ddpd_check(a, ["--token-file", path])
            check(rc == 1 and f"has mode {mode:04o}" in out and out.startswith("FAIL"),
                  f"mode {mode:04o}: ddpd check fails on it too ({rc}): {out[:300]!r}")
        os.chmod(path, 0o600)

        with open(path, "w") as f:
            f.write("\n")
        rc, _, err = refused_start(a, ["--token-file", path])
        check(rc == 2 and "is empty" in err, f"an empty token file: refused ({rc}): {err[-300:]!r}")
        with open(path, "w") as f:
            f.write("two words\n")
        rc, _, err = refused_start(a, ["--token-file", path])
        check(rc == 2 and "space or control character" in err, f"a token with a space: refused ({rc}): {err[-300:]!r}")
        rc, _, err = refused_start(a, ["--token-file", os.path.join(work, "missing")])
        check(rc == 2 and "cannot be opened: No such file or directory" in err, f"a missing file: refused ({rc}): {err[-300:]!r}")
        rc, _, err = refused_start(a, ["--token-file", work])
        check(rc == 2 and "is not a regular file" in err, f"a directory: refused ({rc}): {err[-300:]!r}")
        rc, _, err = refused_start(a, ["--token-file", path, "--token", "x"])
        check(rc == 2 and "not both" in err, f"--token and --token-file: refused ({rc}): {err[-300:]!r}")
        rc, _, err = refused_start(a, [], env={"DDPD_TOKEN_FILE": path, "DDPD_TOKEN": "x"})
        check(rc == 2 and "both set" in err, f"DDPD_TOKEN and DDPD_TOKEN_FILE: refused ({rc}): {err[-300:]!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    with Server(a.ddpd, a.fake_trainer, extra_args=["--token", token]) as s:
        check(s.request("DELETE", "/runs/1").status == 401 and
              s.request("DELETE", "/runs/1", headers={"Authorization": "Bearer " + token}).status == 404,
              "--token still sets the token")
        s.stop()
        with open(s.log_path) as f:
            log = f.read()
        check("can be read by every user of this host" in log and "--token-file" in log and "DDPD_TOKEN" in log,
              f"--token: the log warns and says what to use instead: {log[-600:]!r}")
    rc, out = ddpd_check(a, ["--token", token])
    check(rc == 0 and out.startswith("warn") and "--token-file" in out,
          f"ddpd check warns about --token: {out[:400]!r}")


def status_and_detail(s, method, path):
    """(status, the problem's detail or "") without reading a stream's body."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        if (r.getheader("Content-Type") or "").startswith("text/event-stream"):
            return r.status, "(an event stream)"
        body = r.read()
        try:
            detail = json.loads(body).get("detail", "") if r.status >= 400 else ""
        except ValueError:
            detail = "(not JSON) " + body[:100].decode(errors="replace")
        return r.status, detail
    finally:
        conn.close()


# Other spellings of run N ("{}" is N): each one is no run at all.
NON_CANONICAL_IDS = ["{}%00", "0{}", "00{}", "%20{}", "{}%20", "+{}", "%2B{}", "{}%00x", "{}%0A", "%09{}", "-{}", "{}.0",
                     "{}e0", "0x{}", "{}%FF", "%C3%A9{}"]
RUN_ROUTES = [("GET", "/runs/{}"), ("DELETE", "/runs/{}"), ("POST", "/runs/{}/cancel"), ("GET", "/runs/{}/metrics"),
              ("GET", "/runs/{}/epochs"), ("GET", "/runs/{}/ranks"), ("GET", "/runs/{}/checkpoints"),
              ("GET", "/runs/{}/logs"), ("GET", "/runs/{}/events")]


def case_canonical_ids_and_paths(a):
    """Run 1 exists; every other spelling of its id (a NUL, leading zeros, spaces, a
    sign) is no run at all, on every /runs/{id} route, DELETE included; a static path
    with a NUL in it is no file."""
    with Server(a.ddpd, a.fake_trainer) as s:
        # a run of its own for each spelling, so that one that deletes its run cannot
        # hide what the next would do
        ids = [s.submit({"name": "record"}) for _ in NON_CANONICAL_IDS]
        for rid in ids:
            s.wait_status(rid, "succeeded", timeout=120)
        for rid, spelling in zip(ids, NON_CANONICAL_IDS):
            for method, template in RUN_ROUTES:
                path = template.format(spelling.format(rid))
                status, detail = status_and_detail(s, method, path)
                check(status == 404 and detail.startswith("there is no run"),
                      f"{method} {path}: 404 \"there is no run ...\", got {status} {detail!r}")
            check(s.get(f"/runs/{rid}").status == 200, f"run {rid} is still there after DELETE /runs/{spelling.format(rid)}")
        check(s.get("/runs?limit=5%00").status == 400, "a NUL in a query value is no number: 400")
        # the canonical spellings still work
        check(s.get("/runs/1").status == 200 and s.get("/runs/1/epochs").status == 200, "GET /runs/1 and its epochs: 200")
        check(s.get("/ui/index.html").status == 200 and s.get("/ui/app.js").status == 200, "/ui/index.html, /ui/app.js: 200")
        for path in ("/ui/index.html%00.js", "/ui/index.html%00", "/ui/app.js%00.css", "/ui/%00index.html",
                     "/ui/index.html%2500.js", "/ui/%FF", "/vendor/uplot/uPlot.esm.js%00.css", "/ui/" + "index.html" + "x" * 40):
            status, detail = status_and_detail(s, "GET", path)
            check(status == 404, f"GET {path}: 404, got {status} {detail!r}")
        r = s.request("DELETE", "/runs/1")
        check(r.status == 204 and s.get("/runs/1").status == 404 and s.get("/runs/2").status == 200,
              f"DELETE /runs/1 (its own spelling) deletes it, and only it: {r.status}")


def raw_exchange(port, data, timeout=30):
    """Sends bytes as they are; returns (what came back until the server closed,
    whether it closed before the timeout)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out, closed = b"", False
    try:
        sock.sendall(data)
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            out += chunk
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    finally:
        sock.close()
    return out, closed


def parse_one(raw):
    """(status, headers {lower name: value}, body, what follows it) of the first reply."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None, {}, b"", raw
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    n = int(headers.get("content-length", "0") or 0)
    return status, headers, rest[:n], rest[n:]


def case_strict_framing(a):
    """Two Content-Length headers, or Content-Length with Transfer-Encoding: 400 before
    the body is used, the connection closed, and a request smuggled after it never
    runs; a transfer coding other than chunked: 501 with a problem body."""
    body = b'{"name": "record"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    smuggled = b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body), body)
    head = b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    refused = [
        ("two equal Content-Length", head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body)) + body, 400,
         "2 Content-Length headers"),
        ("two different Content-Length", head + b"Content-Length: %d\r\nContent-Length: 0\r\n\r\n" % len(body) + body, 400,
         "2 Content-Length headers"),
        ("Content-Length and chunked", head + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, 400,
         "both Content-Length and Transfer-Encoding"),
        ("chunked and Content-Length", head + b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(chunked) + chunked, 400,
         "both Content-Length and Transfer-Encoding"),
        ("chunked twice", head + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked, 400,
         "chunked more than once"),
        ("gzip", head + b"Transfer-Encoding: gzip\r\n\r\n" + body, 501, 'transfer coding "gzip" is not supported'),
        ("gzip, chunked", head + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked, 501, '"gzip" is not supported'),
        ("chunked, identity", head + b"Transfer-Encoding: chunked, identity\r\n\r\n" + chunked, 501, '"identity" is not supported'),
        ("a GET with two Content-Length", b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n", 400,
         "2 Content-Length headers"),
        ("a GET with gzip", b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, '"gzip" is not supported'),
    ]
    with Server(a.ddpd, a.fake_trainer) as s:
        for what, request, want, words in refused:
            raw, closed = raw_exchange(s.port, request + smuggled)
            status, headers, reply, after = parse_one(raw)
            check(status == want, f"{what}: {want}, got {status}: {raw[:300]!r}")
            check(headers.get("content-type", "").startswith("application/problem+json"),
                  f"{what}: a problem+json body, got {headers.get('content-type')!r}")
            try:
                detail = json.loads(reply).get("detail", "")
            except ValueError:
                detail = None
            check(detail is not None and words in detail and json.loads(reply).get("status") == want,
                  f"{what}: the detail says what is wrong ({words!r}): {reply[:300]!r}")
            check(closed and after == b"", f"{what}: the connection is closed after that one answer (closed {closed}, then {after[:200]!r})")
        r = s.get("/runs")
        check(r.status == 200 and r.json().get("runs") == [], f"no refused or smuggled request stored a run: {r.body[:300]!r}")
        # what is sound still works: one Content-Length, or chunked alone (any case)
        for what, request in (("Content-Length", head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body),
                              ("chunked", head + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked),
                              ("Chunked", head + b"Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n" + chunked)):
            raw, _ = raw_exchange(s.port, request)
            status, _, reply, _ = parse_one(raw)
            check(status == 201, f"a body with {what}: 201, got {status}: {raw[:300]!r}")
        check(len(s.get("/runs").json().get("runs", [])) == 3, "those three are the runs stored")
        check(s.get("/healthz").status == 200, "the server still answers")



def case_host_memory_plan(a):
    """The issue's memory bomb (16 hidden layers of 65536, 256 threads per rank, about
    258 GB of weights) is refused at POST naming what it needs and its share of the
    host (its slots of the host's memory); a normal config is accepted."""
    bomb = fmnist_config(**{"model.hidden": [65536] * 16, "distributed.threads_per_rank": 256,
                            "distributed.world_size": 1, "distributed.backend": "cpu"})
    with Server(a.ddpd, a.fake_trainer, slots=2) as s:
        r = s.post("/runs", bomb)
        check(r.status == 400, f"the memory bomb: 400, got {r.status} {r.body[:300]!r}")
        errs = r.json().get("errors") or [{}]
        msg = errs[0].get("message", "")
        check(errs[0].get("pointer") == "/model", f"the error is at /model: {errs}")
        need = re.search(r"needs ([0-9.]+) GiB of host memory", msg)
        check(need and float(need.group(1)) > 240, f"it names what the run needs (more than its 240 GiB of weights): {msg!r}")
        check("its share is" in msg and "1 of 2 CPU slots of" in msg, f"it names its share of the host: {msg!r}")
        check(s.get("/runs").json().get("runs") == [], "nothing was stored")
        r = s.post("/runs", fmnist_config())
        check(r.status == 201, f"a normal config is accepted: {r.status} {r.body[:300]!r}")


def case_cnn_shape_checked(a):
    """A CNN whose max-pool does not fit the convolution's output (6x6 after a 7x7
    kernel on 12x12) is refused at POST
    by the trainer's own shape code, naming the layer; one that fits is accepted."""
    conv = [{"channels": 8, "kernel": 5, "padding": 0, "pool": 2}, {"channels": 8, "kernel": 7, "padding": 0, "pool": 8}]
    bad = fmnist_config(**{"model": {"type": "cnn", "cnn": {"conv": conv}}})
    with Server(a.ddpd, a.fake_trainer) as s:
        r = s.post("/runs", bad)
        check(r.status == 400, f"the max-pool that does not fit: 400, got {r.status} {r.body[:300]!r}")
        errs = r.json().get("errors") or [{}]
        check(errs[0].get("pointer") == "/model/cnn/conv/1", f"the error names the layer /model/cnn/conv/1: {errs}")
        check("a 8x8 max-pool does not fit" in errs[0].get("message", ""), f"and says why: {errs}")
        conv[1]["pool"] = 2
        r = s.post("/runs", fmnist_config(**{"model": {"type": "cnn", "cnn": {"conv": conv}}}))
        check(r.status == 201, f"a cnn that fits is accepted: {r.status} {r.body[:300]!r}")

def case_paths_named_by_roots(a):
    """The server's own paths never reach a client: a checkpoint path and a reason that
    name the state dir and the data root come back as <state-dir>/... and
    <data-root>/... in the run, the list, the checkpoints, the live feed's replay and
    a refusal; the real server path appears nowhere. serve --show-paths shows them."""
    from fake_trainer import Conn  # the test speaks for the run's rank 0
    state = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-test-"))
    try:
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state) as s:
            rid = s.submit({"name": "hold"})
            hold = os.path.join(s.run_dir(rid), "hold.json")
            info = wait_until(lambda: os.path.exists(hold) and json.load(open(hold)), "hold.json", 60)
            rank = Conn(info["events"], info["run"], 0)
            rank.hello(info["secret"], epochs=1, steps_per_epoch=10, total_steps=10)
            ckpt = os.path.join(state, "runs", str(rid), "checkpoints", "epoch-0000.safetensors")
            rank.send(rank.ev("checkpoint", epoch=0, global_step=10, path=ckpt, bytes=1000))
            rank.send(rank.ev("status", state="training", detail=f"read {DATA_ROOT}/fashion-mnist/x and {state}/datasets"))
            named = f"<state-dir>/runs/{rid}/checkpoints/epoch-0000.safetensors"
            run = wait_until(lambda: (lambda r: r if r["checkpoints"] else None)(s.get(f"/runs/{rid}").json()),
                             "the checkpoint to show", 30)
            check(run and run["checkpoints"][0]["path"] == named, f"the checkpoint's path is {named}: "
                  f"{run and run['checkpoints']}")
            answers = {path: s.get(path).body for path in (f"/runs/{rid}", "/runs", f"/runs/{rid}/ranks",
                                                           f"/runs/{rid}/checkpoints", "/healthz")}
            stream, _ = raw_exchange(s.port, b"GET /events?last_event_id=0 HTTP/1.1\r\nHost: x\r\n\r\n", timeout=3)
            answers["GET /events (replay)"] = stream
            r = s.post("/runs", fmnist_config(**{"data.train.images": f"{DATA_ROOT}/x", "distributed.world_size": 1}))
            answers["POST /runs with an absolute data path"] = r.body
            check(r.status == 400 and b"<data-root>" in r.body, f"the refusal names the data root as <data-root>: "
                  f"{r.body[:400]!r}")
            check(named.encode() in stream, f"the live feed's checkpoint event names {named}: {stream[-600:]!r}")
            check(b"<data-root>/fashion-mnist/x" in answers[f"/runs/{rid}/ranks"] or
                  b"<data-root>/fashion-mnist/x" in answers[f"/runs/{rid}"],
                  f"a rank's detail names <data-root>/...: {answers[f'/runs/{rid}/ranks'][:400]!r}")
            for what, body in answers.items():
                for path in (state, DATA_ROOT):
                    check(path.encode() not in body, f"{what} does not show {path}: {body[:300]!r}")
            rank.close()
            s.request("POST", f"/runs/{rid}/cancel")
            s.wait_status(rid, "canceled", timeout=60)
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state, extra_args=["--show-paths"]) as s:
            r = s.get(f"/runs/{rid}")
            check(r.status == 200 and r.json()["checkpoints"][0]["path"] == ckpt,
                  f"serve --show-paths: the checkpoint's path is the server's own {ckpt}: {r.body[:400]!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)

CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
