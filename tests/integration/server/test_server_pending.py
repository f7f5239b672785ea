#!/usr/bin/env python3
"""Why a queued run waits, as a code, and when it is expected to start: a real ddpd on a
loopback port, real users (`ddpd user`), real runs (the scripted stand-in trainer; real
command runs for the estimates). Each case makes one real situation and reads
`pending` {reason, detail, blocked_by, estimated_start, estimate_basis} from GET
/runs/{id} and GET /queue.

  devices            one slot busy: the next run waits for devices, behind the busy run,
                     with no estimate (the busy run, silent, has no expected end, named); another
                     user reads the same; a started run's pending is null
  user_quota         alice at her quota: her next run waits for it, blocked by her run;
                     bob's run starts
  fair_share         alice has used the box: her second run waits behind bob's first
  priority           a run of a higher priority ahead: the older, lower one says so
  backfill_reserved  a 2-slot run waited past the backfill window: a 1-slot run that
                     would fit waits, the free slot kept for it
  preempted          a preemptible run preempted for a higher priority: queued again,
                     it says preempted, blocked by the preemptor
  timeline           GET /runs/{id}/timeline of a preempted run: submitted, pending,
                     admitted (its devices), started, preempted by the run, queued
                     again, pending preempted, admitted again, ended; a run's first
                     step; a restart and why; a real trainer's checkpoints; another user reads it as it
                     reads the run, nobody without a token; 404 for no run
  history_is_own     bob's runs of a name teach nothing of alice's runs of that name:
                     behind her first run (no history of hers), her second has no
                     estimate, naming her first; behind bob's, hers has one
  estimate_steady    behind a run that steps 20 times a second (its ETA wobbles with each
                     step), a queued run's estimate appears and then moves only by more
                     than its tolerance (a minute, or a tenth of the wait): its answer and
                     its tag do not change every second; each tag change is a body change;
                     the steps the store writes do not make the tick decide more than once a
                     second
  decided_once       70 runs queued behind a busy slot (past the 64 decided at once on
                     submission): each one's position and reason, GET /queue in order;
                     reads of the queue and of queued runs decide nothing (the
                     decisions counter in /metrics); a submission behind them is
                     decided by the tick or the first read, once; the busy run's end
                     starts the first and moves every position up by one; GET /queue's
                     tag is its bytes': 304 while they hold (across the refreshes that
                     rebuild it, once nothing changes), a new tag with a new body
  decision_held      70 runs queued behind a busy slot, decided and published; then the
                     tick's refresh of the decisions holds the scheduler's lock (the test
                     hook DDPD_TEST_HOLD_DECISION, while a file exists): a queued run's
                     GET (plain and 304) and GET /queue answer from what was published,
                     a submission is answered (queued, its place not decided yet), all
                     while the lock is held; released, the submission is placed at 71.
                     Reads of the decided queue take the lock never (the counter in
                     /metrics)
  cancel_while_decided  70 runs queued behind a busy slot; the tick's refresh of the
                     decisions, which decides outside the scheduler's lock, is held (the
                     hook's file empty): a cancel of the running run and one of a queued
                     run are answered (202) meanwhile, as is a run's read; released, both
                     end canceled and the next run starts
  estimates          a replayed scenario: 8 command runs of known lengths (their names'
                     earlier runs give their lengths) submitted in order on 2 slots; each
                     estimate at submission within 20% of the wait or 5 s of the actual
                     start; prints the table

Usage: test_server_pending.py CASE --ddpd PATH --fake-trainer PATH --runner PATH [--trainer PATH]"""
import os, shutil, signal, sys, tempfile, time

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, bearer, iso_seconds  # noqa: E402
from test_server_sharing import Box, submit_as  # noqa: E402  (a state dir with its users; a run submitted as one)

REASONS = {"devices", "user_quota", "fair_share", "priority", "backfill_reserved", "restart_backoff", "preempted",
           "sweep_parallel", "nodes", "slurm", "suspect_nodes", "time_slice"}


def pending_of(s, rid, token=None):
    r = s.get(f"/runs/{rid}", headers=bearer(token) if token else None)
    return r.json().get("pending") if r.status == 200 else None


def wait_reason(s, rid, reason, blocked, what, timeout=30):
    """Waits until run rid's pending says `reason`, blocked by `blocked` (a list of ids);
    returns the pending (or the last seen, failing the check)."""
    seen = {}

    def now():
        p = pending_of(s, rid)
        seen["p"] = p
        return p if p and p["reason"] == reason and p["blocked_by"] == blocked else None
    got = wait_until(now, f"{what}: run {rid} pending {reason} blocked by {blocked}", timeout=timeout)
    check(got is not None, f"{what}: run {rid} says {reason}, blocked by {blocked}: {seen.get('p')}")
    if got:
        check(set(got) == {"reason", "detail", "blocked_by", "estimated_start", "estimate_basis"} and
              got["reason"] in REASONS and isinstance(got["detail"], str) and got["detail"],
              f"{what}: every member, a documented reason, a detail: {got}")
        queued = [q for q in s.get("/queue").json()["runs"] if q["id"] == rid]
        check(queued and queued[0].get("pending", {}).get("reason") == reason,
              f"{what}: GET /queue says the same: {queued and queued[0].get('pending')}")
    return got


def cancel_all(s, pairs):
    for rid, token in pairs:
        s.post(f"/runs/{rid}/cancel", headers=bearer(token))
    for rid, _ in pairs:
        s.wait_status(rid, ("canceled", "succeeded", "failed"), timeout=30)


def case_devices(a):
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        with box.server(slots=1) as s:
            # "hold": it says hello and nothing more: no step gives it an ETA, no earlier run of its name a length
            busy = submit_as(s, alice, {"name": "hold"})
            s.wait_status(busy, "running", timeout=30)
            check(pending_of(s, busy) is None and "pending" in s.run(busy), f"a started run's pending is null")
            nxt = submit_as(s, alice, {"name": "sleep"})
            p = wait_reason(s, nxt, "devices", [busy], "one slot busy")
            if p:
                check(p["estimated_start"] is None and f"run {busy} has no expected end" in p["estimate_basis"],
                      f"no estimate: the busy run has no expected end, and it is named: {p}")
                check(p["detail"] == s.run(nxt)["waiting_for"] and "1 CPU slots on this host (0 free of 1)" in p["detail"],
                      f"detail is the waiting_for sentence: {p['detail']!r}")
            # another user reads the run as the run is visible to it: the same pending
            check(pending_of(s, nxt, bob) == pending_of(s, nxt, alice), "bob reads the same pending as alice")
            r = s.get(f"/runs/{nxt}", anonymous=True)
            check(r.status == 401, f"without a token, nothing: {r.status}")
            cancel_all(s, [(busy, alice)])
            s.wait_status(nxt, "running", timeout=30)
            check(pending_of(s, nxt) is None, "once started, its pending is null")
            cancel_all(s, [(nxt, alice)])


def case_user_quota(a):
    with Box(a) as box:
        alice, bob = box.add("alice", "--max-devices", "1"), box.add("bob")
        with box.server(slots=2) as s:
            first = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(first, "running", timeout=30)
            second = submit_as(s, alice, {"name": "sleep"})
            theirs = submit_as(s, bob, {"name": "sleep"})
            s.wait_status(theirs, "running", timeout=30)
            wait_reason(s, second, "user_quota", [first], "alice at her quota")
            cancel_all(s, [(first, alice), (second, alice), (theirs, bob)])


def case_fair_share(a):
    with Box(a) as box:
        alice, bob = box.add("alice"), box.add("bob")
        with box.server(slots=1) as s:
            used = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(used, "running", timeout=30)
            time.sleep(2)  # alice uses the box a while
            second = submit_as(s, alice, {"name": "sleep"})
            bobs = submit_as(s, bob, {"name": "sleep"})
            wait_reason(s, bobs, "devices", [used], "bob's run first")
            p = wait_reason(s, second, "fair_share", sorted([used, bobs]), "alice's second behind bob's")
            check(p and "decayed usage is less" in p["detail"], f"the detail says why: {p and p['detail']!r}")
            cancel_all(s, [(used, alice), (bobs, bob), (second, alice)])


def case_priority(a):
    with Box(a) as box:
        alice = box.add("alice", "--max-priority", "3")
        with box.server(slots=1) as s:
            busy = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(busy, "running", timeout=30)
            low = submit_as(s, alice, {"name": "sleep"})
            high = submit_as(s, alice, {"name": "sleep", "priority": 3})
            wait_reason(s, high, "devices", [busy], "the higher one waits for the slot")
            wait_reason(s, low, "priority", sorted([busy, high]), "the lower one behind the higher")
            cancel_all(s, [(busy, alice), (high, alice), (low, alice)])


def case_backfill_reserved(a):
    with Box(a) as box:
        alice = box.add("alice")
        with box.server(slots=2, extra_args=["--backfill-window", "2"]) as s:
            one = submit_as(s, alice, {"name": "sleep"})
            s.wait_status(one, "running", timeout=30)
            big = submit_as(s, alice, {"name": "sleep", "distributed": {"world_size": 2}})
            wait_reason(s, big, "devices", [one], "the 2-slot run waits")
            time.sleep(2.5)  # it has waited longer than the window
            late = submit_as(s, alice, {"name": "sleep"})
            wait_reason(s, late, "backfill_reserved", [big], "the free slot is kept for the big run")
            cancel_all(s, [(one, alice), (big, alice), (late, alice)])


def case_preempted(a):
    with Box(a) as box:
        alice, root = box.add("alice"), box.add("root", "--admin")
        with box.server(slots=1) as s:
            victim = submit_as(s, alice, {"name": "sleep", "preemptible": True})
            s.wait_status(victim, "running", timeout=30)
            urgent = submit_as(s, root, {"name": "sleep", "priority": 10})
            run = s.wait_status(victim, "queued", timeout=60)
            check(run and run.get("preempted_by") == urgent, f"queued again, preempted by {urgent}: {run}")
            s.wait_status(urgent, "running", timeout=30)
            p = wait_reason(s, victim, "preempted", [urgent], "the preempted run")
            check(p and p["detail"].startswith(f"preempted by run {urgent} and queued again"), f"detail: {p}")
            cancel_all(s, [(urgent, root), (victim, alice)])


def kinds(s, rid, token=None):
    r = s.get(f"/runs/{rid}/timeline", headers=bearer(token) if token else None)
    return r.json()["entries"] if r.status == 200 else None


def case_timeline(a):
    with Box(a) as box:
        alice, bob, root = box.add("alice"), box.add("bob"), box.add("root", "--admin")
        with box.server(slots=1) as s:
            victim = submit_as(s, alice, {"name": "sleep", "preemptible": True})
            s.wait_status(victim, "running", timeout=30)
            urgent = submit_as(s, root, {"name": "sleep", "priority": 10})
            s.wait_status(urgent, "running", timeout=30)
            wait_reason(s, victim, "preempted", [urgent], "the preempted run")
            cancel_all(s, [(urgent, root)])
            s.wait_status(victim, "running", timeout=30)
            cancel_all(s, [(victim, alice)])
            entries = kinds(s, victim)
            got = [e["kind"] for e in entries or [] if e["kind"] != "first_step"]  # its heartbeats' time is its own
            want = ["submitted", "admitted", "started", "preempted", "notice", "queued_again", "pending", "admitted",
                    "started", "ended"]
            check(got == want, f"the preempted run's timeline: {got}, wanted {want}")
            by = {e["kind"]: e["detail"] for e in entries or []}
            check(by.get("preempted", {}).get("by") == urgent and by.get("queued_again", {}).get("by") == urgent,
                  f"preempted and queued again by run {urgent}: {by.get('preempted')} {by.get('queued_again')}")
            check(by.get("pending", {}).get("reason") == "preempted" and by["pending"].get("blocked_by") == [urgent],
                  f"its pending reason, as it changed: {by.get('pending')}")
            check(by.get("admitted", {}).get("devices") == ["cpu:0"], f"admitted with its devices: {by.get('admitted')}")
            check(by.get("ended", {}).get("status") == "canceled", f"ended: {by.get('ended')}")
            ts = [e["t"] for e in entries or []]
            check(ts == sorted(ts), f"oldest first: {ts}")
            # the run that waited behind: submitted, pending devices, admitted, ...
            waited = [e["kind"] for e in kinds(s, urgent) or []]
            check(waited[:3] == ["submitted", "pending", "admitted"] and waited[-1] == "ended",
                  f"the urgent run: it waited for the victim to stop: {waited}")
            # who may read it: as the run
            check(kinds(s, victim, bob) == entries, "bob reads alice's run's timeline as he reads her run")
            r = s.get(f"/runs/{victim}/timeline", anonymous=True)
            check(r.status == 401, f"without a token: 401, got {r.status}")
            r = s.get("/runs/999999/timeline")
            check(r.status == 404, f"no such run: 404, got {r.status}")
            # a first step
            quick = submit_as(s, alice, {"name": "steps-5"})
            s.wait_status(quick, "succeeded", timeout=60)
            steps = [e for e in kinds(s, quick) or [] if e["kind"] == "first_step"]
            check(len(steps) == 1 and steps[0]["detail"]["global_step"] >= 1, f"its first step: {steps}")
            # a restart: its launcher killed, the server starts its next attempt, saying why
            again = submit_as(s, alice, {"name": "sleep", "distributed": {"max_restarts": 1}})
            run = s.wait_status(again, "running", timeout=30)
            os.kill(run["pid"], signal.SIGKILL)
            got = wait_until(lambda: [e for e in kinds(s, again) or [] if e["kind"] == "restarted"], "a restarted entry", 30)
            check(got and got[0]["detail"]["attempt"] == 1 and got[0]["detail"]["reason"],
                  f"restarted: its next attempt and why: {got}")
            s.wait_status(again, "running", timeout=30)
            cancel_all(s, [(again, alice)])
    if a.trainer:  # a real trainer's checkpoints
        with Server(a.ddpd, a.trainer, slots=2) as s:
            from ddpd_harness import fmnist_config
            rid = s.submit(fmnist_config(**{"checkpoint.every_epochs": 1}))
            done = s.wait_status(rid, ("succeeded", "failed"), timeout=300)
            check(done and done["status"] == "succeeded", f"the real run: {done and done['status']}")
            ck = [e["detail"]["epoch"] for e in kinds(s, rid) or [] if e["kind"] == "checkpoint"]
            check(ck == [0, 1], f"its checkpoints, one an epoch: {ck}")


# ---- the estimate, on a replayed scenario ----

def case_estimate_steady(a):
    with Box(a) as box:
        alice = box.add("alice")
        with box.server(slots=1) as s:
            busy = submit_as(s, alice, {"name": "sleep"})  # steps every 50 ms, total_steps 1,000,000
            s.wait_status(busy, "running", timeout=30)
            waiting = submit_as(s, alice, {"name": "sleep"})
            seen = []  # (tag, body, pending, when)
            ticks = decisions(s)["tick"]
            deadline = time.time() + 8
            while time.time() < deadline:
                r = s.get(f"/runs/{waiting}")
                p = r.json().get("pending") if r.status == 200 else None
                if not seen or seen[-1][0] != r.header("ETag") or seen[-1][1] != r.body:
                    seen.append((r.header("ETag"), r.body, p, time.time()))
                time.sleep(0.1)
            estimates = [(x[2]["estimated_start"], x[3]) for x in seen if x[2] and x[2]["estimated_start"]]
            check(estimates, f"behind a run with an ETA, the queued run gets an estimate: {[x[2] for x in seen][-3:]}")
            same_body = 0
            for (t0, b0, _, _), (t1, b1, _, _) in zip(seen, seen[1:]):
                check(b0 == b1 or t0 != t1, f"a new body comes with a new tag: {t0} -> {t1}")
                same_body += b0 == b1
            # the tag names the run's version in the store: the writes that follow a submission
            # (its timeline's first entries) may commit after the first read, the body the same
            check(same_body <= 2, f"the tag changes with the body, not every second: {same_body} changes of the tag "
                                  f"alone in 8 s: {[x[0] for x in seen]}")
            moves = [(e0, e1, when) for (e0, _), (e1, when) in zip(estimates, estimates[1:]) if e0 != e1]
            for e0, e1, when in moves:  # the server's tolerance, from its own clock: within a second of ours
                tolerance = max(60, (iso_seconds(e1) - when) / 10)
                check(abs(iso_seconds(e1) - iso_seconds(e0)) >= tolerance * 0.95 - 1,
                      f"the estimate moves only past its tolerance ({tolerance:.0f} s): {e0} -> {e1}")
            ticks = decisions(s)["tick"] - ticks
            # the tick decides again once a second, and when something changed: the steps the
            # store writes (which move the database's data_version) change nothing of the users
            check(ticks <= 12, f"in 8 s of steps and nothing else, the tick decided the queue {ticks} times "
                               f"(once a second: 8; the users' table read as changed on every write: 80)")
            print(f"in 8 s of steps behind run {busy}: {len(seen)} answers, estimates {[e for e, _ in estimates]}, "
                  f"{ticks} decisions by the tick")
            cancel_all(s, [(busy, alice), (waiting, alice)])


def decisions(s):
    """ddpd_queue_decisions_total by cause, from /metrics."""
    out = {}
    for line in s.get("/metrics").body.decode().splitlines():
        if line.startswith("ddpd_queue_decisions_total{"):
            out[line.split('cause="')[1].split('"')[0]] = int(float(line.split()[-1]))
    return out


def case_decided_once(a):
    with Box(a) as box:
        alice = box.add("alice")
        with box.server(slots=1) as s:
            busy = submit_as(s, alice, {"name": "hold"})
            s.wait_status(busy, "running", timeout=30)
            queued = [submit_as(s, alice, {"name": "hold"}) for _ in range(70)]
            before = decisions(s)
            check(set(before) == {"change", "read", "tick"}, f"the decisions counter, by cause: {before}")
            runs = {rid: s.run(rid) for rid in queued}
            q = s.get("/queue").json()
            for _ in range(3):
                s.get("/queue")
                for rid in queued[:10]:
                    s.get(f"/runs/{rid}")
            after = decisions(s)
            others = (after["change"] - before["change"]) + (after["tick"] - before["tick"])
            check(after["read"] - before["read"] <= 1 + others,
                  f"100 reads of a queue that did not change decide it at most once (the last submissions, "
                  f"when the tick had not yet), and once after each decision of the tick's: {before} -> {after}")
            for k, rid in enumerate(queued):
                run, p = runs[rid], runs[rid].get("pending") or {}
                check(run["status"] == "queued" and run.get("queue_position") == k + 1 and p.get("reason") == "devices"
                      and busy in p.get("blocked_by", []),
                      f"run {rid}: queued at {k + 1}, waiting for devices held by {busy}: "
                      f"{run['status']} {run.get('queue_position')} {p}")
            check([(r["id"], r["position"]) for r in q["runs"]] == [(rid, k + 1) for k, rid in enumerate(queued)],
                  f"GET /queue lists the 70 in order: {[(r['id'], r['position']) for r in q['runs']][:5]}...")
            queue_tags(s, "70 queued behind a running run (its owner's usage grows each second)")
            before = decisions(s)
            late = submit_as(s, alice, {"name": "hold"})
            # GET /queue is served without the scheduler's lock, from what was last
            # published: a change not decided yet is decided first, so it is there
            listed = [(r["id"], r["position"]) for r in s.get("/queue").json()["runs"]]
            check(listed[-1:] == [(late, 71)] and len(listed) == 71,
                  f"GET /queue right after a submission behind 70 lists it, at 71: {listed[-3:]}")
            run = s.run(late)  # the tick, or the read above, decided it
            after = decisions(s)
            check(run.get("queue_position") == 71 and (run.get("pending") or {}).get("reason") == "devices",
                  f"a submission behind 70: decided before its first read shows it, at 71: {run.get('queue_position')}"
                  f" {run.get('pending')}")
            check(after["change"] == before["change"] and
                  after["read"] - before["read"] <= 1 + after["tick"] - before["tick"],
                  f"behind a long queue, a submission is decided with the tick's or the first read's, not at once:"
                  f" {before} -> {after}")
            cancel_all(s, [(busy, alice)])
            s.wait_status(queued[0], "running", timeout=60)
            moved = wait_until(lambda: s.run(queued[-1]).get("queue_position") == 69 or None,
                               "the last queued run to move up", timeout=30)
            check(moved, f"the busy run's end starts the first; the others move up: {s.run(queued[-1]).get('queue_position')}"
                         f" {s.run(queued[0])['status']} {[(r['id'], r['position']) for r in s.get('/queue').json()['runs']][:3]}")
            cancel_all(s, [(rid, alice) for rid in queued + [late]])
            empty = wait_until(lambda: not s.get("/queue").json()["runs"] or None, "the queue to empty", timeout=60)
            check(empty, f"every run canceled: the queue empties: {s.get('/queue').json()['runs'][:3]}")
            first = s.get("/queue")
            time.sleep(2.5)  # past two refreshes, each of which builds the answer anew
            again = s.get("/queue", headers={"If-None-Match": first.header("ETag")})
            check(again.status == 304 and again.header("ETag") == first.header("ETag"),
                  f"a queue that did not change, rebuilt by the refreshes: 304, the same tag: {again.status} "
                  f"{first.header('ETag')} -> {again.header('ETag')}")


def metric(s, name):
    for line in s.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[-1]))
    check(False, f"/metrics has {name}")
    return None


def let_go(hold):
    if os.path.exists(hold):
        os.unlink(hold)


def decision_held(s, alice, hold):
    """case_decision_held on its server (the file `hold` made, the refresh holds the lock)."""
    busy = submit_as(s, alice, {"name": "hold"})
    s.wait_status(busy, "running", timeout=30)
    queued = [submit_as(s, alice, {"name": "hold"}) for _ in range(70)]
    listed = [r["id"] for r in s.get("/queue").json()["runs"]]  # decided now, and published
    check(listed == queued, f"GET /queue lists the 70 in order: {listed[:3]}...")
    reads = metric(s, "ddpd_queue_locked_reads_total")
    for rid in queued[:10]:
        s.run(rid)
    s.get("/queue")
    check(metric(s, "ddpd_queue_locked_reads_total") == reads,
          f"reads of a decided queue and of its runs take the scheduler's lock never: {reads} -> "
          f"{metric(s, 'ddpd_queue_locked_reads_total')}")
    first = s.get(f"/runs/{queued[-1]}")
    with open(hold, "w") as f:
        f.write("lock")  # the hook holds the scheduler's lock (else it holds the tick's decision outside it)
    wait_until(lambda: "a decision holds the scheduler's lock" in open(s.log_path).read() or None,
               "the tick's refresh of the decisions to hold the scheduler's lock", timeout=30)
    # each of these would wait for the lock, until the test's timeout, if it took it
    run = s.get(f"/runs/{queued[-1]}", timeout=20)
    body = run.json() if run.status == 200 else {}
    check(body.get("queue_position") == 70 and (body.get("pending") or {}).get("reason") == "devices",
          f"while a decision holds the lock, a queued run's GET answers from the published decision: "
          f"{run.status} {body.get('queue_position')} {body.get('pending')}")
    again = s.get(f"/runs/{queued[-1]}", headers={"If-None-Match": first.header("ETag")}, timeout=20)
    check(again.status == 304, f"and its 304: {again.status}")
    q = s.get("/queue", timeout=20)
    check(q.status == 200 and len(q.json()["runs"]) == 70, f"and GET /queue: {q.status}")
    late = s.post("/runs", {"name": "hold"}, headers=bearer(alice), timeout=20)
    answer = late.json() if late.status == 201 else {}
    check(late.status == 201 and answer.get("status") == "queued" and answer.get("queue_position") == 0
          and answer.get("pending") is None,
          f"a submission behind the long queue is answered while the decision holds the lock: queued, "
          f"its place not decided yet: {late.status} {answer.get('status')} {answer.get('queue_position')}"
          f" {answer.get('pending')}")
    log = open(s.log_path).read()
    check("the decision goes on" not in log, "the decision held the lock through those answers")
    os.unlink(hold)
    rid = answer.get("id")
    placed = wait_until(lambda: s.run(rid).get("queue_position") == 71 or None,
                        "the submission to be placed once the lock is let go", timeout=30)
    check(placed, f"released, the decision places the submission at 71: {s.run(rid).get('queue_position')}"
                  f" {s.run(rid).get('pending')}")
    check(metric(s, "ddpd_queue_submissions_deferred_total") >= 1,
          "the submission went by the inbox (ddpd_queue_submissions_deferred_total)")
    cancel_all(s, [(r, alice) for r in [busy] + queued + [rid]])


def with_decision_hook(a, body):
    """body(server, alice, hold) on a server of 1 slot whose decisions the file `hold`
    holds (DDPD_TEST_HOLD_DECISION), let go however body ends."""
    hold = os.path.join(tempfile.mkdtemp(prefix="ddpd-hold-"), "hold")
    try:
        with Box(a) as box:
            alice = box.add("alice")
            with box.server(slots=1, env={"DDPD_TEST_HOLD_DECISION": hold}) as s:
                try:
                    body(s, alice, hold)
                finally:
                    let_go(hold)  # before the server stops: its shutdown takes the lock
    finally:
        let_go(hold)
        shutil.rmtree(os.path.dirname(hold), ignore_errors=True)


def case_decision_held(a):
    with_decision_hook(a, decision_held)


def cancel_while_decided(s, alice, hold):
    """case_cancel_while_decided on its server (the file `hold` made empty: the tick's
    refresh holds its decision outside the scheduler's lock)."""
    busy = submit_as(s, alice, {"name": "hold"})
    s.wait_status(busy, "running", timeout=30)
    queued = [submit_as(s, alice, {"name": "hold"}) for _ in range(70)]
    listed = [r["id"] for r in s.get("/queue").json()["runs"]]
    check(listed == queued, f"GET /queue lists the 70 in order: {listed[:3]}...")
    open(hold, "w").close()
    held = wait_until(lambda: "a decision outside the scheduler's lock goes on" in open(s.log_path).read() or None,
                      "the tick's refresh to hold its decision", timeout=30)
    check(held, "the tick's refresh holds its decision (outside the lock)")
    # each of these would wait for the lock, until the test's timeout, were it held through the decision
    stop = s.post(f"/runs/{busy}/cancel", headers=bearer(alice), timeout=20)
    check(stop.status == 202, f"a cancel of the running run is answered while the decision goes on: {stop.status}")
    gone = s.post(f"/runs/{queued[-1]}/cancel", headers=bearer(alice), timeout=20)
    check(gone.status == 202 and gone.json().get("status") == "canceled",
          f"a cancel of a queued run is answered, canceled, while the decision goes on: {gone.status} "
          f"{gone.json().get('status') if gone.status == 202 else gone.body[:200]}")
    run = s.get(f"/runs/{busy}", timeout=20)
    check(run.status == 200 and run.json()["status"] in ("canceling", "canceled"),
          f"the running run is being canceled: {run.status} {run.json().get('status') if run.status == 200 else ''}")
    log = open(s.log_path).read()
    check("the decision outside the lock goes on" not in log, "the decision was held through those answers")
    os.unlink(hold)
    ended = s.wait_status(busy, ("canceled", "succeeded", "failed"), timeout=30)
    check(ended and ended["status"] == "canceled", f"released, the running run ends canceled: {ended and ended['status']}")
    nxt = s.wait_status(queued[0], ("running", "canceled", "failed"), timeout=30)
    check(nxt and nxt["status"] == "running", f"and the queue's head starts: {nxt and nxt['status']}")
    left = wait_until(lambda: len(s.get("/queue").json()["runs"]) == 68 or None, "the queue to be decided again", 30)
    check(left, f"the queue holds the 68 left: {len(s.get('/queue').json()['runs'])}")
    cancel_all(s, [(r, alice) for r in queued[:-1]])


def case_cancel_while_decided(a):
    with_decision_hook(a, cancel_while_decided)


def queue_tags(s, what):
    """GET /queue's tag is its bytes': a read that sends back the tag of what it read is
    answered 304 while the answer is the same, and 200 with another tag and another
    body once it changed."""
    answers = 0
    not_modified = 0
    for _ in range(10):
        r = s.get("/queue")
        tag = r.header("ETag")
        check(r.status == 200 and tag and tag.startswith('"'), f"{what}: GET /queue has a tag: {r.status} {tag}")
        again = s.get("/queue", headers={"If-None-Match": tag})
        if again.status == 304:
            not_modified += 1
            check(again.header("ETag") == tag and not again.body, f"{what}: a 304 has the tag and no body")
        else:
            answers += 1
            check(again.status == 200 and again.header("ETag") != tag and again.body != r.body,
                  f"{what}: a 200 to a conditional read is another answer under another tag: {again.status} "
                  f"{tag} -> {again.header('ETag')}, bodies {'differ' if again.body != r.body else 'the same'}")
    check(not_modified >= 1, f"{what}: reads straight after one another get 304 ({not_modified} of 10; "
                             f"{answers} fell across a refresh)")


LENGTHS = {"short": 2, "long": 4}
ORDER = ["long", "short", "short", "long", "short", "long", "short", "short"]


def case_estimates(a):
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-work-"))
    try:
        extra = ["--allow-commands", "--work-root", root, "--runner", a.runner]
        with Server(a.ddpd, None, slots=2, extra_args=extra) as s:
            def cfg(name):
                return {"name": name, "command": ["/bin/sleep", str(LENGTHS[name])], "working_dir": "."}
            # the history: one run of each name, the lengths the estimates take
            first = [s.submit(cfg(n)) for n in ("short", "long")]
            for rid in first:
                done = s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=60)
                check(done and done["status"] == "succeeded", f"history run {rid}: {done and done['status']}")
            rows = []
            for name in ORDER:
                rid = s.submit(cfg(name))
                run = s.run(rid)  # at submission: the scheduler made it as it decided (null: it started it)
                p = run.get("pending")
                est = iso_seconds(p["estimated_start"]) if p and p["estimated_start"] else None
                rows.append({"id": rid, "name": name, "submitted": iso_seconds(run["created_at"]), "estimate": est,
                             "pending": p, "started_at_once": p is None})
            for r in rows:
                done = s.wait_status(r["id"], ("succeeded", "failed", "canceled"), timeout=120)
                check(done and done["status"] == "succeeded", f"run {r['id']} succeeds: {done and done['status']}")
                r["actual"] = iso_seconds(done["started_at"]) if done and done.get("started_at") else None
            t0 = rows[0]["submitted"]
            print("run  name   submitted  estimate-at-submission  actual-start  error  allowed")
            for r in rows:
                est = r["estimate"]
                if est is None and r["started_at_once"]:
                    est = r["actual"]  # it started at its submission: nothing to estimate
                wait = (r["actual"] or 0) - r["submitted"]
                allowed = max(5.0, 0.2 * wait)
                err = abs(est - r["actual"]) if est is not None and r["actual"] is not None else None
                print(f"{r['id']:<4} {r['name']:<6} {r['submitted'] - t0:>8.1f}s  "
                      f"{'at once' if r['started_at_once'] else ('%.1fs' % (est - t0) if est else 'none'):>22}  "
                      f"{(r['actual'] or 0) - t0:>11.1f}s  {'-' if err is None else '%.1fs' % err:>5}  {allowed:.1f}s")
                check(err is not None and err <= allowed,
                      f"run {r['id']} ({r['name']}): estimate {est} within {allowed:.1f} s of its start {r['actual']}: "
                      f"{r['pending']}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def case_history_is_own(a):
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-work-"))
    try:
        with Box(a) as box:
            alice, bob = box.add("alice"), box.add("bob")
            extra = ["--allow-commands", "--work-root", root, "--runner", a.runner]
            with box.server(slots=1, extra_args=extra) as s:
                def cfg(seconds):
                    return {"name": "train", "command": ["/bin/sleep", str(seconds)], "working_dir": "."}
                taught = submit_as(s, bob, cfg(1))  # bob's history of "train"
                done = s.wait_status(taught, ("succeeded", "failed"), timeout=60)
                check(done and done["status"] == "succeeded", f"bob's first run: {done and done['status']}")
                his = submit_as(s, bob, cfg(20))
                s.wait_status(his, "running", timeout=30)
                first = submit_as(s, alice, cfg(1))
                second = submit_as(s, alice, cfg(1))
                p1, p2 = pending_of(s, first), pending_of(s, second)
                check(p1 and p1["estimated_start"] is not None,
                      f"behind bob's run (his history gives its end), alice's first has an estimate: {p1}")
                check(p2 and p2["estimated_start"] is None and f"run {first} has no expected end" in p2["estimate_basis"],
                      f"bob's runs of the name teach nothing of alice's: her second waits on her first, "
                      f"which has no expected end: {p2}")
                cancel_all(s, [(his, bob), (first, alice), (second, alice)])
    finally:
        shutil.rmtree(root, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES, required=("--runner",)))
