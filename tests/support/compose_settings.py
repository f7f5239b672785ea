"""docker-compose.yml as Debian's docker-compose reads it (`docker-compose config`), and
the settings of its one service that the image's test gives its container: the shm
size, the stop grace period, the state volume's and the datasets' targets, the
capabilities. read() checks the file on the way: compose accepts it with DDPD_TOKEN set
and refuses it, naming DDPD_TOKEN, without; GPUs are reserved the NVIDIA runtime's way;
the state is a named volume, the datasets read-only, the port on the host's loopback;
it drops every capability and adds back exactly the ones the Dockerfile's setcap gives
ddpd's file, which are docs/security.md's --cap-add list ("The server's rights").

Needs docker-compose (scripts/install-deps.sh) and python3-yaml; no Docker engine."""
import os, re, shutil, subprocess

from checks import check

UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024 ** 2, "mb": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3}


def size_bytes(text):
    """compose's sizes: 1gb, 512m, 67108864."""
    m = re.fullmatch(r"(\d+)\s*([a-z]*)", str(text).strip().lower())
    return int(m.group(1)) * UNITS[m.group(2)] if m and m.group(2) in UNITS else None


def duration_s(text):
    """compose's durations: 30s, 1m30s, 1h."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s|ms|us)", str(text).strip())
    if not parts or "".join(n + u for n, u in parts) != str(text).strip():
        return None
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 0.000001}
    return int(sum(float(n) * scale[u] for n, u in parts))


class Settings:
    pass


def compose(repo, token):
    exe = shutil.which("docker-compose")
    if not exe:
        return None
    env = {k: v for k, v in os.environ.items() if k != "DDPD_TOKEN"}
    if token:
        env["DDPD_TOKEN"] = token
    return subprocess.run([exe, "-f", os.path.join(repo, "docker-compose.yml"), "config"], capture_output=True,
                          text=True, timeout=120, env=env, cwd=repo)


def file_capabilities(repo):
    """The capabilities the Dockerfile's `setcap CAPS+p` gives ddpd's file, as Docker names them."""
    with open(os.path.join(repo, "Dockerfile")) as f:
        m = re.search(r"setcap (\S+)\+p /opt/ddpd/bin/ddpd", f.read())
    return sorted(c.upper().removeprefix("CAP_") for c in m.group(1).split(",")) if m else []


SECURITY_DOC = "docs/security.md"  # the capabilities an operator adds ("The server's rights")


def doc_cap_add(repo):
    """docs/security.md's `--cap-drop ALL ... --cap-add X --cap-add Y` line: the X, Y."""
    with open(os.path.join(repo, SECURITY_DOC)) as f:
        lines = [ln for ln in f if "--cap-add" in ln]
    check(len(lines) == 1, f"{SECURITY_DOC} names the --cap-add list once: {lines}")
    return sorted(re.findall(r"--cap-add (\w+)", lines[0])) if lines else []


def read(repo):
    """The service's settings (a Settings), after checking them; raises when compose
    cannot read the file at all."""
    import yaml  # python3-yaml

    p = compose(repo, "t0ken")
    if not check(p is not None, "docker-compose is installed (Debian's docker-compose; scripts/install-deps.sh)"):
        raise RuntimeError("no docker-compose")
    if not check(p.returncode == 0, f"docker-compose config accepts docker-compose.yml: {p.stderr[-1500:]}"):
        raise RuntimeError("docker-compose.yml does not pass docker-compose config")
    refused = compose(repo, None)
    check(refused.returncode != 0 and "DDPD_TOKEN" in refused.stderr,
          f"without DDPD_TOKEN compose refuses, naming it: {refused.returncode} {refused.stderr[-400:]!r}")

    services = yaml.safe_load(p.stdout).get("services") or {}
    check(len(services) == 1, f"one service: {list(services)}")
    svc = next(iter(services.values()))
    s = Settings()
    check(svc.get("environment", {}).get("DDPD_TOKEN") == "t0ken", "the token comes from DDPD_TOKEN")
    s.shm_bytes = size_bytes(svc.get("shm_size", ""))
    check(s.shm_bytes and s.shm_bytes >= 256 * 1024 ** 2,
          f"shm_size is set, well above Docker's 64 MB (NCCL's buffers go through /dev/shm): {svc.get('shm_size')!r}")
    s.grace_s = duration_s(svc.get("stop_grace_period", ""))
    check(s.grace_s and s.grace_s > 10, f"stop_grace_period leaves ddpd its 10 s to cancel runs and more: "
                                        f"{svc.get('stop_grace_period')!r}")
    check((svc.get("ulimits") or {}).get("memlock") == -1, f"memlock is unlimited (NCCL pins memory): "
                                                           f"{svc.get('ulimits')}")
    devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
    check(any(d.get("driver") == "nvidia" and "gpu" in (d.get("capabilities") or []) for d in devices),
          f"GPUs are reserved for the NVIDIA runtime (driver nvidia, capabilities [gpu]): {devices}")
    named = set((yaml.safe_load(p.stdout).get("volumes") or {}))
    s.state_target = s.data_target = None
    for v in svc.get("volumes") or []:
        source, target, *mode = str(v).split(":")
        if source in named:
            s.state_target = target
        elif mode == ["ro"]:
            s.data_target = target
    check(s.state_target == "/var/lib/ddpd", f"the state is a named volume at /var/lib/ddpd: {svc.get('volumes')}")
    check(s.data_target == "/usr/share/datasets", f"the datasets are mounted read-only: {svc.get('volumes')}")
    ports = [str(x) for x in svc.get("ports") or []]
    check(ports and all(x.startswith("127.0.0.1:") for x in ports), f"the port is on the host's loopback: {ports}")
    s.cap_add = sorted(str(c).upper().removeprefix("CAP_") for c in svc.get("cap_add") or [])
    check([str(c).upper() for c in svc.get("cap_drop") or []] == ["ALL"], f"cap_drop is ALL: {svc.get('cap_drop')}")
    check(s.cap_add == file_capabilities(repo), f"cap_add is exactly what the Dockerfile's setcap gives ddpd: "
                                                f"{s.cap_add} against {file_capabilities(repo)}")
    check(s.cap_add == doc_cap_add(repo), f"cap_add is exactly {SECURITY_DOC}'s --cap-add list: {s.cap_add} "
                                          f"against {doc_cap_add(repo)}")
    if s.state_target is None or s.data_target is None or not s.shm_bytes or not s.grace_s:
        raise RuntimeError("docker-compose.yml lacks settings the container needs")
    return s
