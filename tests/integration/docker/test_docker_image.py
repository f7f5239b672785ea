#!/usr/bin/env python3
"""The Docker image, built from the repository's Dockerfile and run for real.

On a Debian 12 base (made with debootstrap: no image registry is needed; see
docker_engine.py) the Dockerfile builds the CPU-only image; this test builds it once,
then, against running containers:

- every program `cmake --install` installs is in the image (the host build's install
  says which, less ddp-trainer-nccl: no CUDA in this build) and ldd finds every
  library each one links; ddp-trainer says it has no nccl backend;
- without DDPD_TOKEN ddpd refuses to start, saying why;
- with it, ddpd runs as the image's own user (uid 10001, not root), /healthz answers
  and the image's HEALTHCHECK turns healthy (checked every second here);
- the container gets docker-compose.yml's settings (read from `docker-compose config`):
  its /dev/shm is compose's shm_size, `docker stop` waits compose's stop_grace_period,
  the state is on a named volume at compose's target, the datasets are mounted
  read-only, the token comes from DDPD_TOKEN (compose's unlimited memlock, for
  NCCL, is checked in the file but not given: it needs a privilege a CPU host's
  engine may not have, as here);
- a run POSTed without the token is refused (401); with it, a small Fashion-MNIST MLP
  succeeds, its metrics, log and checkpoints are served (the checkpoint is the file
  on the volume), and the dashboard's page, its scripts and uPlot load;
- a run asking for nccl is refused, and ddp-trainer itself names the GPU backend it
  lacks;
- `docker stop` during a second run: ddpd ends on its own within the grace period
  (exit 0, not docker's SIGKILL) with the run canceled, not failed; `docker start`
  serves both runs' history unchanged, and resuming the canceled run through the
  API succeeds in the restarted container, from its checkpoint;
- two users mapped to accounts of the image (two_users.py): with --cap-drop ALL and
  exactly compose's cap_add, alice's run runs under her uid and bob's run cannot read
  her directory, the database or the token file; with no capability added, her run
  is refused, naming the capabilities the server lacks.

Skipped (exit 77), saying why, only where no Docker engine answers and none can be
started. Prints how long the base image, the build and the whole test took.
DDPD_DOCKER_BASE=debian:12 builds on that image instead of making one (where a
registry can be reached, or without root, which debootstrap needs).

Usage: test_docker_image.py --source REPO --build BUILD_DIR --cmake CMAKE"""
import argparse, http.client, json, os, re, secrets, shutil, subprocess, sys, tempfile, time

import checks  # noqa: E402
from checks import check  # noqa: E402
from ddpd_harness import DATA_ROOT, Response, fmnist_config, wait_until  # noqa: E402
import compose_settings  # noqa: E402
import docker_engine  # noqa: E402
import two_users  # noqa: E402

IMAGE = "ddpd-test:cpu"
USER_ID = "10001"


class Fatal(Exception):
    """A step whose failure leaves nothing for the next ones to check."""


def seconds_since(t):
    return f"{time.monotonic() - t:.0f} s"


class Container:
    """A running container of the image and its HTTP API (on its own address on the
    test's bridge network, port 8080: the image's defaults, unchanged)."""

    def __init__(self, engine, name, network, token):
        self.engine, self.name, self.network, self.token = engine, name, network, token
        self.addr = None

    def inspect(self, fmt):
        return self.engine.run("inspect", "-f", fmt, self.name).stdout.strip()

    def exec(self, *argv, input=None, timeout=120):
        return self.engine.run("exec", "-i", self.name, *argv, input=input, timeout=timeout)

    def exec_as(self, user, *argv, timeout=120):
        return self.engine.run("exec", "-u", user, self.name, *argv, timeout=timeout)

    def wait_healthy(self, timeout=180):
        def healthy():
            state = self.inspect("{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}")
            if state.startswith("exited"):
                raise Fatal(f"the container exited: {self.engine.run('logs', '--tail', '40', self.name).stderr}")
            if state == "running unhealthy":
                raise Fatal(f"its HEALTHCHECK found it unhealthy: {self.inspect('{{json .State.Health.Log}}')[-1500:]}")
            return state == "running healthy"
        ok = wait_until(healthy, f"{self.name}'s HEALTHCHECK to turn healthy", timeout, interval=0.5)
        self.addr = self.inspect("{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
        return ok

    def request(self, method, path, body=None, token=None, timeout=30):
        conn = http.client.HTTPConnection(self.addr, 8080, timeout=timeout)
        headers = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        resp = Response(r.status, r.getheaders(), r.read())
        conn.close()
        return resp

    def get(self, path):
        return self.request("GET", path)

    def run(self, run_id):
        r = self.get(f"/runs/{run_id}")
        return r.json() if r.status == 200 else None

    def submit(self, cfg):
        r = self.request("POST", "/runs", cfg, token=self.token)
        if not check(r.status == 201, f"POST /runs with the token -> 201: {r.status} {r.body[:500]!r}"):
            raise Fatal("the run was refused")
        return r.json()["id"]

    def wait_status(self, run_id, statuses, timeout):
        run = wait_until(lambda: (lambda r: r if r and r["status"] in statuses else None)(self.run(run_id)),
                         f"run {run_id} to be {'/'.join(statuses)}", timeout, interval=0.5)
        if not run:
            print(f"run {run_id}: {json.dumps(self.run(run_id))[:2000]}\n"
                  f"{self.get(f'/runs/{run_id}/logs?tail=30').body.decode(errors='replace')}", file=sys.stderr)
            raise Fatal(f"run {run_id} never became {'/'.join(statuses)}")
        return run


def expected_programs(a):
    """What `cmake --install` of the host's build puts in bin/: the one list of programs
    (CMakeLists.txt's install(TARGETS)), less the GPU backend, which a build without the
    CUDA toolkit has not."""
    with tempfile.TemporaryDirectory() as prefix:
        p = subprocess.run([a.cmake, "--install", a.build, "--prefix", prefix], capture_output=True, text=True,
                           timeout=300)
        if not check(p.returncode == 0, f"cmake --install of the host's build: {p.stderr[-1000:]}"):
            raise Fatal("cannot tell which programs the image must carry")
        return sorted(set(os.listdir(os.path.join(prefix, "bin"))) - {"ddp-trainer-nccl"})


def build_image(engine, a, base):
    t = time.monotonic()
    log = os.path.join(docker_engine.CACHE, "build.log")
    p = engine.run("build", "--network", "host", "--progress", "plain", "--build-arg", f"BUILD_IMAGE={base}",
                   "--build-arg", f"RUNTIME_IMAGE={base}", "--label", "ddpd.test=1", "-t", IMAGE, a.source,
                   env={"DOCKER_BUILDKIT": "1"}, timeout=2400)
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    if not check(p.returncode == 0, f"docker build of the CPU-only image (base {base}): exit {p.returncode}; "
                                    f"the end of its output ({log}):\n{(p.stdout + p.stderr)[-5000:]}"):
        raise Fatal("the image did not build")
    print(f"image built in {seconds_since(t)}: {engine.run('image', 'ls', '--format', '{{.Size}}', IMAGE).stdout.strip()}")
    sys.stdout.flush()


def check_image_config(engine):
    cfg = json.loads(engine.run("image", "inspect", "-f", "{{json .Config}}", IMAGE, check=True).stdout)
    check(cfg.get("User") == f"{USER_ID}:{USER_ID}", f"the image runs as {USER_ID}, not root: {cfg.get('User')!r}")
    health = (cfg.get("Healthcheck") or {}).get("Test") or []
    check(any("/healthz" in part for part in health), f"the image has a HEALTHCHECK on /healthz: {health}")
    check("8080/tcp" in (cfg.get("ExposedPorts") or {}), f"it exposes 8080: {cfg.get('ExposedPorts')}")


def check_programs(engine, a):
    want = expected_programs(a)
    script = 'cd /opt/ddpd/bin && for p in *; do echo "== $p"; ldd "$p" 2>&1 || echo "ldd failed"; done'
    p = engine.run("run", "--rm", "--network", "none", "--entrypoint", "sh", IMAGE, "-c", script, check=True)
    linked = {}
    for block in p.stdout.split("== ")[1:]:
        name, _, text = block.partition("\n")
        linked[name.strip()] = text
    check(sorted(linked) == want, f"the image's /opt/ddpd/bin is what cmake --install installs "
                                  f"(without the GPU backend): {sorted(linked)} against {want}")
    for name, text in sorted(linked.items()):
        check("not found" not in text and "ldd failed" not in text and "=>" in text,
              f"ldd finds every library {name} links:\n{text}")
    check("ddp-trainer-nccl" not in linked, "the CPU-only image has no ddp-trainer-nccl")
    v = engine.run("run", "--rm", "--network", "none", "--entrypoint", "ddp-trainer", IMAGE, "--version")
    check(v.returncode == 0 and "nccl backend: no" in v.stdout, f"ddp-trainer --version says it has no nccl "
                                                               f"backend: {v.returncode} {v.stdout!r} {v.stderr!r}")


def check_refuses_without_token(engine, name):
    p = engine.run("run", "--name", name, "--network", "none", IMAGE, timeout=120)
    engine.run("rm", "-f", "-v", name)
    out = p.stdout + p.stderr
    check(p.returncode != 0, f"without DDPD_TOKEN the container does not run: exit {p.returncode}")
    check("without a token" in out and "DDPD_TOKEN" in out,
          f"and ddpd says why, naming DDPD_TOKEN: {out[-600:]!r}")


def check_running_container(c, compose):
    check(c.inspect("{{.Config.User}}") == f"{USER_ID}:{USER_ID}", "the container's user is the image's")
    status = c.exec("cat", "/proc/1/status").stdout
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
    check(uid and uid.group(1) == USER_ID, f"ddpd (PID 1) runs as uid {USER_ID}: {uid and uid.group(0)!r}")
    comm = c.exec("cat", "/proc/1/comm").stdout.strip()
    check(comm == "ddpd", f"PID 1 is ddpd itself (exec form: it gets docker stop's SIGTERM): {comm!r}")
    r = c.get("/healthz")
    check(r.status == 200, f"/healthz answers 200 on the container's address: {r.status} {r.body[:200]!r}")
    df = c.exec("df", "-k", "/dev/shm").stdout.split("\n")
    blocks = int(df[1].split()[1]) if len(df) > 1 and len(df[1].split()) > 1 else None
    check(blocks == compose.shm_bytes // 1024, f"/dev/shm is compose's shm_size ({compose.shm_bytes} bytes): "
                                               f"{blocks} KiB")
    ro = c.exec("sh", "-c", f"touch {DATA_ROOT}/x 2>&1; ls {DATA_ROOT}/fashion-mnist")
    check("Read-only file system" in ro.stdout and "train-images-idx3-ubyte.gz" in ro.stdout,
          f"the datasets are mounted read-only: {ro.stdout!r}")


def check_first_run(c):
    cfg = fmnist_config(**{"name": "docker-mlp", "checkpoint.every_epochs": 1})
    r = c.request("POST", "/runs", cfg)
    check(r.status == 401, f"POST /runs without the token -> 401: {r.status}")
    r = c.request("POST", "/runs", cfg, token="not-" + c.token)
    check(r.status == 401, f"POST /runs with a wrong token -> 401: {r.status}")
    run_id = c.submit(cfg)
    run = c.wait_status(run_id, ("succeeded", "failed", "canceled"), 600)
    if not check(run["status"] == "succeeded", f"the run succeeded: {run['status']} {run.get('reason')!r}"):
        print(c.get(f"/runs/{run_id}/logs?tail=40").body.decode(errors="replace"), file=sys.stderr)
        raise Fatal("the first run failed")
    m = c.get(f"/runs/{run_id}/metrics?key=loss")
    points = m.json().get("points", []) if m.status == 200 else []
    check(m.status == 200 and len(points) >= 2 and all(p[1] is not None for p in points),
          f"its loss series is served: {m.status}, {len(points)} points")
    log = c.get(f"/runs/{run_id}/logs?tail=200").body.decode(errors="replace")
    check("run succeeded" in log, f"its log is served: {log[-400:]!r}")
    ck = c.get(f"/runs/{run_id}/checkpoints")
    files = ck.json().get("checkpoints", []) if ck.status == 200 else []
    check(files, f"its checkpoints are listed: {ck.status} {ck.body[:300]!r}")
    for f in files:
        size = c.exec("stat", "-c", "%s", f"/var/lib/ddpd/runs/{run_id}/checkpoints/{f['file']}").stdout.strip()
        check(size == str(f["bytes"]), f"checkpoint {f['file']} is on the volume, {f['bytes']} bytes: {size!r}")
    page = c.get("/")
    html = page.body.decode(errors="replace")
    check(page.status == 200 and "<html" in html.lower(), f"the dashboard's / loads: {page.status}")
    assets = sorted(set(re.findall(r'(?:src|href)="(/(?:ui|vendor)/[^"]+)"', html)) | {"/vendor/uplot/uPlot.esm.js"})
    check(any(a.startswith("/ui/") for a in assets), f"the page names its scripts: {assets}")
    for asset in assets:
        r = c.get(asset)
        check(r.status == 200 and len(r.body) > 100, f"{asset} loads: {r.status}, {len(r.body)} bytes")
    return run_id


def check_nccl_refused(c):
    cfg = fmnist_config(**{"name": "docker-nccl", "distributed.backend": "nccl"})
    r = c.request("POST", "/runs", cfg, token=c.token)
    check(r.status == 400 and b"nccl" in r.body and b"/distributed/backend" in r.body,
          f"a run asking for nccl on a host without GPUs is refused: {r.status} {r.body[:400]!r}")
    c.exec("sh", "-c", "cat > /tmp/nccl.json", input=json.dumps(cfg))
    p = c.exec("ddp-trainer", "--config", "/tmp/nccl.json", "--run-dir", "/tmp/nccl-run", "--data-root", DATA_ROOT)
    check(p.returncode == 2 and "needs the GPU backend, ddp-trainer-nccl" in p.stderr
          and 'distributed.backend to "cpu"' in p.stderr,
          f"the image's ddp-trainer refuses nccl, naming the GPU backend it lacks: {p.returncode} {p.stderr[-600:]!r}")


def history(c, run_id):
    run = c.run(run_id)
    series = c.get(f"/runs/{run_id}/metrics?key=loss").json()["points"]
    return run, series


def check_stop_start_resume(c, engine, compose, first):
    # long enough to be running when docker stop comes; checkpoints every epoch to resume from
    cfg = fmnist_config(**{"name": "docker-stop", "train.epochs": 300, "data.limit": 2000,
                           "checkpoint.every_epochs": 1})
    run_id = c.submit(cfg)

    def checkpointed():
        run = c.run(run_id)
        return run if run and run["status"] == "running" and run["checkpoints"] else None

    if not wait_until(checkpointed, f"run {run_id} to be running with a checkpoint", 300, interval=0.2):
        raise Fatal("the second run never got going")
    before_first = history(c, first)
    before_run, before_series = history(c, run_id)
    t = time.monotonic()
    p = engine.run("stop", c.name, timeout=compose.grace_s + 120)
    took = time.monotonic() - t
    check(p.returncode == 0, f"docker stop: {p.stderr!r}")
    code = c.inspect("{{.State.ExitCode}} {{.State.OOMKilled}}")
    check(code == "0 false", f"ddpd ended on its own within the grace period ({compose.grace_s} s, "
                             f"compose's stop_grace_period): exit status {code} after {took:.0f} s "
                             f"(137 would be docker's SIGKILL)")
    print(f"docker stop took {took:.0f} s (grace {compose.grace_s} s)")
    logs = engine.run("logs", c.name)
    check("canceling 1 active run" in logs.stdout + logs.stderr, "its log says it canceled the active run")

    p = engine.run("start", c.name)
    check(p.returncode == 0, f"docker start on the same volume: {p.stderr!r}")
    if not c.wait_healthy():
        raise Fatal("the restarted container never turned healthy")
    after_first = history(c, first)
    check(after_first == before_first, f"run {first}'s record and series are unchanged across the restart")
    after_run, after_series = history(c, run_id)
    check(after_run["status"] == "canceled", f"run {run_id} was canceled by the stop, not failed: "
                                             f"{after_run['status']} {after_run.get('reason')!r}")
    check(after_series[:len(before_series)] == before_series,
          f"run {run_id}'s series kept every point it had before the stop ({len(before_series)}, now "
          f"{len(after_series)})")
    check(after_run["checkpoints"], f"and its checkpoints: {after_run['checkpoints']}")

    r = c.request("POST", f"/runs/{run_id}/resume", token=c.token)
    check(r.status == 202, f"POST /runs/{run_id}/resume -> 202: {r.status} {r.body[:400]!r}")
    if r.status != 202:
        return
    done = c.wait_status(run_id, ("succeeded", "failed", "canceled"), 900)
    check(done["status"] == "succeeded", f"the resumed run succeeded in the restarted container: {done['status']} "
                                         f"{done.get('reason')!r}")
    resumes = done.get("resumes") or []
    check(len(resumes) == 1 and resumes[0]["prior_status"] == "canceled" and (resumes[0]["from_epoch"] or -1) >= 0,
          f"it continued from a checkpoint of the canceled run: {resumes}")
    epochs = c.get(f"/runs/{run_id}/epochs")
    check(epochs.status == 200 and len(epochs.json().get("epochs", [])) == 300,
          f"and it holds all 300 epochs: {epochs.status} {len(epochs.json().get('epochs', [])) if epochs.status == 200 else ''}")


def cleanup(engine, names, volume, network):
    for n in names:
        engine.run("rm", "-f", "-v", n)  # -v: the anonymous volumes of the image's VOLUMEs too
    engine.run("volume", "rm", "-f", volume)
    engine.run("network", "rm", network)


def ensure_tools(source):
    """Docker's engine and client, debootstrap and compose: scripts/install-deps.sh installs
    them with the other test tools; a machine that ran it before they were on its list
    gets them now."""
    missing = [t for t in ("dockerd", "debootstrap", "docker-compose")
               if not (shutil.which(t) or os.access(f"/usr/sbin/{t}", os.X_OK))]
    if missing and os.geteuid() == 0:
        print(f"installing what the test needs ({', '.join(missing)}): scripts/install-deps.sh")
        subprocess.run([os.path.join(source, "scripts", "install-deps.sh")], timeout=1200)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--cmake", default="cmake")
    a = ap.parse_args()
    t_all = time.monotonic()
    ensure_tools(a.source)

    compose = compose_settings.read(a.source)  # checks docker-compose.yml on the way

    engine = docker_engine.Engine()
    why = engine.start()
    if why:
        print(f"SKIPPED: {why}")
        sys.exit(77)
    tag = f"ddpd-test-{os.getpid()}"
    name, volume, network = tag, f"{tag}-state", f"{tag}-net"
    try:
        t = time.monotonic()
        base = os.environ.get("DDPD_DOCKER_BASE") or docker_engine.debian_base(engine)
        print(f"base image {base} ready in {seconds_since(t)}")
        build_image(engine, a, base)
        check_image_config(engine)
        check_programs(engine, a)
        check_refuses_without_token(engine, f"{tag}-notoken")

        engine.run("network", "create", "--driver", "bridge", network, check=True)
        token = secrets.token_hex(16)
        engine.run("run", "-d", "--name", name, "--network", network, "--shm-size", str(compose.shm_bytes),
                   "--stop-timeout", str(compose.grace_s),
                   "-e", "DDPD_TOKEN", "-v", f"{volume}:{compose.state_target}",
                   "-v", f"{DATA_ROOT}:{compose.data_target}:ro", "--health-interval", "1s", IMAGE,
                   env={"DDPD_TOKEN": token}, check=True)
        c = Container(engine, name, network, token)
        if not c.wait_healthy():
            raise Fatal("the container never turned healthy")
        check_running_container(c, compose)
        first = check_first_run(c)
        check_nccl_refused(c)
        check_stop_start_resume(c, engine, compose, first)
        two_users.build_image(engine, IMAGE)
        two_users.check_two_users(engine, Container, tag, network, compose)
        two_users.check_refused_without_caps(engine, Container, tag, network)
    except (Fatal, RuntimeError) as e:
        check(False, f"stopped early: {e}")
        tail = engine.run("logs", "--tail", "60", name)
        if tail.returncode == 0:
            print(f"---- the container's log ----\n{tail.stdout}{tail.stderr}", file=sys.stderr)
    finally:
        cleanup(engine, [name, f"{tag}-notoken"], volume, network)
        engine.prune()
        engine.stop()
    print(f"the whole test took {seconds_since(t_all)}")
    checks.finish("docker image")


if __name__ == "__main__":
    try:
        main()
    except Exception:
        import traceback
        traceback.print_exc()
        check(False, "the test raised")
        checks.finish("docker image")
