#!/usr/bin/env python3
"""Connection limits against a real ddpd on loopback: what one client (or many) can
hold, and that /healthz keeps answering meanwhile.

  flags               every limit in --help with its variable, refused when bad, in the
                      start-up log; the defaults sized to ulimit -n
  flood_one_address   4200 connections from one address: all but the per-address cap
                      are turned away with a 503; /healthz from another address
                      answers throughout
  slowloris           hundreds of connections sending a header byte a second are
                      closed at the header deadline (a 408), a keep-alive connection
                      that sends nothing after its answer too; /healthz answers
  idle_timeout        a stalled request body is closed after --idle-timeout; a quiet
                      event stream is not
  total_cap_and_reserve  the cap on every client together, and the loopback reserve
                      above it (from a non-loopback address of this host, when it has
                      one)
  stream_caps         event streams over --max-streams-per-address / --max-streams
                      are a 503 problem naming the cap; a closed stream frees its place
  replay_closes_db    streams that replayed history from the database do not keep a
                      database connection each
  silent_event_conns  300 connections to the event socket that never send a hello: the
                      oldest beyond 256 go at once, the rest at the 10 s deadline, a
                      few log lines say so; a run reports its steps meanwhile
  fd_exhaustion       under a low ulimit -n, the event socket flooded until accept
                      fails: the server backs off (little CPU, a few log lines) and
                      recovers when the connections go

Latencies are printed, and held only to generous bounds (the machine is shared).
Addresses 127.0.0.2 and up are other clients: Linux routes all of 127.0.0.0/8 to
loopback, so a socket bound to 127.0.0.3 is another address to the server.

Usage: test_server_limits.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import errno, fcntl, http.client, json, os, resource, select, socket, struct, sys, threading, time

from ddpd_harness import Server, check, cases_in, args_for, main, wait_until  # noqa: E402

HEALTHZ_BOUND_S = 5.0  # generous: the point is "answered", not "fast"


def raise_own_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connect_from(src, port, dst="127.0.0.1", timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect((dst, port))
    return s


def read_answer(sock, timeout=10):
    """What the server sends until it closes (or `timeout`): bytes, and whether it closed."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return got, True
            got += chunk
    except socket.timeout:
        return got, False
    except OSError:  # a reset is a close too
        return got, True


def get_from(src, port, path, timeout=30, dst="127.0.0.1"):
    """A GET from address `src`: (status, headers dict, body)."""
    c = http.client.HTTPConnection(dst, port, timeout=timeout, source_address=(src, 0))
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def metric(s, name, **labels):
    text = s.get("/metrics").body.decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    key = f"{name}{{{want}}}" if want else name
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return None


class HealthPoller:
    """GET /healthz from `src` every `interval` s in a thread: counts, failures, the
    worst latency."""

    def __init__(self, port, src="127.0.0.2", interval=0.1):
        self.port, self.src, self.interval = port, src, interval
        self.n, self.worst, self.failures = 0, 0.0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(60)
        return False

    def _run(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                status, _, _ = get_from(self.src, self.port, "/healthz", timeout=HEALTHZ_BOUND_S * 4)
                if status != 200:
                    self.failures.append(f"status {status}")
            except OSError as e:
                self.failures.append(repr(e))
            took = time.monotonic() - t0
            self.n += 1
            self.worst = max(self.worst, took)
            self._stop.wait(self.interval)

    def report(self, what):
        print(f"{what}: /healthz answered {self.n} times, worst {self.worst * 1000:.1f} ms, "
              f"{len(self.failures)} failures; load {os.getloadavg()[0]:.2f}", flush=True)
        check(self.n >= 5, f"{what}: /healthz was asked throughout (asked {self.n} times)")
        check(not self.failures, f"{what}: every /healthz answered 200: {self.failures[:5]}")
        check(self.worst < HEALTHZ_BOUND_S, f"{what}: /healthz within {HEALTHZ_BOUND_S} s throughout "
              f"(worst {self.worst:.2f} s)")


def log_lines(s, needle):
    with open(s.log_path, "rb") as f:
        return [line for line in f.read().decode(errors="replace").splitlines() if needle in line]


FLAGS = {"--max-connections": "DDPD_MAX_CONNECTIONS", "--reserved-connections": "DDPD_RESERVED_CONNECTIONS",
         "--max-connections-per-address": "DDPD_MAX_CONNECTIONS_PER_ADDRESS", "--header-timeout": "DDPD_HEADER_TIMEOUT",
         "--idle-timeout": "DDPD_IDLE_TIMEOUT", "--max-streams": "DDPD_MAX_STREAMS",
         "--max-streams-per-address": "DDPD_MAX_STREAMS_PER_ADDRESS"}


def case_flags(a):
    """Each limit is in `ddpd serve --help` with its variable; a bad value is refused
    naming the flag; the start-up log says the limits in force (a flag, a variable,
    the defaults sized to ulimit -n)."""
    import subprocess, tempfile, shutil
    text = subprocess.run([a.ddpd, "serve", "--help"], capture_output=True, timeout=30).stdout.decode()
    for flag, env in FLAGS.items():
        check(f"  {flag} " in text and env in text, f"serve --help lists {flag} and {env}")
    state = tempfile.mkdtemp(prefix="ddpd-test-")
    try:
        for flag in FLAGS:
            p = subprocess.run([a.ddpd, "serve", "--listen", "127.0.0.1:0", "--state-dir", state, "--gpus", "none",
                                flag, "0x"], capture_output=True, timeout=30)
            err = p.stderr.decode()
            check(p.returncode == 2 and f"{flag} must be an integer" in err and '"0x"' in err,
                  f"{flag} 0x is refused naming the flag and the value: {p.returncode} {err.strip()[-200:]!r}")
    finally:
        shutil.rmtree(state, ignore_errors=True)
    with Server(a.ddpd, a.fake_trainer, extra_args=["--max-connections", "100", "--header-timeout", "7"],
                env={"DDPD_MAX_STREAMS_PER_ADDRESS": "5"}) as s:
        line = (log_lines(s, "HTTP: at most") or [""])[0]
        check("at most 100 connections (+16 for loopback), 64 per address; headers within 7 s, idle 30 s" in line
              and ", 5 per address;" in line, f"the start-up line says the limits: {line!r}")
    with Server(a.ddpd, a.fake_trainer, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))) as s:
        line = (log_lines(s, "HTTP: at most") or [""])[0]
        m = [int(w) for w in line.split("at most ", 1)[-1].split()[:1] if w.isdigit()]
        check(m and 8 <= m[0] < 256 and "512 file descriptors" in line,
              f"under ulimit -n 512 the default cap fits in half the descriptors: {line!r}")
        check(not log_lines(s, "can take about"), "the defaults never warn about descriptors")
    with Server(a.ddpd, a.fake_trainer, extra_args=["--max-connections", "5000"],
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))) as s:
        warn = log_lines(s, "can take about")
        check(warn and "may open 512" in warn[0] and "--max-connections" in warn[0],
              f"limits set by hand beyond the descriptors get a warning naming both: {warn[:1]}")


def case_flood_one_address(a):
    """4200 connections from 127.0.0.3, held: the per-address cap (64 by default) lets
    64 in and turns the rest away at once, each with a 503 saying why."""
    n = min(4200, raise_own_fd_limit() - 300)  # what broke the server before: 4200
    with Server(a.ddpd, a.fake_trainer) as s:
        socks = []
        with HealthPoller(s.port) as hp:
            t0 = time.monotonic()
            for _ in range(n):
                try:
                    socks.append(connect_from("127.0.0.3", s.port))
                except OSError as e:
                    check(False, f"connect from 127.0.0.3: {e}")
                    break
            print(f"flood: {len(socks)} connections opened in {time.monotonic() - t0:.1f} s", flush=True)
            refused = wait_until(lambda: (metric(s, "ddpd_http_connections_refused_total", reason="per_address") or 0)
                                 >= n - 64, f"{n - 64} connections refused over the per-address cap", timeout=60)
            check(refused, "the flood beyond 64 connections was refused")
            time.sleep(2)  # the flood held a while, /healthz still asked
            open_now = metric(s, "ddpd_http_connections")
            check(open_now is not None and open_now <= 64 + 4,
                  f"at most the cap (64) of the flood's connections open, plus a few of /healthz: {open_now}")
            # one of the refused: its answer says what to do
            body, closed = read_answer(socks[-1], timeout=10)
            check(closed and body.startswith(b"HTTP/1.1 503"), f"a refused connection gets a 503 and is closed: "
                  f"{body[:200]!r}")
            check(b"too many connections from your address (64 open)" in body and
                  b"--max-connections-per-address" in body, f"the 503 names the cap and its flag: {body[-300:]!r}")
            # one admitted: still open, and it can make a request
            first = socks[0]
            first.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            body, _ = read_answer(first, timeout=30)
            check(body.startswith(b"HTTP/1.1 200"), f"an admitted flood connection is served: {body[:100]!r}")
            for c in socks:
                c.close()
        hp.report(f"flood of {n} connections from one address")
        lines = log_lines(s, "refused a connection from 127.0.0.3")
        check(1 <= len(lines) <= 10, f"the refusals are logged, once per interval, not per connection: "
              f"{len(lines)} lines")
        wait_until(lambda: (metric(s, "ddpd_http_connections") or 0) <= 2, "the flood's connections gone", timeout=60)
        status, _, _ = get_from("127.0.0.3", s.port, "/healthz")
        check(status == 200, f"once its connections are closed, the address is served again: {status}")


def case_slowloris(a):
    """1000 connections from 20 addresses each sending a header byte a second: closed
    at the deadline (3 s here), not before; the first requests get a 408. A connection
    that got its answer and then sends nothing is closed at the deadline too."""
    raise_own_fd_limit()
    deadline = 3
    per_addr, addrs = 50, [f"127.0.0.{i}" for i in range(10, 30)]
    with Server(a.ddpd, a.fake_trainer, extra_args=["--header-timeout", str(deadline)]) as s:
        with HealthPoller(s.port) as hp:
            conns = {}  # sock -> connect time
            for src in addrs:
                for _ in range(per_addr):
                    c = connect_from(src, s.port)
                    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    conns[c] = time.monotonic()
            idle = connect_from("127.0.0.20", s.port)
            idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            idle_answer = b""
            while b"\r\n\r\n" not in idle_answer:
                chunk = idle.recv(4096)
                if not chunk:
                    break
                idle_answer += chunk
            idle_answered_at = time.monotonic()
            check(idle_answer.startswith(b"HTTP/1.1 200"), f"a plain request is answered: {idle_answer[:80]!r}")
            closed_after, got_408, early = [], 0, 0
            idle_closed_after = None
            limit = time.monotonic() + deadline + 40
            next_byte = time.monotonic() + 1
            by_fd = {c.fileno(): c for c in conns}
            by_fd[idle.fileno()] = idle
            poller = select.poll()
            for fd in by_fd:
                poller.register(fd, select.POLLIN)
            while (conns or idle_closed_after is None) and time.monotonic() < limit:
                events = poller.poll(max(0.0, next_byte - time.monotonic()) * 1000)
                now = time.monotonic()
                for fd, _ in events:
                    c = by_fd.pop(fd)
                    poller.unregister(fd)
                    if c is idle:
                        data, _ = read_answer(idle, timeout=5)
                        check(data == b"", f"the idle keep-alive connection is closed without another answer: "
                              f"{data[:80]!r}")
                        idle_closed_after = now - idle_answered_at
                        continue
                    data, _ = read_answer(c, timeout=5)
                    took = now - conns.pop(c)
                    closed_after.append(took)
                    if took < deadline - 0.5:
                        early += 1
                    if data.startswith(b"HTTP/1.1 408") and b"--header-timeout" in data:
                        got_408 += 1
                    c.close()
                if now >= next_byte:
                    for c in list(conns):
                        try:
                            c.send(b"a")
                        except OSError:
                            pass
                    next_byte = now + 1
        n = per_addr * len(addrs)
        print(f"slowloris: {len(closed_after)} of {n} closed, after {min(closed_after, default=0):.1f} to "
              f"{max(closed_after, default=0):.1f} s; {got_408} got a 408; the idle keep-alive one after "
              f"{idle_closed_after if idle_closed_after is None else round(idle_closed_after, 1)} s", flush=True)
        hp.report(f"slowloris of {n} connections")
        check(not conns, f"every slow connection was closed by the server ({len(conns)} left open)")
        check(early == 0, f"none closed before the deadline of {deadline} s ({early} were)")
        check(got_408 >= n // 2, f"the slow first requests were answered 408 naming --header-timeout "
              f"({got_408} of {n})")
        check(idle_closed_after is not None and idle_closed_after >= deadline - 0.5,
              f"the keep-alive connection idle after its answer was closed, at the deadline: {idle_closed_after}")
        timeouts = metric(s, "ddpd_http_header_timeouts_total") or 0
        check(timeouts >= n + 1, f"ddpd_http_header_timeouts_total counts them: {timeouts}")
        lines = log_lines(s, "whose request headers took over")
        check(1 <= len(lines) <= 10, f"the deadline's closes are logged once per interval: {len(lines)} lines")
        for c in conns:
            c.close()
        idle.close()


def case_idle_timeout(a):
    """--idle-timeout 2: a request whose body stops coming is closed after 2 s of
    silence; an event stream with nothing to say (no heartbeat for a minute) stays."""
    with Server(a.ddpd, a.fake_trainer, extra_args=["--idle-timeout", "2", "--header-timeout", "60"],
                env={"DDPD_SSE_HEARTBEAT_S": "60"}) as s:
        status, _, stream, _ = open_stream("127.0.0.3", s.port)
        check(status == 200, f"an event stream opens: {status}")
        c = connect_from("127.0.0.4", s.port)
        c.sendall(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na")
        t0 = time.monotonic()
        _, closed = read_answer(c, timeout=60)
        took = time.monotonic() - t0
        print(f"idle: the stalled upload was closed after {took:.1f} s", flush=True)
        check(closed and took >= 1.5, f"the stalled upload is closed after the idle timeout, not before: "
              f"closed {closed} after {took:.1f} s")
        c.close()
        time.sleep(1)
        _, stream_closed = read_answer(stream, timeout=1)
        check(not stream_closed, f"the quiet event stream is still open {time.monotonic() - t0:.1f} s on")
        stream.close()
        check(s.get("/runs").json().get("runs") == [], "the cut-short POST stored nothing")


def non_loopback_ipv4():
    """An IPv4 address of this host outside 127.0.0.0/8, or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = struct.pack("256s", name.encode()[:15])
                addr = socket.inet_ntoa(fcntl.ioctl(probe.fileno(), 0x8915, req)[20:24])  # SIOCGIFADDR
            except OSError:
                continue
            if not addr.startswith("127."):
                return addr
    finally:
        probe.close()
    return None


def metric_on(sock, name, **labels):
    """A /metrics sample read over a connection already open (kept alive), so that
    the asking takes no new connection."""
    sock.settimeout(30)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
    while len(body) < length:
        body += sock.recv(65536)
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    key = f"{name}{{{want}}}" if want else name
    for line in body.decode().splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return None


def case_total_cap_and_reserve(a):
    """--max-connections 10 with 3 reserved for loopback: remote clients get 10, this
    host's /healthz still gets in, and past 13 everyone is turned away."""
    raise_own_fd_limit()
    ext = non_loopback_ipv4()
    print(f"non-loopback address of this host: {ext}", flush=True)
    args = ["--max-connections", "10", "--reserved-connections", "3", "--max-connections-per-address", "100",
            "--header-timeout", "120", "--idle-timeout", "120"]
    if ext:
        args = ["--listen", "0.0.0.0:0", "--insecure"] + args
    with Server(a.ddpd, a.fake_trainer, extra_args=args) as s:
        src, dst = (ext, ext) if ext else ("127.0.0.3", "127.0.0.1")
        held = [connect_from(src, s.port, dst=dst) for _ in range(10)]
        probe = connect_from("127.0.0.5", s.port)  # the 11th, in the reserve: asks /metrics from here on
        check(wait_until(lambda: metric_on(probe, "ddpd_http_connections") == 11, "11 connections open",
                         timeout=30), "10 held and the probe open")
        if ext:
            extra = connect_from(ext, s.port, dst=ext)
            body, closed = read_answer(extra, timeout=10)
            check(closed and body.startswith(b"HTTP/1.1 503") and b"--max-connections" in body,
                  f"an 11th remote connection is turned away with a 503 naming --max-connections: {body[:300]!r}")
            extra.close()
            status, _, _ = get_from("127.0.0.2", s.port, "/healthz")
            check(status == 200, f"with 10 remote connections open, /healthz from this host gets in: {status}")
            wait_until(lambda: metric_on(probe, "ddpd_http_connections") == 11, "/healthz's connection gone",
                       timeout=30)
        local = [connect_from("127.0.0.6", s.port) for _ in range(2)]  # the reserve's last two places
        check(wait_until(lambda: metric_on(probe, "ddpd_http_connections") == 13, "13 connections open",
                         timeout=30), "the reserve's three places taken by this host")
        beyond = connect_from("127.0.0.7", s.port)
        body, closed = read_answer(beyond, timeout=10)
        check(closed and body.startswith(b"HTTP/1.1 503") and b"the server has 10 connections open" in body,
              f"past the cap and the reserve, this host is turned away too: {body[:300]!r}")
        beyond.close()
        refused = metric_on(probe, "ddpd_http_connections_refused_total", reason="total")
        check(refused == (2 if ext else 1), f"ddpd_http_connections_refused_total{{reason=total}} counts them: "
              f"{refused}")
        for c in held + local:
            c.close()
        check(wait_until(lambda: metric_on(probe, "ddpd_http_connections") == 1, "the held connections gone",
                         timeout=30), "closed connections free their places")
        probe.close()
        status, _, _ = get_from(src, s.port, "/healthz", dst=dst)
        check(status == 200, f"once they close, the clients are served again: {status}")


def open_stream(src, port, path="/events"):
    """An SSE GET from `src`: (status, headers, the socket, what came after the headers)."""
    c = connect_from(src, port)
    c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
    c.settimeout(30)
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = c.recv(65536)
        if not chunk:
            break
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return status, headers, c, rest


def problem_of(sock, rest, headers):
    body = rest
    want = int(headers.get("content-length", "0"))
    sock.settimeout(10)
    while len(body) < want:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    try:
        return json.loads(body)
    except ValueError:
        return {"unparsed": body[:300]}


def case_stream_caps(a):
    """--max-streams 5, --max-streams-per-address 3: a 4th stream from one address and
    a 6th in all are 503 problems that name the cap; closing one frees its place."""
    raise_own_fd_limit()
    with Server(a.ddpd, a.fake_trainer, extra_args=["--max-streams", "5", "--max-streams-per-address", "3"],
                env={"DDPD_SSE_HEARTBEAT_S": "1"}) as s:
        mine = []
        for i in range(3):
            status, _, c, _ = open_stream("127.0.0.3", s.port)
            check(status == 200, f"stream {i + 1} from 127.0.0.3: 200, got {status}")
            mine.append(c)
        status, headers, c, rest = open_stream("127.0.0.3", s.port)
        p = problem_of(c, rest, headers)
        c.close()
        check(status == 503 and headers.get("content-type", "").startswith("application/problem+json"),
              f"a 4th stream from one address: a 503 problem, got {status} {headers.get('content-type')}")
        check(p.get("detail") == "too many event streams from this address (3); close some or raise "
              "--max-streams-per-address", f"the problem names the cap and its flag: {p}")
        check(headers.get("retry-after") == "5", f"with Retry-After: {headers.get('retry-after')}")
        others = []
        for i in range(2):
            status, _, c, _ = open_stream("127.0.0.4", s.port, "/events")
            check(status == 200, f"stream {i + 1} from 127.0.0.4: 200, got {status}")
            others.append(c)
        status, headers, c, rest = open_stream("127.0.0.4", s.port)
        p = problem_of(c, rest, headers)
        c.close()
        check(status == 503 and "--max-streams" in p.get("detail", "") and "(5" in p.get("detail", ""),
              f"a 6th stream in all: a 503 naming --max-streams and its 5: {status} {p}")
        check(metric(s, "ddpd_event_streams_refused_total", cap="per_address") == 1 and
              metric(s, "ddpd_event_streams_refused_total", cap="total") == 1,
              "/metrics counts one refusal of each kind")
        mine.pop().close()  # the server notices at its next heartbeat (1 s here)

        def reopened():
            status, _, c, _ = open_stream("127.0.0.4", s.port)
            if status == 200:
                others.append(c)
                return True
            c.close()
            return False
        check(wait_until(reopened, "a closed stream's place taken by another", timeout=30, interval=0.5),
              "a closed stream frees its place")
        for c in mine + others:
            c.close()


def db_fds(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").endswith("ddpd.db"):
                n += 1
        except OSError:
            pass
    return n


def case_replay_closes_db(a):
    """Streams that replay history from the table (a restarted server's ring is
    empty): once caught up, no database connection stays open per stream."""
    raise_own_fd_limit()
    state = None
    with Server(a.ddpd, a.fake_trainer, slots=2) as s:
        state = s.state_dir
        s.own_dir = False
        ids = [s.submit({"name": "steps-5", "distributed": {"world_size": 1}}) for _ in range(4)]
        for i in ids:
            s.wait_status(i, "succeeded", timeout=120)
    try:
        with Server(a.ddpd, a.fake_trainer, state_dir=state) as s:
            s.get("/runs")
            base = db_fds(s.proc.pid)
            newest = None
            streams = []
            for i in range(40):
                status, _, c, got = open_stream(f"127.0.0.{3 + i // 10}", s.port,
                                                "/events?last_event_id=0")
                if not check(status == 200, f"a replaying stream: 200, got {status}"):
                    c.close()
                    break
                # the greeting's `ready` names the newest id; the replay ends with it
                while newest is None and b'"last_event_id":' not in got:
                    got += c.recv(65536) or b"\0"
                if newest is None:
                    newest = int(got.split(b'"last_event_id":', 1)[1].split(b",")[0].split(b"}")[0])
                while f"id: {newest}\n".encode() not in got.split(b"event: ready", 1)[-1]:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                streams.append(c)
            check(newest and newest >= 8, f"there was history to replay (newest event {newest})")
            check(len(streams) == 40, f"40 streams replayed it ({len(streams)})")
            wait_until(lambda: db_fds(s.proc.pid) <= base + 3, "the replays' database connections closed", timeout=30)
            now = db_fds(s.proc.pid)
            print(f"replay: {base} database descriptors before, {now} with 40 replayed streams open", flush=True)
            check(now <= base + 3, f"40 replayed streams hold no database connection each: {base} -> {now}")
            for c in streams:
                c.close()
    finally:
        import shutil
        shutil.rmtree(state, ignore_errors=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case_fd_exhaustion(a):
    """ulimit -n 256 and 600 connections to the event socket: accept fails for want of
    descriptors. The server must not spin (CPU) nor log per failure, and once the
    connections go it accepts again, on the event socket and over HTTP."""
    raise_own_fd_limit()
    limit = 256

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    with Server(a.ddpd, a.fake_trainer, preexec_fn=low_limit) as s:
        sock_path = os.path.join(s.state_dir, "events.sock")
        with open(f"/proc/{s.proc.pid}/limits") as f:
            check(any("Max open files" in line and f" {limit} " in line for line in f),
                  f"the server runs with ulimit -n {limit}")
        flood = []
        for _ in range(600):
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            u.setblocking(False)
            try:
                u.connect(sock_path)
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.ECONNREFUSED):
                    check(False, f"connect to the event socket: {e}")
                u.close()
                break
            flood.append(u)
        hit = wait_until(lambda: log_lines(s, "event socket: accept:"), "accept to fail for want of descriptors",
                         timeout=30)
        check(hit and "Too many open files" in hit[0], f"the failure is logged, saying why: {hit[:1]}")
        log_before, cpu_before, t0 = os.path.getsize(s.log_path), cpu_seconds(s.proc.pid), time.monotonic()
        http_tries = []
        while time.monotonic() - t0 < 6:  # out of descriptors for 6 s, HTTP asked meanwhile
            try:
                status, _, body = get_from("127.0.0.2", s.port, "/healthz", timeout=2)
                http_tries.append(status)
            except OSError as e:
                http_tries.append(type(e).__name__)
            time.sleep(0.3)
        took = time.monotonic() - t0
        cpu = cpu_seconds(s.proc.pid) - cpu_before
        grown = os.path.getsize(s.log_path) - log_before
        print(f"fd exhaustion: {cpu:.2f} s of CPU and {grown} log bytes in {took:.1f} s; HTTP meanwhile: "
              f"{http_tries}; load {os.getloadavg()[0]:.2f}", flush=True)
        check(cpu < 1.5, f"no spinning: under 1.5 s of CPU in {took:.0f} s out of descriptors ({cpu:.2f} s)")
        check(grown < 16384, f"the log grew by a few lines, not a line per failure ({grown} bytes)")
        for u in flood:
            u.close()
        ok = wait_until(lambda: get_from("127.0.0.2", s.port, "/healthz", timeout=5)[0] == 200,
                        "/healthz once the connections are gone", timeout=60, interval=0.5)
        check(ok, "the server answers again once descriptors are free")

        def event_socket_serves():
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            u.settimeout(5)
            try:
                u.connect(sock_path)
                u.sendall(b'{"type":"step"}\n')  # not a hello: the server reads it and drops the connection
                return u.recv(100) == b""
            except OSError:
                return False
            finally:
                u.close()
        check(wait_until(event_socket_serves, "the event socket to accept and read again", timeout=60, interval=0.5),
              "the event socket accepts and reads again")



def case_silent_event_conns(a):
    """Connections to the event socket that never say hello are capped (256 waiting;
    the oldest goes for a new one) and dropped at a 10 s deadline, with a log line at
    most every 10 s; a real run's connections get in and its steps are stored."""
    raise_own_fd_limit()
    with Server(a.ddpd, a.fake_trainer) as s:
        sock_path = os.path.join(s.state_dir, "events.sock")
        silent = []
        for _ in range(300):
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            u.connect(sock_path)
            u.setblocking(False)
            silent.append(u)

        def closed(u):
            try:
                return u.recv(1) == b""
            except BlockingIOError:
                return False
            except OSError:
                return True

        first = wait_until(lambda: sum(closed(u) for u in silent[:44]) == 44, "the 44 oldest beyond the cap to go",
                           timeout=8)
        check(first, "the 44 oldest of 300 silent connections were dropped at once (a cap of 256 waiting)")
        check(not any(closed(u) for u in silent[60:]), "the newer ones still wait, before their deadline")
        run = s.submit({"name": "steps-50", "distributed": {"world_size": 2}})
        done = s.wait_status(run, "succeeded", timeout=60)
        check(done and done["status"] == "succeeded", f"a run succeeds among the silent connections: {done}")
        m = s.get(f"/runs/{run}/metrics?key=loss").json()
        check(len(m.get("points", [])) == 50, f"all its 50 steps were stored: {len(m.get('points', []))}")
        ok = wait_until(lambda: all(closed(u) for u in silent), "every silent connection to be dropped", timeout=40,
                        interval=0.2)
        check(ok, "every silent connection was dropped by its hello deadline")
        with open(s.log_path, errors="replace") as f:
            lines = [line for line in f if "sent no hello" in line]
        print(f"silent connections: {len(lines)} log lines: {lines[:3]}", flush=True)
        check(1 <= len(lines) <= 5, f"a few log lines about them, not one per connection: {len(lines)}")
        health = s.get("/healthz").json()["ingest"]
        check(health["dropped_connections"] >= 300, f"counted as dropped connections: {health}")
        for u in silent:
            u.close()

CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
