#!/usr/bin/env python3
"""ddp-run's restarts (distributed.max_restarts, torchrun's --max-restarts), run
directly on real processes: a script of pytorch/examples' multigpu_torchrun.py shape
(DDP on gloo, a snapshot every epoch on rank 0, loaded on start) whose rank 1 crashes
once ends with the weights of an uninterrupted run, its ranks having seen
TORCHELASTIC_RESTART_COUNT 1 on the second attempt; restarts that run out; a cancel
during the pause, during a restarted attempt and while a failed one is being stopped;
another MASTER_PORT when the run's own is taken; each attempt's `attempt` events and
its part of every rank's log; a node's part that is not restarted alone.

Usage: test_ddp_run_restarts.py CASE --ddp-run PATH"""
import json, os, signal, socket, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402
import test_ddp_run as base  # noqa: E402  (Launch, script, wait_until: one launch of ddp-run)
from test_ddp_run import Launch, script, wait_until, PYTHON  # noqa: E402


def attempts(L):
    """The launcher's `attempt` events, in order."""
    return [e for e in L.journal() if e["type"] == "attempt" and e["rank"] == -1]


def events_follow_schema(L):
    import jsonschema
    with open(os.path.join(HERE, "..", "..", "..", "schema", "events.schema.json")) as f:
        v = jsonschema.Draft202012Validator(json.load(f))
    mine = [e for e in L.journal() if e["rank"] == -1]
    bad = [(e, next(iter(v.iter_errors(e))).message) for e in mine if not v.is_valid(e)]
    check(mine and not bad, f"{len(bad)} of the launcher's {len(mine)} events break the schema, the first: {bad[:1]}")


# pytorch/examples' distributed/ddp-tutorial-series/multigpu_torchrun.py, on the CPU
# with gloo: a Trainer that loads its snapshot when there is one and saves one on
# rank 0 after every epoch (to a temporary name, then renamed, so that a crash never
# leaves half a snapshot). Rank 1 crashes in epoch 2's first step once when asked.
TORCHRUN_SCRIPT = """
    import json, os, sys
    import torch, torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler

    out = sys.argv[1]
    rank = int(os.environ["RANK"])
    restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])


    class Trainer:
        def __init__(self, model, data, optimizer, snapshot_path):
            self.model = model
            self.data = data
            self.optimizer = optimizer
            self.epochs_run = 0
            self.snapshot_path = snapshot_path
            if os.path.exists(snapshot_path):
                snapshot = torch.load(snapshot_path)
                self.model.load_state_dict(snapshot["MODEL_STATE"])
                self.epochs_run = snapshot["EPOCHS_RUN"]
                print(f"Resuming training from snapshot at Epoch {self.epochs_run}", flush=True)
            self.model = DDP(self.model)

        def _run_batch(self, source, targets):
            self.optimizer.zero_grad()
            loss = F.mse_loss(self.model(source), targets)
            loss.backward()
            self.optimizer.step()

        def _run_epoch(self, epoch):
            self.data.sampler.set_epoch(epoch)
            for i, (source, targets) in enumerate(self.data):
                if epoch == 2 and i == 1 and rank == 1 and restart == 0 and os.environ.get("CRASH_ONCE"):
                    print("RuntimeError: rank 1 crashed in epoch 2", file=sys.stderr, flush=True)
                    os._exit(1)
                self._run_batch(source, targets)

        def _save_snapshot(self, epoch):
            snapshot = {"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}
            torch.save(snapshot, self.snapshot_path + ".tmp")
            os.replace(self.snapshot_path + ".tmp", self.snapshot_path)
            print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}", flush=True)

        def train(self, max_epochs):
            for epoch in range(self.epochs_run, max_epochs):
                self._run_epoch(epoch)
                if rank == 0:
                    self._save_snapshot(epoch)


    dist.init_process_group("gloo")
    with open(os.path.join(out, f"seen-{rank}.jsonl"), "a") as f:
        f.write(json.dumps({k: os.environ[k] for k in ("TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
                                                       "MASTER_PORT")}) + "\\n")
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 20), torch.randn(512, 1))
    loader = DataLoader(data, batch_size=32, shuffle=False, sampler=DistributedSampler(data, seed=7))
    model = torch.nn.Linear(20, 1)
    trainer = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=1e-2), os.path.join(out, "snapshot.pt"))
    trainer.train(5)
    if rank == 0:
        state = trainer.model.module.state_dict()
        with open(os.path.join(out, "final.json"), "w") as f:
            json.dump({k: v.detach().numpy().tobytes().hex() for k, v in state.items()}, f)
    del trainer, model  # before the group goes (a torch 1.13 gloo deadlock at exit: docs/using.md)
    dist.barrier()
    dist.destroy_process_group()
"""


def seen(out, rank):
    with open(os.path.join(out, f"seen-{rank}.jsonl")) as f:
        return [json.loads(line) for line in f]


def final_weights(out):
    with open(os.path.join(out, "final.json")) as f:
        return json.load(f)


def case_torchrun_snapshot_restart(d):
    s = script(d, "multigpu_torchrun.py", TORCHRUN_SCRIPT)
    outs = {}
    for name in ("straight", "crashes", "no_restarts"):
        outs[name] = os.path.join(d, "out-" + name)
        os.makedirs(outs[name])

    straight = Launch(d, [PYTHON, s, outs["straight"]], 2, name="straight")
    check(straight.wait(timeout=240) == 0, f"the uninterrupted run succeeded: {straight.stderr[-600:]!r}")

    L = Launch(d, [PYTHON, s, outs["crashes"]], 2, name="crashes", env={"CRASH_ONCE": "1"},
               distributed={"max_restarts": 2})
    rc = L.wait(timeout=240)
    check(rc == 0 and L.end().get("status") == "succeeded",
          f"the run whose rank 1 crashed once succeeded on its second attempt: {rc} {L.end()} {L.stderr[-600:]!r}")
    a = attempts(L)
    check([(e["attempt"], e["phase"], e.get("status")) for e in a] ==
          [(0, "started", None), (0, "ended", "failed"), (1, "started", None), (1, "ended", "succeeded")],
          f"two attempts, the first failed: {a}")
    if len(a) == 4:
        check(a[1]["failing_rank"] == 1 and a[1]["exit_code"] == 1 and a[1]["signal"] is None
              and a[1]["last_line"] == "RuntimeError: rank 1 crashed in epoch 2" and a[1]["restarting"] is True
              and a[1]["reason"] == "rank 1 exited with status 1: RuntimeError: rank 1 crashed in epoch 2",
              f"the first attempt's end names rank 1, its status and its last line: {a[1]}")
        check(a[0]["max_restarts"] == 2 and a[2]["master_port"] == L.port == a[0]["master_port"],
              f"the same MASTER_PORT, still free, for both: {a[0]} {a[2]}")
    for r in (0, 1):
        counts = [(e["TORCHELASTIC_RESTART_COUNT"], e["TORCHELASTIC_MAX_RESTARTS"]) for e in seen(outs["crashes"], r)]
        check(counts == [("0", "2"), ("1", "2")], f"rank {r} saw TORCHELASTIC_RESTART_COUNT 0 then 1, max 2: {counts}")
    check("Resuming training from snapshot at Epoch 2" in L.rank_log(0) and
          "Resuming training from snapshot at Epoch 2" in L.rank_log(1),
          f"the second attempt loaded the snapshot of epoch 1: {L.rank_log(0)[-400:]!r}")
    with open(os.path.join(L.run_dir, "trainer.log")) as f:
        log = f.read()
    want = ("attempt 1 starting (TORCHELASTIC_RESTART_COUNT=1; the last allowed is attempt 2) in 1 s: rank 1 exited with status 1: "
            "RuntimeError: rank 1 crashed in epoch 2")
    check(want in L.stderr or want in log, f"the run's log says why attempt 2 starts: {L.stderr[-800:]!r}")
    got, wanted = final_weights(outs["crashes"]), final_weights(outs["straight"])
    check(got == wanted and len(got) == 2, f"the final weights are the uninterrupted run's, bit for bit: {got} {wanted}")
    events_follow_schema(L)
    check(wait_until(lambda: not L.left_running(), 30), f"nothing left: {L.left_running()}")

    # max_restarts 0 (the default): the same crash fails the run, naming the rank
    L = Launch(d, [PYTHON, s, outs["no_restarts"]], 2, name="no_restarts", env={"CRASH_ONCE": "1"})
    rc = L.wait(timeout=240)
    end = L.end()
    check(rc == 1 and end.get("status") == "failed" and
          end.get("reason") == "rank 1 exited with status 1: RuntimeError: rank 1 crashed in epoch 2",
          f"without restarts the crash fails the run naming rank 1: {rc} {end}")
    a = attempts(L)
    check([(e["attempt"], e["phase"]) for e in a] == [(0, "started"), (0, "ended")] and a[-1]["restarting"] is False,
          f"one attempt, no restart: {a}")
    check(not os.path.exists(os.path.join(outs["no_restarts"], "final.json")), "and it never finished")


# Rank 0 marks each attempt it reached (a file in the directory given), and the rank
# that fails waits for that mark: rank 0 has then surely done what the test looks for.
WAIT_FOR_RANK_0 = """
    import os, sys, time
    k = os.environ["TORCHELASTIC_RESTART_COUNT"]
    mark = os.path.join(sys.argv[1], "rank0-on-" + k)
    if os.environ["RANK"] == "0":
        if os.environ.get("STUBBORN"):
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(mark, "w").close()
    else:
        while not os.path.exists(mark):
            time.sleep(0.01)
"""

ALWAYS_FAILS = """
    import os, sys, time
    k = os.environ["TORCHELASTIC_RESTART_COUNT"]
    print(f"rank {os.environ['RANK']} attempt {k} of max {os.environ['TORCHELASTIC_MAX_RESTARTS']}", flush=True)
""" + WAIT_FOR_RANK_0 + """
    if os.environ["RANK"] == "1":
        sys.stdout.write(f"gives up on attempt {k}")  # no newline: the next attempt's marker starts a line
        sys.exit(7)
    time.sleep(600)
"""


def case_restarts_used_up(d):
    s = script(d, "always.py", ALWAYS_FAILS)
    L = Launch(d, [PYTHON, s, d], 2, distributed={"max_restarts": 2}, launcher_env={"DDPD_RESTART_BACKOFF_S": "0"})
    rc = L.wait(timeout=240)
    end = L.end()
    check(rc == 1 and end.get("status") == "failed" and end.get("exit_code") == 1 and end.get("reason") ==
          "all 3 attempts failed (distributed.max_restarts is 2); the last: rank 1 exited with status 7: gives up on attempt 2",
          f"the reason says how many attempts there were and names the last one's failing rank: {rc} {end}")
    a = attempts(L)
    check([(e["attempt"], e["phase"], e.get("restarting")) for e in a] ==
          [(0, "started", None), (0, "ended", True), (1, "started", None), (1, "ended", True),
           (2, "started", None), (2, "ended", False)], f"three attempts, two restarts: {a}")
    base.launcher_events_ok(L, "failed")
    events_follow_schema(L)

    # every attempt's output is kept, one after another in each rank's log; the
    # `started` event says where each attempt's part begins
    starts = [e for e in a if e["phase"] == "started"]
    for r in (0, 1):
        with open(os.path.join(L.run_dir, "ranks", f"rank-{r}.log"), "rb") as f:
            log = f.read()
        offsets = [e["log_offsets"][str(r)] for e in starts] + [len(log)]
        parts = [log[offsets[k]:offsets[k + 1]].decode() for k in range(3)]
        for k, part in enumerate(parts):
            marker = (f"--- ddp-run: attempt {k} starting (TORCHELASTIC_RESTART_COUNT={k}; the last allowed is attempt 2); program "
                      f"{os.path.realpath(PYTHON)}; working directory {L.run_dir} ---\n")
            want = marker + f"rank {r} attempt {k} of max 2\n" + (f"gives up on attempt {k}" if r == 1 else "")
            check(part.rstrip("\n") == want.rstrip("\n") if r == 1 else part == want,
                  f"rank {r}'s log from attempt {k}'s offset {offsets[k]}: {part!r}, wanted {want!r}")
    check(wait_until(lambda: not L.left_running(), 30), f"nothing left: {L.left_running()}")

    # --restart-count: a run whose count goes on (a resumed run: the same run
    # directory, its logs going on) starts at that attempt
    L2 = Launch(d, [PYTHON, s, d], 2, distributed={"max_restarts": 1}, name="run",
                launcher_env={"DDPD_RESTART_BACKOFF_S": "0"}, args=["--restart-count", "3"])
    rc = L2.wait(timeout=240)
    check(rc == 1 and L2.end().get("reason") ==
          "all 2 attempts failed (distributed.max_restarts is 1); the last: rank 1 exited with status 7: gives up on attempt 4",
          f"attempts 3 and 4 were made: {L2.end()}")
    a = [(e["attempt"], e["phase"]) for e in attempts(L2)]
    check(a[-4:] == [(3, "started"), (3, "ended"), (4, "started"), (4, "ended")], f"numbered from 3: {a}")
    check("--- ddp-run: attempt 3 starting (TORCHELASTIC_RESTART_COUNT=3; the last allowed is attempt 4); program " in L2.rank_log(0) and
          " ---\nrank 0 attempt 3 of max 1\n" in L2.rank_log(0), f"the first attempt of a count that goes on is marked too: {L2.rank_log(0)[-300:]!r}")
    # --restarts-from: the server started the run again within one launch's restarts
    # (it lost the run's processes after attempt 2 began): attempts 3 and 4 are what
    # is left of the 2 restarts counted from attempt 2
    L3 = Launch(d, [PYTHON, s, d], 2, distributed={"max_restarts": 2}, name="again",
                launcher_env={"DDPD_RESTART_BACKOFF_S": "0"}, args=["--restart-count", "3", "--restarts-from", "2"])
    rc = L3.wait(timeout=240)
    check(rc == 1 and L3.end().get("reason") ==
          "all 3 attempts failed (distributed.max_restarts is 2); the last: rank 1 exited with status 7: gives up on attempt 4",
          f"attempts 3 and 4, counted with attempt 2: {L3.end()}")
    a = [(e["attempt"], e["phase"]) for e in attempts(L3)]
    check(a == [(3, "started"), (3, "ended"), (4, "started"), (4, "ended")], f"numbered from 3, up to 4: {a}")
    check("--- ddp-run: attempt 3 starting (TORCHELASTIC_RESTART_COUNT=3; the last allowed is attempt 4); program " in L3.rank_log(0),
          f"attempt 3, the last allowed 4 counted from attempt 2: {L3.rank_log(0)[-300:]!r}")
    for args, words in ((["--restart-count", "-1"], "--restart-count -1 is not a number of attempts"),
                        (["--restart-count", "x"], "--restart-count x is not a number of attempts"),
                        (["--restart-count", "1", "--restarts-from", "2"],
                         "--restarts-from 2 is after --restart-count 1"),
                        (["--restarts-from", "y"], "--restarts-from y is not a number of attempts"),
                        (["--port-range", "2000"], "--port-range \"2000\": want LO-HI")):
        bad = Launch(d, [PYTHON, s, d], 1, name="refused", args=args)
        check(bad.wait() == 2 and words in bad.stderr, f"{args} refused saying {words!r}: {bad.stderr!r}")


CRASH_ONCE_THEN_SLEEP = WAIT_FOR_RANK_0 + """
    if os.environ["RANK"] == "1" and k == "0":
        print("crashing on the first attempt", flush=True)
        sys.exit(5)
    print(f"ready on attempt {k}", flush=True)
    time.sleep(600)
"""


def marks(d, name):
    """A directory of its own for a launch's WAIT_FOR_RANK_0 marks."""
    path = os.path.join(d, "marks-" + name)
    os.makedirs(path)
    return path


def log_says(L, words):
    return any(e["type"] == "log" and words in e.get("msg", "") for e in L.journal())


def case_cancel_stops_for_good(d):
    s = script(d, "once.py", CRASH_ONCE_THEN_SLEEP)
    # during the pause before attempt 2 (a long one, so that it is surely there)
    L = Launch(d, [PYTHON, s, marks(d, "pause")], 2, distributed={"max_restarts": 3},
               launcher_env={"DDPD_RESTART_BACKOFF_S": "600"})
    check(wait_until(lambda: any(e["phase"] == "ended" and e["restarting"] for e in attempts(L)), 120),
          f"attempt 1 failed and a restart is due: {attempts(L)}")
    check(wait_until(lambda: log_says(L, "in 600 s: rank 1 exited with status 5"), 30), "the pause began")
    os.killpg(L.p.pid, signal.SIGTERM)  # as ddpd cancels
    rc = L.wait(timeout=60)  # well before the pause would end
    end = L.end()
    check(rc == 128 + signal.SIGTERM and end.get("status") == "canceled" and end.get("exit_code") == rc and
          end.get("reason") == "canceled by SIGTERM before attempt 1 (rank 1 exited with status 5: crashing on the "
                               "first attempt)", f"canceled for good during the pause: {rc} {end}")
    check([(e["attempt"], e["phase"]) for e in attempts(L)] == [(0, "started"), (0, "ended")],
          f"no second attempt started: {attempts(L)}")
    base.launcher_events_ok(L, "canceled")
    check(wait_until(lambda: not L.left_running(), 30), f"nothing left: {L.left_running()}")

    # during a restarted attempt: canceled, no third
    L = Launch(d, [PYTHON, s, marks(d, "during")], 2, distributed={"max_restarts": 3}, name="during",
               launcher_env={"DDPD_RESTART_BACKOFF_S": "0"})
    check(wait_until(lambda: all("ready on attempt 1" in L.rank_log(r) for r in (0, 1)), 120),
          f"attempt 2 runs: {L.rank_log(1)[-200:]!r}")
    os.killpg(L.p.pid, signal.SIGTERM)
    rc = L.wait(timeout=120)
    check(rc == 128 + signal.SIGTERM and L.end().get("reason") == "canceled by SIGTERM",
          f"the restarted attempt was canceled: {rc} {L.end()}")
    a = attempts(L)
    check([(e["attempt"], e["phase"], e.get("status")) for e in a][-2:] == [(1, "started", None), (1, "ended", "canceled")]
          and len(a) == 4, f"and nothing followed: {a}")
    check(wait_until(lambda: not L.left_running(), 30), f"nothing left: {L.left_running()}")

    # while a failed attempt is being stopped (rank 0 ignores SIGTERM, so the grace
    # runs): the cancel is heard, the second SIGTERM ends the grace, no restart
    L = Launch(d, [PYTHON, s, marks(d, "stopping")], 2, distributed={"max_restarts": 3}, name="stopping",
               env={"STUBBORN": "1"},
               launcher_env={"DDPD_RESTART_BACKOFF_S": "0", "DDPD_CANCEL_GRACE_S": "600"})
    check(wait_until(lambda: log_says(L, "rank 1 exited with status 5: stopping the other ranks"), 120),
          "rank 1 failed and rank 0 is being stopped")
    os.killpg(L.p.pid, signal.SIGTERM)
    check(wait_until(lambda: log_says(L, "received SIGTERM while the ranks are being stopped: the run will not start "
                                         "again"), 60), "the cancel was heard")
    os.killpg(L.p.pid, signal.SIGTERM)
    rc = L.wait(timeout=120)
    check(rc == 128 + signal.SIGTERM and L.end().get("reason") ==
          "canceled by SIGTERM as a failed attempt was being stopped (rank 1 exited with status 5: crashing on the "
          "first attempt)", f"canceled, saying what had happened: {rc} {L.end()}")
    check(len(attempts(L)) == 2, f"no restart: {attempts(L)}")
    check(wait_until(lambda: not L.left_running(), 30), f"nothing left: {L.left_running()}")


PORT_SCRIPT = """
    import os, sys
    k = os.environ["TORCHELASTIC_RESTART_COUNT"]
    print(f"MASTER_PORT={os.environ['MASTER_PORT']} on attempt {k}", flush=True)
    sys.exit(6 if os.environ["RANK"] == "1" and k == "0" else 0)
"""


def case_port_taken(d):
    """The run's MASTER_PORT taken when a restart comes (here from the start: the
    script does not listen itself): the restart takes the next free port of
    --port-range, or without one a port the kernel picks."""
    s = script(d, "port.py", PORT_SCRIPT)
    for name, ranged in (("ranged", True), ("kernel", False)):
        holder = socket.socket()
        holder.bind(("0.0.0.0", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        L = Launch(d, [PYTHON, s], 2, distributed={"max_restarts": 1}, name=name, port=port,
                   launcher_env={"DDPD_RESTART_BACKOFF_S": "0"},
                   args=["--port-range", f"{port}-{port + 40}"] if ranged else [])
        rc = L.wait(timeout=120)
        holder.close()
        check(rc == 0, f"{name}: the second attempt succeeded: {rc} {L.stderr[-400:]!r}")
        a = [e for e in attempts(L) if e["phase"] == "started"]
        first = port
        fresh = a[1]["master_port"] if len(a) == 2 else None
        check(a and a[0]["master_port"] == first, f"{name}: attempt 1 on the run's port {first}: {a}")
        check(fresh is not None and fresh != first, f"{name}: attempt 2 on another: {a}")
        if ranged:
            check(fresh is not None and port < fresh <= port + 40, f"{name}: within the range: {fresh}")
        check(f"MASTER_PORT={fresh} on attempt 1" in L.rank_log(0) and f"MASTER_PORT={fresh} on attempt 1" in L.rank_log(1),
              f"{name}: the ranks were given it: {L.rank_log(0)!r}")
        check(log_says(L, f"MASTER_PORT {first} is taken now (by another program): attempt 1 uses {fresh}"),
              f"{name}: the log says so")


def case_node_part_not_restarted_alone(d):
    """A node's part of a run across nodes never restarts on its own: the other
    nodes' ranks lost their peers. Its ranks still see the configured maximum."""
    s = script(d, "always.py", ALWAYS_FAILS)
    L = Launch(d, [PYTHON, s, d], 4, distributed={"max_restarts": 2}, launcher_env={"DDPD_RESTART_BACKOFF_S": "0"},
               args=["--nodes", "2", "--node-rank", "0"])
    rc = L.wait(timeout=120)
    check(rc == 1 and L.end().get("reason") == "rank 1 exited with status 7: gives up on attempt 0",
          f"the first failure ends the part, as without restarts: {rc} {L.end()}")
    check([(e["attempt"], e["phase"], e.get("restarting")) for e in attempts(L)] ==
          [(0, "started", None), (0, "ended", False)], f"one attempt: {attempts(L)}")
    check("rank 0 attempt 0 of max 2" in L.rank_log(0), f"TORCHELASTIC_MAX_RESTARTS is the config's: {L.rank_log(0)!r}")
    check(log_says(L, "a node's part of a run across nodes is not restarted on its own"), "the log says why")


CASES = cases_in(globals())

if __name__ == "__main__":
    case = sys.argv[1]
    base.DDP_RUN = sys.argv[sys.argv.index("--ddp-run") + 1]
    with tempfile.TemporaryDirectory(prefix="ddp-run-restarts-") as d:
        CASES[case](d)
    checks.finish(f"ddp-run restarts {case}")
