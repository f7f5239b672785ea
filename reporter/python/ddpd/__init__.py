"""ddpd's reporter for command runs: a training script tells ddpd how it is doing.

    import ddpd
    ddpd.log_step(global_step, loss=loss.item(), lr=scheduler.get_last_lr()[0])
    ddpd.log_epoch(epoch, lr=lr, train_loss=tl, test_loss=vl, test_acc=acc)
    ddpd.status("evaluating", "epoch 3")

    # a pause (a sweep's ASHA, a paused sweep) or a preemption: checkpoint at the next
    # step, say so, and ddpd stops the run; it goes on from there when resumed
    if ddpd.should_pause():
        torch.save(state, path)
        ddpd.checkpoint_saved(global_step, path)

Standard library only. A call never blocks and never raises into the training loop:
it appends to a bounded in-memory queue that a background thread sends to ddpd's
event socket (only that thread ever waits on the socket) (and appends to the run's journal, from which a restarted server
catches up). When the queue is full the point is dropped and counted
(`ddpd.dropped()`). Outside ddpd (no DDPD_EVENTS_SOCKET in the environment) every
call is a no-op, so the same script runs anywhere.

The line protocol is in the repository's reporter/README.md; a C, Rust or JAX
trainer can speak it directly (reporter/c/ddpd_report.h does, for C).
"""
import atexit
import collections
import json
import math
import os
import signal
import socket
import threading
import time

__all__ = ["log_step", "log_epoch", "status", "checkpoint_saved", "should_pause", "preempt_requested", "on_preempt",
           "dropped", "enabled", "flush"]

QUEUE_MAX = 1_000_000       # points waiting to be sent; past this they are dropped
SEND_EVERY_S = 0.1          # the sender's pace
SEND_TIMEOUT_S = 5.0        # a server that takes nothing for this long is given up (the journal has it all)
RECONNECT_EVERY_S = 1.0
STATES = ("init", "loading", "training", "evaluating", "checkpointing", "done", "failed")


def _number(v):
    """A JSON number for a metric value; NaN and infinities become null."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return repr(f) if math.isfinite(f) else "null"


def _values(metrics):
    parts = []
    for k, v in metrics.items():
        num = _number(v)
        if num is not None:
            parts.append(json.dumps(str(k)) + ":" + num)
    return "{" + ",".join(parts) + "}"


class _Reporter:
    def __init__(self, env):
        self.socket_path = env["DDPD_EVENTS_SOCKET"]
        self.journal_path = env.get("DDPD_EVENTS_JOURNAL")
        self.run = env.get("DDPD_RUN_ID", "")
        self.rank = int(env.get("RANK", "0") or 0)
        self.world = int(env.get("WORLD_SIZE", "1") or 1)
        self.secret = env.get("DDPD_RUN_SECRET")
        self.queue = collections.deque()
        self.lost = 0
        self.seq = 0
        self.sock = None
        self.last_connect = 0.0
        self.torn = False
        self.journal = None
        self.stop = threading.Event()
        self.lock = threading.Lock()  # the sender's, never taken by a caller
        if self.journal_path:
            try:
                # the server's user only, whatever the script's umask (as the C reporter)
                fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                self.journal = os.fdopen(fd, "ab", buffering=0)
            except OSError:
                self.journal = None
        self.prefix = '{"run":%s,"rank":%d,' % (json.dumps(self.run), self.rank)
        self.hello = self._line("hello", self._hello_fields(secret=None), time.time())
        self.hello_with_secret = self._line("hello", self._hello_fields(secret=self.secret), time.time(), seq=0)
        self._write_journal(self.hello)
        self._connect(time.time())
        self.thread = threading.Thread(target=self._run, name="ddpd-reporter", daemon=True)
        self.thread.start()

    def _hello_fields(self, secret):
        fields = {"pid": os.getpid(), "host": socket.gethostname(), "device": os.environ.get("CUDA_VISIBLE_DEVICES")
                  or "cpu", "world_size": self.world, "reporter": "python", "secret": secret}
        return json.dumps(fields, separators=(",", ":"))[1:-1]

    def _line(self, type_, body, t, seq=None):
        if seq is None:
            seq = self.seq
            self.seq += 1
        return ('%s"seq":%d,"t":%d,"type":"%s"%s%s}\n' % (
            self.prefix, seq, int(t * 1000), type_, "," if body else "", body)).encode()

    # --- the sender thread -----------------------------------------------------------

    def _connect(self, now):
        self.last_connect = now
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(SEND_TIMEOUT_S)
            s.connect(self.socket_path)
            s.sendall(self.hello_with_secret)  # a connection starts with the hello, which authenticates it
        except OSError:
            return
        self.sock = s

    def _send(self, data):
        if self.sock is None:
            return
        try:
            self.sock.sendall(data)
        except OSError:  # gone, or stopped reading: the server catches up from the journal
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def _write_journal(self, data):
        if self.journal is None:
            return
        try:
            if self.torn:
                self.journal.write(b"\n")
                self.torn = False
            n = self.journal.write(data)
            if n != len(data):
                self.torn = True
        except OSError:
            self.torn = True

    def _drain(self):
        with self.lock:
            lines = []
            q = self.queue
            while q:
                kind, a, b, t = q.popleft()
                if kind == "step":
                    body = '"global_step":%d,"values":%s' % (a, _values(b))
                    lines.append(self._line("metric", body, t))
                elif kind == "epoch":
                    values, zero_only = b
                    body = '"epoch":%d,"values":%s%s' % (a, _values(values), "" if zero_only else ',"rank_zero_only":false')
                    lines.append(self._line("metric", body, t))
                elif kind == "preempt":
                    lines.append(self._line("preempt", '"state":%s' % json.dumps(a), t))
                elif kind == "checkpoint":
                    body = '"global_step":%d,"path":%s' % (a, json.dumps(b))
                    lines.append(self._line("checkpoint", body, t))
                else:
                    body = '"state":%s,"detail":%s' % (json.dumps(a), json.dumps(b))
                    lines.append(self._line("status", body, t))
            now = time.time()
            if self.sock is None and now - self.last_connect >= RECONNECT_EVERY_S:
                self._connect(now)
            if lines:
                data = b"".join(lines)
                self._write_journal(data)
                self._send(data)

    def _run(self):
        while not self.stop.wait(SEND_EVERY_S):
            try:
                self._drain()
            except Exception:  # never let reporting take the script down
                pass

    def put(self, item):
        if len(self.queue) >= QUEUE_MAX:
            self.lost += 1
        else:
            self.queue.append(item)

    def close(self):
        self.stop.set()
        self._drain()
        if self.sock is not None:
            self.sock.close()
            self.sock = None


_reporter = None
_reporter_pid = None


def _get():
    """The process's reporter, made at the first call (and again in a forked child)."""
    global _reporter, _reporter_pid
    if _reporter_pid == os.getpid():
        return _reporter
    _reporter_pid = os.getpid()
    _reporter = _Reporter(os.environ) if os.environ.get("DDPD_EVENTS_SOCKET") else None
    return _reporter


def enabled():
    """True when this process runs under ddpd (its calls are sent)."""
    return _get() is not None


def log_step(global_step, **metrics):
    """Reports metrics at a training step (global_step counts steps done, from 1).
    `loss` and `lr` fill the run's loss and learning-rate series and its progress;
    any other name becomes a series of its own (GET /runs/{id}/metrics?key=name).
    Non-numeric values are skipped; NaN and infinities are kept as null."""
    r = _reporter if _reporter_pid == os.getpid() else _get()
    if r is not None:
        r.put(("step", int(global_step), metrics, time.time()))
        if _notice["heard"] and _notice["callbacks"]:
            _call_back(int(global_step))


def log_epoch(epoch, rank_zero_only=True, **metrics):
    """Reports an epoch's figures (epochs count from 0): lr, train_loss, test_loss,
    test_acc, seconds and samples_per_s fill the run's epoch table
    (GET /runs/{id}/epochs); other names become per-epoch series (the series
    epoch:NAME, its step the epoch; a sweep's metric may be NAME). The table is rank
    0's (as the step series are): another rank's figures are kept only with
    rank_zero_only=False, for a script that evaluates on that rank."""
    r = _get()
    if r is not None:
        r.put(("epoch", int(epoch), (metrics, bool(rank_zero_only)), time.time()))


def status(state, detail=""):
    """This rank's state, one of init, loading, training, evaluating,
    checkpointing, done, failed; detail is a sentence (for failed: why)."""
    if state not in STATES:
        raise ValueError(f"ddpd.status: state must be one of {', '.join(STATES)}, not {state!r}")
    r = _get()
    if r is not None:
        r.put(("status", state, str(detail), time.time()))


def checkpoint_saved(global_step, path=None):
    """Says that the script has just saved a checkpoint of the state after `global_step`
    steps (to `path`, listed as the run's checkpoint; without one, as "step-N"). The
    server counts the time since the step before it as checkpoint writing, and when a
    restart goes back to this step, the time of the steps after it as lost (docs/using.md,
    "Where the device time went"). Call status("checkpointing") before saving to count
    the save alone. After a preemption's notice (preempt_requested()), this is what ddpd
    waits for to stop the run: call it once the file is durable (written and renamed)."""
    r = _get()
    if r is not None:
        r.put(("checkpoint", int(global_step), str(path) if path else "step-%d" % int(global_step), time.time()))
        if _notice["heard"]:  # ddpd stops the run once it has this: sent now, not at the sender's pace
            r._drain()


# A preemption's notice (docs/using.md, "Preemption notices"): ddp-run sends SIGUSR1
# to a rank whose process catches it. The handler is set at the first
# preempt_requested() or on_preempt(), in the main thread, and only under ddpd: a
# script that never asks is stopped at once, as before (SIGTERM).
_notice = {"listening": False, "heard": False, "callbacks": [], "previous": None}


def _heard(signum, frame):
    if not _notice["heard"]:
        _notice["heard"] = True
        r = _reporter if _reporter_pid == os.getpid() else None
        if r is not None:
            r.put(("preempt", "heard", None, time.time()))
    prev = _notice["previous"]
    if callable(prev):
        prev(signum, frame)


def _listen():
    """Catches SIGUSR1 from now on (under ddpd, in the main thread). Whether it does."""
    if _notice["listening"]:
        return True
    r = _get()
    if r is None:
        return False
    try:
        _notice["previous"] = signal.signal(signal.SIGUSR1, _heard)
    except ValueError:  # not the main thread: signal handlers are set there only
        return False
    _notice["listening"] = True
    r.put(("preempt", "listening", None, time.time()))
    return True


def _call_back(global_step):
    callbacks, _notice["callbacks"] = _notice["callbacks"], []
    for fn in callbacks:
        fn(global_step)


def preempt_requested():
    """True once ddpd has sent this rank a preemption's notice (or a max_duration_s
    timeout's): save a checkpoint at the end of the current step, call
    checkpoint_saved(step), and ddpd stops the run at once, instead of at the
    preemption's grace's end; it resumes from that checkpoint. The first call starts
    listening for the notice (SIGUSR1, from the main thread): call it at every step.
    Outside ddpd, always False."""
    _listen()
    return _notice["heard"]


def should_pause():
    """True once ddpd has asked this rank to pause: a sweep's trial paused by ASHA below
    its rung or with its sweep (POST /sweeps/{id}/pause), a preemption, a max_duration_s
    timeout; the same notice as preempt_requested() (it is that call). Save a snapshot of
    the state after the current step, call checkpoint_saved(step, path), and wait to be
    stopped (ddpd stops the run once it has the checkpoint, else at the grace's end). A
    paused trial is started again when ASHA promotes it or its sweep is resumed: load
    the snapshot and go on. The first call starts listening (SIGUSR1, from the main
    thread): call it at every step. Outside ddpd, always False."""
    return preempt_requested()


def on_preempt(fn):
    """The callback form of preempt_requested(): fn(global_step) is called once, in
    the caller's thread, at the first log_step() after the notice (a step boundary: the
    step it reports is done), to save a checkpoint and call checkpoint_saved. Listens
    from now on (call it from the main thread). Outside ddpd, fn is never called."""
    if _listen():
        _notice["callbacks"].append(fn)


def dropped():
    """How many points were dropped because the queue was full."""
    r = _get()
    return r.lost if r is not None else 0


def flush():
    """Sends what is queued now (at most SEND_TIMEOUT_S on a stalled server); runs at
    exit by itself."""
    r = _reporter if _reporter_pid == os.getpid() else None
    if r is not None:
        r._drain()


@atexit.register
def _at_exit():
    r = _reporter if _reporter_pid == os.getpid() else None
    if r is not None:
        r.close()
