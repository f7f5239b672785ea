#!/usr/bin/env python3
"""A sweep goes through every gate a run goes through (docs/sweeps.md and
docs/security.md), attacked by one member of a shared server against another: a real ddpd as
root, real Unix accounts alice and bob (the harness's Accounts, made and removed by
the test), the real ddp-trainer and ddp-run. Root only: without it a case says why
and is skipped (exit 77).

  priority_param     bob (--max-priority 0) asks priority 100 through a parameter (a
                     grid's value, a random range's end): refused at POST /sweeps with
                     403 naming /parameters/priority, the value and his limit; no sweep
                     and no run is made. Values within his limit are taken
  others_checkpoint  bob's sweep whose base, or whose parameter, loads alice's
                     checkpoint: 403 naming alice and where (the base's pointer, the
                     parameter); nothing stored, and the server's log has no retry line
  devices_quota      a world size over bob's quota (--max-devices 1), in the base or a
                     parameter: 403 naming the quota; one that this server can never
                     place: 400, as POST /runs refuses it
  limit_lowered      bob's limit is lowered (ddpd user set --max-priority) while his
                     sweep runs: the next trial ends failed once with the gate's reason
                     (in the sweep, in the log once), the sweep goes on to its end
  masked             alice's GET /sweeps/{id} and GET /sweeps of bob's command sweep
                     (and the live feed's sweep events) show none of its env values,
                     arguments or env/placeholder parameter values (nor a condition's
                     values on an env parameter); bob, an admin and
                     the server's token see them all; the masked spec alice was shown,
                     posted back as hers, is refused naming the hidden range's min

  canceled_best      alice's command sweep is canceled while a trial that reported a
                     better val_acc than the one that succeeded still runs: its best is
                     that trial, by its last reported value (last_reported); bob sees
                     that best with its env parameter and config values hidden
  others_change      alice may not pause, resume, extend or add a trial to bob's sweep
                     (403); carol, an admin, adds one, run as bob's; alice sees the
                     best trial's config masked

Usage: test_sweep_gates.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH --runner PATH"""
import argparse, hashlib, http.client, json, os, shutil, sys, tempfile

from ddpd_harness import (Server, Accounts, check, cases_in, wait_until, main, fmnist_config, add_user, user,  # noqa: E402
                          bearer)
from openapi_contract import checker as openapi_checker  # noqa: E402  (answers against schema/openapi.json)

SKIP = 77
FINAL = ("succeeded", "failed", "canceled")
RETRY_WORDS = "tried again"


def needs_root(a):
    if os.geteuid() != 0:
        print(f"{a.case}: skipped: it makes Unix accounts and starts the server as root; run it as root (CI does)")
        sys.exit(SKIP)


def base(**over):
    """A small built-in run: 1000 examples, one rank, one epoch."""
    return fmnist_config(**{"name": "gate", "data.limit": 1000, "data.test_limit": 500, "train.epochs": 1,
                            "distributed.world_size": 1, "model.hidden": [32], **over})


class Team:
    """A root server with users alice (an account of her own), bob (his own account,
    --max-priority 0, --max-devices 1) and carol (an admin), and its token file."""

    def __init__(self, a, acc, slots=2):
        self.state = tempfile.mkdtemp(prefix="ddpd-sweep-gates-")
        fd, self.token_path = tempfile.mkstemp(prefix="ddpd-sweep-gates-token-")
        self.token = hashlib.sha256(os.urandom(16)).hexdigest()
        os.write(fd, (self.token + "\n").encode())
        os.close(fd)
        os.chmod(self.token_path, 0o600)
        self.alice = add_user(a.ddpd, self.state, "alice", "--unix-user", acc["alice"])
        self.bob = add_user(a.ddpd, self.state, "bob", "--unix-user", acc["bob"], "--max-priority", "0",
                            "--max-devices", "1")
        self.carol = add_user(a.ddpd, self.state, "carol", "--admin")
        self.server = Server(a.ddpd, a.trainer, slots=slots, state_dir=self.state,
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

    def post_sweep(self, token, body):
        return self.server.post("/sweeps", body, headers=bearer(token))

    def get(self, token, path):
        return self.server.get(path, headers=bearer(token))

    def log(self):
        with open(self.server.log_path, errors="replace") as f:
            return f.read()


def refused(r, status, words, what):
    """r is a problem document of `status` whose detail holds every one of `words`."""
    body = r.body.decode(errors="replace")
    detail = r.json().get("detail", "") if r.status == status else ""
    return check(r.status == status and all(w in detail for w in words),
                 f"{what}: {status} naming {words}, got {r.status}: {body[:600]!r}")


def nothing_made(t, token, what):
    sweeps = t.get(token, "/sweeps").json()["sweeps"]
    runs = [r for r in t.get(token, "/runs?limit=100").json()["runs"] if r.get("sweep_id")]
    check(sweeps == [] and runs == [], f"{what}: no sweep and no trial's run is made: {sweeps} {runs}")


def sweep_of(t, token, sid):
    r = t.get(token, f"/sweeps/{sid}")
    return r.json() if r.status == 200 else None


def wait_sweep(t, sid, timeout=300):
    got = wait_until(lambda: (lambda w: w if w and w["status"] in FINAL else None)(sweep_of(t, t.token, sid)),
                     f"sweep {sid} to end", timeout, interval=0.2)
    if not got:
        print(json.dumps(sweep_of(t, t.token, sid), indent=1)[:4000], file=sys.stderr)
        t.server.dump_log()
    return got


# ---- priority_param ----

def case_priority_param(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        body = {"name": "hi", "base": base(), "parameters": {"priority": {"values": [100]}},
                "metric": {"key": "test_loss"}}
        r = t.post_sweep(t.bob, body)
        refused(r, 403, ["/parameters/priority", "100", "at most 0", "bob"], "a grid's priority 100 over bob's limit")
        openapi_checker().response("POST", "/sweeps", r, "the 403 of POST /sweeps")
        if r.status == 403:
            errs = r.json().get("errors") or []
            check(errs and errs[0]["pointer"] == "/parameters/priority" and "/base/priority" in errs[0]["message"],
                  f"the error's pointer is the parameter, its message names the base's pointer: {errs}")
        # a random range whose upper end passes it
        rnd = dict(body, method="random", max_trials=3, parameters={"priority": {"min": -10, "max": 100}})
        refused(t.post_sweep(t.bob, rnd), 403, ["/parameters/priority", "100", "at most 0"],
                "a random range reaching priority 100")
        nothing_made(t, t.bob, "refused sweeps")
        # within his limit: taken (then canceled)
        ok = dict(body, parameters={"priority": {"values": [-1, 0]}}, parallel=1)
        r = t.post_sweep(t.bob, ok)
        check(r.status == 201, f"priorities within bob's limit are taken: {r.status} {r.body[:400]!r}")
        if r.status == 201:
            t.server.post(f"/sweeps/{r.json()['id']}/cancel", headers=bearer(t.bob))


# ---- others_checkpoint ----

def alice_checkpoint(t):
    """Alice's finished run's checkpoint, as a config names it (ID/checkpoints/FILE)."""
    rid = t.server.post("/runs", base(name="alice-ckpt", **{"checkpoint.every_epochs": 1}),
                        headers=bearer(t.alice)).json()["id"]
    run = t.server.wait_status(rid, FINAL, timeout=180)
    check(run and run["status"] == "succeeded", f"alice's run succeeds: {run and (run['status'], run['reason'])}")
    files = sorted(os.listdir(os.path.join(t.server.run_dir(rid), "checkpoints")))
    check(files, f"alice's run wrote a checkpoint: {files}")
    return f"{rid}/checkpoints/{files[-1]}"


def case_others_checkpoint(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        hers = alice_checkpoint(t)
        body = {"name": "steal", "base": base(**{"checkpoint.load": hers}),
                "parameters": {"train.optimizer.lr": {"values": [0.001, 0.01]}}, "metric": {"key": "test_loss"}}
        refused(t.post_sweep(t.bob, body), 403, ["/base/checkpoint/load", "alice"], "a base loading alice's checkpoint")
        body = {"name": "steal2", "base": base(), "parameters": {"checkpoint.load": {"values": [hers]}},
                "metric": {"key": "test_loss"}}
        refused(t.post_sweep(t.bob, body), 403, ["/parameters/checkpoint.load", "alice"],
                "a parameter loading alice's checkpoint")
        nothing_made(t, t.bob, "refused sweeps")
        # the searcher had nothing to try again: a pass of it (4 a second) would have said so
        alice_sweep = {"name": "mine", "base": base(**{"checkpoint.load": hers, "train.epochs": 2}), "parallel": 1,
                       "parameters": {"train.optimizer.lr": {"values": [0.001]}}, "metric": {"key": "test_loss"}}
        r = t.post_sweep(t.alice, alice_sweep)
        check(r.status == 201, f"alice may load her own checkpoint in a sweep: {r.status} {r.body[:400]!r}")
        w = wait_sweep(t, r.json()["id"]) if r.status == 201 else None
        check(w and w["status"] == "succeeded", f"and her sweep succeeds: {w and (w['status'], w['reason'])}")
        retries = [ln for ln in t.log().splitlines() if RETRY_WORDS in ln]
        check(not retries, f"the server's log has no retry line: {len(retries)}: {retries[:3]}")


# ---- devices_quota ----

def case_devices_quota(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        body = {"name": "wide", "base": base(**{"distributed.world_size": 2}),
                "parameters": {"train.optimizer.lr": {"values": [0.001]}}, "metric": {"key": "test_loss"}}
        refused(t.post_sweep(t.bob, body), 403, ["/base/distributed/world_size", "quota is 1"],
                "a base over bob's quota")
        body = {"name": "wide2", "base": base(), "parameters": {"distributed.world_size": {"values": [1, 2]}},
                "metric": {"key": "test_loss"}}
        refused(t.post_sweep(t.bob, body), 403, ["/parameters/distributed.world_size", "quota is 1", "value 2"],
                "a parameter over bob's quota")
        nothing_made(t, t.bob, "refused sweeps")
        # alice has no quota, but this server has 2 slots: a world size of 64 never starts
        body = {"name": "huge", "base": base(), "parameters": {"distributed.world_size": {"values": [1, 64]}},
                "metric": {"key": "test_loss"}}
        refused(t.post_sweep(t.alice, body), 400, ["/parameters/distributed.world_size", "value 64", "this server has 2"],
                "a world size this server never places")
        nothing_made(t, t.alice, "a sweep that can never be placed")


# ---- limit_lowered ----

# reports its metric once let go (a sweep none of whose trials reports it ends failed)
WAIT_GO = ("import os, sys, time, ddpd\n"
           "while not os.path.exists(sys.argv[1]):\n"
           "    time.sleep(0.05)\n"
           "ddpd.log_epoch(0, test_loss=1.0)\n"
           "ddpd.flush()\n")


def case_limit_lowered(a):
    needs_root(a)
    go_dir = tempfile.mkdtemp(prefix="ddpd-sweep-go-")
    os.chmod(go_dir, 0o755)  # bob's ranks look for the file there
    go = os.path.join(go_dir, "go")
    try:
        with Accounts("alice", "bob") as acc, Team(a, acc) as t:
            body = {"name": "lowered", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "-c", WAIT_GO, go, "{n}"], "distributed": {"world_size": 1}},
                    "parameters": {"{n}": {"values": ["1", "2"]}}, "metric": {"key": "test_loss"}}
            r = t.post_sweep(t.bob, body)
            if not check(r.status == 201, f"bob's sweep is taken: {r.status} {r.body[:400]!r}"):
                return
            sid = r.json()["id"]
            first = wait_until(lambda: (lambda w: w["trials"][0] if w and w["trials"] and w["trials"][0]["run_id"]
                                        else None)(sweep_of(t, t.bob, sid)), "trial 0's run", 60)
            if not first:
                return
            t.server.wait_status(first["run_id"], "running", timeout=120)
            code, out, err = user(a.ddpd, t.state, "set", "bob", "--max-priority", "-1")
            check(code == 0 and "-1" in out, f"ddpd user set bob --max-priority -1: {code} {out!r} {err!r}")
            open(go, "w").close()
            w = wait_sweep(t, sid)
            if not w:
                return
            t0, t1 = w["trials"][0], w["trials"][1]
            check(t0["status"] == "succeeded", f"trial 0, started before, runs to its end: {t0}")
            check(t1["status"] == "failed" and t1["run_id"] is None and "/priority" in (t1["reason"] or "")
                  and "at most -1" in (t1["reason"] or ""),
                  f"trial 1 ends failed, with no run, by bob's current limit: {t1}")
            check(w["status"] == "succeeded", f"the sweep ends as it should (a trial succeeded): {w['status']} {w['reason']}")
            runs = [x for x in t.get(t.bob, "/runs?limit=100").json()["runs"] if x.get("sweep_id") == sid]
            check(len(runs) == 1, f"one run for the sweep, trial 0's: {[(x['id'], x['trial']) for x in runs]}")
            log = t.log().splitlines()
            said = [ln for ln in log if "at most -1" in ln]
            check(len(said) == 1 and "trial 1" in said[0], f"the log says the refusal once: {said}")
            retries = [ln for ln in log if RETRY_WORDS in ln]
            check(not retries, f"and no retry line: {retries[:3]}")
    finally:
        shutil.rmtree(go_dir, ignore_errors=True)


# ---- others_change ----

def case_others_change(a):
    """alice may not pause, resume, extend or add a trial to bob's sweep (403 naming bob,
    nothing changed); carol, an admin, adds one, which runs as bob's; bob pauses and
    resumes his own; alice sees the best trial's config masked."""
    needs_root(a)
    go_dir = tempfile.mkdtemp(prefix="ddpd-sweep-go-")
    os.chmod(go_dir, 0o755)
    go = os.path.join(go_dir, "go")
    try:
        with Accounts("alice", "bob") as acc, Team(a, acc) as t:
            body = {"name": "theirs", "parallel": 1,
                    "base": {"command": ["/usr/bin/python3", "-c", WAIT_GO, go, "{n}"],
                             "env": {"API_KEY": "sekrit-env-A1"}, "distributed": {"world_size": 1}},
                    "parameters": {"{n}": {"values": ["1", "2", "3"]}}, "metric": {"key": "test_loss"}}
            r = t.post_sweep(t.bob, body)
            if not check(r.status == 201, f"bob's sweep is taken: {r.status} {r.body[:400]!r}"):
                return
            sid = r.json()["id"]
            api = openapi_checker()
            for verb, payload in (("pause", None), ("resume", None), ("extend", {"max_trials": 9}),
                                  ("trials", {"params": {"{n}": "2"}})):
                r = t.server.post(f"/sweeps/{sid}/{verb}", payload, headers=bearer(t.alice))
                refused(r, 403, ["bob", "only bob or an admin"], f"alice's POST /sweeps/{{id}}/{verb} of bob's sweep")
                api.response("POST", f"/sweeps/{{id}}/{verb}", r, f"the 403 of POST /sweeps/{{id}}/{verb}")
            w = sweep_of(t, t.bob, sid)
            check(w["status"] == "running" and w["n_trials"] == 3 and len(w["trials"]) <= 1,
                  f"bob's sweep is as it was: {w['status']} {w['n_trials']} {len(w['trials'])}")
            r = t.server.post(f"/sweeps/{sid}/trials", {"params": {"{n}": "3"}}, headers=bearer(t.carol))
            check(r.status == 201, f"carol, an admin, enqueues a configuration: {r.status} {r.body[:300]!r}")
            r = t.server.post(f"/sweeps/{sid}/pause", headers=bearer(t.bob))
            check(r.status == 202 and r.json()["status"] == "paused", f"bob pauses his sweep: {r.status} {r.body[:300]!r}")
            r = t.server.post(f"/sweeps/{sid}/resume", headers=bearer(t.bob))
            check(r.status == 202, f"and resumes it: {r.status} {r.body[:300]!r}")
            open(go, "w").close()
            w = wait_sweep(t, sid)
            if not check(w and w["status"] == "succeeded", f"it succeeds: {w and (w['status'], w['reason'])}"):
                return
            check([x["params"]["{n}"] for x in w["trials"]] == ["1", "3", "2"],
                  f"the enqueued configuration is the next trial, the grid's own point 3 not made again: "
                  f"{[x['params'] for x in w['trials']]}")
            runs = [x for x in t.get(t.bob, "/runs?limit=100").json()["runs"] if x.get("sweep_id") == sid]
            check(len(runs) == 3 and all(x["owner"] == "bob" for x in runs),
                  f"every trial's run is bob's, the one carol enqueued too: {[(x['id'], x['owner']) for x in runs]}")
            mine = t.get(t.bob, f"/sweeps/{sid}").json()
            check(mine["best"]["config"]["env"]["API_KEY"] == "sekrit-env-A1",
                  f"bob sees his best trial's full config: {mine['best'].get('config', {}).get('env')}")
            theirs = t.get(t.alice, f"/sweeps/{sid}")
            cfg = theirs.json()["best"].get("config") or {}
            check("sekrit" not in theirs.body.decode() and cfg.get("env") == {"API_KEY": "<hidden>"} and
                  "/best/config/env" in (theirs.json().get("hidden") or []),
                  f"alice sees it masked: {cfg.get('env')} {theirs.json().get('hidden')}")
            api.response("GET", "/sweeps/{id}", theirs, "alice's masked GET /sweeps/{id} with best.config")
    finally:
        shutil.rmtree(go_dir, ignore_errors=True)


# ---- masked ----

SECRETS = ["sekrit-env-A1", "sekrit-arg-B2", "sekrit-lr-C3", "sekrit-w-D4"]
REPORT = ("import ddpd\n"
          "ddpd.log_epoch(0, test_loss=0.5)\n"
          "ddpd.flush()\n")


def sweep_events_text(s, token, sid):
    """The live feed's `sweep` events of sweep sid, as `token` reads them, until its end."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
    conn.request("GET", "/events?last_event_id=0", headers=bearer(token))
    r = conn.getresponse()
    got, event = [], None
    try:
        while True:
            line = r.fp.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "sweep":
                d = json.loads(line[6:])
                if d["sweep"] == sid:
                    got.append(line)
                    if d["trial"] is None and d["action"] in FINAL:
                        return "\n".join(got)
            elif not line:
                event = None
    finally:
        conn.close()


def case_masked(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        body = {"name": "secret", "parallel": 1,
                "base": {"command": ["/usr/bin/python3", "-c", REPORT, "--token=sekrit-arg-B2", "--w={w}"],
                         "env": {"API_KEY": "sekrit-env-A1"}, "distributed": {"world_size": 1}},
                "parameters": {"env.LR": {"values": ["sekrit-lr-C3"]},
                               "{w}": {"values": ["sekrit-w-D4"], "when": {"env.LR": ["sekrit-lr-C3"]}},
                               "env.K": {"min": 1, "max": 2}, "priority": {"values": [-1]}},
                "metric": {"key": "test_loss"}}
        r = t.post_sweep(t.bob, body)
        if not check(r.status == 201, f"bob's command sweep is taken: {r.status} {r.body[:400]!r}"):
            return
        sid = r.json()["id"]
        w = wait_sweep(t, sid)
        check(w and w["status"] == "succeeded" and w["best"], f"it succeeds with a best trial: {w and (w['status'], w['best'])}")
        for who, token in (("bob", t.bob), ("carol, an admin", t.carol), ("the server's token", t.token)):
            for path in (f"/sweeps/{sid}", "/sweeps"):
                text = t.get(token, path).body.decode()
                want = SECRETS if path != "/sweeps" else ["sekrit-lr-C3", "sekrit-w-D4"]  # the list: best's params
                check(all(x in text for x in want), f"{who} sees every value in GET {path}: "
                      f"{[x for x in want if x not in text]} missing")
        one = t.get(t.alice, f"/sweeps/{sid}")
        text = one.body.decode()
        check(one.status == 200 and not any(x in text for x in SECRETS),
              f"alice's GET /sweeps/{sid} shows no secret: {[x for x in SECRETS if x in text]}")
        if one.status == 200:
            m = one.json()
            spec = m["spec"]
            check(spec["base"]["env"] == {"API_KEY": "<hidden>"}, f"the base's env names, no values: {spec['base']['env']}")
            check(spec["base"]["command"][0] == "/usr/bin/python3" and
                  all(x == "<hidden>" for x in spec["base"]["command"][1:]) and len(spec["base"]["command"]) == 5,
                  f"the base's program, its arguments hidden: {spec['base']['command']}")
            check(spec["parameters"]["env.LR"] == {"values": ["<hidden>"]} and
                  spec["parameters"]["{w}"] == {"values": ["<hidden>"], "when": {"env.LR": ["<hidden>"]}} and
                  spec["parameters"]["env.K"] == {"min": "<hidden>", "max": "<hidden>"} and
                  spec["parameters"]["priority"] == {"values": [-1]},
                  f"the env and placeholder parameters' values hidden, the others shown: {spec['parameters']}")
            params = [x["params"] for x in m["trials"]] + [m["best"]["params"]]
            check(len(params) == 3 and all(p == {"env.LR": "<hidden>", "{w}": "<hidden>", "env.K": "<hidden>",
                                                  "priority": -1} for p in params),
                  f"each trial's and the best's params hidden the same way: {params}")
            check(set(m.get("hidden") or []) >= {"/spec/base/env", "/spec/base/command", "/spec/parameters/env.LR",
                                                 "/spec/parameters/{w}", "/spec/parameters/{w}/when/env.LR"},
                  f"the answer says what it hides: {m.get('hidden')}")
        api = openapi_checker()
        api.response("GET", "/sweeps/{id}", one, "alice's masked GET /sweeps/{id}")
        if one.status == 200:  # the spec alice was shown, submitted as hers: "<hidden>" is refused, not run
            again = t.post_sweep(t.alice, one.json()["spec"])
            errs = again.json().get("errors", []) if again.status == 400 else []
            check(any(e["pointer"] == "/parameters/env.K/min" and "give the number itself" in e["message"] for e in errs),
                  f"the masked spec posted back: 400 naming /parameters/env.K/min: {again.status} {again.body[:600]!r}")
            api.response("POST", "/sweeps", again, "alice posts the masked spec back")
            check([x["id"] for x in t.get(t.bob, "/sweeps").json()["sweeps"]] == [sid], "and no sweep of hers is stored")
        listed = t.get(t.alice, "/sweeps")
        api.response("GET", "/sweeps", listed, "alice's masked GET /sweeps")
        text = listed.body.decode()
        check(listed.status == 200 and not any(x in text for x in SECRETS),
              f"alice's GET /sweeps shows no secret: {[x for x in SECRETS if x in text]}")
        best = next((x for x in listed.json()["sweeps"] if x["id"] == sid), {}).get("best") or {}
        check(best.get("params") == {"env.LR": "<hidden>", "{w}": "<hidden>", "env.K": "<hidden>", "priority": -1},
              f"the list's best trial, hidden the same way: {best}")
        feed = sweep_events_text(t.server, t.alice, sid)
        check(feed and not any(x in feed for x in SECRETS), f"the live feed's sweep events hold no secret: "
              f"{[x for x in SECRETS if x in (feed or '')]}")
        trial_run = t.get(t.alice, f"/runs/{w['trials'][0]['run_id']}").body.decode()
        check(not any(x in trial_run for x in SECRETS), "and the trial's run, as runs are masked")


# ---- canceled_best ----

LINGER = ("import os, time, ddpd\n"
          "lr = float(os.environ['LR'])\n"
          "ddpd.log_epoch(0, val_acc=lr)\n"
          "ddpd.flush()\n"
          "if lr > 0.5:\n"
          "    time.sleep(120)\n"
          "    ddpd.log_epoch(1, val_acc=0.1)\n"
          "    ddpd.flush()\n")


def case_canceled_best(a):
    needs_root(a)
    with Accounts("alice", "bob") as acc, Team(a, acc) as t:
        body = {"name": "cb", "parallel": 2,
                "base": {"command": ["/usr/bin/python3", "-c", LINGER], "env": {"API_KEY": "sekrit-env-A1"},
                         "distributed": {"world_size": 1}},
                "parameters": {"env.LR": {"values": [0.3, 0.9]}},
                "metric": {"key": "val_acc", "goal": "maximize"}}
        r = t.post_sweep(t.alice, body)
        if not check(r.status == 201, f"alice's command sweep is taken: {r.status} {r.body[:400]!r}"):
            return
        sid = r.json()["id"]
        # trial 0 (0.3) succeeds; trial 1 reports 0.9 at epoch 0, then lingers
        ready = wait_until(lambda: (lambda w: w if w and len(w["trials"]) == 2 and w["trials"][0]["status"] == "succeeded"
                                    and w["trials"][1]["metric"] is not None else None)(sweep_of(t, t.alice, sid)),
                           "trial 0 to succeed and trial 1 to report", 180, interval=0.1)
        if not check(ready, "trial 0 succeeds and trial 1 reports its first epoch"):
            t.server.dump_log()
            return
        check(ready["best"]["trial"] == 0 and not ready["best"].get("last_reported"),
              f"while it runs, the best is the trial that succeeded: {ready['best']}")
        r = t.server.post(f"/sweeps/{sid}/cancel", headers=bearer(t.alice))
        check(r.status == 202, f"alice cancels it: {r.status} {r.body[:300]!r}")
        w = sweep_of(t, t.alice, sid)
        best = w["best"] or {}
        check(w["status"] == "canceled" and best.get("trial") == 1 and best.get("metric") == 0.9 and
              best.get("status") == "canceled" and best.get("last_reported") is True and
              best.get("params") == {"env.LR": 0.9} and best.get("config", {}).get("env", {}).get("LR") == "0.9",
              f"the canceled sweep's best is trial 1 by its last reported val_acc, marked so: {w['status']} {best}")
        api = openapi_checker()
        theirs = t.get(t.bob, f"/sweeps/{sid}")
        api.response("GET", "/sweeps/{id}", theirs, "bob's GET of alice's canceled sweep")
        seen = theirs.json() if theirs.status == 200 else {}
        sb = seen.get("best") or {}
        check(sb.get("trial") == 1 and sb.get("last_reported") is True and sb.get("params") == {"env.LR": "<hidden>"}
              and "sekrit-env-A1" not in theirs.body.decode() and
              (sb.get("config") or {}).get("env", {}).get("LR") == "<hidden>",
              f"bob sees the canceled best with alice's values hidden: {sb}")
        listed = t.get(t.bob, "/sweeps")
        lb = next((x for x in listed.json()["sweeps"] if x["id"] == sid), {}).get("best") or {}
        check(lb.get("trial") == 1 and lb.get("params") == {"env.LR": "<hidden>"},
              f"and in GET /sweeps, hidden the same way: {lb}")


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer")
    p.add_argument("--fake-trainer", required=True)
    p.add_argument("--runner", required=True)
    p.add_argument("--ddpctl")
    main(CASES, p.parse_args())
