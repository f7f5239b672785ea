#!/usr/bin/env python3
"""ddp-run, the launcher of command runs, run directly (no server) on real processes:
the torchrun environment of every rank (whole allocation or one GPU each), the ranks'
output in ranks/rank-N.log and prefixed on the launcher's stdout, gang failure (the
first failing rank named with its last line or its TORCHELASTIC_ERROR_FILE message, the
others stopped, nothing left running), a command that cannot run, cancel by SIGTERM,
the grace its flags give the ranks (--stop-grace, --preempt-grace on SIGUSR1), ranks
stopped at exit after another exited 0 (distributed.exit_timeout_s),
refused configs, the installed copy finding the installed reporter, and a real 2-rank PyTorch DDP script (Debian's python3-torch, gloo)
reporting through `import ddpd` to a socket.

Usage: test_ddp_run.py CASE --ddp-run PATH --cmake CMAKE --build BUILD_DIR"""
import json, os, signal, socket, subprocess, sys, tempfile, textwrap, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPORTER_DIR = os.path.realpath(os.path.join(HERE, "..", "..", "..", "reporter", "python"))
import checks  # noqa: E402
from procs import live_with_env  # noqa: E402
from checks import check, cases_in  # noqa: E402
from fake_ingest import Listener  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's, as users' scripts run (python3-torch is for it)
DDP_RUN = None
TORCHRUN_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                 "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                 "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING",
                 "OMP_NUM_THREADS", "PYTHONUNBUFFERED"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launch:
    """One ddp-run: config.json and the run dir in `d`, every rank marked (DDPD_TEST_MARK
    in the config's env) so that what is left of it can be found in /proc."""

    def __init__(self, d, command, world_size=2, env=None, distributed=None, extra=None, launcher_env=None,
                 events=None, name="run", args=(), port=None):
        self.mark = uuid.uuid4().hex
        self.run_dir = os.path.join(d, name)
        self.config = dict(command=command, env=dict(env or {}, DDPD_TEST_MARK=self.mark),
                           distributed=dict(distributed or {}, world_size=world_size), **(extra or {}))
        self.config_path = os.path.join(d, name + ".json")
        with open(self.config_path, "w") as f:
            json.dump(self.config, f)
        self.port = port or free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_")}
        self.env.update({"DDPD_RUN_ID": "41", "DDPD_RUN_SECRET": "s3cret-41", "CUDA_VISIBLE_DEVICES": ""})
        self.env.update(launcher_env or {})
        argv = [DDP_RUN, "--config", self.config_path, "--run-dir", self.run_dir, "--master-port", str(self.port)]
        if events:
            argv += ["--events", events]
        argv += list(args)
        # its own session, as ddpd starts it: ddpd cancels by signalling the group
        self.p = subprocess.Popen(argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  errors="replace", start_new_session=True)
        self.stdout = self.stderr = None

    def wait(self, timeout=120):
        self.stdout, self.stderr = self.p.communicate(timeout=timeout)
        return self.p.returncode

    def journal(self):
        path = os.path.join(self.run_dir, "events.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]

    def end(self):
        ends = [e for e in self.journal() if e["type"] == "end"]
        return ends[-1] if ends else {}

    def rank_log(self, r):
        path = os.path.join(self.run_dir, "ranks", f"rank-{r}.log")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f.read()

    def left_running(self):
        """Live (not zombie) processes carrying this launch's mark."""
        return live_with_env("DDPD_TEST_MARK", self.mark)


def wait_until(cond, timeout=60, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def script(d, name, body):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(body))
    return path


def launcher_events_ok(L, status):
    ev = [e for e in L.journal() if e["rank"] == -1]
    check(ev and ev[0]["type"] == "hello" and ev[0]["secret"] is None and ev[0]["device"] is None
          and ev[0]["world_size"] == L.config["distributed"]["world_size"] and ev[0]["run"] == "41",
          f"the launcher's hello comes first, no secret in the journal: {ev[:1]}")
    check(ev and ev[-1]["type"] == "end" and ev[-1]["status"] == status,
          f"its end comes last, {status}: {ev[-1:]}")
    seqs = [e["seq"] for e in ev]
    check(seqs == list(range(len(seqs))), f"seq counts from 0: {seqs}")


DUMP_ENV = """
    import json, os, sys
    import ddpd
    out = dict(os.environ, cwd=os.getcwd(), ddpd_module=os.path.realpath(ddpd.__file__),
               own_group=os.getpgrp() == os.getpid(), parent=os.getppid())
    with open(os.path.join(sys.argv[1], "env-%s.json" % os.environ["RANK"]), "w") as f:
        json.dump(out, f)
"""


def dumped_envs(out_dir, n):
    envs = []
    for r in range(n):
        with open(os.path.join(out_dir, f"env-{r}.json")) as f:
            envs.append(json.load(f))
    return envs


def case_env_contract(d):
    dump = script(d, "dump_env.py", DUMP_ENV)
    out = os.path.join(d, "out")
    work = os.path.join(d, "project")
    os.makedirs(out)
    os.makedirs(work)
    L = Launch(d, [PYTHON, dump, out], 2, env={"MY_FLAG": "1", "PYTHONPATH": "/opt/extra"},
               distributed={"threads_per_rank": 3}, extra={"working_dir": work},
               launcher_env={"CUDA_VISIBLE_DEVICES": "2,5", "RANK": "99", "INHERITED_X": "kept"})
    check(L.wait() == 0, f"both ranks succeeded: {L.p.returncode} {L.stderr[-400:]!r}")
    check(L.end().get("status") == "succeeded", f"the end: {L.end()}")
    envs = dumped_envs(out, 2)
    for r, e in enumerate(envs):
        want = {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
                "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(r), "ROLE_NAME": "default", "ROLE_WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(L.port), "TORCHELASTIC_RUN_ID": "41",
                "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                "TORCHELASTIC_USE_AGENT_STORE": "False",
                "TORCHELASTIC_ERROR_FILE": os.path.join(L.run_dir, "ranks", f"rank-{r}.error.json"),
                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "NCCL_ASYNC_ERROR_HANDLING": "1", "OMP_NUM_THREADS": "3",
                "PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": "2,5", "DDPD_RUN_ID": "41",
                "DDPD_RUN_SECRET": "s3cret-41", "DDPD_EVENTS_JOURNAL": os.path.join(L.run_dir, "events.jsonl"),
                "MY_FLAG": "1", "INHERITED_X": "kept", "cwd": work, "PWD": work}
        wrong = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
        check(not wrong, f"rank {r}: every torchrun variable and the rest right (seen, wanted): {wrong}")
        check(set(TORCHRUN_VARS) <= set(want), "the test covers the whole torchrun list")
        check(e["PYTHONPATH"].split(":") == [REPORTER_DIR, "/opt/extra"],
              f"rank {r}: the reporter first on PYTHONPATH, then the config's: {e['PYTHONPATH']!r}")
        check(e["ddpd_module"].startswith(REPORTER_DIR + os.sep), f"`import ddpd` is the reporter: {e['ddpd_module']}")
        check("DDPD_EVENTS_SOCKET" not in e, "no events socket given: the reporter stays off")
        check(e["own_group"] is True and e["parent"] == L.p.pid, f"rank {r}: its own process group, the launcher's child")

    # isolate_devices: each rank sees only its own GPU, as cuda:0
    out2 = os.path.join(d, "out2")
    os.makedirs(out2)
    L = Launch(d, [PYTHON, dump, out2], 2, distributed={"isolate_devices": True},
               launcher_env={"CUDA_VISIBLE_DEVICES": "2,5"}, name="isolated")
    check(L.wait() == 0, f"isolated run succeeded: {L.stderr[-400:]!r}")
    envs = dumped_envs(out2, 2)
    seen = [(e["CUDA_VISIBLE_DEVICES"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"], e["RANK"]) for e in envs]
    check(seen == [("2", "0", "2", "0"), ("5", "0", "2", "1")], f"one GPU each, LOCAL_RANK 0: {seen}")
    check(all(e["OMP_NUM_THREADS"] == "1" for e in envs), "threads_per_rank defaults to 1")
    check(all(e["cwd"] == L.run_dir for e in envs), f"no working_dir: the run dir: {[e['cwd'] for e in envs]}")
    check(all(e["PYTHONPATH"].split(":")[0] == REPORTER_DIR for e in envs), "the reporter on PYTHONPATH")

    # a CPU run: CUDA_VISIBLE_DEVICES stays empty, with or without isolate_devices
    out3 = os.path.join(d, "out3")
    os.makedirs(out3)
    srv = Listener(os.path.join(d, "ingest.sock"))
    L = Launch(d, [PYTHON, dump, out3], 2, distributed={"isolate_devices": True}, name="cpu", events=srv.path)
    check(L.wait() == 0, f"CPU run succeeded: {L.stderr[-400:]!r}")
    envs = dumped_envs(out3, 2)
    check([e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["", ""], "CPU: no GPUs visible")
    check(all(e.get("DDPD_EVENTS_SOCKET") == srv.path for e in envs), "the events socket is handed to the reporter")
    srv.close()


def case_node_part(d):
    """--nodes 2 --node-rank 1: this launcher starts ranks 2 and 3 of 4, with node 1's
    torchrun variables and MASTER_ADDR the one given; its logs by global rank."""
    dump = script(d, "dump_env.py", DUMP_ENV)
    out = os.path.join(d, "out")
    os.makedirs(out)
    L = Launch(d, [PYTHON, dump, out], 4, args=["--nodes", "2", "--node-rank", "1", "--master-addr", "10.9.8.7"])
    check(L.wait() == 0, f"node 1's ranks succeeded: {L.p.returncode} {L.stderr[-400:]!r}")
    check(sorted(os.listdir(out)) == ["env-2.json", "env-3.json"], f"ranks 2 and 3 ran, no other: {os.listdir(out)}")
    for r in (2, 3):
        with open(os.path.join(out, f"env-{r}.json")) as f:
            e = json.load(f)
        want = {"RANK": str(r), "LOCAL_RANK": str(r - 2), "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
                "GROUP_RANK": "1", "GROUP_WORLD_SIZE": "2", "ROLE_RANK": str(r), "ROLE_WORLD_SIZE": "4",
                "MASTER_ADDR": "10.9.8.7", "MASTER_PORT": str(L.port),
                "TORCHELASTIC_ERROR_FILE": os.path.join(L.run_dir, "ranks", f"rank-{r}.error.json")}
        wrong = {k: (e.get(k), v) for k, v in want.items() if e.get(k) != v}
        check(not wrong, f"rank {r} of node 1: its torchrun variables (seen, wanted): {wrong}")
    logs = sorted(os.listdir(os.path.join(L.run_dir, "ranks")))
    check(logs == ["rank-2.log", "rank-3.log"], f"the rank logs are named by global rank: {logs}")
    with open(os.path.join(L.run_dir, "trainer.log"), errors="replace") as f:
        log = f.read()
    check("node 1 of 2: ranks 2 to 3 of 4" in log and "MASTER_ADDR 10.9.8.7" in log,
          f"the log says which part it is: {log[-600:]!r}")

    # a rank of a node part that fails is named by its global rank
    bad = script(d, "fail_3.py", """
        import os, sys
        if os.environ["RANK"] == "3":
            print("rank three gives up", flush=True)
            sys.exit(4)
    """)
    L = Launch(d, [PYTHON, bad], 4, name="fails", args=["--nodes", "2", "--node-rank", "1"])
    check(L.wait() == 1, f"the part failed: {L.p.returncode}")
    check(L.end().get("reason", "").startswith("rank 3 exited with status 4: rank three gives up"),
          f"the reason names global rank 3: {L.end()}")

    for args, words in ((["--nodes", "3", "--node-rank", "0"], "--nodes 3 does not divide distributed.world_size 4"),
                        (["--nodes", "2", "--node-rank", "2"], "--node-rank 2: one of 0 to 1 is needed"),
                        (["--node-rank", "1"], "--nodes (missing)"),
                        (["--nodes", "2"], "--node-rank (missing)")):
        L = Launch(d, [PYTHON, dump, out], 4, name="refused", args=args)
        check(L.wait() == 2 and words in L.stderr, f"{args} refused, saying {words!r}: {L.p.returncode} {L.stderr!r}")


def case_logs(d):
    s = script(d, "talk.py", """
        import os, sys
        r = os.environ["RANK"]
        for i in range(3000):
            print(f"out {r} {i}")
        print(f"err line {r}", file=sys.stderr)
        sys.stdout.write(f"tail {r} without newline")
    """)
    L = Launch(d, [PYTHON, s], 2)
    check(L.wait() == 0, f"succeeded: {L.stderr[-300:]!r}")
    lines = L.stdout.splitlines()
    check(all(l.startswith("[rank 0] ") or l.startswith("[rank 1] ") for l in lines),
          f"every stdout line is one rank's, prefixed: {[l for l in lines if not l.startswith('[rank ')][:3]}")
    for r in range(2):
        mine = [l[len(f"[rank {r}] "):] for l in lines if l.startswith(f"[rank {r}] ")]
        want = [f"out {r} {i}" for i in range(3000)] + [f"err line {r}", f"tail {r} without newline"]
        check(mine == want, f"rank {r}'s lines, in order, stderr too, the partial last line flushed: "
                            f"{len(mine)} lines, last {mine[-2:]}")
        banner, log = L.rank_log(r).split("\n", 1)
        check(banner == f"--- ddp-run: attempt 0 starting (TORCHELASTIC_RESTART_COUNT=0; the last allowed is attempt 0); program "
                        f"{os.path.realpath(PYTHON)}; working directory {L.run_dir} ---",
              f"rank {r}'s log begins with the attempt, the interpreter found and the working directory: {banner!r}")
        check(log == "".join(f"out {r} {i}\n" for i in range(3000)) + f"err line {r}\ntail {r} without newline",
              f"ranks/rank-{r}.log holds its output verbatim ({len(log)} bytes, ends {log[-40:]!r})")
    with open(os.path.join(L.run_dir, "trainer.log")) as f:
        tlog = f.read()
    check("launcher: started 2 ranks" in tlog and "launcher: run succeeded" in tlog,
          f"the launcher's own lines are in trainer.log: {tlog[-300:]!r}")
    launcher_events_ok(L, "succeeded")


def case_rank_fails(d):
    s = script(d, "fail.py", """
        import os, sys, time
        if os.environ["RANK"] == "1":
            print("loading shard 1", flush=True)
            print("RuntimeError: boom", file=sys.stderr, flush=True)
            print("   ", flush=True)  # blank lines do not count as the last words
            time.sleep(0.5)
            sys.exit(3)
        print("sleeping", os.getpid(), flush=True)
        time.sleep(600)
    """)
    L = Launch(d, [PYTHON, s], 2)
    rc = L.wait(timeout=120)
    check(rc == 1, f"the launcher exits 1: {rc} {L.stderr[-300:]!r}")
    end = L.end()
    check(end.get("status") == "failed" and end.get("reason") == "rank 1 exited with status 3: RuntimeError: boom",
          f"the reason names rank 1, its status and its last line: {end}")
    check("sleeping" in L.rank_log(0), "rank 0 was running")
    sleeper = int(L.rank_log(0).split("\n", 1)[1].split()[1])  # after the attempt's banner
    check(not os.path.exists(f"/proc/{sleeper}") or open(f"/proc/{sleeper}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
          f"the sleeping rank {sleeper} is gone")
    check(wait_until(lambda: not L.left_running(), 30), f"no process of the run is left: {L.left_running()}")
    launcher_events_ok(L, "failed")


def case_blame_the_cause(d):
    """Two ranks that fail together, the first reaped only saying it lost its peer
    (as gloo does when the peer died): the reason names the rank that failed on its
    own, with its words."""
    s = script(d, "peer.py", """
        import os, signal, sys, time
        if os.environ["RANK"] == "0":
            time.sleep(1.0)  # rank 1 is set up by then
            print("RuntimeError: [gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:4242",
                  file=sys.stderr, flush=True)
            sys.exit(1)
        told = []
        signal.signal(signal.SIGTERM, lambda *_: told.append(1))  # its own end comes a moment later, by itself
        while not told:
            time.sleep(0.01)
        time.sleep(0.2)
        print("ValueError: the real cause", file=sys.stderr, flush=True)
        sys.exit(3)
    """)
    L = Launch(d, [PYTHON, s], 2)
    rc = L.wait(timeout=120)
    end = L.end()
    check(rc == 1 and end.get("reason") == "rank 1 exited with status 3: ValueError: the real cause",
          f"the cause is named, not the rank that lost its peer: {rc} {end}")


def case_leftovers_killed(d):
    """A process a rank started and left behind (its output let go, so no pipe tells)
    does not outlive the run, which still succeeds."""
    s = script(d, "leave.py", """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("left a sleeper behind")
    """)
    L = Launch(d, [PYTHON, s], 2)
    check(L.wait() == 0 and L.end().get("status") == "succeeded", f"succeeded: {L.end()} {L.stderr[-300:]!r}")
    check("left processes behind in its process group: killed them" in L.stderr, f"and said so: {L.stderr[-400:]!r}")
    check(wait_until(lambda: not L.left_running(), 30), f"the sleepers are gone: {L.left_running()}")


def case_reason_is_valid_text(d):
    """The last line of a rank is bytes: one that is not UTF-8, and one clipped in the
    middle of a character, still make a valid reason (JSON needs UTF-8)."""
    s = script(d, "bytes.py", """
        import os, sys
        sys.stdout.buffer.write(b"bad \\xff!: " + "\\u00e9".encode() * 300 + b"\\n")
        sys.exit(5)
    """)
    L = Launch(d, [PYTHON, s], 1)
    check(L.wait() == 1, f"failed: {L.stderr[-300:]!r}")
    end = L.end()
    want = "rank 0 exited with status 5: bad ?!: " + "\u00e9" * 251
    check(end.get("status") == "failed" and end.get("reason") == want,
          f"the bad byte became ?, the clipped last character was dropped: {end.get('reason', '')[:40]!r}... "
          f"({len(end.get('reason', '').encode())} bytes)")
    with open(os.path.join(L.run_dir, "ranks", "rank-0.log"), "rb") as f:
        check(f.read().split(b"\n", 1)[1] == b"bad \xff!: " + "\u00e9".encode() * 300 + b"\n",
              "the rank's log keeps its bytes as they were (after the attempt's banner)")


def case_stubborn_rank_killed(d):
    """A rank that ignores SIGTERM (and a child it started) is SIGKILLed after the grace."""
    s = script(d, "stubborn.py", """
        import os, signal, subprocess, sys, time
        if os.environ["RANK"] == "0":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
            print("ignoring SIGTERM", flush=True)
            time.sleep(600)
        while not os.path.exists(sys.argv[1]):
            time.sleep(0.05)
        print("Segfaulting now", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    """)
    go = os.path.join(d, "go")
    L = Launch(d, [PYTHON, s, go], 2, launcher_env={"DDPD_CANCEL_GRACE_S": "1"})
    check(wait_until(lambda: "ignoring SIGTERM" in L.rank_log(0), 60), "rank 0 started its child")
    check(wait_until(lambda: len(L.left_running()) >= 3, 30), f"two ranks and a child run: {L.left_running()}")
    open(go, "w").close()
    rc = L.wait(timeout=120)
    check(rc == 1, f"failed: {rc} {L.stderr[-300:]!r}")
    end = L.end()
    check(end.get("reason") == "rank 1 was killed by signal 11 (SIGSEGV: Segmentation fault): Segfaulting now",
          f"the reason names the signal: {end}")
    check("sending SIGKILL" in L.stderr, f"the grace ran out and SIGKILL followed: {L.stderr[-400:]!r}")
    check(wait_until(lambda: not L.left_running(), 30), f"the rank and its child are gone: {L.left_running()}")


def case_error_file(d):
    # torch's own @record writes TORCHELASTIC_ERROR_FILE; its message's first line wins
    # over the last line of output (here the exception's second line)
    s = script(d, "recorded.py", """
        import os, time
        from torch.distributed.elastic.multiprocessing.errors import record

        @record
        def main():
            if os.environ["RANK"] == "1":
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\\nsee the memory summary")
            time.sleep(600)

        main()
    """)
    L = Launch(d, [PYTHON, s], 2)
    check(L.wait(timeout=180) == 1, f"failed: {L.stderr[-300:]!r}")
    check(L.rank_log(1).rstrip().endswith("see the memory summary"), f"the last line is another: {L.rank_log(1)[-200:]!r}")
    end = L.end()
    check(end.get("reason") == "rank 1 exited with status 1: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB; "
          "failure: oom", f"the error file's message is the reason, with its failure's class (docs/failures.md): {end}")
    check(wait_until(lambda: not L.left_running(), 30), f"nothing left: {L.left_running()}")

    # the plain form, {"message": "..."}, written by hand
    s = script(d, "plain.py", """
        import json, os, sys
        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
            json.dump({"message": "the dataset /data/x is missing"}, f)
        print("last words")
        sys.exit(2)
    """)
    L = Launch(d, [PYTHON, s], 1, name="plain")
    check(L.wait() == 1, "failed")
    check(L.end().get("reason") == "rank 0 exited with status 2: the dataset /data/x is missing", f"{L.end()}")
    # a stale error file from an earlier attempt is not taken for this one's
    s = script(d, "quiet.py", "import sys; print('no error file this time'); sys.exit(4)\n")
    L2 = Launch(d, [PYTHON, s], 1, name="plain")
    check(L2.wait() == 1 and L2.end().get("reason") == "rank 0 exited with status 4: no error file this time",
          f"the earlier error file was removed: {L2.end()}")


def case_command_cannot_run(d):
    L = Launch(d, ["python9-no-such-program", "train.py"], 2)
    check(L.wait() == 1, f"failed: {L.p.returncode} {L.stderr[-300:]!r}")
    reason = L.end().get("reason", "")
    check(reason.startswith("cannot run python9-no-such-program: no program python9-no-such-program on the ranks' "
                            "PATH (") and "name it by its absolute path" in reason and "--env PATH=" in reason,
          f"the program missing: what to pass instead: {L.end()}")
    check("program python9-no-such-program (not found);" in L.rank_log(0).split("\n")[0],
          f"the banner says it was not found: {L.rank_log(0)!r}")
    launcher_events_ok(L, "failed")
    not_exec = script(d, "not-executable.sh", "echo hi\n")
    L = Launch(d, [not_exec], 2, name="noexec")
    check(L.wait() == 1 and L.end().get("reason", "").startswith(f"cannot run {not_exec}: Permission denied (make it "
                                                                  "executable, chmod +x, or run it through"),
          f"{L.end()}")
    L = Launch(d, ["true"], 2, extra={"working_dir": os.path.join(d, "gone")}, name="nodir")
    check(L.wait() == 1 and L.end().get("reason") ==
          f"cannot enter the working directory {os.path.join(d, 'gone')}: No such file or directory", f"{L.end()}")
    check(not L.left_running(), "nothing runs")


def case_cancel(d):
    s = script(d, "forever.py", """
        import os, time
        print("ready", flush=True)
        time.sleep(600)
    """)
    L = Launch(d, [PYTHON, s], 2)
    check(wait_until(lambda: all("ready" in L.rank_log(r) for r in range(2)), 60), "both ranks are up")
    os.killpg(L.p.pid, signal.SIGTERM)  # as ddpd cancels: the launcher's process group
    rc = L.wait(timeout=120)
    check(rc == 128 + signal.SIGTERM, f"the launcher exits 128+SIGTERM: {rc} {L.stderr[-300:]!r}")
    check(L.end().get("status") == "canceled" and L.end().get("reason") == "canceled by SIGTERM", f"{L.end()}")
    check(L.end().get("exit_code") == rc, f"the end event carries the exit status {rc}: {L.end()}")
    check(wait_until(lambda: not L.left_running(), 30), f"every rank is gone: {L.left_running()}")
    launcher_events_ok(L, "canceled")

    L = Launch(d, [PYTHON, s], 1, name="interrupted")
    check(wait_until(lambda: "ready" in L.rank_log(0), 60), "the rank is up")
    L.p.send_signal(signal.SIGINT)
    check(L.wait(timeout=120) == 128 + signal.SIGINT and L.end().get("reason") == "canceled by SIGINT", f"{L.end()}")
    check(wait_until(lambda: not L.left_running(), 30), f"gone: {L.left_running()}")


def case_stop_grace(d):
    """--stop-grace is the ranks' grace after SIGTERM (over DDPD_CANCEL_GRACE_S): a rank
    whose SIGTERM handler needs a while to save keeps what it saved; --preempt-grace is
    theirs after SIGUSR1 (ddpd's preemption): a rank that ignores SIGTERM is killed when
    it ends. The log names each deadline."""
    s = script(d, "saves.py", """
        import os, signal, sys, time
        rank = os.environ["RANK"]
        def save(*_):
            time.sleep(1.5)
            with open(os.path.join(sys.argv[1], f"saved-{rank}"), "w") as f:
                f.write("checkpoint")
            sys.exit(0)
        signal.signal(signal.SIGTERM, save)
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)
    L = Launch(d, [PYTHON, s, d], 2, launcher_env={"DDPD_CANCEL_GRACE_S": "0"}, args=["--stop-grace", "5"])
    check(wait_until(lambda: all("ready" in L.rank_log(r) for r in range(2)), 60), "both ranks are up")
    os.killpg(L.p.pid, signal.SIGTERM)
    rc = L.wait(timeout=120)
    check(rc == 128 + signal.SIGTERM, f"canceled: {rc} {L.stderr[-300:]!r}")
    check(all(os.path.exists(os.path.join(d, f"saved-{r}")) for r in range(2)),
          f"each rank saved within --stop-grace 5 (DDPD_CANCEL_GRACE_S 0 is not used): {os.listdir(d)}")
    check("received SIGTERM: SIGTERM to every rank, SIGKILL at " in L.stderr and "UTC, in 5 s" in L.stderr,
          f"the log names the deadline: {L.stderr[-400:]!r}")
    check("sending SIGKILL" not in L.stderr, f"no SIGKILL was needed: {L.stderr[-400:]!r}")

    s = script(d, "stubborn.py", """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(600)
    """)
    L = Launch(d, [PYTHON, s], 2, name="preempted", args=["--stop-grace", "600", "--preempt-grace", "1"])
    check(wait_until(lambda: all("ready" in L.rank_log(r) for r in range(2)), 60), "both ranks are up")
    L.p.send_signal(signal.SIGUSR1)  # as ddpd preempts: the launcher alone
    rc = L.wait(timeout=120)
    check(rc == 128 + signal.SIGUSR1, f"stopped by the preemption: {rc} {L.stderr[-300:]!r}")
    check("received SIGUSR1 (preempted): SIGTERM to every rank, SIGKILL at " in L.stderr and "in 1 s" in L.stderr
          and "sending SIGKILL" in L.stderr, f"killed at --preempt-grace 1, not --stop-grace 600: {L.stderr[-400:]!r}")
    check(wait_until(lambda: not L.left_running(), 30), f"every rank is gone: {L.left_running()}")
    bad = subprocess.run([DDP_RUN, "--config", L.config_path, "--run-dir", L.run_dir, "--master-port", "1",
                          "--stop-grace", "soon"], capture_output=True, text=True)
    check(bad.returncode == 2 and "--stop-grace soon is not a number of seconds" in bad.stderr,
          f"a grace that is not a number is refused by name: {bad.returncode} {bad.stderr[-200:]!r}")


def case_stopped_at_exit(d):
    """Once a rank has exited 0, the ranks still running that write nothing for the exit
    timeout (the config's distributed.exit_timeout_s, or --exit-timeout) are stopped and
    the attempt succeeds, naming them; one that keeps writing is waited for."""
    s = script(d, "hangs_at_exit.py", """
        import os, time
        if os.environ["RANK"] == "0":
            print("done", flush=True)
        else:
            print("tearing down", flush=True)
            time.sleep(600)
    """)
    L = Launch(d, [PYTHON, s], 2, distributed={"exit_timeout_s": 1})
    rc = L.wait(timeout=120)
    end = L.end()
    check(rc == 0 and end.get("status") == "succeeded", f"the finished run succeeded: {rc} {end} {L.stderr[-300:]!r}")
    want = "rank 1 stopped at exit: still running, silent, 1 s after rank 0 exited 0 (distributed.exit_timeout_s)"
    check(end.get("reason") == want, f"the end names the rank stopped at exit: {end.get('reason')!r}")
    ended = [e for e in L.journal() if e["type"] == "attempt" and e.get("phase") == "ended"]
    check(ended and ended[-1]["status"] == "succeeded" and ended[-1]["reason"] == want,
          f"and so does its attempt: {ended[-1:]}")
    check(want in L.stderr and "run succeeded: " + want in L.stderr, f"and the log: {L.stderr[-400:]!r}")
    states = [(e["of"], e["state"], e.get("exit_code"), e.get("signal")) for e in L.journal() if e["type"] == "rank_state"]
    check(sorted(states[:2]) == [(0, "started", None, None), (1, "started", None, None)]
          and sorted(states[2:]) == [(0, "exited", 0, None), (1, "killed", None, signal.SIGTERM)],
          f"the launcher says each rank started, rank 0 exited 0 and rank 1 was killed (rank_state): {states}")
    check(wait_until(lambda: not L.left_running(), 30), f"every rank is gone: {L.left_running()}")
    launcher_events_ok(L, "succeeded")

    s = script(d, "slow_last_epoch.py", """
        import os, sys, time
        started = os.path.join(sys.argv[1], "rank-1-started")
        if os.environ["RANK"] == "0":
            while not os.path.exists(started):
                time.sleep(0.02)
        else:
            open(started, "w").close()
            for i in range(12):
                print(f"still evaluating {i}", flush=True)
                time.sleep(0.25)
    """)
    L = Launch(d, [PYTHON, s, d], 2, name="busy", distributed={"exit_timeout_s": 600}, args=["--exit-timeout", "2"])
    rc = L.wait(timeout=120)
    end = L.end()
    check(rc == 0 and end.get("status") == "succeeded" and end.get("reason") == "" and "still evaluating 11" in L.rank_log(1),
          f"a rank that keeps writing past --exit-timeout 2 (over the config's 600) is waited for: {rc} {end}")


def case_launcher_killed(d):
    """A SIGKILLed launcher (nothing can forward then) still leaves no rank: each dies
    with its parent (PR_SET_PDEATHSIG)."""
    s = script(d, "forever.py", """
        import time
        print("ready", flush=True)
        time.sleep(600)
    """)
    L = Launch(d, [PYTHON, s], 2)
    check(wait_until(lambda: all("ready" in L.rank_log(r) for r in range(2)), 60), "both ranks are up")
    check(len(L.left_running()) == 2, f"two ranks run: {L.left_running()}")
    L.p.kill()
    L.wait()
    check(wait_until(lambda: not L.left_running(), 30), f"the ranks died with the launcher: {L.left_running()}")


def case_bad_config(d):
    bad = [
        ({"distributed": {"world_size": 2}}, "/command: is required"),
        ({"command": [], "distributed": {"world_size": 2}}, "/command: must be a non-empty array"),
        ({"command": ["python3", 7], "distributed": {"world_size": 2}}, "/command/1: must be a string"),
        ({"command": [""], "distributed": {"world_size": 2}}, "/command/0: the program must not be empty"),
        ({"command": "python3 train.py", "distributed": {"world_size": 2}}, "/command: must be a non-empty array"),
        ({"command": ["true"], "env": {"RANK": "3"}, "distributed": {"world_size": 2}},
         "/env/RANK: ddpd sets RANK for every rank itself"),
        ({"command": ["true"], "env": {"CUDA_VISIBLE_DEVICES": "0"}, "distributed": {"world_size": 2}},
         "/env/CUDA_VISIBLE_DEVICES: ddpd sets"),
        ({"command": ["true"], "env": {"X": 1}, "distributed": {"world_size": 2}}, "/env/X: must be a string"),
        ({"command": ["true"], "env": {"A=B": "1"}, "distributed": {"world_size": 2}}, "/env/A=B: is not a variable name"),
        ({"command": ["true"], "env": [], "distributed": {"world_size": 2}}, "/env: must be an object"),
        ({"command": ["true"], "distributed": {"world_size": 0}}, "/distributed/world_size: must be an integer from 1"),
        ({"command": ["true"], "distributed": {"world_size": "2"}}, "/distributed/world_size: must be an integer"),
        ({"command": ["true"]}, "/distributed/world_size: is required"),
        ({"command": ["true"], "distributed": {"world_size": 2, "threads_per_rank": 0}},
         "/distributed/threads_per_rank: must be an integer from 1"),
        ({"command": ["true"], "distributed": {"world_size": 2, "isolate_devices": "yes"}},
         "/distributed/isolate_devices: must be true or false"),
        ({"command": ["true"], "distributed": {"world_size": 2, "max_restarts": 101}},
         "/distributed/max_restarts: must be an integer from 0 to 100"),
        ({"command": ["true"], "distributed": {"world_size": 2, "max_restarts": -1}},
         "/distributed/max_restarts: must be an integer from 0 to 100"),
        ({"command": ["true"], "working_dir": "projects/x", "distributed": {"world_size": 2}},
         "/working_dir: must be an absolute path"),
    ]
    for i, (config, want) in enumerate(bad):
        path = os.path.join(d, f"bad-{i}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        run_dir = os.path.join(d, f"run-{i}")
        p = subprocess.run([DDP_RUN, "--config", path, "--run-dir", run_dir, "--master-port", "29601"],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and want in p.stderr, f"{config} -> exit 2 naming the field ({want!r}): "
                                                      f"{p.returncode} {p.stderr!r}")
        check(not os.path.exists(run_dir), "nothing was started or written")
    with open(os.path.join(d, "broken.json"), "w") as f:
        f.write('{"command": ["true"], ')
    p = subprocess.run([DDP_RUN, "--config", os.path.join(d, "broken.json"), "--run-dir", os.path.join(d, "r"),
                        "--master-port", "29601"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "cannot read the config" in p.stderr and "line 1" in p.stderr, f"not JSON: {p.stderr!r}")
    good = os.path.join(d, "good.json")
    with open(good, "w") as f:
        json.dump({"command": ["true"], "distributed": {"world_size": 1}}, f)
    for args, want in [([], "--config is required"), (["--config", good], "--run-dir is required"),
                       (["--config", good, "--run-dir", d], "--master-port is required"),
                       (["--config", good, "--run-dir", d, "--master-port", "99999"], "not a port"),
                       (["--config", good, "--run-dir", d, "--master-port", "29601", "--events", good],
                        "not a Unix socket"),
                       (["--config", good, "--run-dir", d, "--master-port", "29601", "--events", d + "/no.sock"],
                        "no such socket"),
                       (["--config", good, "--run-dir", d, "--master-port", "29601", "extra"], "unexpected argument"),
                       (["--bogus"], "usage:")]:
        p = subprocess.run([DDP_RUN] + args, capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and want in p.stderr, f"{args} -> exit 2, {want!r}: {p.returncode} {p.stderr[-200:]!r}")
    with open(good, "w") as f:
        json.dump({"command": ["true"], "distributed": {"world_size": 3, "isolate_devices": True}}, f)
    p = subprocess.run([DDP_RUN, "--config", good, "--run-dir", os.path.join(d, "iso"), "--master-port", "29601"],
                       capture_output=True, text=True, timeout=60, env=dict(os.environ, CUDA_VISIBLE_DEVICES="0,1"))
    check(p.returncode == 2 and "isolate_devices" in p.stderr and "has 2" in p.stderr,
          f"isolate_devices with fewer GPUs than ranks: {p.stderr!r}")


def case_installed(d):
    """`cmake --install`: the reporter lands in share/ddpd/reporter/python, and the
    installed ddp-run puts that copy (not the source tree's) on the ranks' PYTHONPATH."""
    prefix = os.path.join(d, "prefix")
    p = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"cmake --install: {p.stderr[-500:]!r}")
    installed = os.path.join(prefix, "share", "ddpd", "reporter", "python")
    check(os.path.isfile(os.path.join(installed, "ddpd", "__init__.py")), "the reporter is installed")
    check(not os.path.exists(os.path.join(installed, "ddpd", "__pycache__")), "without a __pycache__")
    global DDP_RUN
    DDP_RUN = os.path.join(prefix, "bin", "ddp-run")
    check(os.access(DDP_RUN, os.X_OK), "ddp-run is installed in bin/")
    dump = script(d, "dump_env.py", DUMP_ENV)
    out = os.path.join(d, "out")
    os.makedirs(out)
    L = Launch(d, [PYTHON, dump, out], 1)
    check(L.wait() == 0, f"the installed ddp-run ran the rank: {L.stderr[-300:]!r}")
    e = dumped_envs(out, 1)[0]
    check(e["PYTHONPATH"].split(":")[0] == os.path.realpath(installed),
          f"the installed reporter first on PYTHONPATH: {e['PYTHONPATH']!r}")
    check(e["ddpd_module"].startswith(os.path.realpath(installed) + os.sep), f"`import ddpd`: {e['ddpd_module']}")


DDP_SCRIPT = """
    # The tutorial's shape on the CPU: env:// rendezvous, gloo, DistributedSampler, DDP.
    import os, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.data.distributed import DistributedSampler
    import ddpd

    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.5
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=1)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    step = 0
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            step += 1
            ddpd.log_step(step, loss=loss.item(), lr=opt.param_groups[0]["lr"])
        ddpd.log_epoch(epoch, lr=opt.param_groups[0]["lr"], train_loss=loss.item())
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    w = model.module.weight.detach().clone()
    dist.broadcast(w, 0)
    same = torch.equal(w, model.module.weight.detach())
    del loss, opt, model  # before the group goes: see tests/integration/commands/ddp_fmnist.py (a torch 1.13 deadlock)
    dist.barrier()
    print(f"rank {rank}: all_reduce {t.item()} replicas equal {same} steps {step}", flush=True)
    ddpd.status("done", "finished")
    dist.destroy_process_group()
"""


def case_torch_ddp_gloo(d):
    s = script(d, "train_ddp.py", DDP_SCRIPT)
    sock = os.path.join(d, "ingest.sock")
    srv = Listener(sock)
    L = Launch(d, [PYTHON, s], 2, events=sock)
    rc = L.wait(timeout=240)
    check(rc == 0, f"the DDP run succeeded: {rc} {L.stdout[-800:]!r} {L.stderr[-400:]!r}")
    for r in range(2):
        check(f"[rank {r}] rank {r}: all_reduce 3.0 replicas equal True steps 24" in L.stdout,
              f"rank {r} reduced, kept its replica equal and ran 24 steps: {L.rank_log(r)[-300:]!r}")
    check(wait_until(lambda: len(srv.connections) >= 3, 30) and srv.drained(),
          f"the launcher and both ranks connected, and closed: {len(srv.connections)}")
    by_rank = {}
    for i in range(len(srv.connections)):
        ev = srv.events(i)
        if ev:
            by_rank[ev[0]["rank"]] = ev
    check(sorted(by_rank) == [-1, 0, 1], f"connections from the launcher and ranks 0 and 1: {sorted(by_rank)}")
    for rank, ev in by_rank.items():
        check(ev[0]["type"] == "hello" and ev[0]["secret"] == "s3cret-41" and ev[0]["run"] == "41",
              f"rank {rank}'s connection opens with the hello and the secret: {ev[0]}")
    for r in (0, 1):
        steps = [e["global_step"] for e in by_rank.get(r, []) if e["type"] == "metric" and "global_step" in e]
        check(steps == list(range(1, 25)), f"rank {r}'s 24 steps reached the socket: {steps}")
        epochs = [e["epoch"] for e in by_rank.get(r, []) if e["type"] == "metric" and "epoch" in e]
        check(epochs == [0, 1, 2], f"and its 3 epochs: {epochs}")
        losses = [e["values"]["loss"] for e in by_rank.get(r, []) if e["type"] == "metric" and "global_step" in e]
        check(losses and losses[-1] < losses[0], f"rank {r}'s loss went down: {losses[:1]} -> {losses[-1:]}")
    end = [e for e in by_rank.get(-1, []) if e["type"] == "end"]
    check(end and end[-1]["status"] == "succeeded", f"the launcher's end on the socket: {end}")
    j = L.journal()
    check(all(e.get("secret") is None for e in j), "no secret in the journal")
    check({e["rank"] for e in j} == {-1, 0, 1}, "the journal has every process's events")
    launcher_events_ok(L, "succeeded")
    # the launcher's own events follow schema/events.schema.json, as ddp-trainer's do
    import jsonschema
    with open(os.path.join(HERE, "..", "..", "..", "schema", "events.schema.json")) as f:
        v = jsonschema.Draft202012Validator(json.load(f))
    mine = [e for e in j if e["rank"] == -1]
    bad = [(e, next(iter(v.iter_errors(e))).message) for e in mine if not v.is_valid(e)]
    check(mine and not bad, f"{len(bad)} of the launcher's {len(mine)} events break the schema, the first: {bad[:1]}")
    check(not L.left_running(), f"nothing left: {L.left_running()}")
    srv.close()


CASES = cases_in(globals())

if __name__ == "__main__":
    case = sys.argv[1]
    DDP_RUN = sys.argv[sys.argv.index("--ddp-run") + 1]
    CMAKE = sys.argv[sys.argv.index("--cmake") + 1]
    BUILD = sys.argv[sys.argv.index("--build") + 1]
    with tempfile.TemporaryDirectory(prefix="ddp-run-") as d:
        CASES[case](d)
    checks.finish(f"ddp-run {case}")
