#!/usr/bin/env python3
"""The Docker image's files, checked as text (tests/docker builds the image and runs
it): the Dockerfile is parsed (continuations, comments, ARG defaults) and held to
what the image must be, and docker-compose.yml (YAML, python3-yaml) to what the
NVIDIA runtime expects.

Dockerfile: two stages whose base images are build arguments (BUILD_IMAGE and
RUNTIME_IMAGE), by default NVIDIA's CUDA devel image to build and the matching
runtime image to run (the GPU image; Debian's make the CPU-only one); the build
stage runs scripts/install-deps.sh (in its build mode: DDPD_DEPS=build, a mode
that installs none of the tests' tools) and then scripts/build.sh, the very steps
CI runs (.ci/run -> scripts/test.sh -> scripts/build.sh -> scripts/install-deps.sh,
checked here too), after copying what the script reads, then `cmake --install`
into the prefix the runtime stage copies: which programs the image carries is said
once, by CMakeLists.txt's install(TARGETS) (ddpd, ddp-trainer, ddp-trainer-nccl,
ddp-run, ddpctl), never listed in the Dockerfile, and the runtime stage's ldd check
goes over every installed program. The runtime stage installs its libraries with the
same script (--runtime), runs as a user of its own (not root), has volumes for the
state directory and the datasets that match ddpd's settings, EXPOSEs the port ddpd
listens on, and a HEALTHCHECK that fetches /healthz on it with curl (which the
runtime list installs); ddpd listens on 0.0.0.0 inside the container (DDPD_LISTEN, no
--listen in CMD, so that `docker run -e DDPD_LISTEN=...` is heard), in exec form
(SIGTERM reaches it), with the token from the environment: no token or --insecure
baked in.

Compose: GPUs through deploy.resources.reservations.devices (driver nvidia,
capabilities [gpu]), the token from the environment, the port on the host's
loopback, the same volumes, cap_drop ALL and cap_add exactly the capabilities the
Dockerfile's setcap gives ddpd and docs/security.md's --cap-add line names. Also: .dockerignore keeps build trees out,
docs/operating.md shows `docker run --gpus all`, what to mount and how to build the CPU-only image,
and install-deps.sh is valid bash that names both Debian's and Ubuntu's packages
where they differ.

Usage: test_docker_files.py REPO"""
import json, os, re, shlex, subprocess, sys

import checks  # noqa: E402  (the one pass/fail count)
from checks import check  # noqa: E402
import compose_settings  # noqa: E402

OPERATING_DOC = "docs/operating.md"  # the Docker commands an operator runs ("Docker")


def parse_dockerfile(text):
    """[(INSTRUCTION, arguments, line number)], as Docker reads it: parser directives
    and comment lines dropped (also inside continuations), backslash continuations
    joined."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # a comment inside a continuation
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        instr, _, args = buf.strip().partition(" ")
        out.append((instr.upper(), args.strip(), start))
        buf = ""
    check(not buf, "the Dockerfile does not end inside a continuation")
    return out


def substitute(s, env):
    return re.sub(r"\$\{(\w+)(:-[^}]*)?\}|\$(\w+)",
                  lambda m: env.get(m.group(1) or m.group(3), (m.group(2) or ":-")[2:]), s)


def exec_form(args):
    """The JSON array of an exec-form instruction, or None (shell form)."""
    try:
        v = json.loads(args)
    except ValueError:
        return None
    return v if isinstance(v, list) and all(isinstance(x, str) for x in v) else None


def env_pairs(args):
    """ENV a=b c=d (or the legacy ENV a b)."""
    parts = shlex.split(args)
    if parts and "=" not in parts[0]:
        return {parts[0]: " ".join(parts[1:])}
    return dict(p.split("=", 1) for p in parts if "=" in p)


def main():
    repo = sys.argv[1]
    read = lambda p: open(os.path.join(repo, p)).read()

    text = read("Dockerfile")
    instrs = parse_dockerfile(text)

    # ---- stages ----
    args = {}
    stages = []  # {"from": image, "name": ..., "instrs": [...]}
    for ins, a, n in instrs:
        if ins == "ARG" and not stages:
            k, _, v = a.partition("=")
            args[k.strip()] = v.strip().strip('"')
        elif ins == "FROM":
            parts = a.split()
            image = substitute(parts[0], args)
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append({"from": image, "name": name, "instrs": []})
        elif stages:
            stages[-1]["instrs"].append((ins, a, n))
    if not check(len(stages) >= 2, f"multi-stage: {len(stages)} stages"):
        return
    build, final = stages[0], stages[-1]
    froms = [ins_args for ins, ins_args, _ in instrs if ins == "FROM"]
    check(froms and froms[0].split()[0] == "${BUILD_IMAGE}" and froms[-1].split()[0] == "${RUNTIME_IMAGE}",
          f"the base images are the build arguments BUILD_IMAGE and RUNTIME_IMAGE: {froms}")
    mb = re.match(r"^nvidia/cuda:(13\.\d+(?:\.\d+)?)-devel-(ubuntu\d+\.\d+)$", build["from"])
    mr = re.match(r"^nvidia/cuda:(13\.\d+(?:\.\d+)?)-runtime-(ubuntu\d+\.\d+)$", final["from"])
    check(mb is not None, f"by default the build stage is NVIDIA's CUDA 13 devel image: {build['from']}")
    check(mr is not None, f"by default the runtime stage is NVIDIA's CUDA 13 runtime image (cudart, cuBLAS, NCCL): "
                          f"{final['from']}")
    if mb and mr:
        check(mb.groups() == mr.groups(), f"the same CUDA version and Ubuntu in both: {mb.groups()} {mr.groups()}")
    check(build["name"] is not None, "the build stage is named (COPY --from names it)")

    def runs(stage):
        return [(a, n) for i, a, n in stage["instrs"] if i == "RUN"]

    def line_of(stage, pred):
        for i, a, n in stage["instrs"]:
            if pred(i, a):
                return n
        return None

    # ---- the build stage: CI's steps ----
    install_at = line_of(build, lambda i, a: i == "RUN" and re.search(r"(^|[\s;&|])(\./)?scripts/install-deps\.sh(\s*($|&&|;))", a))
    build_at = line_of(build, lambda i, a: i == "RUN" and re.search(r"(^|[\s;&|])(\w+=\S+\s+)*(\./)?scripts/build\.sh\b", a))
    check(install_at is not None, "the build stage runs scripts/install-deps.sh (no flags: DDPD_DEPS says the mode)")
    check(build_at is not None, "the build stage builds with scripts/build.sh (what CI builds with)")
    if install_at and build_at:
        check(install_at < build_at, "dependencies first, then the build")
    build_env = {}
    for i, a, n in build["instrs"]:
        if i == "ENV" and install_at and n < install_at:
            build_env.update(env_pairs(a))
    check(build_env.get("DDPD_DEPS") == "build",
          f"before it, ENV DDPD_DEPS=build: install-deps.sh (and scripts/build.sh's call of it) installs what "
          f"building needs, not the tests' tools: {build_env}")
    install_run = re.compile(r"\bcmake --install (\S+) --prefix (\S+)")
    check(not any(re.search(r"\bcmake\b|\bmake\b|\bapt-get\b|\bgcc\b", install_run.sub("", a)) for a, _ in runs(build)),
          "the build stage calls no cmake (but cmake --install), make, gcc or apt-get of its own: only the scripts")
    copies = [(a, n) for i, a, n in build["instrs"] if i == "COPY" and not a.startswith("--from")]
    script_copied = [n for a, n in copies if "scripts/install-deps.sh" in a.split()[:-1] or a.split()[0] in (".", "./")]
    check(script_copied and install_at and min(script_copied) < install_at, "install-deps.sh is copied in before it runs")
    deps_text = read("scripts/install-deps.sh")
    if "npm ci" in deps_text:
        for f in ("package.json", "package-lock.json"):
            ok = any(n < (install_at or 0) and (f in a.split()[:-1] or a.split()[0] in (".", "./")) for a, n in copies)
            check(ok, f"{f} is copied in before install-deps.sh runs (it runs npm ci)")
    whole = [n for a, n in copies if a.split()[0] in (".", "./")]
    check(whole and build_at and min(whole) < build_at, "the whole tree is copied in before the build")
    for a, n in copies:
        for src in shlex.split(a)[:-1]:
            if not src.startswith("--") and src not in (".", "./"):
                check(os.path.exists(os.path.join(repo, src)), f"line {n}: COPY source {src} is in the repository")

    # CI runs the same: .ci/run -> scripts/test.sh -> scripts/build.sh -> scripts/install-deps.sh
    check(re.search(r"scripts/test\.sh", read(".ci/run")) is not None, ".ci/run runs scripts/test.sh")
    check(re.search(r"^\s*scripts/build\.sh", read("scripts/test.sh"), re.M) is not None, "scripts/test.sh runs scripts/build.sh")
    check(re.search(r"^\s*scripts/install-deps\.sh\s*$", read("scripts/build.sh"), re.M) is not None,
          "scripts/build.sh runs scripts/install-deps.sh")
    build_sh = read("scripts/build.sh")
    check("BUILD_DIR:-build}" in build_sh, "scripts/build.sh builds into build/ by default")
    build_run = next((a for a, n in runs(build) if n == build_at), "")
    installs = install_run.search(build_run)
    check(installs and installs.group(1) == "build", f"after building, the build stage installs build/ with "
                                                     f"cmake --install --prefix: {build_run!r}")
    prefix = installs.group(2).rstrip("/") if installs else "/nonexistent"
    check(re.search(r"scripts/build\.sh.*-DDDPD_BUILD_TESTS=OFF", build_run),
          f"without the tests (configuring them needs the tests' tools): {build_run!r}")
    instructions = "\n".join(a for _, a, _ in instrs)  # (comments may name programs)
    check(not re.search(r"build/bin/|\bddp-(trainer|run)|\bddpctl\b", instructions),
          "the Dockerfile lists no programs: CMakeLists.txt's install rules say which")
    # The one list: CMakeLists.txt's install(TARGETS) (a foreach over the programs)
    cmakelists = read("CMakeLists.txt")
    programs = re.search(r"foreach\(program ([^)]*)\)\s*if\(TARGET \$\{program\}\)\s*"
                         r"install\(TARGETS \$\{program\} RUNTIME DESTINATION bin\)", cmakelists)
    listed = programs.group(1).split() if programs else []
    for binary in ("ddpd", "ddp-trainer", "ddp-trainer-nccl", "ddp-run", "ddpctl"):
        check(binary in listed, f"CMakeLists.txt installs {binary} (install(TARGETS)): {listed}")
    for what, rule in (("the dashboard", r"install\(DIRECTORY web/ DESTINATION share/ddpd/web\)"),
                       ("uPlot", r"install\(DIRECTORY node_modules/uplot/dist/ DESTINATION share/ddpd/vendor/uplot"),
                       ("the Python reporter", r"install\(DIRECTORY reporter/python/ DESTINATION share/ddpd/reporter")):
        check(re.search(rule, cmakelists), f"and {what}")
    check(re.search(r"install\(DIRECTORY reporter/python/ddpd DESTINATION \$\{DDPD_PYTHON_INSTALL_DIR\}", cmakelists),
          "and the Python reporter where python3 finds it (DDPD_PYTHON_INSTALL_DIR)")
    python_dir = re.search(r"-DDDPD_PYTHON_INSTALL_DIR=(\S+)", build_run)
    check(python_dir, f"the build says where the reporter goes (-DDDPD_PYTHON_INSTALL_DIR): {build_run!r}")

    # ---- the runtime stage ----
    check(any(re.search(r"install-deps\.sh\s+--runtime", a) for a, _ in runs(final)),
          "the runtime stage installs its libraries with the same script (--runtime)")
    check(any(i == "COPY" and a.startswith(f"--from={build['name']}") for i, a, _ in final["instrs"]),
          "the runtime stage takes the binaries from the build stage")
    dest = [shlex.split(a)[-1] for i, a, _ in final["instrs"] if i == "COPY" and a.startswith("--from=")]
    check(any(d.rstrip("/") == prefix for d in dest), f"the build stage's {prefix} is what the runtime stage copies: {dest}")
    check(any(re.search(rf"for p in {re.escape(prefix)}/bin/\*; do.*ldd \"\$p\".*not found.*exit 1.*\"\$p\" --version", a)
              for a, _ in runs(final)),
          f"the runtime stage runs ldd on every program in {prefix}/bin, fails on a library not found, and starts each")

    users = [a for i, a, _ in final["instrs"] if i == "USER"]
    check(users, "the runtime stage sets USER")
    user = users[-1].split(":")[0] if users else "root"
    check(user not in ("root", "0", ""), f"and it is not root: {users}")
    if user.isdigit():
        check(any(re.search(rf"useradd\b.*--uid {user}\b", a) for a, _ in runs(final)), f"uid {user} is created")
    else:
        check(any(re.search(rf"useradd\b.*\b{re.escape(user)}\s*($|&&)", a) for a, _ in runs(final)), f"user {user} is created")

    env = {}
    for i, a, _ in final["instrs"]:
        if i == "ENV":
            env.update(env_pairs(a))
    volumes = []
    for i, a, _ in final["instrs"]:
        if i == "VOLUME":
            v = exec_form(a)
            volumes += v if v is not None else a.split()
    if python_dir:
        want = f"{prefix}/{python_dir.group(1).rstrip('/')}"
        check(want in env.get("PYTHONPATH", "").split(":"),
              f"PYTHONPATH has {want}: `import ddpd` in the image ({env.get('PYTHONPATH')!r})")
    state_dir = env.get("DDPD_STATE_DIR", "")
    data_roots = env.get("DDPD_DATA_ROOT", "").split(":")
    check(state_dir and state_dir in volumes, f"a VOLUME for the state dir ({state_dir}): {volumes}")
    check(any(r and r in volumes for r in data_roots), f"a VOLUME for the datasets ({data_roots}): {volumes}")
    check(any(re.search(rf"install -d -o \S+ -g \S+ -m 0700 {re.escape(state_dir)}\b", a) for a, _ in runs(final)),
          "the state dir is made the user's (0700) before it becomes a volume")
    check("DDPD_TOKEN" not in env and "DDPD_INSECURE" not in env, "no token and no --insecure baked into the image")

    entry = [exec_form(a) for i, a, _ in final["instrs"] if i == "ENTRYPOINT"]
    cmd = [exec_form(a) for i, a, _ in final["instrs"] if i == "CMD"]
    check(entry and entry[-1] is not None and cmd and cmd[-1] is not None,
          "ENTRYPOINT and CMD in exec form: ddpd is PID 1 and gets SIGTERM")
    command = (entry[-1] or []) + (cmd[-1] or []) if entry and cmd else []
    check(command[:2] == ["ddpd", "serve"] or command[:2] == ["/opt/ddpd/bin/ddpd", "serve"],
          f"the container runs ddpd serve: {command}")
    check("--listen" not in command,
          f"no --listen in the command: `docker run -e DDPD_LISTEN=...` must decide (a flag wins over it): {command}")
    listen = env.get("DDPD_LISTEN")
    check(listen is not None and listen.startswith("0.0.0.0:"),
          f"inside the container it listens on 0.0.0.0 by default (ENV DDPD_LISTEN): {listen}")
    port = listen.rsplit(":", 1)[1] if listen else None
    check("--token" not in command and "--insecure" not in command,
          f"the default command takes the token from DDPD_TOKEN, never --insecure: {command}")
    exposed = [p.split("/")[0] for i, a, _ in final["instrs"] if i == "EXPOSE" for p in a.split()]
    check(port in exposed, f"EXPOSE {port}: {exposed}")
    health = [a for i, a, _ in final["instrs"] if i == "HEALTHCHECK"]
    check(health and re.search(r'curl\s+-\S*f\S*.*"http://(127\.0\.0\.1|localhost):\$\{DDPD_LISTEN##\*:\}/healthz"',
                               health[-1]),
          f"a HEALTHCHECK that fetches /healthz on DDPD_LISTEN's port (shell form), failing on an HTTP error: {health}")
    lists = {m.group(1): m.group(2) for m in re.finditer(r"^(\w+)_packages=\((.*?)^\)", deps_text, re.S | re.M)}
    build_list = re.sub(r"#.*", "", lists.get("build", ""))
    check(build_list and "cmake" in build_list and "npm" in deps_text, f"install-deps.sh has a build list: {sorted(lists)}")
    for tool in ("python3-torch", "chromium", "clang", "prometheus", "docker.io", "dataset-fashion-mnist"):
        check(tool not in build_list and tool in lists.get("test", ""), f"{tool} is a test tool, not in the build list")
    check(re.search(r'build\) packages=\("\$\{build_packages\[@\]\}"\)', deps_text),
          "the build mode installs the build list alone")
    check(re.search(r"npm ci --omit=dev", deps_text), "and of npm's packages only uPlot (the dependencies, not the "
                                                     "devDependencies)")
    runtime_list = re.search(r"^runtime_packages=\((.*?)^\)", deps_text, re.S | re.M)
    check(runtime_list and re.search(r"\bcurl\b", runtime_list.group(1)), "the runtime list installs curl (the health check)")
    if runtime_list:
        rl = runtime_list.group(1)
        for old, new in (("libmicrohttpd12", "libmicrohttpd12t64"), ("libcurl4", "libcurl4t64")):
            check(re.search(rf'"{new}\|{old}"|"{old}\|{new}"', rl), f"the runtime list takes {new} (Ubuntu 24.04) or {old} (Debian 12)")
    check(subprocess.run(["bash", "-n", os.path.join(repo, "scripts", "install-deps.sh")]).returncode == 0,
          "install-deps.sh is valid bash")
    p = subprocess.run([os.path.join(repo, "scripts", "install-deps.sh")], capture_output=True, timeout=300)
    check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
          f"install-deps.sh, run again (CI ran it before the build), changes nothing and says nothing: "
          f"{p.returncode} {(p.stdout + p.stderr)[-300:]!r}")

    # ---- docker-compose.yml: as Debian's docker-compose reads it (tests/integration/docker/compose_settings.py:
    # it passes `docker-compose config`, refuses to start without DDPD_TOKEN, reserves GPUs
    # the NVIDIA runtime's way, ...), then what only this file knows ----
    try:
        settings = compose_settings.read(repo)
    except RuntimeError as e:
        check(False, f"docker-compose.yml: {e}")
        return
    import yaml  # python3-yaml (compose_settings.read has it)
    svc = next(iter((yaml.safe_load(read("docker-compose.yml")).get("services") or {}).values()), {})
    check(svc.get("build") in (".", "./") or (isinstance(svc.get("build"), dict) and svc["build"].get("context") in (".", "./")),
          "built from this Dockerfile")
    devices = (((svc.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []
    gpu = [d for d in devices if d.get("driver") == "nvidia"]
    check(gpu and (gpu[0].get("count") == "all" or isinstance(gpu[0].get("count"), int) or gpu[0].get("device_ids")),
          f"it says how many GPUs (count or device_ids): {devices}")
    environment = svc.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(e.split("=", 1) for e in environment)
    check("DDPD_INSECURE" not in environment, "not --insecure")
    ports = [str(p) for p in svc.get("ports") or []]
    check(ports and all(p.endswith(f":{port}") for p in ports), f"the container's port is the image's {port}: {ports}")
    for v in volumes:
        check(v in (settings.state_target, settings.data_target), f"compose mounts the image's VOLUME {v}")

    # ---- .dockerignore, the operator's docs ----
    ignore = read(".dockerignore").split()
    for pattern in (".git", "node_modules"):
        check(pattern in ignore, f".dockerignore keeps {pattern} out")
    check("build" in ignore and "build-*" in ignore, ".dockerignore keeps the build trees out")
    ops = read(OPERATING_DOC)
    check(re.search(r"docker run[^\n]*--gpus all", ops) is not None, f"{OPERATING_DOC} shows docker run --gpus all")
    check(re.search(r"docker build[^\n]*--build-arg BUILD_IMAGE=debian:12[^\n]*--build-arg RUNTIME_IMAGE=debian:12", ops),
          "and how to build the CPU-only image")
    check("--shm-size" in ops and "NVIDIA Container Toolkit" in ops, "and what the host gives the container")
    for v in volumes:
        check(f":{v}" in ops, f"and mounts {v}")
    check("DDPD_TOKEN" in ops and "docker compose" in ops, "and the token and compose")



if __name__ == "__main__":
    try:
        main()
    except Exception:
        import traceback
        traceback.print_exc()
        check(False, "the test raised")
    checks.finish("docker files")
