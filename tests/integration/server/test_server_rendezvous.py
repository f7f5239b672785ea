#!/usr/bin/env python3
"""A run's rendezvous (POST and GET /runs/{id}/rendezvous) against a real ddpd on a
loopback port: what the trainer processes of a run across nodes exchange through the
coordinator before they can reach each other (gloo's addresses, NCCL's unique id).

  round_trip      256 random bytes, hex-encoded, come back identical; a key is 404
                  until it is set; the answers are never cached (no-store, no ETag);
                  each run has its own keys, and one run's secret opens no other's
  write_once      the same value again is 200 (a retry), another is 409, and the
                  first stays; racing writers of one key: one 201, the others 409
  secret          no bearer, a wrong one, another scheme: 401 on both routes, and a
                  refused write leaves nothing behind
  server_token    with --token-file, the run's secret opens the routes without the
                  token, and the token alone opens neither (401); every other route
                  that changes something still needs the token
  not_active      a queued run, a finished run (its keys gone: /metrics counts none)
                  and no run at all: 404 naming the run
  bad_requests    keys and values out of the contract (characters, length, odd or
                  uppercase hex, not strings, no body): 400 naming the field
  key_cap         4096 keys per run, then 409; a retry of a key held still answers 200

The runs are the fake trainer's `hold` script: it says hello, falls silent, and
leaves the run's secret in hold.json in its run directory for the test.

Usage: test_server_rendezvous.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import http.client, json, os, sys, tempfile, shutil, threading, urllib.parse

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main  # noqa: E402

HOLD = {"name": "hold", "distributed": {"world_size": 1}}


def hold_run(s, headers=None):
    """Submits a `hold` run and waits for its secret: (id, secret)."""
    r = s.post("/runs", HOLD, headers=headers)
    if not check(r.status == 201, f"POST /runs -> 201: {r.status} {r.body[:300]!r}"):
        raise RuntimeError("submission refused")
    rid = r.json()["id"]
    path = os.path.join(s.run_dir(rid), "hold.json")

    def read():
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    info = wait_until(read, f"run {rid}'s trainer to write hold.json", timeout=60)
    if not info:
        raise RuntimeError("no secret")
    return rid, info["secret"]


def bearer(secret):
    return {"Authorization": f"Bearer {secret}"}


def put(s, rid, secret, key, value, headers=None):
    hdrs = bearer(secret) if secret is not None else {}
    hdrs.update(headers or {})
    return s.post(f"/runs/{rid}/rendezvous", {"key": key, "value": value}, headers=hdrs)


def get(s, rid, secret, key, headers=None):
    hdrs = bearer(secret) if secret is not None else {}
    hdrs.update(headers or {})
    return s.get(f"/runs/{rid}/rendezvous?key={urllib.parse.quote(key, safe='')}", headers=hdrs)


def problem(r, status, words, what):
    """r is a problem document of `status` whose detail holds `words`."""
    ok = r.status == status and (r.header("Content-Type") or "").startswith("application/problem+json")
    detail = ""
    try:
        detail = r.json().get("detail", "")
    except ValueError:
        ok = False
    return check(ok and words in detail, f"{what}: {status} saying {words!r}; got {r.status} {r.body[:300]!r}")


def metric(s, name):
    for line in s.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def not_cached(r, what):
    check(r.header("Cache-Control") == "no-store" and r.header("ETag") is None,
          f"{what}: Cache-Control: no-store, no ETag: {r.header('Cache-Control')!r} {r.header('ETag')!r}")


def case_round_trip(a):
    with Server(a.ddpd, a.fake_trainer, slots=2) as s:
        rid, secret = hold_run(s)
        other, other_secret = hold_run(s)
        key = "gloo/rank:0.addr_-x"
        r = get(s, rid, secret, key)
        problem(r, 404, f"key {key} is not set yet in run {rid}'s rendezvous", "a key before it is put")
        not_cached(r, "the 404 of a key not set")

        data = os.urandom(256)
        r = put(s, rid, secret, key, data.hex())
        check(r.status == 201 and r.json() == {"key": key}, f"the first write: 201 {{key}}: {r.status} {r.body[:200]!r}")
        not_cached(r, "the 201")
        r = get(s, rid, secret, key)
        check(r.status == 200 and (r.header("Content-Type") or "").startswith("application/json"),
              f"after the put: 200 JSON: {r.status} {r.header('Content-Type')}")
        body = r.json() if r.status == 200 else {}
        check(body.get("key") == key and bytes.fromhex(body.get("value", "")) == data,
              f"the 256 bytes come back identical: {body}")
        not_cached(r, "the 200")
        # the same key as the client may write it, unescaped in the query
        r = s.get(f"/runs/{rid}/rendezvous?key={key}", headers=bearer(secret))
        check(r.status == 200 and r.json().get("value") == data.hex(), f"?key= unescaped: {r.status}")

        # the most a value holds, and an empty one
        big = os.urandom(65536).hex()
        check(put(s, rid, secret, "nccl/unique_id", big).status == 201, "a 64 KiB value is taken")
        r = get(s, rid, secret, "nccl/unique_id")
        check(r.status == 200 and r.json()["value"] == big, f"and comes back whole: {r.status} {len(r.body)}")
        check(put(s, rid, secret, "empty", "").status == 201, "an empty value (no bytes) is taken")
        r = get(s, rid, secret, "empty")
        check(r.status == 200 and r.json()["value"] == "", f"and comes back empty: {r.body[:100]!r}")

        # runs do not share keys, and one run's secret opens no other run
        problem(get(s, other, other_secret, key), 404, f"not set yet in run {other}'s", "the other run has no such key")
        r = put(s, other, other_secret, key, "00ff")
        check(r.status == 201, f"the other run takes the same key with its own value: {r.status} {r.body[:200]!r}")
        check(get(s, rid, secret, key).json().get("value") == data.hex(), "the first run's value is unchanged")
        problem(get(s, rid, other_secret, key), 401, "this route needs the run's secret", "another run's secret, GET")
        problem(put(s, rid, other_secret, "x", "00"), 401, "this route needs the run's secret", "another run's secret, POST")
        check(metric(s, "ddpd_rendezvous_keys") == 4, f"/metrics counts the 4 keys: {metric(s, 'ddpd_rendezvous_keys')}")
        want_bytes = len(key) * 2 + len(data.hex()) + len("nccl/unique_id") + len(big) + len("empty") + 4
        check(metric(s, "ddpd_rendezvous_bytes") == want_bytes,
              f"and their bytes, {want_bytes}: {metric(s, 'ddpd_rendezvous_bytes')}")


def case_write_once(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        rid, secret = hold_run(s)
        first = os.urandom(32).hex()
        check(put(s, rid, secret, "nccl.id", first).status == 201, "the first write: 201")
        r = put(s, rid, secret, "nccl.id", first)
        check(r.status == 200 and r.json() == {"key": "nccl.id"}, f"the same value again (a retry): 200: {r.status} {r.body[:200]!r}")
        r = put(s, rid, secret, "nccl.id", os.urandom(32).hex())
        problem(r, 409, "key nccl.id is already set to another value", "another value")
        check(get(s, rid, secret, "nccl.id").json().get("value") == first, "the first value stays")

        # writers racing for one key, each with its own value: one wins, the others are told
        n = 8
        values = [os.urandom(16).hex() for _ in range(n)]
        statuses = [None] * n
        barrier = threading.Barrier(n)

        def writer(i):
            barrier.wait()
            statuses[i] = put(s, rid, secret, "race", values[i]).status

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(sorted(statuses) == [201] + [409] * (n - 1), f"racing writers: one 201, the others 409: {statuses}")
        got = get(s, rid, secret, "race").json().get("value")
        check(statuses[values.index(got)] == 201 if got in values else False,
              f"the value kept is the winner's: {got}")


def case_secret(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        rid, secret = hold_run(s)
        wrong = os.urandom(32).hex()
        for what, hdrs in (("no Authorization", {}), ("a wrong secret", bearer(wrong)),
                           ("the secret in upper case", bearer(secret.upper())),
                           ("the secret with one more character", bearer(secret + "0")),
                           ("another scheme", {"Authorization": f"Basic {secret}"}),
                           ("Bearer and nothing", {"Authorization": "Bearer "})):
            r = put(s, rid, None, "k", "00", headers=hdrs)
            problem(r, 401, "this route needs the run's secret", f"POST with {what}")
            check((r.header("WWW-Authenticate") or "").startswith("Bearer"),
                  f"POST with {what}: WWW-Authenticate: Bearer: {r.header('WWW-Authenticate')!r}")
            problem(get(s, rid, None, "k", headers=hdrs), 401, "this route needs the run's secret", f"GET with {what}")
        problem(get(s, rid, secret, "k"), 404, "not set yet", "a refused write left nothing")
        check(put(s, rid, secret, "k", "00").status == 201, "the run's secret writes")
        check(s.get(f"/runs/{rid}/rendezvous?key=k", headers={"Authorization": f"bearer   {secret}"}).status == 200,
              "the scheme in any case, spaces after it (as for the token)")


def case_server_token(a):
    token = "tok-" + os.urandom(16).hex()
    work = tempfile.mkdtemp(prefix="ddpd-rdv-token-")
    try:
        path = os.path.join(work, "token")
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chmod(path, 0o600)
        with Server(a.ddpd, a.fake_trainer, slots=1, extra_args=["--token-file", path]) as s:
            rid, secret = hold_run(s, headers=bearer(token))
            r = put(s, rid, secret, "addr", "0a0b")
            check(r.status == 201, f"the run's secret writes without the server's token: {r.status} {r.body[:300]!r}")
            r = get(s, rid, secret, "addr")
            check(r.status == 200 and r.json().get("value") == "0a0b", f"and reads: {r.status} {r.body[:200]!r}")
            problem(put(s, rid, token, "other", "00"), 401, "this route needs the run's secret",
                    "the server's token alone does not write")
            problem(get(s, rid, token, "addr"), 401, "this route needs the run's secret",
                    "the server's token alone does not read")
            problem(put(s, rid, None, "other", "00"), 401, "this route needs the run's secret", "nothing at all")
            # the exemption is these routes' only: the run's secret changes nothing else
            problem(s.post(f"/runs/{rid}/cancel", headers=bearer(secret)), 401, "this server needs its token",
                    "cancel with the run's secret instead of the token")
            problem(s.post("/runs", HOLD, headers=bearer(secret)), 401, "this server needs its token",
                    "submit with the run's secret instead of the token")
            check(s.run(rid)["status"] == "running", "the run still runs")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def case_not_active(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        rid, secret = hold_run(s)
        queued = s.post("/runs", HOLD).json()["id"]
        check(s.run(queued)["status"] == "queued", "the second run waits for the slot")
        problem(get(s, queued, secret, "k"), 404, f"run {queued} is not active: it is queued", "GET of a queued run")
        problem(put(s, queued, secret, "k", "00"), 404, f"run {queued} is not active: it is queued", "POST of a queued run")

        for i in range(3):
            check(put(s, rid, secret, f"k{i}", "abcd").status == 201, f"key k{i} written")
        check(metric(s, "ddpd_rendezvous_keys") == 3, f"/metrics: 3 keys: {metric(s, 'ddpd_rendezvous_keys')}")
        check(s.post(f"/runs/{rid}/cancel").status == 202, "the run is canceled")
        s.wait_status(rid, "canceled", timeout=60)
        problem(get(s, rid, secret, "k0"), 404, f"run {rid} is not active: it has ended (canceled)",
                "GET of a finished run, with its secret")
        problem(put(s, rid, secret, "k9", "00"), 404, f"run {rid} is not active", "POST of a finished run")
        # its keys are gone: the finished run's table is freed, not kept unreachable
        check(metric(s, "ddpd_rendezvous_keys") == 0 and metric(s, "ddpd_rendezvous_bytes") == 0,
              f"/metrics: no key, no byte left: {metric(s, 'ddpd_rendezvous_keys')} {metric(s, 'ddpd_rendezvous_bytes')}")

        # the queued run started in the freed slot: its own secret, an empty rendezvous
        s.wait_status(queued, "running", timeout=60)
        info = wait_until(lambda: os.path.exists(os.path.join(s.run_dir(queued), "hold.json")) and
                          json.load(open(os.path.join(s.run_dir(queued), "hold.json"))), "the next run's secret")
        if info:
            problem(get(s, queued, info["secret"], "k0"), 404, "not set yet", "the next run starts with no key")
            problem(get(s, queued, secret, "k0"), 401, "needs the run's secret", "the finished run's secret opens no other")

        problem(get(s, 999, secret, "k"), 404, "run 999 is not active: there is no run 999", "no such run")
        r = s.get("/runs/abc/rendezvous?key=k", headers=bearer(secret))
        problem(r, 404, "run ids are positive integers", "not a run id")


def case_bad_requests(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        rid, secret = hold_run(s)
        for key, what in (("", "empty"), ("a b", "a space"), ("a?b", "a '?'"), ("k%", "a '%'"), ("ключ", "not ASCII"),
                          ("a\u0000b", "a NUL"), ("k" * 201, "201 characters")):
            # (a NUL in a JSON string is refused by the JSON parser itself, saying so)
            problem(put(s, rid, secret, key, "00"), 400, "key:" if "\u0000" not in key else "\\u0000 is not allowed",
                    f"POST, a key with {what}")
            if key:
                problem(get(s, rid, secret, key), 400, "query parameter key", f"GET, a key with {what}")
        check(put(s, rid, secret, "k" * 200, "00").status == 201, "a key of 200 characters is taken")
        for value, words, what in (("abc", "an odd number of hex digits", "odd length"),
                                   ("ABCD", "an uppercase hex digit", "uppercase"),
                                   ("zz", "character 1 of 2 is not a hex digit", "not hex"),
                                   ("00" * 65537, "131074 hex digits", "64 KiB and one byte"),
                                   (12, "another JSON value than a string", "a number"),
                                   (None, "another JSON value than a string", "null")):
            problem(put(s, rid, secret, "v", value), 400, "value:", f"a value that is {what}")
            problem(put(s, rid, secret, "v", value), 400, words, f"a value that is {what}: says what is wrong")
        r = s.post(f"/runs/{rid}/rendezvous", {"value": "00"}, headers=bearer(secret))
        problem(r, 400, "key:", "no key")
        problem(s.post(f"/runs/{rid}/rendezvous", {"key": "v"}, headers=bearer(secret)), 400, "value:", "no value")
        problem(s.post(f"/runs/{rid}/rendezvous", {"key": 5, "value": "00"}, headers=bearer(secret)), 400, "key:",
                "a key that is a number")
        problem(s.post(f"/runs/{rid}/rendezvous", ["k", "00"], headers=bearer(secret)), 400, "not a JSON object",
                "a body that is an array")
        problem(s.post(f"/runs/{rid}/rendezvous", "{nope", headers=dict(bearer(secret), **{"Content-Type": "application/json"})),
                400, "not a JSON object", "a body that is not JSON")
        problem(s.post(f"/runs/{rid}/rendezvous", "key=v", headers=dict(bearer(secret), **{"Content-Type": "text/plain"})),
                415, "must be JSON", "a body that is not sent as JSON")
        problem(s.get(f"/runs/{rid}/rendezvous", headers=bearer(secret)), 400, "query parameter key", "GET without ?key=")
        problem(get(s, rid, secret, "v"), 404, "not set yet", "nothing refused was written")
        check(metric(s, "ddpd_rendezvous_keys") == 1, f"/metrics: only the good key: {metric(s, 'ddpd_rendezvous_keys')}")


def value_of(key):
    """rank/N's value in key_cap: N as 4 bytes."""
    return "%08x" % int(key.split("/")[1])


def case_key_cap(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        rid, secret = hold_run(s)
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)  # one connection: 4096 requests are quick
        hdrs = dict(bearer(secret), **{"Content-Type": "application/json"})

        def post(key):
            conn.request("POST", f"/runs/{rid}/rendezvous", body=json.dumps({"key": key, "value": value_of(key)}),
                         headers=hdrs)
            r = conn.getresponse()
            r.read()
            return r.status

        statuses = {}
        for i in range(4096):
            st = post(f"rank/{i}")
            statuses[st] = statuses.get(st, 0) + 1
        check(statuses == {201: 4096}, f"4096 keys are taken: {statuses}")
        conn.close()
        r = put(s, rid, secret, "one/more", "00")
        problem(r, 409, f"run {rid}'s rendezvous holds its most keys (4096)", "the 4097th key")
        r = put(s, rid, secret, "rank/7", value_of("rank/7"))
        check(r.status == 200, f"a retry of a key it holds still answers 200: {r.status} {r.body[:200]!r}")
        problem(put(s, rid, secret, "rank/7", "ffffff"), 409, "already set to another value", "and another value 409")
        for key in ("rank/0", "rank/4095"):
            check(get(s, rid, secret, key).status == 200, f"{key} is there")
        problem(get(s, rid, secret, "one/more"), 404, "not set yet", "the refused key is not")
        check(metric(s, "ddpd_rendezvous_keys") == 4096, f"/metrics: 4096 keys: {metric(s, 'ddpd_rendezvous_keys')}")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
