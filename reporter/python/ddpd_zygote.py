"""The warm start of a command run's Python ranks (docs/sweeps.md, "Trials that start
fast"): an interpreter that has imported the modules a run config's
`warm_start.imports` names, run as the run's Unix account, and forks each trial's
ranks from there instead of starting Python and importing them again.

Two levels, one program:

- The zygote (`python3 -m ddpd_zygote --socket PATH --imports a,b [--path DIR --cwd DIR]`):
  one per sweep and account, started by ddpd in a cgroup of its own. It imports the
  modules as the script would (DIR, the script's directory, first on sys.path, in the
  run's working directory: a module of the user's own, a data set loaded at import,
  is then shared by every trial forked from here, copy-on-write), listens on PATH (in
  a directory only its account may enter; the socket is renamed into place once it
  listens, so that ddpd waits for it on an event) and, for each connection whose peer
  is its own account or root (SO_PEERCRED), answers `{"op": "fork"}` with a trial
  zygote that takes the connection over: one it forked ahead, after the last (a
  spare, waiting for its connection, passed as SCM_RIGHTS), so that the fork is not
  in the trial's start; else one forked then. It holds no trial's environment.
- A trial zygote: ddpd moves it into the trial's cgroup and hands the connection to
  the trial's ddp-run, which asks it to start each rank (`{"op": "rank", "argv",
  "env", "cwd"}` with the rank's output pipe as SCM_RIGHTS). Each rank is a fork of
  it: its own process group, its life tied to the trial zygote's, the signals a new
  interpreter has, stdout and stderr on the pipe, exactly the environment, working
  directory and sys.argv given, then the script run as __main__; it exits as
  `python3 script.py` would. The trial zygote answers `{"pid": N}` for each rank and
  `{"exit": N, "status": WAIT_STATUS}` when it ends; when ddp-run's end of the
  connection closes, it kills every rank's process group and exits.

Replies are one JSON object a line. Only `python3 SCRIPT ARGS...` commands come here
(ddp-run decides); what the script sees differs from a cold start in that the modules
named were imported before its environment was set (a variable they read at import
comes from the zygote's: docs/sweeps.md says which)."""
import array, atexit, ctypes, gc, importlib, io, json, os, runpy, selectors, signal, socket, struct, sys, traceback

PR_SET_PDEATHSIG = 1
MAX_REQUEST = 1 << 20


def _peer_uid(conn):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _send(conn, obj):
    conn.sendall((json.dumps(obj) + "\n").encode())


class _Lines:
    """One JSON request a line from a connection, with the descriptors that came with it."""

    def __init__(self, conn):
        self.conn, self.buf, self.fds = conn, b"", []

    def next(self):
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_REQUEST:
                return None, []
            fds = array.array("i")
            try:
                data, anc, _, _ = self.conn.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
            except InterruptedError:
                continue
            except OSError:
                return None, []
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
            self.fds.extend(fds)
            if not data:
                return None, []
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        fds, self.fds = self.fds, []
        try:
            return json.loads(line), fds
        except ValueError:
            return None, fds


def _fresh_signals():
    """The signals a new interpreter starts with (python3 sets SIGINT's and ignores SIGPIPE)."""
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _exit_code(code):
    """The status `sys.exit(code)` gives a process (None 0, a number, else printed and 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(code):
    """Ends the rank as an interpreter's exit does, less its teardown: the atexit
    functions run and the output is flushed, then _exit (as multiprocessing's forked
    children end: the interpreter's teardown, in a fork of one that had imported torch,
    can wait many seconds on what the fork did not copy)."""
    try:
        atexit._run_exitfuncs()
    except BaseException:
        code = code or 1
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    os._exit(code)


def _rank(req, out_fd, parent):
    """In the forked rank: becomes `python3 SCRIPT ARGS` and never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the trial zygote died before the tie was made
            os._exit(137)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        if out_fd > 2:
            os.close(out_fd)
        _fresh_signals()
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=unbuffered,
                                      write_through=unbuffered)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True,
                                      errors="backslashreplace")
        script = req["argv"][0]
        sys.argv = list(req["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        extra = [d for d in os.environ.get("PYTHONPATH", "").split(":") if d and d not in sys.path]
        sys.path[1:1] = extra  # where `python3` puts PYTHONPATH: after the script's directory
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        _finish(code)
    except BaseException as e:
        try:
            os.write(2, f"ddpd_zygote: cannot start the rank: {e}\n".encode())
        finally:
            os._exit(127)


def _trial(conn, lines):
    """The trial zygote: starts ranks until ddp-run's end of the connection closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    ranks = set()
    r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(conn, selectors.EVENT_READ)
    sel.register(r, selectors.EVENT_READ)
    _send(conn, {"pid": os.getpid(), "ready": True})
    while True:
        for key, _ in sel.select():
            if key.fileobj == r:
                try:
                    os.read(r, 4096)
                except BlockingIOError:
                    pass
                while ranks:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    ranks.discard(pid)
                    _send(conn, {"exit": pid, "status": status})
                continue
            req, fds = lines.next()
            if req is None or req.get("op") != "rank" or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                if req is not None:  # not a rank's request: said, and the connection stays
                    _send(conn, {"error": "a request is {op: rank, argv, env, cwd} with the rank's output pipe"})
                    continue
                for pid in ranks:  # ddp-run is gone: so are its ranks
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                os._exit(0)
            parent = os.getpid()
            pid = os.fork()
            if pid == 0:
                sel.close()
                os.close(r)
                os.close(w)
                signal.set_wakeup_fd(-1)
                conn.close()
                return req, fds[0], parent
            os.close(fds[0])
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            ranks.add(pid)
            _send(conn, {"pid": pid})


def _fork_spare(listener):
    """A trial zygote forked ahead of its trial: in the zygote, (its pid, the link that
    hands it its connection); in the spare, once handed one, what _trial returns (it
    exits when the link closes first: the zygote is gone)."""
    link, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = os.fork()
    except OSError:
        link.close()
        theirs.close()
        return False  # forked at the connection instead
    if pid:
        theirs.close()
        return pid, link
    listener.close()
    link.close()
    try:
        _, fds, _, _ = socket.recv_fds(theirs, 1, 1)
    except OSError:
        fds = []
    theirs.close()
    if not fds:
        os._exit(0)
    conn = socket.socket(fileno=fds[0])
    return _trial(conn, _Lines(conn))


def _serve(path, imports, script_dir=None, cwd=None):
    if cwd:
        os.chdir(cwd)
    if script_dir:
        sys.path[0] = script_dir  # where `python3 script.py` looks first (`-m` put our own directory there)
    for name in imports:
        importlib.import_module(name)
    # what is imported now lives as long as the zygote: kept out of the collector, so a
    # collection in a trial's rank does not walk (and so copy) every page of it
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # trial zygotes are reaped by the kernel
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    me = os.getuid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        listener.bind(path + ".new")
    finally:
        os.umask(old)
    listener.listen(16)
    os.rename(path + ".new", path)  # in place once it listens: ddpd's wait ends on this
    sys.stdout.write(f"ddpd_zygote: pid {os.getpid()}: {len(imports)} module(s) imported, listening\n")
    sys.stdout.flush()
    spare = _fork_spare(listener)
    while True:
        if spare is None:
            spare = _fork_spare(listener)
        if isinstance(spare, tuple) and len(spare) == 3:  # in a rank of the spare's trial
            return spare
        conn, _ = listener.accept()
        uid = _peer_uid(conn)
        if uid not in (me, 0):
            sys.stdout.write(f"ddpd_zygote: refused a connection from uid {uid}: not this zygote's account\n")
            sys.stdout.flush()
            conn.close()
            continue
        lines = _Lines(conn)
        req, fds = lines.next()
        for fd in fds:
            os.close(fd)
        if not req or req.get("op") != "fork":
            conn.close()
            continue
        # the spare forked ahead takes it (the fork is then off the trial's start); else a fork now
        handed = False
        if spare:
            pid, link = spare
            try:
                socket.send_fds(link, [b"c"], [conn.fileno()])
                handed = True
            except OSError:
                pass
            link.close()
            spare = None
        if not handed:
            spare = None
            pid = os.fork()
            if pid == 0:
                listener.close()
                return _trial(conn, lines)
        conn.close()


def main():
    args = sys.argv[1:]
    usage = "usage: python3 -m ddpd_zygote --socket PATH --imports MODULE[,MODULE...] [--path DIR --cwd DIR]"
    if len(args) % 2 or len(args) < 4:
        sys.exit(usage)
    opts = dict(zip(args[::2], args[1::2]))
    if set(opts) - {"--socket", "--imports", "--path", "--cwd"} or "--socket" not in opts or "--imports" not in opts:
        sys.exit(usage)
    imports = [m for m in opts["--imports"].split(",") if m]
    req, out_fd, parent = _serve(opts["--socket"], imports, opts.get("--path"), opts.get("--cwd"))
    _rank(req, out_fd, parent)


if __name__ == "__main__":
    main()
