"""What the server's integration tests share: a real ddpd on a free loopback port with
a temporary state dir (stopped, and its trainers checked gone, even when a test
fails), a small HTTP client, polling with deadlines, and the pass/fail count.

Standard library only. Every wait polls with a generous deadline: these tests run
on slow 2-core machines next to other tests."""
import argparse, fcntl, http.client, json, os, pwd, random, shutil, signal, stat, subprocess, sys, tempfile, threading, time, traceback

import checks  # noqa: E402  (the one pass/fail count)
from checks import check, cases_in  # noqa: E402,F401  (re-exported for the tests)

DATA_ROOT = "/usr/share/datasets"


def wait_until(pred, what, timeout=60.0, interval=0.05):
    """Polls pred() until it returns something truthy; returns that, or None (and a
    failed check) at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            check(False, f"timed out after {timeout:.0f} s waiting for {what}")
            return None
        time.sleep(interval)


def iso_seconds(text):
    """The server's times ("2026-12-07T19:51:55.123Z", or without the fraction) as
    seconds since the epoch."""
    import datetime
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# ---- users (ddpd user) ----

def user(ddpd, state_dir, *args):
    """`ddpd user ARGS --state-dir DIR`: (exit status, stdout, stderr)."""
    p = subprocess.run([ddpd, "user", *args, "--state-dir", state_dir], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def add_user(ddpd, state_dir, name, *opts):
    """Adds a user; its token, the last line of what the command printed."""
    code, out, err = user(ddpd, state_dir, "add", name, *opts)
    check(code == 0, f"ddpd user add {name} exits 0: {code} {err}")
    token = out.strip().splitlines()[-1] if out.strip() else ""
    check(len(token) == 64 and all(c in "0123456789abcdef" for c in token),
          f"its token is alone on the last line of its output: {out!r}")
    return token


class Accounts:
    """Unix accounts made for one case (ddpdt-ROLE-PID), removed on exit (root only): the
    accounts runs run as (ddpd user --unix-user, serve --run-user), an agent's own."""

    def __init__(self, *roles):
        self.names = {r: f"ddpdt-{r}-{os.getpid()}" for r in roles}

    @staticmethod
    def _shadow_tool(*argv):
        """useradd/userdel, again while another test holds /etc/passwd's lock (ctest -j)."""
        for _ in range(100):
            p = subprocess.run(list(argv), capture_output=True, text=True)
            if p.returncode == 0 or "lock" not in p.stderr:
                return p
            time.sleep(0.1)
        return p

    def __enter__(self):
        for name in self.names.values():
            self._shadow_tool("userdel", name)
            p = self._shadow_tool("useradd", "--no-create-home", "--home-dir", f"/nonexistent/{name}", "--shell",
                                  "/usr/sbin/nologin", name)
            if p.returncode != 0:
                self.__exit__()
                raise RuntimeError(f"useradd {name}: {p.stderr}")
        return self

    def __exit__(self, *exc):
        for name in self.names.values():
            try:
                uid = pwd.getpwnam(name).pw_uid
            except KeyError:
                continue
            for pid in [int(n) for n in os.listdir("/proc") if n.isdigit()]:  # what its runs left, by pid
                try:
                    if os.stat(f"/proc/{pid}").st_uid == uid:
                        os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            p = self._shadow_tool("userdel", "--force", name)
            check(p.returncode == 0, f"the test's account {name} is removed: {p.stderr}")
        return False

    def __getitem__(self, role):
        return self.names[role]

    def uid(self, role):
        return pwd.getpwnam(self.names[role]).pw_uid


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def args_for(cases, required=()):
    """The case and the programs every server test is given, and `required`'s flags."""
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(cases))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer")
    p.add_argument("--fake-trainer", required=True)
    for flag in required:
        p.add_argument(flag, required=True)
    return p.parse_args()


def fmnist_config(**over):
    """A small real run: a few thousand Fashion-MNIST examples."""
    cfg = {
        "name": "fmnist-mlp",
        "model": {"hidden": [128, 64]},
        "data": {"train": {"images": "fashion-mnist/train-images-idx3-ubyte.gz",
                           "labels": "fashion-mnist/train-labels-idx1-ubyte.gz"},
                 "test": {"images": "fashion-mnist/t10k-images-idx3-ubyte.gz",
                          "labels": "fashion-mnist/t10k-labels-idx1-ubyte.gz"},
                 "limit": 3000, "test_limit": 1000},
        "train": {"epochs": 2, "batch_size": 128},
        "distributed": {"world_size": 2},
    }
    return merge(cfg, over)


def merge(cfg, over):
    """over: {"train.epochs": 3, ...}"""
    cfg = json.loads(json.dumps(cfg))
    for path, value in over.items():
        node = cfg
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    return cfg


def pids_under(directory):
    """Processes whose command line mentions `directory` (trainers of its runs)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if directory in cmd and state != "Z":
            found.append(int(name))
    return found


SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
_sanitized = {}


def sanitized(ddpd):
    """Is this ddpd the sanitizer build (its version line says "sanitizers: ...")?"""
    if ddpd not in _sanitized:
        out = subprocess.run([ddpd, "version"], capture_output=True, text=True, timeout=60).stdout
        _sanitized[ddpd] = "sanitizers:" in out
    return _sanitized[ddpd]


def sanitizer_reports(state_dir):
    """The server's log and its runs' trainer logs that hold a sanitizer's report:
    [(path, the report's first line)]."""
    found = []
    logs = [os.path.join(state_dir, "server.log")]
    runs = os.path.join(state_dir, "runs")
    if os.path.isdir(runs):
        logs += [os.path.join(runs, r, "trainer.log") for r in sorted(os.listdir(runs))]
    for path in logs:
        try:  # a run may have left a FIFO or a link where its log was (test_server_wall_files.py)
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            with open(path, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if any(mark in line for mark in SANITIZER_REPORTS):
                found.append((path, line.strip()[:300]))
                break
    return found


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


# ---- MASTER_PORTs of command runs ----

PORT_BLOCKS = range(20000, 29000, 50)  # below torchrun's 29400/29500 and the kernel's ephemeral ports
_held_port_blocks = []  # the lock files this process holds (released when it exits)


def lease_port_range():
    """(LO, HI): 50 ports no other test on this machine leases while this process
    lives. Tests run side by side under ctest -j, each with a server of its own: two
    servers leasing from one range could hand the same MASTER_PORT to runs starting
    at once (each port free when leased), and one run's gloo store would find it
    taken. A block is held by an flock on its file, which the kernel drops when the
    process ends, however it ends."""
    d = os.path.join(tempfile.gettempdir(), "ddpd-test-ports")
    os.makedirs(d, exist_ok=True)
    try:
        os.chmod(d, 0o1777)  # every account's tests lease here
    except OSError:
        pass
    blocks = list(PORT_BLOCKS)
    first = random.randrange(len(blocks))
    for lo in blocks[first:] + blocks[:first]:
        fd = os.open(os.path.join(d, f"{lo}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held_port_blocks.append(fd)
        return lo, lo + PORT_BLOCKS.step - 1
    raise RuntimeError(f"every block of ports in {d} is held by a test: more tests at once than "
                       f"{len(blocks)}, or lock files held by stray processes")


def port_range_args(args):
    """["--port-range", LO-HI] leased for a server that allows command runs and names
    no range of its own; [] otherwise."""
    args = list(args)
    if "--allow-commands" not in args or "--port-range" in args:
        return []
    return ["--port-range", "%d-%d" % lease_port_range()]


def unsafe_commands_flag(args):
    """A root server refuses command runs that would run as root (run_as.h). Tests of
    command runs that are not about the wall between accounts run as root in CI:
    they say so knowingly (["--unsafe-commands-as-server"]); [] where that is not
    needed or the test chose whom runs run as."""
    args = list(args)
    chose = any(a in ("--run-user", "--unsafe-commands-as-server") for a in args)
    return ["--unsafe-commands-as-server"] if os.geteuid() == 0 and "--allow-commands" in args and not chose else []


class Server:
    """One ddpd process. Use as a context manager."""

    def __init__(self, ddpd, trainer, slots=2, state_dir=None, extra_args=(), env=None, grace=3, log_dir=None, preexec_fn=None):
        self.ddpd, self.trainer, self.slots = ddpd, trainer, slots
        self.log_dir = log_dir  # where server.log goes (default: the state dir)
        self.preexec_fn = preexec_fn  # run in the child before ddpd (a lower ulimit -n)
        self.own_dir = state_dir is None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="ddpd-test-")
        self.extra_args, self.env, self.grace = list(extra_args), env, grace
        self.proc = None
        self.port = None
        self.port_args = []  # a leased --port-range (port_range_args)
        self.headers = {}  # sent with every request (a token)
        self.read_headers = {}  # sent with every GET and HEAD (a token, where reads need one)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            # a start that failed (some tests expect it) leaves no state dir of its own behind
            if self.proc and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.own_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type:
            traceback.print_exception(exc_type, exc, tb)
            check(False, f"exception: {exc}")
            self.dump_log()
        running = self.proc is not None and self.proc.poll() is None
        code = self.stop()
        if running:  # stopped here, by SIGTERM: a clean shutdown
            check(code == 0, f"ddpd exits 0 on SIGTERM, exited {code}")
        reports = sanitizer_reports(self.state_dir)
        check(not reports, f"no sanitizer report in the server's or its trainers' logs: {reports}")
        leftovers = pids_under(self.state_dir)
        check(not leftovers, f"no process of a run is left after the server stopped (left: {leftovers})")
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        return True  # the exception was counted as a failure

    def start(self, timeout=30):
        cmd = [self.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", self.state_dir,
               "--slots", str(self.slots), "--data-root", DATA_ROOT, "--cancel-grace", str(self.grace),
               "--gpus", "none"]
        if self.trainer:
            cmd += ["--trainer", self.trainer]
        cmd += self.extra_args
        cmd += unsafe_commands_flag(self.extra_args)
        if not self.port_args:  # kept across restarts of this server
            self.port_args = port_range_args(self.extra_args)
        cmd += self.port_args
        env = dict(os.environ, **(self.env or {}))
        self.log_path = os.path.join(self.log_dir or self.state_dir, "server.log")
        # this user's only, as the server keeps its state dir (it would tighten it, with a warning)
        self.log = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, env=env, preexec_fn=self.preexec_fn)
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        text = line[0].decode() if line else ""
        if "listening on http://" not in text:
            self.dump_log()
            raise RuntimeError(f"ddpd did not start: {text!r} (exit status {self.proc.poll()})")
        self.port = int(text.strip().rsplit(":", 1)[1])

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            check(False, f"ddpd exits within {timeout} s of {sig!r}")
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def kill(self):
        """SIGKILL: the server dies without cleaning up (its trainers live on)."""
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def dump_log(self):
        try:
            with open(self.log_path, "rb") as f:
                sys.stderr.write("---- ddpd log ----\n" + f.read().decode(errors="replace")[-20000:] + "------------------\n")
        except OSError:
            pass

    # ---- HTTP ----

    def request(self, method, path, body=None, headers=None, timeout=30, anonymous=False):
        """anonymous: neither self.headers nor self.read_headers are sent, only `headers`."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        hdrs = {} if anonymous else dict(self.headers, **(self.read_headers if method in ("GET", "HEAD") else {}))
        hdrs.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        resp = Response(r.status, r.getheaders(), r.read())
        conn.close()
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def submit(self, cfg):
        r = self.post("/runs", cfg)
        if not check(r.status == 201, f"POST /runs -> 201, got {r.status}: {r.body[:500]!r}"):
            raise RuntimeError("submission refused")
        return r.json()["id"]

    def run(self, run_id):
        r = self.get(f"/runs/{run_id}")
        return r.json() if r.status == 200 else None

    def wait_status(self, run_id, statuses, timeout=120):
        statuses = {statuses} if isinstance(statuses, str) else set(statuses)

        def done():
            run = self.run(run_id)
            return run if run and run["status"] in statuses else None

        run = wait_until(done, f"run {run_id} to be {'/'.join(sorted(statuses))}", timeout)
        if not run:
            last = self.run(run_id)
            print(f"run {run_id} is {last and last['status']}: {json.dumps(last)[:2000]}", file=sys.stderr)
            self.dump_log()
            self.dump_run_log(run_id)
        return run

    def dump_run_log(self, run_id):
        r = self.get(f"/runs/{run_id}/logs?tail=40")
        sys.stderr.write(f"---- run {run_id} log ----\n{r.body.decode(errors='replace')}\n")

    def run_dir(self, run_id):
        return os.path.join(self.state_dir, "runs", str(run_id))

    def server_path(self, named):
        """A path as the server answers it ("<state-dir>/runs/3/...", named by its root)
        as the file on this host."""
        for label, root in (("<state-dir>", self.state_dir), ("<data-root>", DATA_ROOT)):
            if named == label or named.startswith(label + "/"):
                return os.path.realpath(root) + named[len(label):]
        return named


def needs_trainer(args):
    """A case that trains needs --trainer: without it (ddp-trainer not built) it fails,
    saying so, rather than passing having checked nothing."""
    if not args.trainer:
        print(f"{args.case}: needs --trainer (ddp-trainer is not built): 0 passed, 1 failed")
        sys.exit(1)


def main(cases, args):
    """Runs one case; prints the count; exits non-zero on any failure."""
    try:
        cases[args.case](args)
    except Exception:
        traceback.print_exc()
        check(False, f"case {args.case} raised")
    checks.finish(args.case)
