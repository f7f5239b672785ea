"""A Docker engine for the image's test, and the Debian base image it builds on.

Engine: the engine that answers (DOCKER_HOST, else the usual socket), or else a dockerd
of the test's own (root only): the vfs storage driver, no iptables and no default
bridge, its data under a cache directory (so its images and build cache, the base
image among them, outlive the test) and its socket, pid file and runtime state under
a directory of its own in /tmp, so it never meets another engine on the host. The
test stops only a dockerd it started (or one a crashed earlier run left on its own
socket). A lock on the cache directory keeps two tests from sharing it at once.

debian_base(): no image registry is needed. Debian 12 made with debootstrap
(minbase, dpkg set up as in Debian's own images) and imported once, under a name
that says what went into it; the host's
own CA certificates (/usr/local/share/ca-certificates) go in too, so that a build
behind a proxy that signs with its own CA reaches npm's registry as the host does.

Standard library only."""
import fcntl, hashlib, os, shutil, signal, subprocess, sys, tempfile, time

CACHE = os.environ.get("DDPD_DOCKER_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ddpd-tests", "docker")
RUN_DIR = "/tmp/ddpd-test-dockerd"  # short: containerd's sockets live beneath it
DEBIAN_MIRROR = os.environ.get("DDPD_DEBIAN_MIRROR", "http://deb.debian.org/debian")
LOCAL_CAS = "/usr/local/share/ca-certificates"
BASE_RECIPE = "2"  # bump when debian_base() makes a different image


def client():
    """The docker client: Debian's (docker.io, the daemon's own version, which builds
    with BuildKit without the buildx plugin), else the first on PATH."""
    return "/usr/bin/docker" if os.access("/usr/bin/docker", os.X_OK) else shutil.which("docker")


class Engine:
    def __init__(self):
        self.docker = client()
        self.env = dict(os.environ)
        self.own = None  # the dockerd we started (Popen), or True for one left on our socket
        self.log_path = os.path.join(CACHE, "dockerd.log")
        self.lock = None

    def run(self, *args, check=False, timeout=600, input=None, env=None, capture=True):
        """docker ARGS...; returns the CompletedProcess (text). check=True raises on failure,
        naming the command and its output."""
        p = subprocess.run([self.docker, *args], capture_output=capture, text=True, timeout=timeout,
                           input=input, env=dict(self.env, **(env or {})))
        if check and p.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)[:300]} exited {p.returncode}: {(p.stdout or '')[-2000:]}"
                               f"{(p.stderr or '')[-2000:]}")
        return p

    def answers(self, env=None):
        try:
            return subprocess.run([self.docker, "version", "--format", "{{.Server.Version}}"], capture_output=True,
                                  text=True, timeout=30, env=dict(self.env, **(env or {}))).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def start(self):
        """Finds or starts an engine. Returns None when one answers, else why none can."""
        os.makedirs(CACHE, exist_ok=True)
        self.lock = open(os.path.join(CACHE, "lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)  # another test run using this cache waits here
        if not self.docker:
            return "no docker client (Debian's docker.io; scripts/install-deps.sh installs it)"
        if self.answers():
            print(f"docker engine: the one that answers ({self.env.get('DOCKER_HOST', 'the usual socket')})")
            return None
        ours = {"DOCKER_HOST": f"unix://{RUN_DIR}/docker.sock"}
        if self.answers(ours):
            self.env.update(ours)
            self.own = True
            print(f"docker engine: the dockerd a previous run left on {RUN_DIR}/docker.sock (stopped at the end)")
            return None
        dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if os.access("/usr/sbin/dockerd", os.X_OK) else None)
        if not dockerd:
            return "no Docker engine answers and there is no dockerd to start (Debian's docker.io)"
        if os.geteuid() != 0:
            return "no Docker engine answers, and only root can start a dockerd"
        os.makedirs(RUN_DIR, mode=0o700, exist_ok=True)
        pidfile = os.path.join(RUN_DIR, "docker.pid")
        if os.path.exists(pidfile):  # a dockerd of ours that died: its pid file would stop the next one
            os.unlink(pidfile)
        log = open(self.log_path, "w")
        self.own = subprocess.Popen(
            [dockerd, "--storage-driver=vfs", "--iptables=false", "--ip6tables=false", "--bridge=none",
             "--data-root", os.path.join(CACHE, "data"), "--exec-root", os.path.join(RUN_DIR, "exec"),
             "--pidfile", pidfile, "-H", ours["DOCKER_HOST"]],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.own.poll() is not None:
                why = f"dockerd exited {self.own.returncode} at start: {self.log_tail()}"
                self.own = None
                return why
            if self.answers(ours):
                self.env.update(ours)
                print(f"docker engine: a dockerd of this test's own (vfs), data in {CACHE}/data")
                return None
            time.sleep(0.5)
        self.stop()
        return f"dockerd did not answer within 120 s: {self.log_tail()}"

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return "(no log)"

    def prune(self):
        """In a dockerd of our own: drops the build cache no longer used, keeping what the
        next build reuses (the dependency layers were used last, so they stay)."""
        if self.own:
            self.run("image", "prune", "-f", "--filter", "label=ddpd.test=1")
            self.run("builder", "prune", "-f", "--keep-storage", os.environ.get("DDPD_DOCKER_KEEP", "4g"))

    def stop(self):
        """Stops the dockerd we started (SIGTERM; SIGKILL after 60 s), only that one."""
        if isinstance(self.own, subprocess.Popen):
            self.own.send_signal(signal.SIGTERM)
            try:
                self.own.wait(60)
            except subprocess.TimeoutExpired:
                self.own.kill()
                self.own.wait()
        elif self.own is True:
            try:
                with open(os.path.join(RUN_DIR, "docker.pid")) as f:
                    pid = int(f.read().strip())
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
                    time.sleep(0.2)
            except (OSError, ValueError):
                pass
        self.own = None
        unmount_left(RUN_DIR, os.path.join(CACHE, "data"))
        if self.lock:
            self.lock.close()
            self.lock = None


def unmount_left(*roots):
    """The mounts a stopped dockerd leaves under its own directories (its namespace's
    bind mount, its data root's): taken down, deepest first. Only ever under ours."""
    try:
        with open("/proc/self/mounts") as f:
            points = [line.split()[1].replace("\\040", " ") for line in f]
    except OSError:
        return
    for point in sorted(points, key=len, reverse=True):
        if any(point == r or point.startswith(r + "/") for r in roots):
            subprocess.run(["umount", "-l", point], capture_output=True)


def local_cas():
    """The host's own CA certificates (what update-ca-certificates adds to the system's)."""
    if not os.path.isdir(LOCAL_CAS):
        return []
    found = []
    for root, _, files in os.walk(LOCAL_CAS):
        found += [os.path.join(root, f) for f in files if f.endswith(".crt")]
    return sorted(found)


def debian_base(engine):
    """The name of a Debian 12 image (made now, or the one made before under that name)."""
    h = hashlib.sha256(f"{BASE_RECIPE} bookworm minbase {DEBIAN_MIRROR}".encode())
    cas = local_cas()
    for path in cas:
        with open(path, "rb") as f:
            h.update(f.read())
    name = f"ddpd-test-base:bookworm-{h.hexdigest()[:12]}"
    if engine.run("image", "inspect", name).returncode == 0:
        print(f"base image: {name} (made before)")
        return name
    if os.geteuid() != 0:
        raise RuntimeError(f"making the Debian base ({name}) needs root (debootstrap); or set DDPD_DOCKER_BASE "
                           "to a Debian 12 image (debian:12, where a registry can be reached)")
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    root = tempfile.mkdtemp(prefix="base-", dir=CACHE)
    os.chmod(root, 0o755)  # the image's / (mkdtemp's 0700 would shut every other user out)
    t = time.monotonic()
    try:
        p = subprocess.run([debootstrap, "--variant=minbase", "bookworm", root, DEBIAN_MIRROR],
                           capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"debootstrap exited {p.returncode}: {(p.stdout + p.stderr)[-3000:]}")
        # What Debian's own images have: the release, its updates and security suites; no
        # package lists or downloaded packages (apt-get update comes first in a build).
        os.unlink(os.path.join(root, "etc/apt/sources.list"))
        with open(os.path.join(root, "etc/apt/sources.list.d/debian.sources"), "w") as f:
            f.write(f"Types: deb\nURIs: {DEBIAN_MIRROR}\nSuites: bookworm bookworm-updates\nComponents: main\n"
                    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
                    "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"
                    "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
        # As Debian's own images: dpkg without an fsync per file (a container's layer is
        # thrown away whole if a build fails) and, as debian:12-slim, no manuals or
        # translations: a build's apt-get install takes half the time on vfs
        with open(os.path.join(root, "etc/dpkg/dpkg.cfg.d/docker-apt-speedup"), "w") as f:
            f.write("force-unsafe-io\n")
        with open(os.path.join(root, "etc/dpkg/dpkg.cfg.d/docker-excludes"), "w") as f:
            f.write("".join(f"path-exclude=/usr/share/{d}/*\n" for d in ("doc", "man", "info", "locale")) +
                    "path-include=/usr/share/doc/*/copyright\n")
        for d in ("var/cache/apt", "var/lib/apt/lists"):
            for entry in os.listdir(os.path.join(root, d)):
                path = os.path.join(root, d, entry)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        changes = ["--change", 'CMD ["bash"]']
        if cas:
            dest = os.path.join(root, LOCAL_CAS.lstrip("/"))
            os.makedirs(dest, exist_ok=True)
            for path in cas:
                shutil.copy(path, dest)
            # node (npm) reads the system's bundle only when told: once ca-certificates is
            # installed in a build, the bundle holds these too
            changes += ["--change", "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt"]
        tar = subprocess.Popen(["tar", "-C", root, "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run([engine.docker, "import", *changes, "-", name], stdin=tar.stdout, capture_output=True,
                             text=True, timeout=600, env=engine.env)
        tar.stdout.close()
        if tar.wait() != 0 or imp.returncode != 0:
            raise RuntimeError(f"docker import failed: {imp.stderr[-2000:]}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if engine.own:  # in our own engine, the bases made by an older recipe go
        for old in engine.run("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "ddpd-test-base").stdout.split():
            if old != name:
                engine.run("image", "rm", old)
    print(f"base image: {name} made (debootstrap and import: {time.monotonic() - t:.0f} s)")
    sys.stdout.flush()
    return name
