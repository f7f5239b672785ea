#!/usr/bin/env python3
"""GET /runs's filters and pages, on a real server with users, against its database.

  filters      alice's and bob's runs (running, queued, canceled; names of two
               prefixes; a sweep's trials; created across a moment): each filter and
               combinations of them (status, owner, name prefix, sweep_id, since,
               until), paged through to the end by following "next" with small
               pages, give exactly the ids the database holds for them, newest
               first, and "next" keeps every filter; an unknown owner, name or sweep
               gives no runs.
  bad_filters  each bad value is a 400 whose detail names its parameter: a status
               that is none, a sweep_id or before or limit that is no number or out
               of bounds, a since or until that is no time, a window that ends before
               it starts, an owner or name too long or with a control character.

Usage: test_server_lists.py CASE --ddpd PATH --fake-trainer PATH"""
import os, shutil, sqlite3, sys, tempfile, time, urllib.parse
from datetime import datetime, timezone

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, add_user, bearer  # noqa: E402


def submit_as(s, token, cfg):
    r = s.post("/runs", cfg, headers=bearer(token))
    check(r.status == 201, f"POST /runs -> 201: {r.status} {r.body[:300]!r}")
    return r.json()["id"] if r.status == 201 else None


def iso(ms):
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def paged(s, token, query, limit):
    """Every id GET /runs?query gives, following next with pages of `limit`; and the nexts."""
    ids, nexts = [], []
    url = f"/runs?limit={limit}" + (f"&{query}" if query else "")
    for _ in range(1000):
        r = s.get(url, headers=bearer(token))
        check(r.status == 200, f"GET {url} -> 200: {r.status} {r.body[:300]!r}")
        if r.status != 200:
            break
        page = r.json()
        ids += [run["id"] for run in page["runs"]]
        check(len(page["runs"]) <= limit, f"{url}: at most {limit} runs")
        if not page["next"]:
            break
        nexts.append(page["next"])
        url = page["next"]
    return ids, nexts


def expected(db_path, where, args):
    db = sqlite3.connect(db_path)
    try:
        return [r[0] for r in db.execute(f"SELECT id FROM runs WHERE {where} ORDER BY id DESC", args)]
    finally:
        db.close()


def case_filters(a):
    base = tempfile.mkdtemp(prefix="ddpd-lists-")
    try:
        alice = add_user(a.ddpd, base, "alice")
        bob = add_user(a.ddpd, base, "bob")
        s = Server(a.ddpd, a.fake_trainer, slots=1, state_dir=base)
        s.read_headers = bearer(alice)
        with s:
            token_of = {}
            holder = submit_as(s, alice, {"name": "sleep"})  # holds the one slot: the rest stay queued
            s.wait_status(holder, "running", timeout=30)
            early = []
            for i in range(6):
                who = alice if i % 2 else bob
                early.append(submit_as(s, who, {"name": "resnet-small" if i % 3 else "mnist-a"}))
                token_of[early[-1]] = who
            time.sleep(0.05)
            db_path = os.path.join(base, "ddpd.db")
            moment = max(r[0] for r in sqlite3.connect(db_path).execute("SELECT created_at FROM runs")) + 1
            time.sleep(0.05)
            late = []
            for i in range(7):
                who = bob if i % 3 else alice
                late.append(submit_as(s, who, {"name": "mnist-b" if i % 2 else "resnet-large"}))
                token_of[late[-1]] = who
            for rid in early[:2] + late[:3]:
                check(s.post(f"/runs/{rid}/cancel", headers=bearer(token_of[rid])).status in (200, 202),
                      f"run {rid} canceled")
                s.wait_status(rid, "canceled", timeout=30)
            sweep = {"name": "sw", "base": {"name": "sleep"}, "parallel": 2,
                     "parameters": {"seed": {"values": [1, 2, 3]}}, "metric": {"key": "test_loss"}}
            r = s.post("/sweeps", sweep, headers=bearer(alice))
            check(r.status == 201, f"alice's sweep: {r.status} {r.body[:300]!r}")
            sid = r.json()["id"] if r.status == 201 else 0
            # parallel 2: two trials, queued behind the holder (no third until one ends)
            trials = wait_until(lambda: len(expected(db_path, "sweep_id = ?", (sid,))) == 2 or None, "the sweep's 2 trials",
                                timeout=30)
            check(trials, f"the sweep has its 2 trials: {expected(db_path, 'sweep_id = ?', (sid,))}")

            cases = [
                ("", "1", ()),
                ("status=queued", "status = 'queued'", ()),
                ("status=canceled,running", "status IN ('canceled', 'running')", ()),
                ("owner=bob", "owner = 'bob'", ()),
                ("owner=alice&status=queued", "owner = 'alice' AND status = 'queued'", ()),
                ("name=mnist-", "name LIKE 'mnist-%'", ()),
                ("name=resnet-l", "name LIKE 'resnet-l%'", ()),
                ("name=mnist-&owner=bob&status=queued,canceled",
                 "name LIKE 'mnist-%' AND owner = 'bob' AND status IN ('queued', 'canceled')", ()),
                (f"sweep_id={sid}", "sweep_id = ?", (sid,)),
                (f"sweep_id={sid}&owner=alice", "sweep_id = ? AND owner = 'alice'", (sid,)),
                (f"since={urllib.parse.quote(iso(moment))}", "created_at >= ?", (moment,)),
                (f"until={urllib.parse.quote(iso(moment))}", "created_at < ?", (moment,)),
                (f"since={urllib.parse.quote(iso(moment))}&status=queued&owner=bob",
                 "created_at >= ? AND status = 'queued' AND owner = 'bob'", (moment,)),
                (f"until={urllib.parse.quote(iso(moment))}&name=resnet-", "created_at < ? AND name LIKE 'resnet-%'",
                 (moment,)),
                ("owner=nobody", "0", ()),
                ("name=zzz", "0", ()),
                ("sweep_id=999999", "0", ()),
            ]
            for query, where, args in cases:
                want = expected(db_path, where, args)
                for limit in (2, 50):
                    got, nexts = paged(s, alice, query, limit)
                    check(got == want, f"GET /runs?{query} (pages of {limit}): {got} vs the database's {want}")
                    for n in nexts:
                        kept = urllib.parse.parse_qs(urllib.parse.urlparse(n).query)
                        given = urllib.parse.parse_qs(query)
                        check(all(kept.get(k) == v for k, v in given.items()), f"next keeps the filters {query}: {n}")
            check(expected(db_path, "name LIKE 'mnist-%'", ()) and expected(db_path, "created_at >= ?", (moment,)),
                  "the filters above are not all empty")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def case_bad_filters(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        for query, param in [("status=done", "status"), ("sweep_id=abc", "sweep_id"), ("sweep_id=0", "sweep_id"),
                             ("before=-3", "before"), ("limit=5000", "limit"), ("since=yesterday", "since"),
                             ("until=2026-13-40", "until"),
                             ("since=2026-12-07&until=2026-12-01", "since"),
                             ("owner=" + "x" * 65, "owner"), ("name=" + "n" * 201, "name"),
                             ("name=a%01b", "name"), ("owner=b%0Ab", "owner")]:
            r = s.get(f"/runs?{query}")
            detail = r.json().get("detail", "") if r.status == 400 else ""
            check(r.status == 400 and param in detail, f"GET /runs?{query[:40]}: 400 naming {param}: {r.status} {detail!r}")


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
