#!/usr/bin/env python3
"""schema/openapi.json against the real server: the document is OpenAPI 3.1 whose
every $ref resolves; it names exactly the routes the router serves (read from the
route tables in server/**/*.c); ddpd serves it (and the run-config and sweep schemas it
refers to) as they are in the repository; and every route is exercised on a real ddpd with the
real trainer training Fashion-MNIST (a small data.limit), each answer's status,
content type, required headers and body validated against the document, until
every documented status of every operation has been seen. Security is held against
the route tables too: a route whose entry takes the run's secret (run_secret_auth, a
run's rendezvous) declares runSecret and nothing else, every other one the token or
nothing; the rendezvous is exercised with the secret the database keeps for a run
while it is active.

Validation is JSON Schema 2020-12 by python3-jsonschema (Debian's package; both its
RefResolver API, Debian 12's 4.10, and the newer `referencing` registry work).

Usage: test_openapi.py responses --ddpd PATH --fake-trainer PATH --trainer PATH
                       --openapi schema/openapi.json --source REPO"""
import argparse, subprocess, glob, http.client, json, os, re, socket, sqlite3, sys, time, warnings

import ddpd_harness  # noqa: E402
from ddpd_harness import Server, check, wait_until, fmnist_config  # noqa: E402
from openapi_contract import (BASE, METHODS, OUTSIDE_REFS, RUN_CONFIG_REF, SWEEP_REF, Checker, Validator,  # noqa: E402
                              deref, normalize, outside_schemas, pointer_escape, resolve_pointer)

try:
    import jsonschema
except ImportError:  # counted as a failure below
    jsonschema = None

TOKEN = "openapi-test-token-0123456789abcdef"
# Statuses a route documents that this test cannot bring about on purpose: a stream
# refused while the server shuts down (503), a database that cannot be read (500 is
# "default" anyway), a database that cannot be written (503: tests/integration/server/
# test_server_full_disk.py fills a real disk and validates those against this document).
# A Slurm job's part's report taken (200) needs a Slurm cluster: tests/integration/slurm/test_slurm.py
# validates that answer against this document.
UNREACHABLE = {("get", "/events", "503"), ("get", "/runs/{id}/events", "503"), ("get", "/healthz", "503"),
               ("post", "/runs", "503"), ("delete", "/runs/{id}", "503"), ("post", "/runs/{id}/parts", "200")}


def raw_exchange(port, request, until=None, timeout=30):
    """Sends raw bytes; reads the answer (all of it, or until `until` is in the body).
    Returns a harness Response."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(request)
        except OSError:
            pass  # the server answered early and closed: read what it said
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            if _ and until is not None and until in rest:
                break
            if _ and until is None:
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if m and len(rest) >= int(m.group(1)):
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:] if ":" in line]
    if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers):
        body = dechunk(body)
    m = [v for k, v in headers if k.lower() == "content-length"]
    if m:
        body = body[:int(m[0])]
    return ddpd_harness.Response(status, headers, body)


def dechunk(data):
    out, pos = b"", 0
    while pos < len(data):
        end = data.find(b"\r\n", pos)
        if end < 0:
            break
        try:
            size = int(data[pos:end].split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out += data[end + 2:end + 2 + size]
        pos = end + 2 + size + 2
    return out


# a route row, with designated initialisers: {.method = "GET", .pattern = "/runs/{id}", .handler = h, .flag = true}
ROUTE_ENTRY = re.compile(r'\{\s*\.method\s*=\s*"(GET|POST|PUT|PATCH|DELETE)"\s*,\s*\.pattern\s*=\s*"(/[^"]*)"\s*,'
                         r'\s*\.handler\s*=\s*\w+\s*((?:,\s*\.\w+\s*=\s*\w+\s*)*),?\s*\}')


def route_tables(source):
    """(method, normalized path) of every route in server/**/*.c's route tables, and
    of those among them that take the run's secret instead of the token (the route's
    .run_secret_auth set true). The sets of those open to all (.open: no token even
    where reads need one) and of those that take the token as ?access_token= too
    (.token_in_query) are ROUTE_FLAGS' after the call."""
    found, run_secret = set(), set()
    ROUTE_FLAGS["open"], ROUTE_FLAGS["token_in_query"] = set(), set()
    for path in glob.glob(os.path.join(source, "server", "**", "*.c"), recursive=True):
        with open(path) as f:
            text = f.read()
        for m in ROUTE_ENTRY.finditer(text):
            found.add((m.group(1).lower(), normalize(m.group(2))))
            if re.search(r"\.run_secret_auth\s*=\s*true\b", m.group(3)):
                run_secret.add((m.group(1).lower(), normalize(m.group(2))))
            for flag in ROUTE_FLAGS:
                if re.search(r"\." + flag + r"\s*=\s*true\b", m.group(3)):
                    ROUTE_FLAGS[flag].add((m.group(1).lower(), normalize(m.group(2))))
    return found, run_secret


ROUTE_FLAGS = {"open": set(), "token_in_query": set()}


def run_secret(s, rid):
    """An active run's secret, where the server keeps it for a restart: the database."""
    db = sqlite3.connect(f"file:{os.path.join(s.state_dir, 'ddpd.db')}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT secret FROM runs WHERE id = ?", (rid,)).fetchone()
    finally:
        db.close()
    return row[0] if row else None


def parts_refused(s, req, rid):
    """A Slurm job's part's report, refused by a server that runs no Slurm jobs (its
    answer taken is tests/slurm's)."""
    mine = {"Authorization": f"Bearer {run_secret(s, rid)}"}
    tpl, path = "/runs/{id}/parts", f"/runs/{rid}/parts"
    report = {"node_rank": 0, "node": "n1", "address": "127.0.0.1", "boot": "b0", "parts": [], "streams": [], "logs": []}
    r = req("POST", tpl, path, "a part's report to a server without Slurm", body=report, headers=mine)
    check(r.status == 404 and "no Slurm job" in r.json().get("detail", ""), f"404 naming why: {r.status} {r.body[:200]}")
    req("POST", tpl, path, "a part's report that is not an object", body=[1], headers=mine)
    req("POST", tpl, path, "a part's report without the secret", body=report)


def rendezvous(s, req, rid, token_auth):
    """Every status of a run's rendezvous, on an active run (the server has a token)."""
    secret = run_secret(s, rid)
    if not check(secret, f"run {rid}'s secret is in the database"):
        return
    mine = {"Authorization": f"Bearer {secret}"}
    tpl = "/runs/{id}/rendezvous"
    path = f"/runs/{rid}/rendezvous"
    entry = {"key": "gloo/rank:0", "value": os.urandom(16).hex()}
    r = req("GET", tpl, path + "?key=gloo/rank:0", "GET a rendezvous key not set yet", headers=mine)
    check(r.status == 404, f"a key not set yet: 404, got {r.status}")
    r = req("POST", tpl, path, "POST a rendezvous key", body=entry, headers=mine)
    check(r.status == 201, f"written with the run's secret and no token: 201, got {r.status} {r.body[:200]!r}")
    r = req("POST", tpl, path, "POST the same rendezvous key again", body=entry, headers=mine)
    check(r.status == 200, f"the same value again: 200, got {r.status}")
    r = req("POST", tpl, path, "POST another value", body=dict(entry, value="00"), headers=mine)
    check(r.status == 409, f"another value: 409, got {r.status}")
    r = req("POST", tpl, path, "POST an odd-length value", body=dict(entry, value="abc"), headers=mine)
    check(r.status == 400, f"an odd-length value: 400, got {r.status}")
    r = req("POST", tpl, path, "POST a rendezvous key with the server's token", body=entry, headers=token_auth)
    check(r.status == 401, f"the server's token does not open it: 401, got {r.status}")
    r = req("POST", tpl, "/runs/999999/rendezvous", "POST to no run's rendezvous", body=entry, headers=mine)
    check(r.status == 404, f"no such run: 404, got {r.status}")
    r = req("GET", tpl, path + "?key=gloo%2Frank%3A0", "GET a rendezvous key", headers=mine)
    check(r.status == 200 and r.json() == entry, f"the key and its value: {r.status} {r.body[:200]!r}")
    r = req("GET", tpl, path + "?key=a%20b", "GET a rendezvous key that is not one", headers=mine)
    check(r.status == 400, f"a key with a space: 400, got {r.status}")
    r = req("GET", tpl, path + "?key=gloo/rank:0", "GET a rendezvous key without the secret")
    check(r.status == 401, f"no secret: 401, got {r.status}")


def run(a):
    with open(a.openapi) as f:
        doc = json.load(f)
    outside = outside_schemas(os.path.join(a.source, "schema"))
    rc_schema, sweep_schema = outside[RUN_CONFIG_REF], outside[SWEEP_REF]
    if not check(jsonschema is not None, "python3-jsonschema is installed (scripts/install-deps.sh)"):
        return

    # ---- the document itself ----
    check(re.match(r"^3\.1\.\d+$", doc.get("openapi", "")) is not None, f"OpenAPI 3.1: {doc.get('openapi')}")
    check(all(k in doc.get("info", {}) for k in ("title", "version")), "info has a title and a version")

    def walk(node, where):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref.startswith("#/"):
                    try:
                        resolve_pointer(doc, ref[1:])
                    except (KeyError, IndexError, ValueError):
                        check(False, f"{where}: $ref {ref} resolves")
                else:
                    check(ref in OUTSIDE_REFS, f"{where}: the outside references are the run-config and sweep schemas: {ref}")
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")
    walk(doc, "")
    check(doc["components"]["schemas"]["RunConfig"].get("$ref") == RUN_CONFIG_REF,
          "request bodies and stored configs reuse the run-config schema")
    check(doc["components"]["schemas"]["SweepSpec"].get("$ref") == SWEEP_REF,
          "a sweep's body and its stored spec reuse the sweep schema")
    for name in OUTSIDE_REFS:
        check(os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(a.openapi)), name)),
              f"the reference resolves in the repository: {name} is beside {a.openapi}")
    served, run_secret_routes = route_tables(a.source)
    check(run_secret_routes, f"the routes that take the run's secret were found in the route tables: {run_secret_routes}")
    for template, item in doc["paths"].items():
        params = {p.get("name") for p in item.get("parameters", [])} | {
            deref(doc, p, template)[0]["name"] for p in item.get("parameters", [])}
        for name in re.findall(r"\{([^}]*)\}", template):
            check(name in params, f"{template}: the path parameter {name} is described")
        for m in METHODS:
            if m in item:
                op = item[m]
                check(op.get("operationId") and op.get("summary") and op.get("responses"),
                      f"{m.upper()} {template}: operationId, summary, responses")
                if (m, normalize(template)) in run_secret_routes:
                    check(op.get("security") == [{"runSecret": []}],
                          f"{m.upper()} {template}: documents the run's secret, and only it (security: [runSecret])")
                    check("401" in op.get("responses", {}), f"{m.upper()} {template}: documents 401")
                elif m in ("post", "put", "patch", "delete"):
                    check(op.get("security") == [{"bearer": []}, {}], f"{m.upper()} {template}: documents the token")
                    check("401" in op.get("responses", {}), f"{m.upper()} {template}: documents 401")
                elif (m, normalize(template)) in ROUTE_FLAGS["open"]:
                    check(op.get("security") == [], f"{m.upper()} {template}: declares that it needs no token (security: [])")
                elif (m, normalize(template)) in ROUTE_FLAGS["token_in_query"]:
                    check(op.get("security") == [{"bearer": []}, {"accessToken": []}, {}],
                          f"{m.upper()} {template}: documents the token, in the header or ?access_token=, once there are users")
                    check("401" in op.get("responses", {}), f"{m.upper()} {template}: documents 401")
                else:
                    check(op.get("security") == [{"bearer": []}, {}],
                          f"{m.upper()} {template}: documents the token, needed once there are users")
                    check("401" in op.get("responses", {}), f"{m.upper()} {template}: documents 401")
                check(any(st.startswith("4") for st in op.get("responses", {})), f"{m.upper()} {template}: documents a 4xx")

    documented = {(m, normalize(t)) for t, item in doc["paths"].items() for m in METHODS if m in item}
    check(len(served) >= 10, f"the route tables were found in server/**/*.c: {len(served)}")
    check(served - documented == set(), f"every route the server has is documented; missing: {sorted(served - documented)}")
    check(documented - served == set(), f"every documented route exists; not served: {sorted(documented - served)}")

    validator = Validator(doc, outside)
    c = Checker(doc, validator)

    # the request bodies this test sends, against the document's request schema
    good_config = fmnist_config(**{"checkpoint.every_epochs": 1})
    body_ptr = "/paths/~1runs/post/requestBody/content/application~1json/schema"
    check(not validator.errors(body_ptr, good_config), f"the config this test submits is a RunConfig: "
                                                       f"{validator.errors(body_ptr, good_config)}")
    bad_config = fmnist_config(**{"train.batch_size": "big", "model.activation": "sigmoid"})
    check(validator.errors(body_ptr, bad_config), "a config with the wrong types is not a RunConfig")
    sweep_ptr = "/paths/~1sweeps/post/requestBody/content/application~1json/schema"
    good_sweep = {"base": good_config, "parameters": {"train.optimizer.lr": {"values": [0.01, 0.1]},
                                                      "model.hidden.0": {"min": 8, "max": 16}},
                  "metric": {"key": "test_loss"}, "early_stopping": {"type": "asha"}}
    check(not validator.errors(sweep_ptr, good_sweep), f"a sweep body is a SweepSpec (sweep.schema.json): "
                                                       f"{validator.errors(sweep_ptr, good_sweep)}")
    for change in ({"parallel": 0}, {"early_stoping": {"type": "asha"}}, {"parameters": {"x": {"values": []}}},
                   {"parameters": {"x": {"min": 1}}}):
        check(validator.errors(sweep_ptr, dict(good_sweep, **change)), f"{change} makes it no SweepSpec")

    if not check(a.trainer, "the real trainer is given (--trainer)"):
        return
    auth = {"Authorization": f"Bearer {TOKEN}"}
    srv = Server(a.ddpd, a.trainer, slots=2, extra_args=["--token", TOKEN])
    # a node's suspect mark as a server keeps it (docs/failures.md), for GET /nodes and its clear's 200
    os.makedirs(os.path.join(srv.state_dir, "nodes"), mode=0o700)
    with open(os.path.join(srv.state_dir, "nodes", "suspects.json"), "w") as f:
        json.dump([{"node": "openapi-gone", "device": None, "since_ms": 1796650989083, "last_ms": 1796650989083,
                    "class": "crash", "evidence": "killed by SIGSEGV (signal 11)", "run_id": 7, "failed_runs": 1,
                    "excluded": False, "runs": [{"run_id": 7, "t": 1796650989083}]}], f)
    with srv as s:
        def req(method, template, path, what=None, **kw):
            r = s.request(method, path, **kw)
            c.response(method, template, r, what or f"{method} {path}")
            return r

        # ---- the description, served ----
        r = req("GET", "/openapi.json", "/openapi.json")
        check(r.status == 200 and json.loads(r.body) == doc, "GET /openapi.json serves schema/openapi.json")
        r = req("GET", "/schema/run-config.schema.json", "/schema/run-config.schema.json")
        check(r.status == 200 and json.loads(r.body) == rc_schema, "and the run-config schema it refers to")
        r = req("GET", "/run-config.schema.json", "/" + RUN_CONFIG_REF)
        check(r.status == 200 and json.loads(r.body) == rc_schema, "at the URL the reference resolves to from /openapi.json")
        r = req("GET", "/schema/sweep.schema.json", "/schema/sweep.schema.json")
        check(r.status == 200 and json.loads(r.body) == sweep_schema, "and the sweep schema it refers to")
        r = req("GET", "/sweep.schema.json", "/" + SWEEP_REF)
        check(r.status == 200 and json.loads(r.body) == sweep_schema, "at the URL its reference resolves to")
        req("GET", "/healthz", "/healthz")
        req("GET", "/metrics", "/metrics")
        # a body over 1 MiB is refused on any route (the 4xx every operation documents)
        for path in ("/healthz", "/metrics", "/openapi.json", "/schema/run-config.schema.json", "/run-config.schema.json",
                     "/schema/sweep.schema.json", "/sweep.schema.json", "/nodes", "/queue", "/users", "/sweeps"):
            big = raw_exchange(s.port, (f"GET {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                        f"Content-Length: 2097152\r\n\r\n{{").encode())
            c.response("GET", path, big, f"GET {path} with a 2 MiB body")
            check(big.status == 413, f"GET {path} with a 2 MiB body: 413, got {big.status}")

        # ---- a real run ----
        r = req("POST", "/runs", "/runs", body=good_config, headers=auth)
        if not check(r.status == 201, f"the run is accepted: {r.status} {r.body[:500]!r}"):
            return
        rid = r.json()["id"]
        check(r.header("Location") == f"/runs/{rid}", f"Location: {r.header('Location')}")
        req("POST", "/runs", "/runs", "POST /runs without the token", body=good_config)
        req("POST", "/runs", "/runs", "POST /runs with a bad config", body=bad_config, headers=auth)
        req("POST", "/runs", "/runs", "POST /runs with a command on a server without --allow-commands",
            body={"command": ["python3", "train.py"]}, headers=auth)
        req("POST", "/runs", "/runs", "POST /runs with a body that is not JSON", body="{not json",
            headers=dict(auth, **{"Content-Type": "application/json"}))
        req("POST", "/runs", "/runs", "POST /runs as text/plain", body="{}", headers=dict(auth, **{"Content-Type": "text/plain"}))
        big = raw_exchange(s.port, (f"POST /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                                    f"Content-Type: application/json\r\nContent-Length: 2097152\r\n\r\n{{").encode())
        c.response("POST", "/runs", big, "POST /runs of 2 MiB")
        check(big.status == 413, f"2 MiB: 413, got {big.status}")

        # the live stream while the run trains
        stream = raw_exchange(s.port, f"GET /runs/{rid}/events?last_event_id=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
                              until=b"event: ready")
        c.response("GET", "/runs/{id}/events", stream, "GET /runs/{id}/events")
        check(b"event: ready" in stream.body, f"the stream starts with ready: {stream.body[:200]!r}")
        m = re.search(rb"event: ready\ndata: (\{.*\})\n", stream.body)
        check(m is not None and json.loads(m.group(1)).get("run") == rid, "ready names the run")
        stream = raw_exchange(s.port, b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n", until=b"event: ready")
        c.response("GET", "/events", stream, "GET /events")
        req("GET", "/events", "/events?last_event_id=nope", "GET /events with a bad last_event_id")
        req("GET", "/runs/{id}/events", "/runs/999999/events", "GET /runs/999999/events")
        req("GET", "/runs/{id}/events", f"/runs/{rid}/events", "a bad Last-Event-ID", headers={"Last-Event-ID": "x"})

        run = s.wait_status(rid, "succeeded", timeout=240)
        if not check(run is not None, "the run succeeded"):
            return

        # ---- every read of a finished run ----
        # its last records (the launcher's last words, the journal's compaction) may
        # land just after it reads succeeded, each a new version: read once it settled
        seen = []  # its ETags, a read each 0.2 s: settled once three reads in a row agree

        def settled_tag():
            seen.append(s.get(f"/runs/{rid}").header("ETag"))
            return len(seen) >= 3 and len(set(seen[-3:])) == 1
        settled = wait_until(settled_tag, "the finished run's ETag to settle", 30, interval=0.2)
        check(settled is not None, "a finished run's ETag settles")
        r = req("GET", "/runs/{id}", f"/runs/{rid}")
        r = req("GET", "/runs/{id}", f"/runs/{rid}", "GET /runs/{id} with its ETag",
                headers={"If-None-Match": r.header("ETag") or '"none"'})
        check(r.status == 304, f"GET /runs/{{id}} with its ETag: 304, got {r.status}")
        r = req("GET", "/runs", "/runs")
        check(any(x["id"] == rid for x in r.json()["runs"]), "the run is listed")
        r = req("GET", "/runs", "/runs", "GET /runs with its ETag", headers={"If-None-Match": r.header("ETag") or '"none"'})
        check(r.status == 304, f"GET /runs with its ETag: 304, got {r.status}")
        req("GET", "/runs", "/runs?status=succeeded,failed&limit=1")
        req("GET", "/runs", "/runs?status=nope")
        req("GET", "/runs", "/runs?limit=0")
        for key in ("loss", "lr", "samples_per_s"):
            r = req("GET", "/runs/{id}/metrics", f"/runs/{rid}/metrics?key={key}")
            check(r.status == 200 and r.json()["count"] > 0, f"the {key} series has points")
        r = req("GET", "/runs/{id}/metrics", f"/runs/{rid}/metrics?key=loss&max_points=5")
        check(r.status == 200 and r.json()["downsampled"] and len(r.json()["points"]) <= 5, "downsampled")
        req("GET", "/runs/{id}/metrics", f"/runs/{rid}/metrics?key=loss&after=3")
        req("GET", "/runs/{id}/metrics", f"/runs/{rid}/metrics?key=accuracy")
        req("GET", "/runs/{id}/metrics", f"/runs/{rid}/metrics?max_points=2")
        r = req("GET", "/runs/{id}/epochs", f"/runs/{rid}/epochs")
        check(r.status == 200 and len(r.json()["epochs"]) == 2, f"two epochs: {r.body[:300]!r}")
        r = req("GET", "/runs/{id}/timeline", f"/runs/{rid}/timeline")
        check(r.status == 200 and [e["kind"] for e in r.json()["entries"]][:1] == ["submitted"],
              f"GET /runs/{{id}}/timeline starts with its submission: {r.body[:300]!r}")
        r = req("GET", "/runs/{id}/ranks", f"/runs/{rid}/ranks")
        check(r.status == 200 and {x["rank"] for x in r.json()["ranks"]} >= {0, 1}, f"ranks 0 and 1: {r.body[:300]!r}")
        r = req("GET", "/runs/{id}/logs", f"/runs/{rid}/logs?tail=5")
        check(r.status == 200 and r.body.count(b"\n") <= 5 and r.body, "the log's tail")
        req("GET", "/runs/{id}/logs", f"/runs/{rid}/logs?tail=0")
        check(s.get(f"/runs/{rid}").json()["checkpoints"], "the run has checkpoints")
        r = req("GET", "/runs/{id}/checkpoints", f"/runs/{rid}/checkpoints")
        files = r.json()["checkpoints"] if r.status == 200 else []
        on_disk = sorted(f for f in os.listdir(os.path.join(s.state_dir, "runs", str(rid), "checkpoints"))
                         if f.endswith(".safetensors"))
        check([f["file"] for f in files] == on_disk == ["epoch-0000.safetensors", "epoch-0001.safetensors"],
              f"the checkpoint files are the ones on disk: {[f['file'] for f in files]} vs {on_disk}")
        check([f["epoch"] for f in files] == [0, 1] and all(f["bytes"] == os.path.getsize(s.server_path(f["path"])) for f in files),
              f"with their epochs and sizes: {files}")
        # a run that put a link where its log was: refused, not followed
        log = os.path.join(s.state_dir, "runs", str(rid), "trainer.log")
        os.rename(log, log + ".own")
        os.symlink(os.path.join(s.state_dir, "ddpd.db"), log)
        r = req("GET", "/runs/{id}/logs", f"/runs/{rid}/logs", "a log the run replaced with a link")
        check(r.status == 403 and b"SQLite" not in r.body, f"a log that is a link: 403, not followed: {r.status} {r.body[:200]!r}")
        os.unlink(log)
        os.rename(log + ".own", log)
        for path in ("/runs/999999", "/runs/999999/metrics", "/runs/999999/epochs", "/runs/999999/timeline", "/runs/999999/ranks",
                     "/runs/999999/logs", "/runs/999999/checkpoints", "/runs/abc"):
            tpl = "/runs/{id}" + path[len("/runs/999999"):] if path.startswith("/runs/999999") else "/runs/{id}"
            req("GET", tpl, path)

        # ---- cancel and delete ----
        req("POST", "/runs/{id}/cancel", f"/runs/{rid}/cancel", "cancel a finished run", headers=auth)
        req("POST", "/runs/{id}/cancel", "/runs/999999/cancel", headers=auth)
        req("POST", "/runs/{id}/cancel", f"/runs/{rid}/cancel", "cancel without the token")
        long_cfg = fmnist_config(**{"train.epochs": 200, "name": "long"})
        r = req("POST", "/runs", "/runs", body=long_cfg, headers=auth)
        long_id = r.json()["id"] if r.status == 201 else None
        if long_id and s.wait_status(long_id, "running", timeout=120):
            req("DELETE", "/runs/{id}", f"/runs/{long_id}", "delete a live run", headers=auth)
            # a run that waits behind it: its pending reason and estimate, in both answers
            r = req("POST", "/runs", "/runs", "a run that waits", headers=auth,
                    body=fmnist_config(**{"name": "waits", "distributed.world_size": 1}))
            waits = r.json()["id"] if r.status == 201 else 999999
            r = req("GET", "/runs/{id}", f"/runs/{waits}", "a queued run")
            check(r.status == 200 and (r.json().get("pending") or {}).get("reason") == "devices",
                  f"a queued run's pending: {r.body[-400:]!r}")
            r = req("GET", "/queue", "/queue", "a queued run's pending")
            r = req("GET", "/queue", "/queue", "GET /queue with its ETag", headers={"If-None-Match": r.header("ETag") or '"none"'})
            check(r.status in (200, 304), f"GET /queue with its ETag: 304 (or 200 if the queue changed between), got {r.status}")
            req("POST", "/runs/{id}/cancel", f"/runs/{waits}/cancel", "cancel the waiting run", headers=auth)
            rendezvous(s, req, long_id, auth)
            parts_refused(s, req, long_id)
            req("POST", "/runs/{id}/resume", f"/runs/{long_id}/resume", "resume a live run", headers=auth)
            wait_until(lambda: s.get(f"/runs/{long_id}/checkpoints").json()["checkpoints"], "a checkpoint", 120)
            req("POST", "/runs/{id}/cancel", f"/runs/{long_id}/cancel", "cancel a live run", headers=auth)
            s.wait_status(long_id, "canceled", timeout=120)
            req("GET", "/runs/{id}", f"/runs/{long_id}", "a canceled run")
            req("POST", "/runs/{id}/resume", f"/runs/{long_id}/resume", "resume without the token")
            req("POST", "/runs/{id}/resume", f"/runs/{long_id}/resume", "resume a canceled run", headers=auth)
            req("GET", "/runs/{id}", f"/runs/{long_id}", "a resumed run")
            req("POST", "/runs/{id}/cancel", f"/runs/{long_id}/cancel", "cancel the resumed run", headers=auth)
            s.wait_status(long_id, "canceled", timeout=120)
        req("POST", "/runs/{id}/resume", "/runs/999999/resume", headers=auth)
        req("POST", "/runs/{id}/resume", f"/runs/{rid}/resume", "resume a succeeded run", headers=auth)
        req("DELETE", "/runs/{id}", f"/runs/{rid}", "delete without the token")
        req("DELETE", "/runs/{id}", f"/runs/{rid}", "delete a finished run", headers=auth)
        req("DELETE", "/runs/{id}", f"/runs/{rid}", "delete it again", headers=auth)

        # ---- the nodes: an agent's registration and heartbeat, as `ddpd agent` sends them ----
        r = req("GET", "/nodes", "/nodes")
        here = r.json()["nodes"][0] if r.status == 200 and r.json()["nodes"] else {}
        check(here.get("local") is True and here.get("name"), f"GET /nodes starts with this host: {r.body[:300]!r}")
        node = {"name": "openapi-node", "address": "127.0.0.1", "slots": 0}
        r = req("POST", "/nodes", "/nodes", body=node, headers=auth)
        node_id = r.json()["id"] if r.status == 201 else None
        check(node_id is not None, f"a node registers: {r.status} {r.body[:300]!r}")
        req("POST", "/nodes", "/nodes", "POST /nodes without the token", body=node)
        req("POST", "/nodes", "/nodes", "POST /nodes with slots -1", body=dict(node, slots=-1), headers=auth)
        r = req("POST", "/nodes", "/nodes", "POST /nodes under the coordinator's own name", body=dict(node, name=here.get("name")),
                headers=auth)
        check(r.status == 409 and b"own node name" in r.body, f"the coordinator's own name is refused: {r.body[:300]!r}")
        if node_id:
            r = req("POST", "/nodes/{id}/heartbeat", f"/nodes/{node_id}/heartbeat", body={"parts": []}, headers=auth)
            check(r.status == 200 and r.json()["parts"] == [], f"a heartbeat of an idle node: {r.body[:300]!r}")
            req("POST", "/nodes/{id}/heartbeat", f"/nodes/{node_id}/heartbeat", "a heartbeat that is not JSON",
                body="[nope", headers=dict(auth, **{"Content-Type": "application/json"}))
            req("POST", "/nodes/{id}/heartbeat", f"/nodes/{node_id}/heartbeat", "a heartbeat without the token", body={})
        req("POST", "/nodes/{id}/heartbeat", "/nodes/999/heartbeat", "a heartbeat of no node", body={}, headers=auth)
        r = req("GET", "/nodes", "/nodes")
        names = [n["name"] for n in r.json()["nodes"]] if r.status == 200 else []
        check(names == [here.get("name"), "openapi-node"], f"GET /nodes lists this host first, then the agent: {names}")

        # ---- users: added to the running server's state dir (ddpd user add), each
        # run its submitter's; another user may not change it (403) ----
        tokens = {}
        for name in ("alice", "bob"):
            p = subprocess.run([a.ddpd, "user", "add", name, "--state-dir", s.state_dir], capture_output=True, text=True)
            tokens[name] = p.stdout.strip().splitlines()[-1] if p.returncode == 0 else ""
        as_alice, as_bob = ({"Authorization": f"Bearer {tokens[n]}"} for n in ("alice", "bob"))
        # with users, every read but the open ones needs a token (401 without one)
        wait_until(lambda: s.get("/users", anonymous=True).status == 401, "reads close once there are users")
        for m, template in sorted(served):
            if m != "get" or (m, template) in ROUTE_FLAGS["open"] or (m, template) in run_secret_routes:
                continue
            path = template.replace("{}", str(rid))
            named = [t for t in doc["paths"] if normalize(t) == template]
            r = s.request("GET", path, anonymous=True)
            c.response("GET", named[0] if named else template, r, f"GET {path} without a token, once there are users")
            check(r.status == 401, f"GET {path} without a token once there are users: 401, got {r.status}")
        s.read_headers = as_alice  # the reads below: any user's token
        r = req("GET", "/users", "/users")
        check(r.status == 200 and [u["name"] for u in r.json()["users"]] == ["alice", "bob"], f"GET /users: {r.body[:300]!r}")
        r = req("GET", "/users/me", "/users/me", "who alice's token is", headers=as_alice)
        check(r.status == 200 and r.json()["name"] == "alice", f"GET /users/me: {r.body[:300]!r}")
        req("GET", "/users/me", "/users/me", "who no token is")
        r = req("POST", "/runs", "/runs", "alice submits", body=long_cfg, headers=as_alice)
        hers = r.json()["id"] if r.status == 201 else 999999
        req("GET", "/queue", "/queue")
        req("POST", "/runs/{id}/cancel", f"/runs/{hers}/cancel", "bob cancels alice's run", headers=as_bob)
        req("POST", "/runs/{id}/resume", f"/runs/{hers}/resume", "bob resumes alice's run", headers=as_bob)
        req("DELETE", "/runs/{id}", f"/runs/{hers}", "bob deletes alice's run", headers=as_bob)
        # a node's mark: only an admin clears it
        r = req("GET", "/nodes", "/nodes", "the nodes with a suspect mark")
        check(r.status == 200 and [m["node"] for m in r.json().get("suspects", [])] == ["openapi-gone"],
              f"GET /nodes lists the mark: {r.body[-400:]!r}")
        # its ETag sent back: 304 (a node that changed between the two reads: read again)
        for _ in range(5):
            again = req("GET", "/nodes", "/nodes", "GET /nodes with its ETag",
                        headers={"If-None-Match": r.header("ETag") or '"none"'})
            if again.status == 304:
                break
            r = again
        check(again.status == 304 and not again.body, f"GET /nodes with its ETag: 304, no body: {again.status}")
        req("POST", "/nodes/{id}/clear", "/nodes/openapi-gone/clear", "clear without a token", anonymous=True)
        r = req("POST", "/nodes/{id}/clear", "/nodes/openapi-gone/clear", "alice clears a node", headers=as_alice)
        check(r.status == 403, f"a user may not clear a node: {r.status}")
        req("POST", "/nodes/{id}/clear", "/nodes/" + "x" * 70 + "/clear", "clear a name no node has", headers=auth)
        req("POST", "/nodes/{id}/clear", "/nodes/no-such-node/clear", "clear a node not marked", headers=auth)
        r = req("POST", "/nodes/{id}/clear", "/nodes/openapi-gone/clear", "the admin clears it", headers=auth)
        check(r.status == 200 and r.json() == {"node": "openapi-gone", "cleared": True}, f"cleared: {r.body[:300]!r}")
        req("POST", "/runs/{id}/cancel", f"/runs/{hers}/cancel", "alice cancels her run", headers=as_alice)
        s.wait_status(hers, ("canceled", "failed", "succeeded"), timeout=120)
        # ---- the audit log: alice reads hers (bob's refused attempts on her run are none) ----
        r = req("GET", "/audit", "/audit", "alice reads the audit log", headers=as_alice)
        check(r.status == 200 and any(e["action"] == "run.cancel" and e["actor"] == "alice" for e in r.json()["entries"]),
              f"GET /audit: her cancel: {r.body[:300]!r}")
        req("GET", "/audit", "/audit?actor=bob&since=2026-01-01&limit=2", "the audit log, filtered", headers=as_bob)
        req("GET", "/audit", "/audit?since=soon", "a bad since", headers=as_alice)
        for q in ("", "?by=run", "?by=day&from=2026-01-01&to=2099-01-01", "?by=week"):
            req("GET", "/usage", "/usage" + q, f"usage {q}", headers=as_alice)

        # ---- sweeps: alice's, which bob may not cancel ----
        sweep = {"name": "oa", "base": fmnist_config(**{"train.epochs": 200, "name": "oa"}), "parallel": 1,
                 "parameters": {"train.optimizer.lr": {"values": [0.01, 0.02]}}, "metric": {"key": "test_loss"}}
        r = req("POST", "/sweeps", "/sweeps", "alice submits a sweep", body=sweep, headers=as_alice)
        sid = r.json()["id"] if r.status == 201 else 999999
        check(r.status == 201 and r.header("Location") == f"/sweeps/{sid}", f"the sweep is accepted: {r.status} {r.body[:300]!r}")
        req("POST", "/sweeps", "/sweeps", "a sweep without the token", body=sweep)
        req("POST", "/sweeps", "/sweeps", "a sweep with a path not in its base",
            body=dict(sweep, parameters={"train.nope": {"values": [1]}}), headers=auth)
        req("POST", "/sweeps", "/sweeps", "a sweep of command runs on a server without --allow-commands",
            body=dict(sweep, base={"command": ["python3", "t.py"]}, parameters={"env.X": {"values": ["1"]}}), headers=auth)
        req("POST", "/sweeps", "/sweeps", "a sweep as text/plain", body="{}", headers=dict(auth, **{"Content-Type": "text/plain"}))
        big = raw_exchange(s.port, (f"POST /sweeps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                                    f"Content-Type: application/json\r\nContent-Length: 2097152\r\n\r\n{{").encode())
        c.response("POST", "/sweeps", big, "POST /sweeps of 2 MiB")
        r = req("GET", "/sweeps", "/sweeps")
        check(r.status == 200 and [x["id"] for x in r.json()["sweeps"]] == [sid], f"GET /sweeps lists it: {r.body[:300]!r}")
        wait_until(lambda: s.get(f"/sweeps/{sid}").json()["trials"], "its first trial", 60)
        req("GET", "/sweeps/{id}", f"/sweeps/{sid}")
        req("GET", "/sweeps/{id}", "/sweeps/999999")
        # pause, resume, more trials, a trial by hand: bob may not, alice may
        for verb, body in (("pause", None), ("resume", None), ("extend", {"max_trials": 3}),
                           ("trials", {"params": {"train.optimizer.lr": 0.02}})):
            route = "/sweeps/{id}/" + verb
            req("POST", route, f"/sweeps/{sid}/{verb}", f"bob's {verb} of alice's sweep", body=body, headers=as_bob)
            req("POST", route, f"/sweeps/{sid}/{verb}", f"a sweep's {verb} without the token", body=body)
            req("POST", route, f"/sweeps/999999/{verb}", f"{verb} of no sweep", body=body, headers=auth)
        req("POST", "/sweeps/{id}/resume", f"/sweeps/{sid}/resume", "a running sweep's resume", headers=as_alice)
        r = req("POST", "/sweeps/{id}/pause", f"/sweeps/{sid}/pause", "alice pauses her sweep", headers=as_alice)
        check(r.status == 202 and r.json()["status"] == "paused", f"paused: {r.status} {r.body[:200]!r}")
        req("POST", "/sweeps/{id}/pause", f"/sweeps/{sid}/pause", "a paused sweep's pause", headers=as_alice)
        r = req("POST", "/sweeps/{id}/resume", f"/sweeps/{sid}/resume", "alice resumes it", headers=as_alice)
        check(r.status == 202, f"resumed: {r.status} {r.body[:200]!r}")
        req("POST", "/sweeps/{id}/extend", f"/sweeps/{sid}/extend", "a grid has no point left", body={"max_trials": 5},
            headers=as_alice)
        req("POST", "/sweeps/{id}/extend", f"/sweeps/{sid}/extend", "max_trials not a number",
            body={"max_trials": "more"}, headers=as_alice)
        req("POST", "/sweeps/{id}/trials", f"/sweeps/{sid}/trials", "a trial with a value not in the list",
            body={"params": {"train.optimizer.lr": 0.5}}, headers=as_alice)
        req("POST", "/sweeps/{id}/trials", f"/sweeps/{sid}/trials", "a trial a trial has already",
            body={"params": {"train.optimizer.lr": 0.01}}, headers=as_alice)
        rnd = dict(sweep, name="oa-rnd", method="random", max_trials=1,
                   parameters={"train.optimizer.lr": {"min": 0.001, "max": 0.1}})
        r2 = s.request("POST", "/sweeps", body=rnd, headers=as_alice)
        sid2 = r2.json()["id"] if r2.status == 201 else 999999
        r = req("POST", "/sweeps/{id}/extend", f"/sweeps/{sid2}/extend", "a random sweep extended", body={"max_trials": 2},
                headers=as_alice)
        check(r.status == 202 and r.json()["n_trials"] == 2, f"extended: {r.status} {r.body[:200]!r}")
        r = req("POST", "/sweeps/{id}/trials", f"/sweeps/{sid2}/trials", "a configuration enqueued",
                body={"params": {"train.optimizer.lr": 0.05}}, headers=as_alice)
        check(r.status == 201 and r.json()["trials"][-1]["params"] == {"train.optimizer.lr": 0.05},
              f"enqueued: {r.status} {r.body[:300]!r}")
        s.request("POST", f"/sweeps/{sid2}/cancel", headers=as_alice)
        req("POST", "/sweeps/{id}/cancel", f"/sweeps/{sid}/cancel", "bob cancels alice's sweep", headers=as_bob)
        req("POST", "/sweeps/{id}/cancel", f"/sweeps/{sid}/cancel", "a sweep's cancel without the token")
        r = req("POST", "/sweeps/{id}/cancel", f"/sweeps/{sid}/cancel", "alice cancels her sweep", headers=as_alice)
        req("POST", "/sweeps/{id}/cancel", f"/sweeps/{sid}/cancel", "a canceled sweep's cancel", headers=as_alice)
        req("POST", "/sweeps/{id}/cancel", "/sweeps/999999/cancel", headers=auth)
        for t in (r.json().get("trials", []) if r.status == 202 else []):
            if t["run_id"]:
                s.wait_status(t["run_id"], ("canceled", "failed", "succeeded"), timeout=120)

        # ---- the dashboard's files ----
        r = req("GET", "/", "/")
        if r.status == 200:
            names = re.findall(rb'(?:src|href)="/ui/([A-Za-z0-9._-]+)"', r.body)
            check(names, "the page refers to its files under /ui/")
            for name in sorted(set(names))[:3]:
                req("GET", "/ui/{file}", f"/ui/{name.decode()}")
        req("GET", "/ui/{file}", "/ui/no-such-file.js")
        req("GET", "/ui/{file}", "/ui/.hidden")
        req("GET", "/vendor/uplot/{file}", "/vendor/uplot/uPlot.esm.js")
        req("GET", "/vendor/uplot/{file}", "/vendor/uplot/no-such-file.js")

    # ---- coverage: every documented status of every operation was seen ----
    missing = []
    for (m, _), (tpl, op, _) in sorted(c.ops.items()):
        for status in op.get("responses", {}):
            if status == "default" or (m, tpl, status) in UNREACHABLE:
                continue
            if (m, tpl, status) not in c.seen:
                missing.append(f"{m.upper()} {tpl} {status}")
    # A dashboard that is not installed answers 404 where 200 is documented, and the
    # other way round: one of the two is enough for those routes.
    for tpl in ("/", "/vendor/uplot/{file}"):
        if any(("get", tpl, st) in c.seen for st in ("200", "404")):
            missing = [x for x in missing if not (x.startswith(f"GET {tpl} ") and x.split()[-1] in ("200", "404"))]
    check(not missing, f"every documented status was exercised; not seen: {missing}")
    print(f"validated {len(c.seen)} (operation, status) pairs against {a.openapi}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["responses"])
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer")
    p.add_argument("--fake-trainer", required=True)
    p.add_argument("--openapi", required=True)
    p.add_argument("--source", required=True)
    a = p.parse_args()
    try:
        run(a)
    except Exception:
        import traceback
        traceback.print_exc()
        check(False, "the test raised")
    ddpd_harness.checks.finish("openapi")


if __name__ == "__main__":
    main()
