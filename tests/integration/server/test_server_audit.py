#!/usr/bin/env python3
"""The audit log, end to end: a real ddpd on a loopback port, its users made with the
real `ddpd user` command, the stand-in trainer.

  each_action       every state-changing action and decision is an entry with its actor,
                    target, time and what changed: users added, set, given a new token,
                    removed (`ddpd user`, on the SQLite file); runs submitted, cancelled,
                    resumed (a resume refused with 409 too: the entry is written
                    before it acts), deleted; a restart and its reason; a preemption (preemptor,
                    victim) and the victim queued again; a sweep submitted and cancelled.
                    The server is killed with SIGKILL right after the last request is
                    answered: the next one has every entry
  who_reads_what    an admin reads every entry; a user those it made and those about
                    itself and its runs: bob asking for alice's entries gets none, nor
                    her runs'; without a token, 401; filters (actor, target, since) and
                    pages; a bad `since` is a 400 naming it; `ddpctl audit` prints
                    the table

Usage: test_server_audit.py CASE --ddpd PATH --fake-trainer PATH"""
import os, shutil, signal, subprocess, sys, tempfile, time

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, user, add_user, bearer  # noqa: E402


class Box:
    """A state directory of its own, with users made before the server starts."""

    def __init__(self, a):
        self.a = a
        self.dir = tempfile.mkdtemp(prefix="ddpd-audit-")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def server(self, reader, **kw):
        s = Server(self.a.ddpd, self.a.fake_trainer, state_dir=self.dir, **kw)
        s.read_headers = bearer(reader)
        return s


def submit_as(s, token, cfg):
    r = s.post("/runs", cfg, headers=bearer(token))
    check(r.status == 201, f"POST /runs -> 201: {r.status} {r.body[:300]!r}")
    return r.json()["id"] if r.status == 201 else None


def entries(s, token, query=""):
    r = s.get("/audit" + query, headers=bearer(token))
    check(r.status == 200, f"GET /audit{query} -> 200: {r.status} {r.body[:300]!r}")
    return r.json()["entries"] if r.status == 200 else []


def find(log, action, target, actor=None):
    return [e for e in log if e["action"] == action and e["target"] == target and (actor is None or e["actor"] == actor)]


def case_each_action(a):
    with Box(a) as box:
        alice = add_user(a.ddpd, box.dir, "alice")
        bob = add_user(a.ddpd, box.dir, "bob", "--max-priority", "5")
        root = add_user(a.ddpd, box.dir, "root", "--admin")
        code, _, err = user(a.ddpd, box.dir, "set", "alice", "--max-devices", "2")
        check(code == 0, f"ddpd user set alice: {err!r}")
        code, out, _ = user(a.ddpd, box.dir, "token", "bob")
        check(code == 0, "ddpd user token bob")
        bob = out.strip().splitlines()[-1]
        add_user(a.ddpd, box.dir, "carol")
        code, _, _ = user(a.ddpd, box.dir, "remove", "carol")
        check(code == 0, "ddpd user remove carol")
        code, _, _ = user(a.ddpd, box.dir, "add", "alice")
        check(code == 1, "alice twice is refused")
        s = box.server(root, slots=1)
        s.start()
        try:
            victim = submit_as(s, alice, {"name": "sleep", "preemptible": True, "distributed": {"max_restarts": 1}})
            run = s.wait_status(victim, "running", timeout=30)
            os.kill(run["pid"], signal.SIGKILL)  # its launcher dies: the server restarts it
            wait_until(lambda: s.run(victim)["status"] == "running" and s.run(victim)["pid"] != run["pid"],
                       "the victim restarted", timeout=30)
            # a quota changed while the server runs: `ddpd user`'s entry, then the server's as it sees it
            code, _, _ = user(a.ddpd, box.dir, "set", "alice", "--max-devices", "1")
            check(code == 0, "ddpd user set alice --max-devices 1, the server running")
            seen = wait_until(lambda: find(entries(s, root), "user.seen", "user/alice", "(server)"),
                              "the server's entry of the change it sees", timeout=30)
            check(seen and seen[0]["detail"] == {"max_devices": {"from": 2, "to": 1}} and seen[0]["subject"] == "alice",
                  f"the server saw alice's quota go from 2 to 1: {seen}")
            urgent = submit_as(s, bob, {"name": "sleep", "priority": 5})
            s.wait_status(urgent, "running", timeout=30)
            check(s.run(victim)["status"] == "queued", "the victim was preempted and waits")
            check(s.post(f"/runs/{urgent}/cancel", headers=bearer(bob)).status == 202, "bob cancels his run")
            s.wait_status(urgent, "canceled", timeout=30)
            s.wait_status(victim, "running", timeout=30)
            check(s.post(f"/runs/{victim}/cancel", headers=bearer(alice)).status == 202, "alice cancels hers")
            s.wait_status(victim, "canceled", timeout=30)
            # written before it acts: a resume the run cannot have (no checkpoint) has its entry too
            r = s.post(f"/runs/{victim}/resume", headers=bearer(root))
            check(r.status == 409 and "no checkpoint" in r.json().get("detail", ""),
                  f"the admin's resume is refused: no checkpoint: {r.status} {r.body[:200]!r}")
            sweep = {"name": "sw", "base": {"name": "sleep"}, "parallel": 1,
                     "parameters": {"seed": {"values": [1, 2]}}, "metric": {"key": "test_loss"}}
            r = s.post("/sweeps", sweep, headers=bearer(alice))
            check(r.status == 201, f"alice's sweep: {r.status} {r.body[:300]!r}")
            sid = r.json()["id"] if r.status == 201 else 0
            check(s.post(f"/sweeps/{sid}/cancel", headers=bearer(alice)).status == 202, "she cancels it")
            # the last request answered, the server dies at once: no clean shutdown writes anything
            check(s.request("DELETE", f"/runs/{urgent}", headers=bearer(bob)).status == 204, "bob deletes his run")
            s.kill()
        finally:
            s.stop()
        with box.server(root, slots=1) as s2:
            log = entries(s2, root, "?limit=5000")
            print("\n".join(f"  {e['t']} {e['actor']:<28} {e['action']:<14} {e['target']:<12} {e['detail']}"
                            for e in log))
            cli = [e for e in log if e["actor"].startswith("(ddpd user: ")]
            want_users = [("user.add", "user/alice"), ("user.add", "user/bob"), ("user.add", "user/root"),
                          ("user.set", "user/alice"), ("user.token", "user/bob"), ("user.add", "user/carol"),
                          ("user.remove", "user/carol"), ("user.set", "user/alice")]
            check([(e["action"], e["target"]) for e in cli] == want_users,
                  f"`ddpd user`'s changes, in order, the refused one not among them: {[(e['action'], e['target']) for e in cli]}")
            setting = find(log, "user.set", "user/alice")
            check(setting and setting[0]["detail"] == {"max_devices": {"from": None, "to": 2}},
                  f"what `ddpd user set` changed, from and to: {setting}")
            check(all(e["subject"] == e["target"].split("/")[1] for e in cli), "a user's entries are about that user")
            vt, ut = f"run/{victim}", f"run/{urgent}"
            sub = find(log, "run.submit", vt, "alice")
            check(sub and sub[0]["run"] == victim and sub[0]["subject"] == "alice" and sub[0]["detail"].get("name") == "sleep",
                  f"alice's submission, by her, about her run: {sub}")
            check(find(log, "run.submit", ut, "bob"), "bob's submission")
            restart = find(log, "run.restart", vt, "(server)")
            check(restart and restart[0]["detail"].get("attempt") == 1 and restart[0]["detail"].get("reason"),
                  f"the restart, the server's decision, with its attempt and reason: {restart}")
            pre = find(log, "run.preempt", vt, "(server)")
            check(pre and pre[0]["detail"].get("preemptor") == urgent and pre[0]["detail"].get("preemptor_owner") == "bob"
                  and pre[0]["subject"] == "alice", f"the preemption: victim {victim}, preemptor {urgent}: {pre}")
            check(find(log, "run.requeue", vt, "(server)"), "the victim queued again after it")
            check(find(log, "run.cancel", ut, "bob") and find(log, "run.cancel", vt, "alice"), "each cancel, by whom")
            check(find(log, "run.resume", vt, "root"), "the resume, by the admin")
            check(find(log, "sweep.submit", f"sweep/{sid}", "alice") and find(log, "sweep.cancel", f"sweep/{sid}", "alice"),
                  "the sweep submitted and cancelled")
            trials = [e for e in log if e["action"] == "run.submit" and e["detail"].get("sweep_id") == sid]
            check(all(e["actor"] == "alice" for e in trials), f"its trials are alice's submissions: {trials}")
            check(find(log, "run.delete", ut, "bob"), "bob's delete, written before it acted, is there after the SIGKILL")
            order = [e["action"] for e in log if e["target"] == vt]
            check(order.index("run.submit") < order.index("run.restart") < order.index("run.preempt")
                  < order.index("run.requeue") < order.index("run.resume"), f"the run's entries in order: {order}")
            ts = [e["t"] for e in log]
            check(ts == sorted(ts) and all(t.endswith("Z") for t in ts), "times, in order, ISO 8601")


def case_who_reads_what(a):
    with Box(a) as box:
        alice = add_user(a.ddpd, box.dir, "alice")
        bob = add_user(a.ddpd, box.dir, "bob")
        root = add_user(a.ddpd, box.dir, "root", "--admin")
        with box.server(root, slots=2) as s:
            mine = submit_as(s, alice, {"name": "steps-5"})
            theirs = submit_as(s, bob, {"name": "steps-5"})
            s.wait_status(mine, "succeeded", timeout=30)
            s.wait_status(theirs, "succeeded", timeout=30)
            check(s.post(f"/runs/{theirs}/cancel", headers=bearer(alice)).status == 403, "alice may not cancel bob's")
            check(s.request("DELETE", f"/runs/{mine}", headers=bearer(root)).status == 204, "the admin deletes alice's")
            everything = entries(s, root)
            check(len(everything) >= 6, f"the admin reads every entry: {len(everything)}")
            # bob: what he did, and what is about him or his runs; nothing of alice's
            check(entries(s, bob, "?actor=alice") == [], "bob asking for alice's entries gets none")
            check(entries(s, bob, f"?target=run/{mine}") == [], "nor those of her run")
            check(entries(s, bob, "?target=user/alice") == [], "nor those of her account")
            bobs = entries(s, bob)
            check(bobs and all(e["actor"] == "bob" or e["subject"] == "bob" for e in bobs),
                  f"bob reads only his: {[(e['actor'], e['action'], e['target']) for e in bobs]}")
            check(find(bobs, "user.add", "user/bob") and find(bobs, "run.submit", f"run/{theirs}"),
                  "his account's entry and his run's")
            hers = entries(s, alice)
            check(find(hers, "run.delete", f"run/{mine}", "root"), "alice sees the admin deleting her run")
            check(not find(hers, "run.submit", f"run/{theirs}"), "not bob's submission")
            check(not any(e["action"] == "run.cancel" for e in everything), "a refused cancel is no entry")
            r = s.get("/audit", anonymous=True)
            check(r.status == 401, f"without a token: 401 ({r.status})")
            # filters and pages
            by_actor = entries(s, root, "?actor=bob")
            check(by_actor and all(e["actor"] == "bob" for e in by_actor), "actor=")
            later = entries(s, root, "?since=" + everything[-1]["t"])
            check(later and all(e["t"] >= everything[-1]["t"] for e in later), f"since= (ISO 8601): {later}")
            check(entries(s, root, f"?since={int(time.time()) + 3600}") == [], "since= (unix seconds) in the future: none")
            page = s.get("/audit?limit=2", headers=bearer(root)).json()
            nxt = s.get(f"/audit?limit=2&after={page['next_after']}", headers=bearer(root)).json()
            check(len(page["entries"]) == 2 and page["next_after"] == page["entries"][-1]["id"] and
                  nxt["entries"][0]["id"] > page["next_after"], f"pages: {page} then {nxt}")
            # ddpctl audit: the same, as a table
            ddpctl = os.path.join(os.path.dirname(a.ddpd), "ddpctl")
            url = f"http://127.0.0.1:{s.port}"
            p = subprocess.run([ddpctl, "--server", url, "--token", alice, "audit", "--actor", "root"],
                               capture_output=True, text=True, timeout=30)
            print(p.stdout)
            check(p.returncode == 0 and p.stdout.split("\n")[0].split() == ["TIME", "ACTOR", "ACTION", "TARGET", "DETAIL"]
                  and f"root" in p.stdout and f"run/{mine}" in p.stdout and "run.delete" in p.stdout,
                  f"ddpctl audit --actor root, as alice: {p.returncode} {p.stdout!r} {p.stderr!r}")
            p = subprocess.run([ddpctl, "--server", url, "--token", bob, "audit", "--actor", "alice"],
                               capture_output=True, text=True, timeout=30)
            check(p.returncode == 0 and p.stdout.strip() == "no entries", f"bob's ddpctl audit --actor alice: {p.stdout!r}")
            p = subprocess.run([ddpctl, "--server", url, "--token", bob, "audit", "--since", "later"],
                               capture_output=True, text=True, timeout=30)
            check(p.returncode == 4 and "since" in p.stderr, f"a bad --since: refused, naming it: {p.returncode} {p.stderr!r}")
            r = s.get("/audit?since=yesterday", headers=bearer(root))
            check(r.status == 400 and "since" in r.json().get("detail", ""), f"a bad since: 400 naming it: {r.body[:200]!r}")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
