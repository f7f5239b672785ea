#!/usr/bin/env python3
"""Elastic command runs: a real ddpd on a loopback port with 2 CPU slots, its users
made with the real `ddpd user`, and a real torch script (Debian's python3-torch,
gloo) under the real ddp-run: tests/integration/commands/elastic_torch.py, which
keeps its own checkpoint and writes down its environment at each start.

  shrink_and_grow   a preemptible command run of width 2 (distributed.min_world_size 1)
                    on both slots; bob's run of priority 10 needs one: the elastic run
                    is shrunk to 1 rank instead of preempted (preemptions 0, its sizes
                    say why and for whom), started again with WORLD_SIZE 1 and the
                    rest of torchrun's elastic variables for one rank, and goes on from
                    its own checkpoint; once bob's run ends it grows back to 2 ranks,
                    again from its checkpoint, and succeeds. TORCHELASTIC_RESTART_COUNT
                    stays what it was (0) at every start: torchrun counts no restart for
                    a change of membership
  ddp_run_ranks     ddp-run --ranks outside the run's elastic range, or on a run that
                    is not elastic, is refused naming the range and what to give

Usage: test_command_elastic.py CASE --ddpd PATH --runner PATH --ddpctl PATH"""
import argparse, json, os, shutil, subprocess, tempfile

import ddpd_harness  # noqa: E402

from ddpd_harness import check, cases_in, wait_until, bearer  # noqa: E402
from test_command_preemption import Box, urgent, FINAL  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "elastic_torch.py")


def elastic(root, **dist):
    shutil.copy(SCRIPT, os.path.join(root, "elastic_torch.py"))
    return {"name": "elastic", "preemptible": True,
            "distributed": dict({"world_size": 2, "min_world_size": 1, "max_restarts": 3}, **dist),
            "command": ["/usr/bin/python3", os.path.join(root, "elastic_torch.py"), root]}


def starts(root):
    """Each start of the script, its ranks' records in rank order: [[rank 0's, rank 1's], ...]."""
    try:
        with open(os.path.join(root, "starts.jsonl")) as f:
            lines = [json.loads(ln) for ln in f if ln.strip()]
    except OSError:
        return []
    groups = []
    for ln in lines:  # a start's ranks write one line each, the next start's come after all of them
        if not groups or any(int(x["RANK"]) == int(ln["RANK"]) for x in groups[-1]) or \
                int(ln["WORLD_SIZE"]) != int(groups[-1][0]["WORLD_SIZE"]):
            groups.append([])
        groups[-1].append(ln)
    return [sorted(g, key=lambda x: int(x["RANK"])) for g in groups]


def by_size(groups):
    """The starts at each size in turn: of a run of starts at one size (ddp-run's own restarts after a
    failure, TORCHELASTIC_RESTART_COUNT one higher each), the last."""
    out = []
    for g in groups:
        if out and len(out[-1]) == len(g) and int(g[0]["TORCHELASTIC_RESTART_COUNT"]) > \
                int(out[-1][0]["TORCHELASTIC_RESTART_COUNT"]):
            out[-1] = g
        else:
            out.append(g)
    return out


def check_env(start, size, rid, what, count):
    """Every rank of a start at `size` ranks has torchrun's elastic variables for it, and restart count `count`."""
    ranks = [int(x["RANK"]) for x in start]
    check(ranks == list(range(size)), f"{what}: ranks 0..{size - 1} started: {ranks}")
    for x in start:
        r = x["RANK"]
        want = {"WORLD_SIZE": str(size), "LOCAL_WORLD_SIZE": str(size), "ROLE_WORLD_SIZE": str(size),
                "LOCAL_RANK": r, "ROLE_RANK": r, "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_NAME": "default",
                "TORCHELASTIC_RESTART_COUNT": str(count), "TORCHELASTIC_MAX_RESTARTS": "3",
                "TORCHELASTIC_RUN_ID": str(rid), "TORCHELASTIC_USE_AGENT_STORE": "False", "DDPD_RUN_ID": str(rid)}
        got = {k: x.get(k) for k in want}
        check(got == want, f"{what}: rank {r}'s variables are torchrun's elastic mode's at {size} ranks: "
              f"{ {k: (got[k], want[k]) for k in want if got[k] != want[k]} }")
        check(x.get("TORCHELASTIC_ERROR_FILE") and x.get("MASTER_PORT"),
              f"{what}: rank {r} has TORCHELASTIC_ERROR_FILE and MASTER_PORT: {x}")
    check(len({x["MASTER_PORT"] for x in start}) == 1, f"{what}: one MASTER_PORT for all its ranks")


def case_shrink_and_grow(a):
    with Box(a, extra=["--elastic-grow-interval", "1"]) as b:
        s = b.s
        rid = b.submit(b.alice, elastic(b.root))
        wait_until(lambda: b.steps(rid) >= 20, "the elastic run steps on 2 ranks", 180)
        run = s.run(rid)
        check(run["ranks_now"] == 2 and run["sizes"] == [], f"it runs on 2 ranks: {run['ranks_now']} {run['sizes']}")
        cfg, go = urgent(b.root)
        rush = b.submit(b.bob, cfg)
        if not wait_until(lambda: s.run(rid)["ranks_now"] == 1 and len(starts(b.root)) >= 2,
                          "the elastic run started again on 1 rank", 120):
            s.dump_log()
            return
        wait_until(lambda: s.run(rush)["status"] == "running", "bob's run runs beside it", 60)
        run = s.run(rid)
        shrink = run["sizes"][0] if run["sizes"] else {}
        check(len(run["sizes"]) == 1 and shrink.get("from") == 2 and shrink.get("to") == 1 and
              shrink.get("why") == "shrink" and shrink.get("for_run") == rush,
              f"its sizes say it was shrunk from 2 to 1 for run {rush}: {run['sizes']}")
        check(run["preemptions"] == 0 and run["preempted_by"] is None and run["status"] == "running",
              f"a shrink is no preemption: {run['status']} {run['preemptions']} {run['preempted_by']}")
        tries = [(x["attempt"], x["status"]) for x in run["attempts"]]
        check(tries and tries[-1][1] is None and "resized" not in [t[1] for t in tries],
              f"a shrink is no attempt: its attempt runs on at the new size: {tries}")
        at_shrink = b.steps(rid)
        wait_until(lambda: b.steps(rid) >= at_shrink + 10 or s.run(rid)["status"] in FINAL,
                   "the shrunk run steps on", 120)
        open(go, "w").close()
        done = s.wait_status(rush, FINAL, timeout=60)
        check(done and done["status"] == "succeeded", f"bob's run succeeds: {done and done['status']}")
        if not wait_until(lambda: s.run(rid)["ranks_now"] == 2 and len(starts(b.root)) >= 3,
                          "the elastic run grown back to 2 ranks", 120):
            s.dump_log()
            return
        run = s.run(rid)
        grow = run["sizes"][1] if len(run["sizes"]) > 1 else {}
        check(grow.get("from") == 1 and grow.get("to") == 2 and grow.get("why") == "grow" and grow.get("for_run") is None,
              f"then grown from 1 to 2: {run['sizes']}")
        at_grow = b.steps(rid)
        wait_until(lambda: b.steps(rid) >= at_grow + 10, "the grown run steps on", 120)
        open(os.path.join(b.root, "done"), "w").close()
        done = s.wait_status(rid, FINAL, timeout=120)
        check(done and done["status"] == "succeeded" and done["preemptions"] == 0,
              f"the elastic run succeeds, never preempted: {done and (done['status'], done['reason'])}")
        tries = [(x["attempt"], x["status"], x.get("reason")) for x in done["attempts"]] if done else []
        print("attempts:", tries)
        check(tries and tries[-1][1] == "succeeded" and done["restart_count"] == tries[-1][0] and
              all(t[1] != "resized" for t in tries) and len(tries) == tries[-1][0] + 1,
              f"no attempt for a resize: its last succeeded, its number the restart count: {tries}")
        got = by_size(starts(b.root))
        check([len(g) for g in got] == [2, 1, 2], f"started on 2 ranks, then 1, then 2: {[len(g) for g in got]}")
        if len(got) != 3:
            print(json.dumps(starts(b.root), indent=1))
            return
        # the count of the first start at 2 ranks (0, or more after ddp-run's own restarts), then unchanged
        count = int(got[0][0]["TORCHELASTIC_RESTART_COUNT"])
        for g, size, what in zip(got, (2, 1, 2), ("its first start", "the shrunk start", "the grown start")):
            check_env(g, size, rid, what, count)
        froms = [g[0]["from_step"] for g in got]
        check(froms[0] == 0 and 0 < froms[1] < froms[2],
              f"each start goes on from the script's own checkpoint, further each time: from steps {froms}")
        check(all(x["from_step"] == g[0]["from_step"] for g in got for x in g),
              f"all ranks of a start read the same checkpoint: {[[x['from_step'] for x in g] for g in got]}")
        points = [p[0] for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]
        check(points == list(range(1, len(points) + 1)),
              f"its steps, reported again from each checkpoint, are 1..{len(points)} once each: {points[:5]}...")
        timeline = [e["kind"] for e in s.get(f"/runs/{rid}/timeline").json()["entries"]]
        check(timeline.count("resized") == 2 and "preempted" not in timeline,
              f"its timeline: two resizes, no preemption: {timeline}")
        print(f"starts: {[(len(g), g[0]['from_step']) for g in got]}")


def case_ddp_run_ranks(a):
    root = tempfile.mkdtemp(prefix="ddpd-elastic-")
    try:
        def ddp_run(dist, *args):
            cfg = os.path.join(root, "run.json")
            with open(cfg, "w") as f:
                json.dump({"command": ["/bin/true"], "distributed": dist}, f)
            p = subprocess.run([a.runner, "--config", cfg, "--run-dir", root, "--master-port", "29999", "--events", "-",
                                *args], capture_output=True, text=True, timeout=60)
            return p.returncode, p.stderr
        code, err = ddp_run({"world_size": 4, "min_world_size": 2}, "--ranks", "1")
        check(code == 2 and "--ranks 1 is not within the run's elastic range: give 2 to 4" in err,
              f"below min_world_size: refused naming the range: {code} {err!r}")
        code, err = ddp_run({"world_size": 4, "min_world_size": 2}, "--ranks", "5")
        check(code == 2 and "give 2 to 4" in err, f"above world_size: refused: {code} {err!r}")
        code, err = ddp_run({"world_size": 4, "min_world_size": 2}, "--ranks", "two")
        check(code == 2 and "give 2 to 4" in err, f"not a number: refused: {code} {err!r}")
        code, err = ddp_run({"world_size": 2}, "--ranks", "1")
        check(code == 2 and "the run is not elastic" in err and "min_world_size" in err,
              f"a run that is not elastic: refused, saying how to make it so: {code} {err!r}")
        code, err = ddp_run({"world_size": 2, "min_world_size": 3})
        check(code == 2 and "/distributed/min_world_size" in err and "must not exceed" in err,
              f"min_world_size above world_size: refused at its pointer: {code} {err!r}")
        code, err = ddp_run({"world_size": 4, "min_world_size": 2}, "--ranks", "3")
        check(code == 0, f"--ranks 3 within 2..4 runs: {code} {err[-300:]!r}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--ddpd", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--ddpctl", required=True)
    args = ap.parse_args()
    args.ddpd, args.runner, args.ddpctl = (os.path.abspath(x) for x in (args.ddpd, args.runner, args.ddpctl))
    ddpd_harness.main(CASES, args)
