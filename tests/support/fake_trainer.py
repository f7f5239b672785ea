#!/usr/bin/env python3
"""A scripted stand-in for ddp-trainer, for the server's tests of what the real
trainer will not do on demand: wrong secrets, malformed lines, planted spikes,
chosen exit statuses, ignoring SIGTERM. It follows the trainer contract (the command
line, DDPD_RUN_ID / DDPD_RUN_SECRET, one connection per process with a hello first,
newline-delimited JSON, single events or arrays) and takes its script from the
config's name:

  steps-N        a launcher and world_size ranks say hello; rank 0 sends N steps (in
                 arrays of 50), epochs, heartbeats; the ranks end `done`; exit 0
  spike          steps-5000 with a loss spike of 99.0 at global step 3217
  malformed      good lines around malformed ones on one connection
  badsecret      connections with a wrong secret, no hello, no secret; then good ones
  sleep          hello, then waits; SIGTERM -> end canceled, exit 143
  ignore-term    hello, then waits and ignores SIGTERM (the server must SIGKILL)
  exit2          a config complaint on stderr, exit 2 (before any rank)
  exit1-end      an `end` event with a reason, exit 1
  exit1-noend    a line on stderr, exit 1, no `end`
  killself       hello, then SIGKILL to itself
  hold           hellos, then silence: writes hold.json (the event socket, the run's
                 secret) to the run dir so that a test sends the run's events itself,
                 when it chooses; SIGTERM -> end canceled, exit 143; SIGUSR1 -> exit 0
                 (the test has sent the run's `end` itself)
  record         writes what it was given (argv, env, cwd, pgid) to fake.json; steps-5
"""
import json, os, signal, socket, sys, time

try:
    import jsonschema
except ImportError:
    sys.stderr.write("fake_trainer: needs python3-jsonschema (scripts/install-deps.sh installs it)\n")
    sys.exit(70)

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schema", "events.schema.json")
with open(SCHEMA_PATH) as f:
    EVENT_SCHEMA = jsonschema.Draft202012Validator(json.load(f))


class Conn:
    def __init__(self, path, run, rank):
        self.run, self.rank, self.seq = run, rank, 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)

    def ev(self, type_, **fields):
        e = {"run": self.run, "rank": self.rank, "seq": self.seq, "t": int(time.time() * 1000), "type": type_}
        self.seq += 1
        e.update(fields)
        return e

    def send(self, *events):
        # what it sends as well-formed must be: held against schema/events.schema.json
        # (the malformed lines of the scripts go through raw())
        for e in events:
            problem = next(iter(EVENT_SCHEMA.iter_errors(e)), None)
            if problem is not None:
                sys.stderr.write(f"fake_trainer: event {json.dumps(e)[:200]} breaks schema/events.schema.json: "
                                 f"{problem.message}\n")
                os._exit(70)
        line = json.dumps(events[0] if len(events) == 1 else list(events))
        self.raw(line)

    def raw(self, text):
        try:
            self.sock.sendall(text.encode() + b"\n")
        except OSError:
            pass  # dropped by the server: what some scripts expect

    def hello(self, secret, **extra):
        fields = dict(pid=os.getpid(), host="fake", device="cpu", world_size=1, secret=secret)
        fields.update(extra)
        self.send(self.ev("hello", **fields))

    def close(self):
        self.sock.close()


def steps(cfg, events, run, secret, n, spike_at=None, gpu=False):
    world = cfg["distributed"]["world_size"]
    epochs = 2
    per_epoch = (n + epochs - 1) // epochs
    launcher = Conn(events, run, -1)
    launcher.hello(secret)
    ranks = [Conn(events, run, r) for r in range(world)]
    for r, c in enumerate(ranks):
        extra = {"epochs": epochs, "steps_per_epoch": per_epoch, "total_steps": n} if r == 0 else {}
        if gpu:  # as the nccl backend's ranks say it
            extra["device"] = f"cuda:{r + 4} NVIDIA H200"
        c.hello(secret, **extra)
        c.send(c.ev("status", state="training", detail="epoch 0"))
    batch = []
    g = 0
    for epoch in range(epochs):
        for step in range(per_epoch):
            if g == n:
                break
            g += 1
            loss = 2.0 / (1 + g / 100.0)
            if g == spike_at:
                loss = 99.0
            batch.append(ranks[0].ev("step", epoch=epoch, step=step, global_step=g, loss=loss,
                                     lr=0.001 * (0.5 ** epoch), samples_per_s=1000.0 + g))
            if len(batch) == 50:
                ranks[0].send(*batch)
                batch = []
        if batch:
            ranks[0].send(*batch)
            batch = []
        for r, c in enumerate(ranks):
            mem = {"gpu_mem_used_bytes": (r + 1) * 2**30 + epoch, "gpu_mem_total_bytes": 150 * 2**30} if gpu else {}
            c.send(c.ev("heartbeat", global_step=g, step_ms=1.5, **mem))
        ranks[0].send(ranks[0].ev("epoch", epoch=epoch, lr=0.001 * (0.5 ** epoch), train_loss=1.0 / (epoch + 1),
                                  test_loss=1.1 / (epoch + 1), test_acc=0.5 + epoch / 10, seconds=0.5,
                                  samples_per_s=1234.0))
        ranks[0].send(ranks[0].ev("checkpoint", epoch=epoch, global_step=g, path=f"ckpt-{epoch}.safetensors",
                                  bytes=1000 + epoch))
    if gpu:  # as a real run lasts: the live feed sends the newest heartbeats (about ten times a second)
        time.sleep(1.0)
    for c in ranks:
        c.send(c.ev("status", state="done", detail=""))
        c.close()
    launcher.send(launcher.ev("end", status="succeeded", reason=""))
    launcher.close()
    return 0


def wait_forever(run, events, secret, ignore_term, silent=False, run_dir=None):
    # SIGTERM's handling is in place before the hello: the hello makes the run running,
    # and a cancel may come at once (a stubborn trainer that a SIGTERM killed before it
    # could ignore it would make the grace period look broken)
    conns = []
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        def on_term(sig, frame):
            if conns:
                conns[0].send(conns[0].ev("end", status="canceled", reason="stopped by SIGTERM"))
            os._exit(128 + sig)
        signal.signal(signal.SIGTERM, on_term)
    launcher = Conn(events, run, -1)
    conns.append(launcher)
    launcher.hello(secret)
    rank = Conn(events, run, 0)
    rank.hello(secret, epochs=1, steps_per_epoch=1000000, total_steps=1000000)
    rank.send(rank.ev("status", state="training", detail="epoch 0"))
    if silent:
        signal.signal(signal.SIGUSR1, lambda sig, frame: os._exit(0))
        with open(os.path.join(run_dir, "hold.json.tmp"), "w") as f:
            json.dump({"events": events, "secret": secret, "run": run}, f)
        os.rename(os.path.join(run_dir, "hold.json.tmp"), os.path.join(run_dir, "hold.json"))
        while True:
            signal.pause()
    g = 0
    while True:
        g += 1
        rank.send(rank.ev("step", epoch=0, step=g - 1, global_step=g, loss=1.0, lr=0.001, samples_per_s=100.0))
        time.sleep(0.05)


def main():
    argv = sys.argv[1:]
    opts = {argv[i]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    cfg = json.load(open(opts["--config"]))
    events, run_dir = opts["--events"], opts["--run-dir"]
    run, secret = os.environ["DDPD_RUN_ID"], os.environ["DDPD_RUN_SECRET"]
    name = cfg.get("name", "")
    print(f"fake trainer: run {run} script {name}", file=sys.stderr, flush=True)

    if name.startswith("steps-"):
        return steps(cfg, events, run, secret, int(name[6:]))
    if name == "gpu":
        return steps(cfg, events, run, secret, 10, gpu=True)
    if name == "spike":
        return steps(cfg, events, run, secret, 5000, spike_at=3217)
    if name == "record":
        with open(os.path.join(run_dir, "fake.json"), "w") as f:
            json.dump({"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid(),
                       "pgid": os.getpgrp(), "sid": os.getsid(0), "config": cfg,
                       "stdin": os.readlink("/proc/self/fd/0"), "stdout": os.readlink("/proc/self/fd/1"),
                       "stderr": os.readlink("/proc/self/fd/2")}, f)
        return steps(cfg, events, run, secret, 5)
    if name == "malformed":
        c = Conn(events, run, 0)
        c.hello(secret, epochs=1, steps_per_epoch=5, total_steps=5)
        step = lambda g: c.ev("step", epoch=0, step=g - 1, global_step=g, loss=1.0 / g, lr=0.01, samples_per_s=10.0)
        c.send(step(1))
        c.raw("this is not json")
        c.raw('{"type": "step", "global_step": ')
        c.send(step(2), step(3))
        c.raw("[1, 2]")
        c.raw('{"no_type": 1}')
        c.raw('{"type": "step", "loss": 1.0}')
        c.raw(json.dumps({"run": "999999", "rank": 0, "type": "step", "global_step": 77, "loss": 1.0}))
        c.raw("")
        c.send(step(4))
        c.raw(json.dumps(step(5)) + "\n" + "{broken")  # two lines in one write
        c.close()
        launcher = Conn(events, run, -1)
        launcher.hello(secret)
        launcher.send(launcher.ev("end", status="succeeded", reason=""))
        return 0
    if name == "badsecret":
        wrong = Conn(events, run, 0)
        wrong.hello("0" * 64)
        wrong.send(wrong.ev("step", epoch=0, step=0, global_step=1000, loss=5.0, lr=0.1, samples_per_s=1.0))
        nohello = Conn(events, run, 0)
        nohello.send(nohello.ev("step", epoch=0, step=0, global_step=1001, loss=5.0, lr=0.1, samples_per_s=1.0))
        nosecret = Conn(events, run, 0)
        nosecret.raw(json.dumps(nosecret.ev("hello", pid=os.getpid())))  # no secret, no host: not well-formed
        nosecret.send(nosecret.ev("step", epoch=0, step=0, global_step=1002, loss=5.0, lr=0.1, samples_per_s=1.0))
        otherrun = Conn(events, str(int(run) + 1000), 0)
        otherrun.hello(secret)
        otherrun.send(otherrun.ev("step", epoch=0, step=0, global_step=1003, loss=5.0, lr=0.1, samples_per_s=1.0))
        time.sleep(0.5)
        good = Conn(events, run, 0)
        good.hello(secret, epochs=1, steps_per_epoch=3, total_steps=3)
        for g in (1, 2, 3):
            good.send(good.ev("step", epoch=0, step=g - 1, global_step=g, loss=1.0, lr=0.1, samples_per_s=1.0))
        good.close()
        launcher = Conn(events, run, -1)
        launcher.hello(secret)
        launcher.send(launcher.ev("end", status="succeeded", reason=""))
        return 0
    if name == "sleep":
        return wait_forever(run, events, secret, ignore_term=False)
    if name == "hold":
        return wait_forever(run, events, secret, ignore_term=False, silent=True, run_dir=run_dir)
    if name == "ignore-term":
        return wait_forever(run, events, secret, ignore_term=True)
    if name == "exit2":
        print("ddp-trainer: config.json is not a valid run config: /train/epochs: must be at least 1", file=sys.stderr)
        return 2
    if name == "exit1-end":
        launcher = Conn(events, run, -1)
        launcher.hello(secret)
        launcher.send(launcher.ev("end", status="failed", reason="rank 1 exited with signal 9 (Killed) at epoch 0 step 12"))
        return 1
    if name == "exit1-noend":
        print("something broke in a way nobody planned", file=sys.stderr)
        return 1
    if name == "killself":
        launcher = Conn(events, run, -1)
        launcher.hello(secret)
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)
    print(f"fake trainer: unknown script {name!r}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
