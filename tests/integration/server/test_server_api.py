#!/usr/bin/env python3
"""Integration tests of ddpd's HTTP API against a real server on a loopback port:
routing (404, 405, 413, 415, HEAD), problem+json errors, bad run configs (each
refused with 400 naming the offending field by its JSON pointer, nothing stored),
pagination, deletion, the token, and the config a run is stored and started with.

Usage: test_server_api.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import fcntl, http.client, json, os, shutil, signal, socket, sqlite3, subprocess, sys, tempfile, threading, time

from ddpd_harness import (Server, check, cases_in, wait_until, args_for, main, fmnist_config, merge, DATA_ROOT,  # noqa: E402
                          SANITIZER_REPORTS)


def is_problem(r, status):
    ok = check(r.status == status, f"status {status}, got {r.status}: {r.body[:300]!r}")
    ok &= check((r.header("Content-Type") or "").startswith("application/problem+json"),
                f"problem+json content type, got {r.header('Content-Type')}")
    try:
        p = r.json()
    except ValueError:
        return check(False, f"a JSON problem body: {r.body[:200]!r}")
    ok &= check(p.get("status") == status and all(p.get(k) for k in ("type", "title", "detail")),
                f"type, title, status and detail in {p}")
    return ok


def case_routes(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        r = s.get("/healthz")
        check(r.status == 200 and r.json()["status"] == "ok", f"healthz: {r.status} {r.body!r}")
        check(r.json()["devices"]["cpu"]["slots"] == 2, f"healthz shows the 2 slots: {r.body!r}")
        r = s.request("HEAD", "/healthz")
        check(r.status == 200 and r.body == b"", f"HEAD /healthz: {r.status} {r.body!r}")

        for path in ("/nope", "/runs/1/nope", "/runs/1/cancel/x", "/healthz/x"):
            is_problem(s.get(path), 404)
        r = s.get("/")  # the dashboard (tests/integration/web/ tests it)
        check(r.status == 200 and (r.header("Content-Type") or "").startswith("text/html"), f"GET / is the dashboard: {r.status}")
        r = s.get("/runs/abc")
        is_problem(r, 404)
        check("positive integers" in r.json()["detail"], f"404 for a non-numeric id says why: {r.body!r}")
        for path in ("/runs/999", "/runs/999/metrics", "/runs/999/epochs", "/runs/999/ranks", "/runs/999/logs"):
            r = s.get(path)
            is_problem(r, 404)
            check("no run 999" in r.json()["detail"], f"{path}: detail names the run: {r.body!r}")
        is_problem(s.post("/runs/999/cancel"), 404)
        is_problem(s.request("DELETE", "/runs/999"), 404)

        r = s.request("PUT", "/runs", body="{}", headers={"Content-Type": "application/json"})
        is_problem(r, 405)
        check(set(x.strip() for x in (r.header("Allow") or "").split(",")) == {"GET", "HEAD", "POST"},
              f"Allow for /runs: {r.header('Allow')}")
        r = s.request("DELETE", "/healthz")
        is_problem(r, 405)
        check("GET" in (r.header("Allow") or ""), f"Allow for /healthz: {r.header('Allow')}")
        is_problem(s.get("/runs/1/cancel"), 405)
        is_problem(s.request("PATCH", "/runs/1"), 405)

        # JSON only
        r = s.post("/runs", body=json.dumps(fmnist_config()), headers={"Content-Type": "text/plain"})
        is_problem(r, 415)
        check("application/json" in r.json()["detail"], f"415 says what to send: {r.body!r}")
        is_problem(s.post("/runs", body=json.dumps(fmnist_config())), 415)  # no Content-Type
        r = s.post("/runs", body="{}", headers={"Content-Type": "application/json; charset=utf-8"})
        check(r.status != 415, f"a charset parameter is fine: {r.status}")

        # 413: early, by Content-Length (the answer comes before the body is sent), and
        # while streaming a chunked body
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as sock:
            sock.sendall(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1048577\r\n\r\n{\"name\": ")
            answer = sock.recv(65536)
        check(answer.startswith(b"HTTP/1.1 413"), f"413 before the body is sent: {answer[:200]!r}")
        check(b"1 MiB" in answer and b"application/problem+json" in answer, f"a problem that says the limit: {answer!r}")
        big = b" " * (1024 * 1024 + 1)
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        conn.request("POST", "/runs", body=(big[i:i + 65536] for i in range(0, len(big), 65536)),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        resp = conn.getresponse()
        body = resp.read()
        check(resp.status == 413, f"chunked body past 1 MiB: 413, got {resp.status} {body[:200]!r}")
        conn.close()
        # exactly 1 MiB is within the limit (and then not a valid config)
        ok_size = b"{" + b" " * (1024 * 1024 - 2) + b"}"
        r = s.post("/runs", body=ok_size, headers={"Content-Type": "application/json"})
        check(r.status == 201, f"a 1 MiB body is accepted: {r.status} {r.body[:200]!r}")

        # query parameters
        for path in ("/runs?limit=0", "/runs?limit=x", "/runs?before=-1", "/runs?status=sleeping"):
            is_problem(s.get(path), 400)
        rid = s.get("/runs").json()["runs"][0]["id"]
        for path in (f"/runs/{rid}/logs?tail=0", f"/runs/{rid}/metrics?max_points=2", f"/runs/{rid}/metrics?key=acc",
                     f"/runs/{rid}/metrics?after=x"):
            is_problem(s.get(path), 400)
        # a submitted run is served with its Location
        r = s.post("/runs", {"name": "steps-3"})
        check(r.status == 201 and r.header("Location") == f"/runs/{r.json()['id']}", f"Location: {r.header('Location')}")
        check(r.header("Content-Type") == "application/json", f"JSON content type: {r.header('Content-Type')}")


def case_bad_configs(a):
    root = tempfile.mkdtemp(prefix="ddpd-root-")
    os.symlink("/etc/hostname", os.path.join(root, "evil"))
    os.symlink("/usr/share/datasets/fashion-mnist", os.path.join(root, "fm"))
    with Server(a.ddpd, a.fake_trainer, extra_args=["--data-root", root]) as s:
        good = fmnist_config()
        cases = [
            # (what, body, expected pointer); body: a dict (sent as JSON) or raw text
            ("malformed JSON", '{"name": "x", ', ""),
            ("empty body", "", ""),
            ("whitespace body", "  \n ", ""),
            ("an array", "[1, 2]", ""),
            ("a string", '"train"', ""),
            ("wrong type: epochs a string", merge(good, {"train.epochs": "ten"}), "/train/epochs"),
            ("wrong type: world_size a string", merge(good, {"distributed.world_size": "2"}), "/distributed/world_size"),
            ("wrong type: name a number", merge(good, {"name": 5}), "/name"),
            ("wrong type: hidden not an array", merge(good, {"model.hidden": 512}), "/model/hidden"),
            ("out of range: epochs 0", merge(good, {"train.epochs": 0}), "/train/epochs"),
            ("out of range: negative batch", merge(good, {"train.batch_size": -8}), "/train/batch_size"),
            ("out of range: lr 0", merge(good, {"train.optimizer.lr": 0}), "/train/optimizer/lr"),
            ("out of range: negative limit", merge(good, {"data.limit": -1}), "/data/limit"),
            ("out of range: world_size 0", merge(good, {"distributed.world_size": 0}), "/distributed/world_size"),
            ("empty hidden", merge(good, {"model.hidden": []}), "/model/hidden"),
            ("not in enum: optimizer", merge(good, {"train.optimizer.type": "rmsprop"}), "/train/optimizer/type"),
            ("not in enum: mode", merge(good, {"mode": "predict"}), "/mode"),
            ("bad name pattern", merge(good, {"name": "a b/c"}), "/name"),
            ("unknown field", merge(good, {"bogus": 1}), "/bogus"),
            ("unknown nested field", merge(good, {"train.epoch": 2}), "/train/epoch"),
            ("batch not divisible", merge(good, {"train.batch_size": 129}), "/train/batch_size"),
            ("elastic range above the width", merge(good, {"distributed.world_size": 2, "distributed.min_world_size": 3}),
             "/distributed/min_world_size"),
            ("out of range: negative min_world_size", merge(good, {"distributed.min_world_size": -1}),
             "/distributed/min_world_size"),
            ("too many devices", merge(good, {"distributed.world_size": 3, "train.batch_size": 129}),
             "/distributed/world_size"),
            ("far too many devices", merge(good, {"distributed.world_size": 64}), "/distributed/world_size"),
            ("nccl without GPUs", merge(good, {"distributed.backend": "nccl"}), "/distributed/backend"),
            ("data path escaping with ..", merge(good, {"data.train.images": "../../../etc/passwd"}), "/data/train/images"),
            ("data path escaping inside a path", merge(good, {"data.train.labels": "fashion-mnist/../../../etc/hostname"}),
             "/data/train/labels"),
            ("absolute data path", merge(good, {"data.test.labels": "/etc/passwd"}), "/data/test/labels"),
            ("missing file", merge(good, {"data.test.images": "fashion-mnist/no-such-file.gz"}), "/data/test/images"),
            ("a directory, not a file", merge(good, {"data.train.images": "fashion-mnist"}), "/data/train/images"),
            ("a symlink out of the root", merge(good, {"data.test.images": "evil"}), "/data/test/images"),
            ("empty data path", merge(good, {"data.test.images": ""}), "/data/test/images"),
            ("checkpoint outside the run directories", merge(good, {"mode": "eval", "checkpoint.load": "../../../etc/passwd"}),
             "/checkpoint/load"),
            ("absolute checkpoint path", merge(good, {"mode": "eval", "checkpoint.load": "/etc/passwd"}), "/checkpoint/load"),
            ("missing checkpoint", merge(good, {"mode": "eval", "checkpoint.load": "7/checkpoints/epoch-0001.safetensors"}),
             "/checkpoint/load"),
        ]
        check(len(cases) >= 20, "at least 20 bad configs")
        for what, body, pointer in cases:
            if isinstance(body, dict):
                r = s.post("/runs", body)
            else:
                r = s.post("/runs", body=body, headers={"Content-Type": "application/json"})
            if not is_problem(r, 400):
                print(f"  ... for: {what}", file=sys.stderr)
                continue
            p = r.json()
            pointers = [e.get("pointer") for e in p.get("errors", [])]
            check(pointer in pointers, f"{what}: pointer {pointer!r} in {pointers} ({p['detail']})")
            check(all(e.get("message") for e in p.get("errors", [])), f"{what}: every error has a message")
            check(pointer in p["detail"] or pointer == "", f"{what}: the detail names {pointer}: {p['detail']}")

        # what Jansson refuses on its own terms is named as the schema names it: the field,
        # never "not valid JSON" for JSON, never Jansson's flags
        exact = [
            ('{"seed": 18446744073709551616}', "/seed", "must be at most 9007199254740991 (got 1.8446744073709552e+19)"),
            ('{"seed": 1e20}', "/seed", "must be at most 9007199254740991 (got 1e+20)"),
            ('{"checkpoint": {"keep": 1e20}}', "/checkpoint/keep", "must be at most 10000 (got 1e+20)"),
            ('{"train": {"grad_clip_norm": 1e300}}', "/train/grad_clip_norm", "must be at most 1000000 (got 1e+300)"),
            ('{"name": "a\\u0000b"}', "/name", "must not contain the character \\u0000 (NUL; at character 2)"),
            ('"train"', "", 'must be an object (got string "train")'),
            ("42", "", "must be an object (got number 42)"),
            ("null", "", "must be an object (got null)"),
        ]
        for body, pointer, message in exact:
            r = s.post("/runs", body=body, headers={"Content-Type": "application/json"})
            if not is_problem(r, 400):
                continue
            p = r.json()
            got = [(e.get("pointer"), e.get("message")) for e in p.get("errors", [])]
            check(got == [(pointer, message)], f"{body}: exactly {pointer!r}: {message!r}; got {got}")
            check("not valid JSON" not in p["detail"] and "JSON_" not in p["detail"],
                  f"{body}: the detail says what is wrong: {p['detail']}")
            check(message in p["detail"], f"{body}: the detail has the message: {p['detail']}")

        # every violation at once
        r = s.post("/runs", merge(good, {"train.epochs": 0, "train.batch_size": "x", "data.test.labels": "../x",
                                         "distributed.world_size": 9, "bogus": True}))
        is_problem(r, 400)
        pointers = {e["pointer"] for e in r.json().get("errors", [])}
        want = {"/train/epochs", "/train/batch_size", "/data/test/labels", "/distributed/world_size", "/bogus"}
        check(want <= pointers, f"all five violations listed: {pointers}")
        check("5 problems" in r.json()["detail"], f"the detail counts them: {r.json()['detail']}")

        # nothing was stored: no run, no run directory
        r = s.get("/runs")
        check(r.status == 200 and r.json()["runs"] == [], f"no run stored: {r.body[:300]!r}")
        check(os.listdir(os.path.join(s.state_dir, "runs")) == [], "no run directory created")
        db = sqlite3.connect(os.path.join(s.state_dir, "ddpd.db"))
        check(db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0, "no row in runs")
        db.close()

        # and the good config (through a symlinked directory inside the second root) is taken
        r = s.post("/runs", merge(good, {"name": "record", "data.train.images": "fm/train-images-idx3-ubyte.gz"}))
        check(r.status == 201, f"the good config is accepted: {r.status} {r.body[:300]!r}")
    shutil.rmtree(root, ignore_errors=True)


def case_pagination_and_delete(a):
    with Server(a.ddpd, a.fake_trainer, slots=2) as s:
        ids = [s.submit({"name": "steps-3"}) for _ in range(5)]
        check(ids == sorted(ids) and len(set(ids)) == 5, f"ids increase: {ids}")
        for i in ids:
            s.wait_status(i, "succeeded", timeout=60)
        page = s.get("/runs?limit=2").json()
        check([r["id"] for r in page["runs"]] == ids[::-1][:2], f"newest first: {[r['id'] for r in page['runs']]}")
        check(page["next"] == f"/runs?limit=2&before={ids[3]}", f"next: {page['next']}")
        check("config" not in page["runs"][0] and "progress" in page["runs"][0], "list items: no config, progress")
        page2 = s.get(page["next"]).json()
        check([r["id"] for r in page2["runs"]] == [ids[2], ids[1]], f"second page: {[r['id'] for r in page2['runs']]}")
        page3 = s.get(page2["next"]).json()
        check([r["id"] for r in page3["runs"]] == [ids[0]] and page3["next"] is None, f"last page: {page3}")
        check(len(s.get("/runs?status=succeeded").json()["runs"]) == 5, "filter succeeded")
        check(s.get("/runs?status=queued").json()["runs"] == [], "filter queued")
        check(len(s.get("/runs?status=failed,succeeded&limit=3").json()["runs"]) == 3, "filter by two statuses")
        p = s.get("/runs?status=succeeded&limit=4").json()
        check(p["next"] == f"/runs?limit=4&before={ids[1]}&status=succeeded", f"next keeps the filter: {p['next']}")

        # a live run cannot be deleted
        live = s.submit({"name": "sleep", "distributed": {"world_size": 1}})
        s.wait_status(live, "running", timeout=30)
        r = s.request("DELETE", f"/runs/{live}")
        check(r.status == 409 and "cancel it first" in r.json()["detail"], f"DELETE a running run: {r.status} {r.body!r}")

        # a finished one can, with its directory and its rows
        victim = ids[2]
        check(os.path.isdir(s.run_dir(victim)), "the run directory exists")
        r = s.request("DELETE", f"/runs/{victim}")
        check(r.status == 204 and r.body == b"", f"DELETE -> 204: {r.status} {r.body!r}")
        check(s.get(f"/runs/{victim}").status == 404, "gone from the API")
        check(not os.path.exists(s.run_dir(victim)), "its directory is gone")
        db = sqlite3.connect(os.path.join(s.state_dir, "ddpd.db"))
        for table in ("steps", "epochs", "ranks", "checkpoints"):
            n = db.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", (victim,)).fetchone()[0]
            check(n == 0, f"no rows of the deleted run in {table}: {n}")
        other = db.execute("SELECT count(*) FROM steps WHERE run_id = ?", (ids[1],)).fetchone()[0]
        check(other == 3, f"other runs keep their steps: {other}")
        db.close()
        check(s.request("DELETE", f"/runs/{victim}").status == 404, "DELETE again -> 404")
        check(s.post(f"/runs/{live}/cancel").status == 202, "cancel the live one")
        s.wait_status(live, "canceled", timeout=30)


def case_token(a):
    with Server(a.ddpd, a.fake_trainer, extra_args=["--token", "s3cret"]) as s:
        check(s.get("/healthz").status == 200, "healthz needs no token")
        check(s.get("/runs").status == 200, "reading needs no token")
        r = s.post("/runs", {"name": "record"})
        is_problem(r, 401)
        check((r.header("WWW-Authenticate") or "").startswith("Bearer"), "WWW-Authenticate: Bearer")
        check(s.post("/runs", {"name": "record"}, headers={"Authorization": "Bearer wrong"}).status == 401,
              "a wrong token -> 401")
        s.headers = {"Authorization": "Bearer s3cret"}
        r = s.post("/runs", {"name": "record"})
        check(r.status == 201, f"submit with the token: {r.status}")
        run = s.wait_status(r.json()["id"], "succeeded", timeout=60)
        with open(os.path.join(s.run_dir(run["id"]), "fake.json")) as f:
            seen = json.load(f)
        # but the cap on its logs, which the launchers read (trainer_env.h)
        check(not any(k.startswith("DDPD_") and k not in ("DDPD_RUN_ID", "DDPD_RUN_SECRET", "DDPD_MAX_LOG_BYTES_PER_RUN")
                      for k in seen["env"]),
              f"the trainer gets none of the server's DDPD_* settings: {[k for k in seen['env'] if k.startswith('DDPD')]}")
    with Server(a.ddpd, a.fake_trainer, env={"DDPD_TOKEN": "from-env"}) as s:
        check(s.request("DELETE", "/runs/1").status == 401 and
              s.request("DELETE", "/runs/1", headers={"Authorization": "Bearer from-env"}).status == 404,
              "DDPD_TOKEN sets the token")


def case_state_dir_held(a):
    """A second server on a state dir that one serves is refused at once, naming the
    one that serves it, and leaves it serving (and, under the sanitizers, leaks nothing
    on its way out)."""
    with Server(a.ddpd, a.fake_trainer) as s:
        second = subprocess.run([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", s.state_dir,
                                 "--gpus", "none", "--data-root", DATA_ROOT],
                                capture_output=True, text=True, timeout=60)
        check(second.returncode != 0 and "listening on" not in second.stdout,
              f"the second server does not start: {second.returncode} {second.stdout!r}")
        check(f"another ddpd (pid {s.proc.pid}) is serving" in second.stderr and "--state-dir" in second.stderr,
              f"it names the server that holds the state dir and what to do: {second.stderr[-400:]!r}")
        check(not any(mark in second.stderr for mark in SANITIZER_REPORTS),
              f"no sanitizer report on the way out: {second.stderr[-600:]!r}")
        check(s.get("/healthz").status == 200, "the first server serves on")


def case_lock_of_a_dead_server(a):
    """A server killed while it was starting a run leaves a child between its fork and
    its exec, holding the state dir's lock a moment: the next start waits for it, saying
    so, then serves; one held on and on is refused naming the lock and what to do."""
    state = tempfile.mkdtemp(prefix="ddpd-lock-")
    try:
        lock = os.open(os.path.join(state, "ddpd.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        dead = subprocess.Popen(["true"])
        dead.wait()
        os.write(lock, f"{dead.pid}\n".encode())
        cmd = [a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--gpus", "none", "--data-root", DATA_ROOT]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        said = []

        def read_err():
            for line in p.stderr:
                said.append(line)
        threading.Thread(target=read_err, daemon=True).start()
        check(wait_until(lambda: any("is gone: waiting" in line for line in said), "the start to wait", 30),
              f"the start waits, saying why: {said}")
        check(any(f"(pid {dead.pid})" in line for line in said), f"naming the ddpd that took it: {said}")
        os.close(lock)  # the child execs: its close-on-exec copy goes
        line = p.stdout.readline()
        check("listening on http://" in line, f"then it serves: {line!r} {said[-3:]}")
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=60) == 0, f"and stops cleanly: {p.returncode}")
        check(not any(mark in "".join(said) for mark in SANITIZER_REPORTS), f"no sanitizer report: {said[-5:]}")

        lock = os.open(os.path.join(state, "ddpd.lock"), os.O_RDWR)
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.ftruncate(lock, 0)
        os.write(lock, f"{dead.pid}\n".encode())
        held = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        os.close(lock)
        check(held.returncode != 0 and "listening on" not in held.stdout,
              f"a lock held on is refused: {held.returncode} {held.stdout!r}")
        check("is still held" in held.stderr and "fuser -v" in held.stderr and "ddpd.lock" in held.stderr,
              f"naming the lock and how to find its holder: {held.stderr[-500:]!r}")
        check(not any(mark in held.stderr for mark in SANITIZER_REPORTS), f"no sanitizer report: {held.stderr[-600:]!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def case_config_defaults(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        r = s.post("/runs", {"name": "record"})
        check(r.status == 201, f"a config of only a name is valid: {r.status} {r.body[:300]!r}")
        run = r.json()
        cfg = run["config"]
        check(cfg["train"]["epochs"] == 10 and cfg["train"]["batch_size"] == 128, f"defaults filled: {cfg['train']}")
        check(cfg["distributed"]["world_size"] == 1 and cfg["model"]["hidden"] == [512, 256], "more defaults")
        check(cfg["data"]["train"]["images"] == "fashion-mnist/train-images-idx3-ubyte.gz",
              "the stored config keeps the data paths as submitted")
        for key in ("id", "name", "status", "reason", "config", "created_at", "started_at", "finished_at", "devices",
                    "progress"):
            check(key in run, f"GET /runs/{{id}} has {key}")
        for key in ("epoch", "epochs", "step", "global_step", "total_steps", "fraction", "eta_s", "loss", "lr",
                    "samples_per_s"):
            check(key in run["progress"], f"progress has {key}")
        check(run["created_at"].endswith("Z") and "T" in run["created_at"], f"ISO 8601 UTC: {run['created_at']}")
        run = s.wait_status(run["id"], "succeeded", timeout=60)
        with open(os.path.join(s.run_dir(run["id"]), "fake.json")) as f:
            seen = json.load(f)
        given = seen["config"]["data"]
        check(given["train"]["images"] == os.path.realpath(f"{DATA_ROOT}/fashion-mnist/train-images-idx3-ubyte.gz"),
              f"the trainer gets canonical absolute paths: {given['train']['images']}")
        check(given["test"]["labels"].startswith("/"), "all four")
        # an absolute path inside a data root, as a newcomer copies it from ls, is taken
        absolute = f"{DATA_ROOT}/fashion-mnist/t10k-labels-idx1-ubyte.gz"
        r = s.post("/runs", {"name": "record", "data": {"test": {"labels": absolute}}})
        check(r.status == 201, f"an absolute data path inside a data root is taken: {r.status} {r.body[:300]!r}")
        if r.status == 201:
            done = s.wait_status(r.json()["id"], "succeeded", timeout=60)
            with open(os.path.join(s.run_dir(r.json()["id"]), "fake.json")) as f:
                labels = json.load(f)["config"]["data"]["test"]["labels"]
            check(done and labels == os.path.realpath(absolute), f"and the trainer gets its canonical path: {labels}")
        check(seen["argv"][1:] == ["--config", os.path.join(s.run_dir(run["id"]), "config.json"), "--run-dir",
                                   s.run_dir(run["id"]), "--events", os.path.join(s.state_dir, "events.sock"),
                                   "--data-root", os.path.realpath(DATA_ROOT)],
              f"the command line of the contract, the server's data roots last: {seen['argv']}")
        env = seen["env"]
        check(env.get("DDPD_RUN_ID") == str(run["id"]), f"DDPD_RUN_ID: {env.get('DDPD_RUN_ID')}")
        check(len(env.get("DDPD_RUN_SECRET", "")) == 64 and all(c in "0123456789abcdef" for c in env["DDPD_RUN_SECRET"]),
              "a 64-hex-digit secret")
        check(env.get("CUDA_VISIBLE_DEVICES") == "", f"a CPU run sees no GPU: {env.get('CUDA_VISIBLE_DEVICES')!r}")
        check(seen["pgid"] == seen["pid"] and seen["sid"] == seen["pid"], "the trainer leads its own session and group")
        check(seen["cwd"] == s.run_dir(run["id"]), f"it runs in its run directory: {seen['cwd']}")
        log = os.path.join(s.run_dir(run["id"]), "trainer.log")
        check(seen["stdout"] == log and seen["stderr"] == log and seen["stdin"] == "/dev/null",
              f"stdout and stderr go to trainer.log: {seen['stdout']}, {seen['stderr']}, stdin {seen['stdin']}")
        check(oct(os.stat(os.path.join(s.state_dir, "events.sock")).st_mode & 0o777) == "0o600", "socket mode 0600")
        r = s.get(f"/runs/{run['id']}/logs?tail=1")
        check(r.status == 200 and r.header("Content-Type").startswith("text/plain"), f"logs: {r.status}")
        r = s.get(f"/runs/{run['id']}/logs")
        check(b"fake trainer: run" in r.body and b"ddpd: starting" in r.body, f"the log has both: {r.body!r}")
        check(s.get(f"/runs/{run['id']}/logs?tail=1").body.count(b"\n") <= 1, "tail=1 is one line")


def case_logs_offsets(a):
    # GET /runs/{id}/logs?offset=: whole lines from a byte on and X-Next-Offset, so a
    # follower reads on without gaps or repeats; the tail says where it ends too.
    with Server(a.ddpd, a.fake_trainer) as s:
        rid = s.submit({"name": "steps-20"})
        s.wait_status(rid, "succeeded", timeout=60)
        path = os.path.join(s.run_dir(rid), "trainer.log")
        whole = open(path, "rb").read()
        r = s.get(f"/runs/{rid}/logs?tail=2")
        check(r.status == 200 and r.header("X-Next-Offset") == str(len(whole)),
              f"the tail ends at the file's size: {r.header('X-Next-Offset')} of {len(whole)}")
        got, offset, reads = b"", 0, 0
        while reads < 100:
            r = s.get(f"/runs/{rid}/logs?offset={offset}")
            reads += 1
            nxt = int(r.header("X-Next-Offset") or -1)
            check(r.status == 200 and nxt == offset + len(r.body), f"offset {offset}: next {nxt}, {len(r.body)} bytes")
            if not r.body:
                break
            got += r.body
            offset = nxt
        check(got == whole and whole.count(b"\n") >= 1, f"read on from offsets: the whole log, once ({len(got)} bytes)")
        r = s.get(f"/runs/{rid}/logs?offset={len(whole) + 100}")
        check(r.status == 200 and r.body == b"", "past the end: nothing")
        r = s.get(f"/runs/{rid}/logs?rank=0")
        check(r.status == 400 and "built-in model" in r.json().get("detail", ""),
              f"rank= on a built-in run: 400 saying why: {r.status} {r.body[:200]!r}")
        r = s.get(f"/runs/{rid}/logs?offset=-5")
        check(r.status == 400, f"a negative offset: 400 ({r.status})")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
