#!/usr/bin/env python3
"""POST /runs/{id}/resume end to end: a real ddpd on a loopback port, the real
ddp-trainer on a Fashion-MNIST subset. A run whose rank is killed after its first
checkpoint, resumed, ends bit-identical to an uninterrupted run of the same config
(every step's loss, the epochs, the final checkpoint's bytes) with one point per
step; a canceled run resumes too; every refusal says why. Also what the server
passes on of its DDPD_* environment (an explicit list), and a dataset cache cut
short under a served run, named in the run's reason.

Usage: test_server_resume.py CASE --ddpd PATH --trainer PATH --fake-trainer PATH"""
import hashlib, json, os, signal, sys, tempfile, shutil

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main, fmnist_config, pids_under  # noqa: E402

FINAL = ("succeeded", "failed", "canceled")


def journal(s, rid):
    """The run's events.jsonl, whole lines only (the trainer may be writing the last)."""
    path = os.path.join(s.run_dir(rid), "events.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]


def of_type(events, type_):
    return [e for e in events if e["type"] == type_]


def rank_pids(events):
    return {e["rank"]: e["pid"] for e in of_type(events, "hello") if e["rank"] >= 0}


def losses(s, rid):
    """[(global_step, loss)] as the API serves them, every point."""
    return [(p[0], p[1]) for p in s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]]


def iso_ms(text):
    """2026-12-03T08:00:00.123Z -> unix ms."""
    import calendar, time
    whole, frac = text.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) * 1000 + int(frac[:3].ljust(3, "0"))


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def epochs_of(s, rid):
    """What must match between runs: the epoch's numbers, not its timing."""
    return [(e["epoch"], e["lr"], e["train_loss"], e["test_loss"], e["test_acc"])
            for e in s.get(f"/runs/{rid}/epochs").json()["epochs"]]


def is_problem(r, status, *needles):
    try:
        p = r.json()
    except ValueError:
        p = {}
    detail = p.get("detail", "")
    return check(r.status == status and (r.header("Content-Type") or "").startswith("application/problem+json")
                 and p.get("status") == status and all(n in detail for n in needles),
                 f"{status} problem naming {needles}: {r.status} {r.body[:400]!r}")


def wait_journal(s, rid, pred, what, timeout=180):
    return wait_until(lambda: pred(journal(s, rid)) or (s.run(rid)["status"] in FINAL and pred(journal(s, rid))),
                      what, timeout, interval=0.01)


# 4 epochs of 6000 examples, a checkpoint after epochs 1 and 3: the rank is killed in
# epoch 3, after epoch 2 was recorded (its steps and its epoch go at the resume).
CONFIG = fmnist_config(**{"name": "resume", "data.limit": 6000, "data.test_limit": 500, "train.epochs": 4,
                          "checkpoint.every_epochs": 2, "checkpoint.keep": 2})


def check_same_as(s, rid, full, total):
    """rid ended as the uninterrupted run `full` did: bit for bit."""
    mine, theirs = losses(s, rid), losses(s, full)
    check([p[0] for p in mine] == list(range(1, total + 1)),
          f"run {rid}: exactly one loss point per step, 1..{total}: {len(mine)} points, {mine[:2]}...{mine[-2:]}")
    check(mine == theirs, f"run {rid}: every step's loss is bit-identical to the uninterrupted run's "
                          f"(first difference: {next((a, b) for a, b in zip(mine + [None], theirs + [None]) if a != b) if mine != theirs else None})")
    check(epochs_of(s, rid) == epochs_of(s, full), f"and the epochs: {epochs_of(s, rid)} vs {epochs_of(s, full)}")
    last = os.path.join("checkpoints", "epoch-0003.safetensors")
    a, b = os.path.join(s.run_dir(rid), last), os.path.join(s.run_dir(full), last)
    check(os.path.exists(a) and os.path.exists(b) and sha(a) == sha(b), "and the final checkpoint's bytes")
    files = [c["file"] for c in s.get(f"/runs/{rid}/checkpoints").json()["checkpoints"]]
    check(files == ["epoch-0001.safetensors", "epoch-0003.safetensors"], f"checkpoint.keep holds: {files}")


def case_rank_killed_then_resumed(a):
    with Server(a.ddpd, a.trainer, slots=2) as s:
        full = s.submit(CONFIG)
        run = s.wait_status(full, FINAL, timeout=300)
        if not check(run and run["status"] == "succeeded", f"the uninterrupted run succeeds: {run and run['reason']}"):
            return
        total = run["progress"]["total_steps"]
        check(run["resumes"] == [], f"a run never resumed has no resumes: {run['resumes']}")

        rid = s.submit(CONFIG)
        first = wait_journal(s, rid, lambda ev: any(e["epoch"] == 2 for e in of_type(ev, "epoch")) and
                             len(rank_pids(ev)) == 2, "epoch 2 to end")
        pids = rank_pids(journal(s, rid))
        if not check(first and s.run(rid)["status"] == "running", "running, in epoch 3"):
            return
        os.kill(pids[1], signal.SIGKILL)
        run = s.wait_status(rid, FINAL, timeout=60)
        check(run and run["status"] == "failed" and "rank 1" in (run["reason"] or ""),
              f"the run fails naming rank 1: {run and run['status']} {run and run['reason']}")
        if not run or run["status"] != "failed":
            return
        prior_reason = run["reason"]
        check([c["epoch"] for c in run["checkpoints"]] == [1], f"its checkpoint is recorded: {run['checkpoints']}")
        before = losses(s, rid)
        spe = total // 4
        check(2 * spe < before[-1][0] < total, f"it stopped after epoch 2: step {before[-1][0]} of {total}")
        check([e[0] for e in epochs_of(s, rid)] == [0, 1, 2], f"epochs 0-2 recorded: {epochs_of(s, rid)}")
        on_disk = [c["file"] for c in s.get(f"/runs/{rid}/checkpoints").json()["checkpoints"]]
        newest = os.path.join(s.run_dir(rid), "checkpoints", on_disk[-1])
        newest_epoch = int(on_disk[-1][len("epoch-"):-len(".safetensors")])

        r = s.post(f"/runs/{rid}/resume")
        check(r.status == 202, f"resume -> 202: {r.status} {r.body[:400]!r}")
        body = r.json() if r.status == 202 else {}
        check(body.get("id") == rid and body.get("status") in ("queued", "starting", "running"),
              f"the same run, queued again: {body.get('id')} {body.get('status')}")
        check(body.get("reason") is None and body.get("exit_code") is None and body.get("finished_at") is None,
              f"its end is cleared: {body.get('reason')} {body.get('exit_code')} {body.get('finished_at')}")
        res = body.get("resumes") or [{}]
        check(len(res) == 1 and os.path.realpath(s.server_path(res[0].get("from_checkpoint", ""))) == os.path.realpath(newest) and res[0].get("from_epoch") == newest_epoch
              and res[0].get("prior_status") == "failed" and res[0].get("prior_reason") == prior_reason
              and (res[0].get("at") or "").endswith("Z"),
              f"the resume is in its history, from {newest} (epoch {newest_epoch}), with what it was: {res}")
        gs = res[0].get("from_global_step")
        check(isinstance(gs, int) and 0 < gs < total and (newest_epoch + 1) * spe == gs,
              f"from the checkpoint's global step: {gs}")
        check(s.post(f"/runs/{rid}/resume").status == 409, "a second resume while it is active: 409")
        # what it recorded past the checkpoint is gone (the trainer does it again):
        # any point past it now is the resumed trainer's, newer than the resume
        at_ms = iso_ms(res[0].get("at") or "1970-01-01T00:00:00.000Z")
        points = s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]
        stale = [p for p in points if p[0] > (gs or 0) and p[2] < at_ms]
        check(not stale and [p[0] for p in points][:gs] == list(range(1, (gs or 0) + 1)),
              f"the steps up to the checkpoint are kept, those after it dropped: {stale[:3]}")
        check([e[0] for e in epochs_of(s, rid)][:2] == [0, 1] and
              all(iso_ms(e["finished_at"]) >= at_ms for e in s.get(f"/runs/{rid}/epochs").json()["epochs"][2:]),
              f"and epoch 2, recorded before the resume, is dropped: {epochs_of(s, rid)}")

        run = s.wait_status(rid, FINAL, timeout=300)
        if not check(run and run["status"] == "succeeded", f"the resumed run succeeds: {run and run['reason']}"):
            s.dump_run_log(rid)
            return
        check(run["exit_code"] == 0 and run["reason"] is None, f"exit 0: {run['exit_code']} {run['reason']}")
        check(run["progress"]["global_step"] == total, f"progress at the end: {run['progress']}")
        check(len(run["resumes"]) == 1, f"one resume in its history: {run['resumes']}")
        # its count of attempts goes on: the resume started attempt 1
        check(run["resumes"][0]["attempt"] == 1 and run["restart_count"] == 1 and
              [(x["attempt"], x["status"], x["failing_rank"]) for x in run["attempts"]] == [(0, "failed", 1), (1, "succeeded", None)],
              f"the resume is attempt 1: {run['resumes']} {run['attempts']}")
        check_same_as(s, rid, full, total)
        points = s.get(f"/runs/{rid}/metrics?key=loss").json()["points"]
        check(all(p[2] < at_ms for p in points if p[0] <= gs) and all(p[2] >= at_ms for p in points if p[0] > gs),
              "the steps up to the checkpoint were not done again: the trainer continued from it")
        hellos = [e for e in of_type(journal(s, rid), "hello") if e["rank"] == -1]
        check(len(hellos) == 2, f"the journal goes on (two launchers' hellos in one events.jsonl): {len(hellos)}")
        log = s.get(f"/runs/{rid}/logs?tail=400").body.decode()
        check(f"loaded {newest}" in log,
              f"the trainer's log says what it loaded: {log[-800:]!r}")
        check(log.count("ddpd: starting") == 2, f"the log keeps both starts: {log.count('ddpd: starting')}")
        is_problem(s.post(f"/runs/{rid}/resume"), 409, "only a failed or canceled run can be resumed",
                   f"run {rid} is succeeded")


def case_canceled_then_resumed(a):
    with Server(a.ddpd, a.trainer, slots=2, grace=1) as s:
        cfg = fmnist_config(**{"name": "cancel-resume", "data.limit": 2048, "data.test_limit": 200,
                               "train.epochs": 10, "checkpoint.every_epochs": 2})
        rid = s.submit(cfg)
        ok = wait_journal(s, rid, lambda ev: of_type(ev, "checkpoint") and len(rank_pids(ev)) == 2,
                          "the first checkpoint (epoch 1)")
        pids = rank_pids(journal(s, rid))
        held = 0
        for pid in pids.values():  # held where they are, at once: the cancel lands mid-run
            try:
                os.kill(pid, signal.SIGSTOP)
                held += 1
            except ProcessLookupError:
                pass
        # the server's view trails the journal a moment (its ingest): it must see the run running
        if not check(ok and held == 2 and wait_until(lambda: s.run(rid)["status"] == "running",
                                                   "the server to see the run running", 60),
                     f"running, a checkpoint written, both ranks held ({held})"):
            return
        # the newest checkpoint on disk when the ranks were held (a fast rank may have
        # written a later one by then, and its journal line may still sit in its buffer):
        # what the resume must go on from
        ckpts = os.listdir(os.path.join(s.run_dir(rid), "checkpoints"))
        newest = max(int(n[len("epoch-"):len("epoch-") + 4]) for n in ckpts
                     if n.startswith("epoch-") and n.endswith(".safetensors") and "-step-" not in n)
        check(s.post(f"/runs/{rid}/cancel").status == 202, "cancel -> 202")
        run = s.wait_status(rid, FINAL, timeout=60)
        check(run and run["status"] == "canceled", f"canceled: {run and run['status']} {run and run['reason']}")
        check(wait_until(lambda: not pids_under(s.run_dir(rid)), "its processes to be gone", 20), "no process left")
        r = s.post(f"/runs/{rid}/resume")
        check(r.status == 202, f"a canceled run resumes: {r.status} {r.body[:300]!r}")
        run = s.wait_status(rid, FINAL, timeout=240)
        check(run and run["status"] == "succeeded", f"and succeeds: {run and run['reason']}")
        if not run:
            return
        total = run["progress"]["total_steps"]
        steps = [p[0] for p in losses(s, rid)]
        check(steps == list(range(1, total + 1)), f"one point per step: {len(steps)} of {total}")
        check([e[0] for e in epochs_of(s, rid)] == list(range(10)), f"ten epochs: {epochs_of(s, rid)}")
        res = run["resumes"]
        check(len(res) == 1 and res[0]["prior_status"] == "canceled" and res[0]["prior_reason"] == "canceled by request"
              and res[0]["from_epoch"] == newest, f"its history: resumed from epoch {newest} (its newest checkpoint) "
              f"after a cancel: {res}")
        # an uninterrupted run of the same config: the same numbers
        full = s.submit(cfg)
        frun = s.wait_status(full, FINAL, timeout=240)
        check(frun and frun["status"] == "succeeded", "the uninterrupted one succeeds")
        check(losses(s, rid) == losses(s, full), "bit-identical losses to an uninterrupted run")
        last = os.path.join("checkpoints", "epoch-0009.safetensors")
        check(sha(os.path.join(s.run_dir(rid), last)) == sha(os.path.join(s.run_dir(full), last)),
              "and final weights")


def fail_fast(s, cfg):
    """A real run that fails at once (its test labels are not an IDX file)."""
    rid = s.submit(cfg)
    return rid, s.wait_status(rid, FINAL, timeout=120)


def case_refusals(a):
    with Server(a.ddpd, a.trainer, slots=2, extra_args=["--allow-commands"]) as s:
        is_problem(s.post("/runs/999/resume"), 404, "there is no run 999")
        is_problem(s.post("/runs/abc/resume"), 404, "run ids are positive integers")
        check(s.get("/runs/1/resume").status in (404, 405), "GET on resume is not a route")

        # active: running, and queued behind it
        long = fmnist_config(**{"name": "long", "data.limit": 0, "train.epochs": 50})
        active = s.submit(long)
        queued = s.submit(dict(long, name="queued"))
        wait_until(lambda: s.run(active)["status"] == "running", "the first run to be running", 120)
        is_problem(s.post(f"/runs/{active}/resume"), 409, "only a failed or canceled run can be resumed",
                   f"run {active} is running")
        is_problem(s.post(f"/runs/{queued}/resume"), 409, f"run {queued} is queued")
        # canceled while queued: no checkpoint
        check(s.post(f"/runs/{queued}/cancel").status == 202, "cancel the queued run")
        is_problem(s.post(f"/runs/{queued}/resume"), 409, f"run {queued} has no checkpoint to resume from",
                   "its config's checkpoint.every_epochs is 1", "ended before its first checkpoint")
        check(s.post(f"/runs/{active}/cancel").status == 202, "cancel the running one")
        s.wait_status(active, "canceled", timeout=60)
        is_problem(s.post(f"/runs/{active}/resume"), 409, f"run {active} has no checkpoint to resume from")

        # a failed run that writes no checkpoints
        never = fmnist_config(**{"name": "never", "checkpoint.every_epochs": 0,
                                 "data.test.labels": "fashion-mnist/train-images-idx3-ubyte.gz"})
        rid, run = fail_fast(s, never)
        check(run and run["status"] == "failed", f"the mislabelled run fails: {run and run['reason']}")
        is_problem(s.post(f"/runs/{rid}/resume"), 409, f"run {rid} has no checkpoint to resume from",
                   "checkpoint.every_epochs is 0", "writes none")
        # the same run with a damaged checkpoint on disk: named, and what to do
        bad = os.path.join(s.run_dir(rid), "checkpoints")
        os.makedirs(bad, exist_ok=True)
        with open(os.path.join(bad, "epoch-0003.safetensors"), "wb") as f:
            f.write(b"\xff" * 8 + b"not a header")
        is_problem(s.post(f"/runs/{rid}/resume"), 409, f"run {rid} cannot be resumed from",
                   "epoch-0003.safetensors", "is not a safetensors file", "delete that file")
        check(s.run(rid)["status"] == "failed" and s.run(rid)["resumes"] == [], "a refused resume changes nothing")

        # an eval run
        ok = s.submit(fmnist_config(**{"name": "ok", "data.limit": 512, "train.epochs": 1}))
        okrun = s.wait_status(ok, FINAL, timeout=120)
        check(okrun and okrun["status"] == "succeeded", "a short run succeeds")
        is_problem(s.post(f"/runs/{ok}/resume"), 409, f"run {ok} is succeeded")
        ckpt = f"{ok}/checkpoints/epoch-0000.safetensors"
        ev, evrun = fail_fast(s, fmnist_config(**{"name": "eval", "mode": "eval", "checkpoint.load": ckpt,
                                                   "data.test.labels": "fashion-mnist/train-images-idx3-ubyte.gz"}))
        check(evrun and evrun["status"] == "failed", f"the eval run fails: {evrun and evrun['reason']}")
        is_problem(s.post(f"/runs/{ev}/resume"), 409, f"run {ev} is an eval run", "POST /runs")

        # a command run is not refused: it starts again (no checkpoint of ddpd's), its count of attempts going on
        # (tests/commands: command_resumed, what its script sees)
        cmd = s.post("/runs", {"name": "cmd", "command": ["python3", "-c", "import sys; sys.exit(3)"]})
        check(cmd.status == 201, f"a command run is taken: {cmd.status} {cmd.body[:200]!r}")
        if cmd.status == 201:
            cid = cmd.json()["id"]
            crun = s.wait_status(cid, FINAL, timeout=60)
            check(crun and crun["status"] == "failed", f"it fails: {crun and crun['reason']}")
            r = s.post(f"/runs/{cid}/resume")
            check(r.status == 202, f"a failed command run is resumed: {r.status} {r.body[:200]!r}")
            wait_until(lambda: s.run(cid)["restart_count"] == 1 and s.run(cid)["status"] in FINAL,
                       "its second attempt to fail too", 60)
            crun = s.run(cid)
            check(crun["status"] == "failed" and [x["from_checkpoint"] for x in crun["resumes"]] == [None] and
                  [x["attempt"] for x in crun["resumes"]] == [1] and
                  [(x["attempt"], x["status"]) for x in crun["attempts"]] == [(0, "failed"), (1, "failed")],
                  f"recorded: a resume without a checkpoint at attempt 1; both attempts: {crun['resumes']} "
                  f"{crun['attempts']}")

        # deleted: its resumes go with it
        check(s.request("DELETE", f"/runs/{ok}").status == 204, "delete")
        is_problem(s.post(f"/runs/{ok}/resume"), 404, f"there is no run {ok}")


def case_train_from_checkpoint(a):
    """checkpoint.load on a train run: it starts from that checkpoint (weights,
    optimizer state, position) and goes on as the run that wrote it did; one that
    does not fit the config is refused at submission, naming the misfit."""
    base = fmnist_config(**{"name": "a", "data.limit": 2048, "data.test_limit": 200, "train.epochs": 2})
    with Server(a.ddpd, a.trainer, slots=2) as s:
        first = s.submit(base)
        run = s.wait_status(first, FINAL, timeout=180)
        if not check(run and run["status"] == "succeeded", f"the first run succeeds: {run and run['reason']}"):
            return
        spe = run["progress"]["total_steps"] // 2
        ckpt = f"{first}/checkpoints/epoch-0000.safetensors"
        n_runs = len(s.get("/runs").json()["runs"])
        for over, pointer, words in (
                ({"model.hidden": [64, 64]}, "/checkpoint/load", "does not fit model.hidden: its hidden layer 0 is 128 wide, the config's is 64"),
                ({"model.hidden": [128]}, "/checkpoint/load", "made for a model with 2 hidden layers, but model.hidden has 1"),
                ({"model.hidden": [128, 64, 32]}, "/checkpoint/load", "made for a model with 2 hidden layers, but model.hidden has 3"),
                ({"train.optimizer": {"type": "sgd"}}, "/checkpoint/load", "holds adam optimizer state but train.optimizer.type is sgd"),
                ({"model.type": "cnn"}, "/checkpoint/load", "holds a mlp model but model.type is cnn"),
                ({"train.epochs": 1}, "/train/epochs", "already holds 1 epochs: nothing is left to train"),
                ({"checkpoint.load": f"{first}/config.json"}, "/checkpoint/load", "is not a safetensors file")):
            cfg = fmnist_config(**dict({"name": "misfit", "checkpoint.load": ckpt}, **over))
            r = s.post("/runs", cfg)
            errors = r.json().get("errors", []) if r.status == 400 else []
            hit = [e for e in errors if e.get("pointer") == pointer and words in e.get("message", "")]
            check(r.status == 400 and hit, f"{over}: 400 at {pointer} saying {words!r}: {r.status} {errors or r.body[:300]}")
        check(len(s.get("/runs").json()["runs"]) == n_runs, "nothing refused was stored")
        ev = s.submit(fmnist_config(**{"name": "eval", "mode": "eval", "checkpoint.load": ckpt,
                                       "train.optimizer": {"type": "sgd"}}))
        check(s.wait_status(ev, FINAL, timeout=120)["status"] == "succeeded",
              "an eval run takes the weights only: its optimizer is not held against the checkpoint")

        second = s.submit(dict(base, name="b", checkpoint={"load": ckpt}))
        run = s.wait_status(second, FINAL, timeout=180)
        if not check(run and run["status"] == "succeeded", f"the run from the checkpoint succeeds: {run and run['reason']}"):
            return
        mine = losses(s, second)
        check([p[0] for p in mine] == list(range(spe + 1, 2 * spe + 1)),
              f"it starts after the checkpoint's epoch 0: steps {mine[:1]}...{mine[-1:]}")
        check(mine == losses(s, first)[spe:], "and its losses are the first run's, bit for bit")
        check([e[0] for e in epochs_of(s, second)] == [1], f"it trains epoch 1 only: {epochs_of(s, second)}")
        last = os.path.join("checkpoints", "epoch-0001.safetensors")
        check(sha(os.path.join(s.run_dir(second), last)) == sha(os.path.join(s.run_dir(first), last)),
              "the final checkpoints are identical")


def plant_checkpoint(path, next_epoch, global_step):
    """A safetensors file with no tensors and ddpd's position metadata: what the
    server reads of a checkpoint (the fake trainer loads nothing)."""
    header = json.dumps({"__metadata__": {"format": "ddpd-checkpoint-1", "next_epoch": str(next_epoch),
                                          "next_step": "0", "global_step": str(global_step)}}).encode()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)


def case_queued_resume_survives_restart(a):
    """A resumed run still queued when the server stops is started with --resume by
    the next server; deleting it deletes its resumes."""
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state) as s:
            holder = s.submit({"name": "sleep"})
            wait_until(lambda: s.run(holder)["status"] == "running", "the slot to be taken", 60)
            rid = s.submit({"name": "record"})
            check(s.post(f"/runs/{rid}/cancel").status == 202, "canceled while queued")
            ckpt = os.path.join(s.run_dir(rid), "checkpoints", "epoch-0002.safetensors")
            plant_checkpoint(ckpt, 3, 30)
            r = s.post(f"/runs/{rid}/resume")
            body = r.json() if r.status == 202 else {}
            check(r.status == 202 and body.get("status") == "queued" and body.get("queue_position") == 1,
                  f"queued again, behind the running run: {r.status} {body.get('status')} {body.get('queue_position')}")
            res = (body.get("resumes") or [{}])[0]
            check(s.server_path(res.get("from_checkpoint", "")) == os.path.realpath(ckpt) and res.get("from_epoch") == 2 and res.get("from_global_step") == 30
                  and res.get("prior_status") == "canceled", f"from the planted checkpoint's position: {res}")
            check(body.get("progress", {}).get("global_step") == 30, f"its progress is the checkpoint's: {body.get('progress')}")
        with Server(a.ddpd, a.fake_trainer, slots=1, state_dir=state) as s:
            run = s.wait_status(rid, FINAL, timeout=60)
            check(run and run["status"] == "succeeded", f"the next server starts it: {run and run['status']}")
            with open(os.path.join(s.run_dir(rid), "fake.json")) as f:
                argv = json.load(f)["argv"]
            check("--resume" in argv and argv.index("--resume") < argv.index("--data-root"),
                  f"with --resume on its trainer's command line: {argv}")
            check(len(run["resumes"]) == 1, f"its history survived the restart: {run['resumes']}")
            check(s.request("DELETE", f"/runs/{rid}").status == 204, "delete it")
            import sqlite3
            db = sqlite3.connect(os.path.join(state, "ddpd.db"))
            left = db.execute("SELECT count(*) FROM run_resumes WHERE run_id = ?", (rid,)).fetchone()[0]
            db.close()
            check(left == 0, f"its resumes went with it: {left} left")
    finally:
        shutil.rmtree(state, ignore_errors=True)


def case_env_passed_on(a):
    """The trainer gets the DDPD_* settings it reads (by name), none of the others."""
    passed = {"DDPD_CACHE_DIR": "/tmp/ddpd-cache-test", "DDPD_COLLECTIVE_TIMEOUT_S": "7", "DDPD_CPU_CONV": "im2col",
              "DDPD_TRAINER_NCCL": "/nonexistent/ddp-trainer-nccl", "DDPD_RENDEZVOUS_TIMEOUT_S": "9",
              "DDPD_RESTART_BACKOFF_S": "4"}
    kept = {"DDPD_TOKEN": "s3cret-token", "DDPD_LOG_LEVEL": "info", "DDPD_SOMETHING_ELSE": "x"}
    # the cap on a run's logs: serve's own setting, passed on as it read it, in bytes
    cap = {"DDPD_MAX_LOG_BYTES_PER_RUN": "2M"}
    with Server(a.ddpd, a.fake_trainer, env=dict(passed, **kept, **cap)) as s:
        s.headers = {"Authorization": "Bearer s3cret-token"}
        rid = s.submit({"name": "record"})
        run = s.wait_status(rid, "succeeded", timeout=60)
        if not check(run is not None, "the recording run succeeds"):
            return
        with open(os.path.join(s.run_dir(rid), "fake.json")) as f:
            env = json.load(f)["env"]
        for k, v in passed.items():
            check(env.get(k) == v, f"{k} reaches the trainer: {env.get(k)!r}")
        check(env.get("DDPD_MAX_LOG_BYTES_PER_RUN") == str(2 << 20),
              f"the log cap reaches it in bytes: {env.get('DDPD_MAX_LOG_BYTES_PER_RUN')!r}")
        got = sorted(k for k in env if k.startswith("DDPD_"))
        check(got == sorted(list(passed) + list(cap) + ["DDPD_RUN_ID", "DDPD_RUN_SECRET"]),
              f"and no other DDPD_* variable (the token stays with the server): {got}")


def case_cache_cut_short_named(a):
    """DDPD_CACHE_DIR through the server: a cache file cut short under a served run
    fails it with a reason naming the cache, not only 'signal 7 (Bus error)'."""
    cache = tempfile.mkdtemp(prefix="ddpd-cache-")
    try:
        with Server(a.ddpd, a.trainer, slots=2, env={"DDPD_CACHE_DIR": cache}) as s:
            cfg = fmnist_config(**{"name": "cache", "data.limit": 0, "train.epochs": 1, "data.test_limit": 200,
                                   "model.hidden": [256]})
            first = s.submit(cfg)
            run = s.wait_status(first, FINAL, timeout=300)
            check(run and run["status"] == "succeeded", f"a first run fills the cache: {run and run['reason']}")
            files = sorted(os.path.join(cache, f) for f in os.listdir(cache) if f.endswith(".idxcache"))
            check(len(files) == 2, f"the served run used the server's DDPD_CACHE_DIR: {files}")
            if len(files) != 2:
                return
            rid = s.submit(dict(cfg, train={"epochs": 5, "batch_size": 128}))
            wait_journal(s, rid, lambda ev: len(of_type(ev, "step")) >= 3, "training to start")
            for path in files:
                fd = os.open(path, os.O_RDWR)
                os.ftruncate(fd, 4096)
                os.close(fd)
            run = s.wait_status(rid, FINAL, timeout=120)
            reason = (run and run["reason"]) or ""
            named = [f for f in files if f"the dataset cache file {f} was cut short" in reason]
            check(run and run["status"] == "failed" and "signal 7" in reason and len(named) == 1
                  and "delete it" in reason, f"the reason names the cache file and what to do: {reason!r}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
