#!/usr/bin/env python3
"""Who may read what, on a real ddpd on a loopback port with users made by the real
`ddpd user` command.

  reads_need_token      with users, every read route (runs, a run, its metrics, epochs,
                        ranks, checkpoints, logs, its events, /events, /queue, /users,
                        /users/me, /metrics, /nodes) answers 401 without a token or with
                        one nobody has, saying what to send and how to get one; 200 with
                        any user's token and with the server's; the event streams take
                        the token as ?access_token= too (an EventSource sends no header),
                        other routes do not, and the server's log never shows it;
                        /healthz, the dashboard's files and /openapi.json stay open; a
                        user added while the server runs reads at once, a removed one
                        stops within a tick
  open_without_users    a server without users reads as before, anonymous, with a token
                        of its own or without; its first user closes reads (within a tick)
  open_reads_flag       --open-reads: anybody reads again on a server with users, and
                        the start-up says so; changing still needs a token, and a command
                        run's env values and arguments stay hidden from anybody
  env_hidden            GET /runs/{id} of a command run: its env values and command
                        arguments for its owner, an admin and the server's token; the
                        names, the program and "hidden" for another user (never the
                        values, not from the cache, not by another's ETag)
  reads_own_runs        checkpoint.load and working_dir inside another user's run are
                        refused at submission (403 naming its owner), through a symlink
                        too, and from a run with no owner; the runs directory itself too;
                        the submitter's own run and an admin's submission pass that check

Usage: test_server_reads.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import http.client, json, os, sys

from ddpd_harness import check, cases_in, wait_until, args_for, main  # noqa: E402
from test_server_sharing import Box, bearer, problem, submit_as, user  # noqa: E402

SERVER_TOKEN = "s" * 32


def read_routes(rid):
    return ["/runs", f"/runs/{rid}", f"/runs/{rid}/metrics", f"/runs/{rid}/epochs", f"/runs/{rid}/ranks",
            f"/runs/{rid}/checkpoints", f"/runs/{rid}/logs", "/queue", "/users", "/users/me", "/metrics", "/nodes"]


def open_routes(rid):
    """What anybody reads where reads are open (/users/me asks who the token is: none is nobody)."""
    return [p for p in read_routes(rid) if p != "/users/me"]


def stream_routes(rid):
    return ["/events", f"/runs/{rid}/events"]


def open_stream(s, path, headers=None):
    """An event stream's status (its headers come at once; the stream is then left)."""
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    status, detail = r.status, ""
    if status != 200:
        detail = json.loads(r.read() or b"{}").get("detail", "")
    conn.close()
    return status, detail


def says_what_to_do(r, what):
    """A 401 that names the header to send and how to get a token."""
    detail = r.json().get("detail", "") if r.body else ""
    check(r.status == 401 and "Authorization: Bearer" in detail and "ddpd user add" in detail,
          f"{what}: 401 naming the header and how to get a token: {r.status} {detail!r}")
    check((r.header("WWW-Authenticate") or "").startswith("Bearer"), f"{what}: WWW-Authenticate: Bearer")


def finished_run(s, token, name="steps-5"):
    rid = submit_as(s, token, {"name": name})
    s.wait_status(rid, "succeeded", timeout=60)
    return rid


# ---- reads need a token once there are users ----

def case_reads_need_token(a):
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        code, out, _ = user(a.ddpd, box.dir, "add", "root", "--admin")
        root = out.strip().splitlines()[-1]
        with box.server(env={"DDPD_TOKEN": SERVER_TOKEN}) as s:
            s.read_headers = bearer(alice)
            rid = finished_run(s, alice)
            for path in read_routes(rid):
                says_what_to_do(s.get(path, anonymous=True), f"GET {path} without a token")
                r = s.request("HEAD", path, anonymous=True)
                check(r.status == 401, f"HEAD {path} without a token: 401, got {r.status}")
                problem(s.get(path, headers=bearer("f" * 64), anonymous=True), 401, "not one this server knows",
                        f"GET {path} with a token nobody has")
                for who, token in (("bob (not the run's owner)", bob), ("an admin", root),
                                   ("the server's token", SERVER_TOKEN)):
                    r = s.get(path, headers=bearer(token), anonymous=True)
                    check(r.status == 200, f"GET {path} as {who}: 200, got {r.status} {r.body[:200]!r}")
            for path in stream_routes(rid):
                status, detail = open_stream(s, path)
                check(status == 401 and "Authorization: Bearer" in detail, f"{path} without a token: 401 {detail!r}")
                check(open_stream(s, path, bearer(bob))[0] == 200, f"{path} with bob's token in the header: 200")
                check(open_stream(s, f"{path}?access_token={bob}")[0] == 200,
                      f"{path}?access_token=bob's token: 200 (what the dashboard's EventSource sends)")
                check(open_stream(s, f"{path}?access_token={'f' * 64}")[0] == 401, f"{path} with a bad access_token")
            r = s.get(f"/runs?access_token={bob}", anonymous=True)
            check(r.status == 401, f"?access_token= is for the event streams only: GET /runs with it -> {r.status}")
            for path in ("/healthz", "/", "/ui/app.js", "/openapi.json", "/schema/run-config.schema.json",
                         "/schema/sweep.schema.json", "/sweep.schema.json"):
                r = s.get(path, anonymous=True)
                check(r.status == 200, f"GET {path} stays open: {r.status}")
            # a user added while the server runs reads at once; a removed one stops
            carol = box.add("carol")
            r = s.get("/runs", headers=bearer(carol), anonymous=True)
            check(r.status == 200, f"carol, added while the server runs, reads at once: {r.status}")
            code, _, _ = user(a.ddpd, box.dir, "remove", "carol")
            check(code == 0, "ddpd user remove carol")
            wait_until(lambda: s.get("/runs", headers=bearer(carol), anonymous=True).status == 401,
                       "carol's token stops reading once she is removed")
            with open(s.log_path, errors="replace") as f:
                log = f.read()
            check(bob not in log and "access_token" not in log,
                  "the server's log never shows a token sent as ?access_token=")


def case_open_without_users(a):
    with Box(a) as box:
        with box.server() as s:
            rid = s.submit({"name": "steps-5"})
            s.wait_status(rid, "succeeded", timeout=60)
            for path in read_routes(rid):  # anybody is an admin there: /users/me too
                r = s.get(path, anonymous=True)
                check(r.status == 200, f"no users: GET {path} without a token: 200, got {r.status}")
            check(open_stream(s, f"/runs/{rid}/events")[0] == 200, "no users: an event stream without a token")
        with box.server(env={"DDPD_TOKEN": SERVER_TOKEN}) as s:
            for path in open_routes(rid):
                r = s.get(path, anonymous=True)
                check(r.status == 200, f"a token but no users: GET {path} without one: 200, got {r.status}")
            problem(s.post("/runs", {"name": "steps-5"}, anonymous=True), 401, "needs its token",
                    "a token but no users: changing still needs it")
            box.add("alice")  # the first user, while the server runs: reads close
            wait_until(lambda: s.get("/runs", anonymous=True).status == 401,
                       "once there is a user, reading needs a token (within a tick)")
            says_what_to_do(s.get(f"/runs/{rid}", anonymous=True), "a read after the first user")


def case_open_reads_flag(a):
    with Box(a) as box:
        alice = box.add("alice")
        with box.server(extra_args=["--open-reads", "--allow-commands"]) as s:
            rid = finished_run(s, alice)
            for path in open_routes(rid):
                r = s.get(path, anonymous=True)
                check(r.status == 200, f"--open-reads: GET {path} without a token: 200, got {r.status}")
            check(open_stream(s, f"/runs/{rid}/events")[0] == 200, "--open-reads: an event stream without a token")
            problem(s.post("/runs", {"name": "steps-5"}, anonymous=True), 401, "this server has users",
                    "--open-reads: changing still needs a token")
            cmd = submit_as(s, alice, {"name": "cmd", "command": ["true", "--key=ARG-SECRET"],
                                       "env": {"API_KEY": "ENV-SECRET"}})
            r = s.get(f"/runs/{cmd}", anonymous=True)
            check(r.status == 200 and b"SECRET" not in r.body and r.json().get("hidden"),
                  f"--open-reads: a command run's env values and arguments stay hidden from anybody: {r.body[:400]!r}")
            s.wait_status(cmd, ("succeeded", "failed"), timeout=60)
            with open(s.log_path, errors="replace") as f:
                log = f.read()
            check("--open-reads: anybody who can reach" in log, "the start-up says reads are open")


# ---- what of a run another user sees ----

def case_env_hidden(a):
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        code, out, _ = user(a.ddpd, box.dir, "add", "root", "--admin")
        root = out.strip().splitlines()[-1]
        with box.server(env={"DDPD_TOKEN": SERVER_TOKEN}, extra_args=["--allow-commands"]) as s:
            cfg = {"name": "cmd", "command": ["true", "--api-key=ARG-SECRET-1", "plain"],
                   "env": {"API_KEY": "ENV-SECRET-1", "OTHER": "x"}}
            rid = submit_as(s, alice, cfg)
            s.wait_status(rid, ("succeeded", "failed"), timeout=60)
            for who, token in (("alice, its owner", alice), ("an admin", root), ("the server's token", SERVER_TOKEN)):
                r = s.get(f"/runs/{rid}", headers=bearer(token))
                c = r.json()["config"] if r.status == 200 else {}
                check(c.get("env") == cfg["env"] and c.get("command") == cfg["command"] and "hidden" not in r.json(),
                      f"{who} sees the env values and the command line: {r.status} {c}")
            mine = s.get(f"/runs/{rid}", headers=bearer(alice)).header("ETag")
            for attempt in ("built", "from the cache"):
                r = s.get(f"/runs/{rid}", headers=bearer(bob))
                c = r.json()["config"] if r.status == 200 else {}
                check(r.status == 200 and c.get("env") == {"API_KEY": "<hidden>", "OTHER": "<hidden>"},
                      f"bob ({attempt}): the env's names, not its values: {c.get('env')}")
                check(c.get("command") == ["true", "<hidden>", "<hidden>"],
                      f"bob ({attempt}): the program and how many arguments, not what they are: {c.get('command')}")
                check(r.json().get("hidden") == ["/config/env", "/config/command"],
                      f"bob ({attempt}): the answer says what is hidden: {r.json().get('hidden')}")
                check(b"SECRET-1" not in r.body, f"bob ({attempt}): no value anywhere in the answer")
            theirs = r.header("ETag")
            check(theirs and mine and theirs != mine, f"bob's answer has a tag of its own: {theirs} vs {mine}")
            r = s.get(f"/runs/{rid}", headers=dict(bearer(bob), **{"If-None-Match": mine}))
            check(r.status == 200 and b"SECRET-1" not in r.body, f"bob sending alice's tag gets his own answer: {r.status}")
            r = s.get(f"/runs/{rid}", headers=dict(bearer(bob), **{"If-None-Match": theirs}))
            check(r.status == 304, f"bob's own tag: 304, got {r.status}")
            builtin = finished_run(s, alice)
            r = s.get(f"/runs/{builtin}", headers=bearer(bob))
            check(r.status == 200 and "hidden" not in r.json() and r.json()["config"].get("name") == "steps-5",
                  f"a built-in run hides nothing: {r.body[:200]!r}")


# ---- what a run may read of other runs ----

def refused(r, pointer, words, what):
    errors = r.json().get("errors", []) if r.body else []
    first = errors[0] if errors else {}
    check(r.status == 403 and first.get("pointer") == pointer and words in first.get("message", ""),
          f"{what}: 403 at {pointer} with \"{words}\": {r.status} {r.body[:400]!r}")


def not_refused_for_whose(r, what):
    text = r.body.decode(errors="replace")
    check(r.status != 403 and "submitter" not in text and "no owner" not in text,
          f"{what}: not refused for whose run it is: {r.status} {text[:300]!r}")


def case_reads_own_runs(a):
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        code, out, _ = user(a.ddpd, box.dir, "add", "root", "--admin")
        root = out.strip().splitlines()[-1]
        # the state dir as a work root: a working_dir could then name a run's directory
        with box.server(env={"DDPD_TOKEN": SERVER_TOKEN},
                        extra_args=["--allow-commands", "--work-root", box.dir]) as s:
            hers = finished_run(s, alice)
            ckpt_dir = os.path.join(s.run_dir(hers), "checkpoints")
            os.makedirs(ckpt_dir, exist_ok=True)
            with open(os.path.join(ckpt_dir, "epoch-0001.safetensors"), "wb") as f:
                f.write(b"not a checkpoint")
            load = {"name": "steps-5", "checkpoint": {"load": f"{hers}/checkpoints/epoch-0001.safetensors"}}
            r = s.post("/runs", load, headers=bearer(bob))
            refused(r, "/checkpoint/load", f"run {hers}, which is alice's", "bob loads alice's checkpoint")
            check(r.status == 403 and "bob may not submit this run" in r.json().get("detail", ""),
                  f"the detail names who may not: {r.body[:300]!r}")
            for who, token in (("alice, its owner", alice), ("an admin", root), ("the server's token", SERVER_TOKEN)):
                not_refused_for_whose(s.post("/runs", load, headers=bearer(token)), f"{who} loads it")
            r = s.post("/runs", {"name": "cmd", "command": ["true"], "working_dir": f"runs/{hers}"}, headers=bearer(bob))
            refused(r, "/working_dir", f"run {hers}, which is alice's", "bob works in alice's run directory")
            r = s.post("/runs", {"name": "cmd", "command": ["true"], "working_dir": "runs"}, headers=bearer(bob))
            refused(r, "/working_dir", "into no run of bob's", "bob works in the runs directory itself")
            # his own run: fine; a symlink he leaves in it into hers is not
            his = submit_as(s, bob, {"name": "cmd", "command": ["true"]})
            s.wait_status(his, ("succeeded", "failed"), timeout=60)
            r = s.post("/runs", {"name": "cmd", "command": ["true"], "working_dir": f"runs/{his}"}, headers=bearer(bob))
            check(r.status == 201, f"bob works in his own run's directory: {r.status} {r.body[:300]!r}")
            if r.status == 201:
                s.wait_status(r.json()["id"], ("succeeded", "failed"), timeout=60)
            os.symlink(s.run_dir(hers), os.path.join(s.run_dir(his), "peek"))
            r = s.post("/runs", {"name": "steps-5", "checkpoint": {"load": f"{his}/peek/checkpoints/epoch-0001.safetensors"}},
                       headers=bearer(bob))
            refused(r, "/checkpoint/load", f"run {hers}, which is alice's", "through a symlink in his own run")
            # a run of no owner (the server's token's) is an admin's to read
            tokens = s.post("/runs", {"name": "steps-5"}, headers=bearer(SERVER_TOKEN)).json()["id"]
            s.wait_status(tokens, "succeeded", timeout=60)
            r = s.post("/runs", {"name": "cmd", "command": ["true"], "working_dir": f"runs/{tokens}"}, headers=bearer(bob))
            refused(r, "/working_dir", "which has no owner", "bob works in a run of no owner")


if __name__ == "__main__":
    cases = cases_in(globals())
    main(cases, args_for(cases))
