#!/usr/bin/env python3
"""Integration tests of ddpd's cheap reads against a real server on a loopback port:
GET /runs/{id} answers from a per-run cache while the run is unchanged, both it and
GET /runs carry an ETag that changes exactly when the store writes something about
the run (the store, for the list), and If-None-Match with the current tag gets 304
with no body.

The runs are the fake trainer's `hold` script: it says hello and falls silent,
leaving its event socket and secret in hold.json, so that this test sends the run's
events itself, one at a time, and knows that nothing else writes about the run in
between. Every answer is held against the database itself (SQLite, read-only), and
at the end against a fresh server's answers for the same database.

Usage: test_server_cached_reads.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import json, os, re, shutil, sqlite3, sys, tempfile, time
from datetime import datetime, timezone

from ddpd_harness import cases_in, Server, check, wait_until, args_for, main  # noqa: E402
from fake_trainer import Conn  # noqa: E402

HOLD = {"name": "hold", "distributed": {"world_size": 1}}
ETAG = re.compile(r'^"[^"]+"$')


def iso(ms):
    if ms is None or ms == 0:
        return None
    return datetime.fromtimestamp(ms // 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def db_run(s, rid):
    """The run as the database holds it, in the answer's shape (the fields stored as
    they are; progress's derived fields, fraction and eta, are left out); None when
    there is no such run."""
    db = sqlite3.connect(f"file:{os.path.join(s.state_dir, 'ddpd.db')}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()
        if row is None:
            return None
        ckpts = db.execute("SELECT epoch, global_step, path, bytes, t FROM checkpoints WHERE run_id = ?"
                           " ORDER BY global_step", (rid,)).fetchall()
    finally:
        db.close()
    return {
        "id": row["id"], "name": row["name"], "status": row["status"], "reason": row["reason"],
        "world_size": row["world_size"], "device_kind": row["device_kind"],
        "devices": json.loads(row["devices"]) if row["devices"] else [], "pid": row["pid"],
        "exit_code": row["exit_code"], "exit_signal": row["exit_signal"], "created_at": iso(row["created_at"]),
        "started_at": iso(row["started_at"]), "finished_at": iso(row["finished_at"]),
        "config": json.loads(row["config"]),
        "progress": {k: row[k] for k in ("epoch", "epochs", "step", "global_step", "total_steps", "loss", "lr",
                                         "samples_per_s")},
        "checkpoints": [{"epoch": c["epoch"], "global_step": c["global_step"], "path": c["path"], "bytes": c["bytes"],
                         "created_at": iso(c["t"])} for c in ckpts],
    }


def matches_db(s, rid, answer, what):
    """The answer (a JSON body) shows what the database holds."""
    want = db_run(s, rid)
    if not check(want is not None, f"{what}: run {rid} is in the database"):
        return False
    got = dict(answer)
    got["progress"] = {k: answer.get("progress", {}).get(k) for k in want["progress"]}
    got.pop("queue_position", None)
    diff = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    return check(not diff, f"{what}: the answer is what the database holds; differs (answer, database): {diff}")


def get_run(s, rid, **kw):
    r = s.get(f"/runs/{rid}", **kw)
    if r.status == 200:
        check(ETAG.match(r.header("ETag") or "") is not None, f"GET /runs/{rid}: a quoted ETag: {r.header('ETag')}")
        check(r.header("Cache-Control") == "no-cache", f"GET /runs/{rid}: kept, revalidated: {r.header('Cache-Control')}")
    return r


def settled(s, path):
    """(ETag, body) of `path` once three answers in a row agree: what is in flight
    (a commit whose version is not bumped yet) has landed."""
    last = []

    def agree():
        r = s.get(path)
        last.append((r.status, r.header("ETag"), r.body))
        if len(last) >= 3 and len(set(last[-3:])) == 1:
            return last[-1]
        time.sleep(0.05)
        return None

    got = wait_until(agree, f"{path} to settle", timeout=30, interval=0)
    return (got[1], got[2]) if got else (None, None)


def steady(s, path, tag, body, what, n=5):
    """With nothing sent, the tag and the body stay as they are."""
    seen = set()
    for _ in range(n):
        r = s.get(path)
        seen.add((r.status, r.header("ETag"), r.body))
        time.sleep(0.05)
    return check(seen == {(200, tag, body)}, f"{what}: with no event, {path} keeps its tag {tag} and body "
                                             f"(saw {len(seen)} different answers: {[x[1] for x in seen]})")


def metric(s, name, **labels):
    text = s.get("/metrics").body.decode()
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return None


class Trainer:
    """The test speaking for a `hold` run's rank 0 over the event socket."""

    def __init__(self, s, rid):
        info = wait_until(lambda: self._read(os.path.join(s.run_dir(rid), "hold.json")),
                          f"run {rid}'s trainer to write hold.json", timeout=60)
        self.conn = Conn(info["events"], info["run"], 0)
        self.conn.hello(info["secret"], epochs=3, steps_per_epoch=10, total_steps=30)

    @staticmethod
    def _read(path):
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def send(self, type_, **fields):
        self.conn.send(self.conn.ev(type_, **fields))

    def close(self):
        self.conn.close()


def changed(s, rid, old_tag, pred, what):
    """Waits for run rid's answer to carry a new tag and show `pred`; then checks it
    against the database and that the old tag no longer gets a 304."""
    def new():
        r = get_run(s, rid)
        return r if r.status == 200 and r.header("ETag") != old_tag and pred(r.json()) else None

    r = wait_until(new, f"run {rid}: a new ETag after {what}", timeout=30)
    if not r:
        return None
    tag, body = settled(s, f"/runs/{rid}")
    matches_db(s, rid, json.loads(body), f"after {what}")
    r2 = get_run(s, rid, headers={"If-None-Match": old_tag})
    check(r2.status == 200 and r2.body == body and r2.header("ETag") == tag,
          f"after {what}: the old tag gets 200 with the new body and tag: {r2.status} {r2.header('ETag')}")
    r3 = get_run(s, rid, headers={"If-None-Match": tag})
    check(r3.status == 304 and r3.body == b"" and r3.header("ETag") == tag,
          f"after {what}: the new tag gets 304: {r3.status} {r3.body[:100]!r}")
    return tag, body


def case_run_etags(a):
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state) as s:
            kept, deleted = run_etags(s)
            keep = {rid: settled(s, f"/runs/{rid}") for rid in kept}
        check(len(keep) == 2 and deleted, f"two runs kept, one deleted: {sorted(keep)} {deleted}")
        # a fresh server on the same database: nothing cached, a new identity
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state) as s:
            for rid, (tag, body) in keep.items():
                r = get_run(s, rid, headers={"If-None-Match": tag})
                check(r.status == 200, f"a restarted server never matches the last one's tag {tag}: {r.status}")
                check(r.body == body, f"run {rid}: the last cached answer equals a fresh server's, byte for byte:"
                                      f"\n  {body[:400]!r}\n  {r.body[:400]!r}")
                check(r.header("ETag") != tag, f"run {rid}: a new server life, a new tag: {r.header('ETag')}")
            for rid in deleted:
                check(s.get(f"/runs/{rid}").status == 404, "the deleted run is gone after the restart too")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def without_estimate(body):
    """A queued run's answer less its start estimate, which moves with the runs ahead."""
    run = json.loads(body)
    for k in ("estimated_start", "estimate_basis"):
        (run.get("pending") or {}).pop(k, None)
    return run


def run_etags(s):
    """Runs A, B, C through every kind of change; returns the runs left (B, C) and the
    one deleted (A)."""
    a_id = s.submit(HOLD)
    if not s.wait_status(a_id, "running", timeout=60):
        return [], []
    t = Trainer(s, a_id)
    b_id, c_id = s.submit(HOLD), s.submit(HOLD)  # queued behind A: one slot
    tags = {}
    bodies = {}
    for rid in (a_id, b_id, c_id):
        tags[rid], bodies[rid] = settled(s, f"/runs/{rid}")
        matches_db(s, rid, json.loads(bodies[rid]), f"run {rid} at first")
    check(len(set(tags.values())) == 3, f"three runs, three tags: {tags}")
    check(json.loads(bodies[b_id]).get("queue_position") == 1 and json.loads(bodies[c_id]).get("queue_position") == 2,
          f"B and C are queued at 1 and 2: {bodies[b_id][:80]!r} {bodies[c_id][:80]!r}")
    steady(s, f"/runs/{a_id}", tags[a_id], bodies[a_id], "run A")

    # the cache serves while nothing changes: answers counted as served from it
    served, built = metric(s, "ddpd_run_answers_total", source="cache"), metric(s, "ddpd_run_answers_total", source="built")
    for _ in range(5):
        get_run(s, b_id)
    served2, built2 = metric(s, "ddpd_run_answers_total", source="cache"), metric(s, "ddpd_run_answers_total", source="built")
    check(served is not None and served2 - served == 5 and built2 == built,
          f"5 GETs of an unchanged run: 5 answers from the cache, none built (cache {served} -> {served2},"
          f" built {built} -> {built2})")

    # If-None-Match
    for inm in (tags[a_id], f'"nope", {tags[a_id]}', f"W/{tags[a_id]}", "*", f'"x",\t"y" ,{tags[a_id]}'):
        r = get_run(s, a_id, headers={"If-None-Match": inm})
        check(r.status == 304 and r.body == b"" and r.header("ETag") == tags[a_id],
              f"If-None-Match: {inm} -> 304, no body, the tag: {r.status} {r.header('ETag')} {r.body[:80]!r}")
        check(r.header("Content-Type") is None, f"a 304 has no Content-Type: {r.header('Content-Type')}")
    for inm in ('"nope"', tags[b_id], tags[a_id].replace('"', ""), '""'):
        r = get_run(s, a_id, headers={"If-None-Match": inm})
        check(r.status == 200 and r.body == bodies[a_id], f"If-None-Match: {inm} (not A's tag) -> 200 and the body: {r.status}")
    r = s.request("HEAD", f"/runs/{a_id}", headers={"If-None-Match": tags[a_id]})
    check(r.status == 304 and r.body == b"", f"HEAD with the tag -> 304: {r.status}")
    r = get_run(s, 999999, headers={"If-None-Match": "*"})
    check(r.status == 404, f"If-None-Match on no run -> 404: {r.status}")

    # each kind of event for A: a new tag, what the database holds; B and C change only in their start estimates
    def event(type_, pred, what, **fields):
        t.send(type_, **fields)
        got = changed(s, a_id, tags[a_id], pred, what)
        if got:
            tags[a_id], bodies[a_id] = got
            steady(s, f"/runs/{a_id}", tags[a_id], bodies[a_id], f"run A after {what}")
        for rid in (b_id, c_id):
            tag, body = settled(s, f"/runs/{rid}")
            if tag == tags[rid]:
                check(body == bodies[rid], f"{what} for run A: run {rid} keeps its tag, and its body too")
            else:  # A's steps give it an ETA: what B and C wait for may get an expected end
                check(body != bodies[rid] and without_estimate(body) == without_estimate(bodies[rid]),
                      f"{what} for run A changes run {rid}'s answer only in its start estimate, and its tag with it:"
                      f"\n  {bodies[rid][:400]!r}\n  {body[:400]!r}")
                tags[rid], bodies[rid] = tag, body

    event("step", lambda b: b["progress"]["global_step"] == 7, "a step", epoch=0, step=6, global_step=7, loss=0.5,
          lr=0.01, samples_per_s=123.0)
    event("checkpoint", lambda b: len(b["checkpoints"]) == 1, "a checkpoint", epoch=0, global_step=7,
          path="ckpt-0.safetensors", bytes=4321)
    event("epoch", lambda b: True, "an epoch", epoch=0, lr=0.01, train_loss=0.5, test_loss=0.6, test_acc=0.7,
          seconds=1.5, samples_per_s=100.0)
    event("status", lambda b: True, "a rank's status", state="training", detail="epoch 1")
    event("step", lambda b: b["progress"]["global_step"] == 12 and b["progress"]["epoch"] == 1, "a step of epoch 1",
          epoch=1, step=1, global_step=12, loss=0.25, lr=0.005, samples_per_s=150.0)
    check(len(set(tags.values())) == 3, f"three runs, three tags: {tags}")

    # cancel B (queued): its tag changes; C moves up the queue, a new tag, though nothing was written about C
    r = s.post(f"/runs/{b_id}/cancel")
    check(r.status == 202, f"cancel B: {r.status} {r.body[:200]!r}")
    got = changed(s, b_id, tags[b_id], lambda b: b["status"] == "canceled", "canceling queued run B")
    if got:
        tags[b_id], bodies[b_id] = got
    got = changed(s, c_id, tags[c_id], lambda b: b.get("queue_position") == 1, "run B leaving the queue ahead of C")
    if got:
        tags[c_id], bodies[c_id] = got

    # cancel A (running): canceling, then canceled when its trainer ends; C starts
    r = s.post(f"/runs/{a_id}/cancel")
    check(r.status == 202, f"cancel A: {r.status} {r.body[:200]!r}")
    got = changed(s, a_id, tags[a_id], lambda b: b["status"] == "canceled", "canceling running run A")
    if got:
        tags[a_id], bodies[a_id] = got
    t.close()
    got = changed(s, c_id, tags[c_id], lambda b: b["status"] == "running", "run C starting")
    if got:
        tags[c_id], bodies[c_id] = got
        check("queue_position" not in json.loads(bodies[c_id]), "a running run has no queue position")

    # delete A: 404, not the cached 200, with or without its last tag
    r = s.request("DELETE", f"/runs/{a_id}")
    check(r.status == 204, f"delete A: {r.status} {r.body[:200]!r}")
    cached = metric(s, "ddpd_run_cache_runs")
    check(cached == 2, f"the store's writer dropped the deleted run's answer: {cached} runs cached (B and C)")
    for hdrs in ({}, {"If-None-Match": tags[a_id]}, {"If-None-Match": "*"}):
        r = s.get(f"/runs/{a_id}", headers=hdrs)
        check(r.status == 404 and r.header("ETag") is None, f"GET a deleted run {hdrs} -> 404: {r.status} {r.body[:200]!r}")

    r = s.post(f"/runs/{c_id}/cancel")
    check(r.status == 202, f"cancel C: {r.status}")
    s.wait_status(c_id, "canceled", timeout=60)
    return [b_id, c_id], [a_id]


def case_list_etags(a):
    with Server(a.ddpd, a.fake_trainer, slots=1) as s:
        tag, body = settled(s, "/runs")
        check(ETAG.match(tag or "") is not None, f"GET /runs: a quoted ETag: {tag}")
        steady(s, "/runs", tag, body, "the empty list")
        r = s.get("/runs", headers={"If-None-Match": tag})
        check(r.status == 304 and r.body == b"" and r.header("ETag") == tag, f"GET /runs with its tag -> 304: {r.status}")
        r = s.get("/runs?limit=0", headers={"If-None-Match": tag})
        check(r.status == 400, f"a bad query is refused whatever the tag: {r.status}")

        rid = s.submit(HOLD)
        s.wait_status(rid, "running", timeout=60)
        t = Trainer(s, rid)
        r = s.get("/runs", headers={"If-None-Match": tag})
        check(r.status == 200 and any(x["id"] == rid for x in r.json()["runs"]) and r.header("ETag") != tag,
              f"after a submission the old tag gets the new list: {r.status} {r.body[:200]!r}")
        tag, body = settled(s, "/runs")
        steady(s, "/runs", tag, body, "the list of one silent run")
        run_tag = get_run(s, rid).header("ETag")
        check(run_tag != tag, f"the list's tag is not the run's: {tag} {run_tag}")

        t.send("step", epoch=0, step=2, global_step=3, loss=0.5, lr=0.01, samples_per_s=10.0)

        def moved():
            r = s.get("/runs", headers={"If-None-Match": tag})
            return r if r.status == 200 and r.json()["runs"][0]["progress"]["global_step"] == 3 else None

        r = wait_until(moved, "the list to show the step, under a new tag")
        check(r is not None and r.header("ETag") != tag, f"a step changes the list's tag: {r and r.header('ETag')}")
        tag, body = settled(s, "/runs")
        r = s.get("/runs", headers={"If-None-Match": tag})
        check(r.status == 304 and r.body == b"", f"and the new tag gets 304: {r.status}")
        t.close()
        s.post(f"/runs/{rid}/cancel")
        s.wait_status(rid, "canceled", timeout=60)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
