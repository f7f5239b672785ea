"""Two users in the Docker image: docs/security.md's model as the image runs it.

On the test's image plus a layer of two accounts (ddpd-alice, ddpd-bob: made in an
image built on it, as docs/security.md says an operator does), a container started with
`--cap-drop ALL` and exactly docker-compose.yml's cap_add, as the image's own user:

- ddpd holds exactly those capabilities, and `ddpd check` says runs can run as other
  accounts and finds alice's;
- users alice and bob, mapped to those accounts (`ddpd user add --unix-user`), a token
  file on the volume, --allow-commands (ddp-run is the image's; the runs are `sh -c`);
- alice's command run writes a file in its run directory and holds; its processes,
  found in the container's /proc, run under alice's uid, none under another;
- bob's command run tries to list her run directory, read her file, the database and
  the token file, list the state directory, write into her directory and signal her
  rank; his log (GET /runs/{id}/logs with his token) shows each denied;
- afterwards alice's run is still running and hers, her file unchanged, nothing
  planted, the users unchanged (`ddpd user list`), and released, her run succeeds.

And the same image with `--cap-drop ALL` and nothing added refuses alice's run at
submission (403), saying the server cannot switch accounts and which capabilities it
lacks, as `ddpd check` does."""
import json, re, secrets, sys

from checks import check
from ddpd_harness import wait_until

IMAGE = "ddpd-test:users"
ACCOUNTS = {"alice": "ddpd-alice", "bob": "ddpd-bob"}
STATE = "/var/lib/ddpd"
CAP_BITS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7}  # linux/capability.h
TOKEN_FILE = f"{STATE}/server-token"

ALICE = ("echo alice-private-words > alice-file && echo ALICE READY && "
         "while [ ! -e release ]; do sleep 0.1; done; echo alice done")

# $1: alice's run directory, $2: the PID of her rank
BOB = r"""
attempt() {
  what=$1; shift
  if out=$("$@" 2>&1); then echo "ATTACK $what: SUCCEEDED: $(echo "$out" | head -c 200)"
  else echo "ATTACK $what: denied: $out"; fi
}
attempt "list alice's run directory" ls "$1"
attempt "read alice's file" cat "$1/alice-file"
attempt "read the database" head -c 16 /var/lib/ddpd/ddpd.db
attempt "read the token file" cat /var/lib/ddpd/server-token
attempt "list the state directory" ls /var/lib/ddpd
attempt "write into alice's run directory" touch "$1/planted"
attempt "signal alice's rank" kill -TERM "$2"
echo ATTACKS DONE
"""
ATTACK_NAMES = ["list alice's run directory", "read alice's file", "read the database", "read the token file",
                "list the state directory", "write into alice's run directory", "signal alice's rank"]


def build_image(engine, base_image):
    """The test's image with the two accounts, as a derived image of an operator's."""
    dockerfile = (f"FROM {base_image}\nUSER 0\n"
                  + "".join(f"RUN useradd --no-create-home --shell /usr/sbin/nologin {a}\n" for a in ACCOUNTS.values())
                  + "USER 10001:10001\n")
    engine.run("build", "--network", "none", "--label", "ddpd.test=1", "-t", IMAGE, "-", input=dockerfile,
               env={"DOCKER_BUILDKIT": "1"}, check=True)


def start(engine, make_container, name, network, volume, caps):
    """A server container of IMAGE on its own volume, its token in a 0600 file there,
    with --cap-drop ALL and `caps` added back; returns the Container, healthy."""
    token = secrets.token_hex(16)
    engine.run("run", "--rm", "-i", "--network", "none", "-v", f"{volume}:{STATE}", "--entrypoint", "sh", IMAGE,
               "-c", f"umask 077 && cat > {TOKEN_FILE}", input=token + "\n", check=True)
    engine.run("run", "-d", "--name", name, "--network", network, "--cap-drop", "ALL",
               *[f"--cap-add={c}" for c in caps], "-v", f"{volume}:{STATE}", "--health-interval", "1s", IMAGE,
               "serve", "--allow-commands", "--token-file", TOKEN_FILE, check=True)
    c = make_container(engine, name, network, token)
    if not c.wait_healthy():
        raise RuntimeError(f"the container {name} never turned healthy")
    return c


def add_user(c, name):
    p = c.exec("ddpd", "user", "add", name, "--unix-user", ACCOUNTS[name])
    check(p.returncode == 0, f"ddpd user add {name} --unix-user {ACCOUNTS[name]} in the container: {p.stderr!r}")
    return p.stdout.strip().splitlines()[-1] if p.returncode == 0 else ""


def command(name, script, *args):
    return {"name": name, "command": ["sh", "-c", script, *args], "distributed": {"world_size": 1}}


def submit(c, token, cfg):
    r = c.request("POST", "/runs", cfg, token=token)
    check(r.status == 201, f"POST /runs ({cfg['name']}) -> 201: {r.status} {r.body[:500]!r}")
    if r.status != 201:
        raise RuntimeError(f"run {cfg['name']} refused")
    return r.json()["id"]


def run_of(c, token, rid):
    r = c.request("GET", f"/runs/{rid}", token=token)
    return r.json() if r.status == 200 else None


def log_of(c, token, rid):
    return c.request("GET", f"/runs/{rid}/logs?tail=200", token=token).body.decode(errors="replace")


def wait_ended(c, token, rid, timeout=120):
    run = wait_until(lambda: (lambda r: r if r and r["status"] in ("succeeded", "failed", "canceled") else None)(
        run_of(c, token, rid)), f"run {rid} to end", timeout, interval=0.3)
    if not run:
        print(f"run {rid}: {json.dumps(run_of(c, token, rid))[:1500]}\n{log_of(c, token, rid)[-2000:]}",
              file=sys.stderr)
        raise RuntimeError(f"run {rid} never ended")
    return run


def processes(c):
    """Every process in the container: (pid, uid, cmdline), read from /proc by root."""
    script = ('for d in /proc/[0-9]*; do [ -r "$d/cmdline" ] || continue; '
              'printf "%s %s %s\\n" "${d#/proc/}" "$(stat -c %u "$d")" "$(tr "\\0" " " < "$d/cmdline")"; done')
    out = c.exec_as("0", "sh", "-c", script).stdout
    # a process that exits while it is read (the shell's own children, the exec's) has no
    # uid by the time stat looks: such a line is no process to judge
    rows = (ln.split(" ", 2) for ln in out.splitlines())
    return [(int(r[0]), int(r[1]), r[2]) for r in rows if len(r) == 3 and r[0].isdigit() and r[1].isdigit()]


def user_settings(listing):
    """`ddpd user list` without its DISK-USED column: what the operator set, not what the
    server measures (the disk walk fills it in on its own time, bob's run included)."""
    lines = listing.splitlines()
    if not lines or "DISK-USED" not in lines[0] or "UNIX-USER" not in lines[0]:
        return listing
    a, b = lines[0].index("DISK-USED"), lines[0].index("UNIX-USER")
    return "\n".join(ln[:a] + ln[b:] for ln in lines)


def check_lines(c):
    """`ddpd check` in the container, as the image's user: {what: (verdict, text)}."""
    out = c.exec("ddpd", "check").stdout
    return {ln[6:18].strip(): (ln[:5].strip(), ln[18:]) for ln in out.splitlines()
            if ln[:5].strip() in ("ok", "warn", "FAIL")}


def cap_eff(c):
    m = re.search(r"^CapEff:\s+(\S+)", c.exec("cat", "/proc/1/status").stdout, re.M)
    return int(m.group(1), 16) if m else None


def uid_of(c, account):
    p = c.exec("id", "-u", account)
    return int(p.stdout.strip()) if p.returncode == 0 else None


def check_two_users(engine, make_container, tag, network, compose):
    name, volume = f"{tag}-users", f"{tag}-users-state"
    try:
        c = start(engine, make_container, name, network, volume, compose.cap_add)
        eff = cap_eff(c)
        uid = c.exec("sh", "-c", "stat -c %u /proc/1").stdout.strip()
        print(f"two users: ddpd runs as uid {uid}, capabilities {eff and hex(eff)}, "
              f"added: {' '.join(compose.cap_add)}")
        check(uid == "10001", f"the server is the image's user, not root: uid {uid}")
        want = sum(1 << CAP_BITS.get(cap, 63) for cap in compose.cap_add)
        check(eff == want, f"ddpd holds exactly compose's capabilities, effective: {eff and hex(eff)} "
                           f"against {hex(want)}")
        alice, bob = add_user(c, "alice"), add_user(c, "bob")
        lines = check_lines(c)
        print(f"  ddpd check: accounts: {lines.get('accounts')}; user alice: {lines.get('user alice')}")
        check(lines.get("accounts", ("",))[0] == "ok" and "it holds CAP_SETUID and CAP_SETGID" in lines["accounts"][1],
              f"ddpd check says runs can run as other accounts: {lines.get('accounts')}")
        check(lines.get("user alice", ("",))[0] == "ok" and ACCOUNTS["alice"] in lines["user alice"][1],
              f"and finds alice's account: {lines.get('user alice')}")
        users_before = user_settings(c.exec("ddpd", "user", "list").stdout)
        check("ddpd-alice" in users_before and "ddpd-bob" in users_before, f"ddpd user list: {users_before!r}")

        rid = submit(c, alice, command("alice", ALICE, "alice-mark"))
        if not wait_until(lambda: "ALICE READY" in log_of(c, alice, rid), f"alice's run {rid} to write its file", 120,
                          interval=0.3):
            raise RuntimeError(f"alice's run never got going: {json.dumps(run_of(c, alice, rid))[:800]} "
                               f"{log_of(c, alice, rid)[-1500:]}")
        adir = f"{STATE}/runs/{rid}"
        alice_uid, bob_uid = uid_of(c, ACCOUNTS["alice"]), uid_of(c, ACCOUNTS["bob"])
        procs = processes(c)
        hers = [p for p in procs if "alice-mark" in p[2]]
        launchers = [p for p in procs if "ddp-run" in p[2]]
        for p in hers + launchers:
            print(f"  /proc: pid {p[0]} uid {p[1]}: {p[2][:120]}")
        check(hers and all(p[1] == alice_uid for p in hers),
              f"alice's rank runs under alice's uid {alice_uid}: {hers}")
        check(launchers and all(p[1] == alice_uid for p in launchers),
              f"her run's launcher (ddp-run) runs under her uid {alice_uid}: {launchers}")
        file_before = c.exec_as("0", "cat", f"{adir}/alice-file").stdout
        check(file_before == "alice-private-words\n", f"her file is in her run directory: {file_before!r}")
        rank_pid = hers[0][0] if hers else 1

        bid = submit(c, bob, command("bob", BOB, "bob-mark", adir, str(rank_pid)))
        wait_ended(c, bob, bid)
        log = log_of(c, bob, bid)
        check("ATTACKS DONE" in log, f"bob's run went through every attack: {log[-2500:]}")
        bob_procs = [p for p in processes(c) if "bob-mark" in p[2]]
        check(all(p[1] == bob_uid for p in bob_procs), f"what is left of bob's run is his: {bob_procs}")
        for what in ATTACK_NAMES:
            line = next((ln for ln in log.splitlines() if f"ATTACK {what}:" in ln), "")
            print(f"  bob: {line.split('] ', 1)[-1] if '] ' in line else line}")
            denied = ": denied:" in line and ("Permission denied" in line or "Operation not permitted" in line)
            check(denied, f"bob's attack fails with a permission error: {what}: {line!r}")

        run = run_of(c, alice, rid)
        check(run and run["status"] == "running" and run["owner"] == "alice",
              f"alice's run still runs and is hers: {run and (run['status'], run['owner'])}")
        check(all(p[0] in {q[0] for q in processes(c)} for p in hers), "her rank still runs")
        check(c.exec_as("0", "cat", f"{adir}/alice-file").stdout == file_before, "her file is unchanged")
        check(c.exec_as("0", "test", "-e", f"{adir}/planted").returncode != 0, "nothing was planted in her directory")
        users_after = user_settings(c.exec("ddpd", "user", "list").stdout)
        check(users_after == users_before, f"the users are unchanged: {users_before!r} -> {users_after!r}")
        c.exec_as("0", "touch", f"{adir}/release")
        run = wait_ended(c, alice, rid)
        check(run["status"] == "succeeded" and run["owner"] == "alice" and not run.get("reason"),
              f"released, alice's run succeeded: {run['status']} {run.get('reason')!r}")
    finally:
        engine.run("rm", "-f", "-v", name)
        engine.run("volume", "rm", "-f", volume)


def check_refused_without_caps(engine, make_container, tag, network):
    name, volume = f"{tag}-nocaps", f"{tag}-nocaps-state"
    try:
        c = start(engine, make_container, name, network, volume, [])
        eff = cap_eff(c)
        check(eff == 0, f"with --cap-drop ALL alone ddpd holds no capability: {eff and hex(eff)}")
        alice = add_user(c, "alice")
        lines = check_lines(c)
        print(f"  ddpd check without them: accounts: {lines.get('accounts')}")
        check(lines.get("accounts", ("",))[0] == "FAIL" and "lacks CAP_SETUID and CAP_SETGID" in lines["accounts"][1],
              f"ddpd check says it cannot switch, naming what it lacks: {lines.get('accounts')}")
        r = c.request("POST", "/runs", command("alice", "echo hi"), token=alice)
        detail = r.body.decode(errors="replace")
        print(f"without the capabilities, alice's run: {r.status} {detail[:400]}")
        check(r.status == 403 and "cannot switch accounts" in detail and ACCOUNTS["alice"] in detail
              and "lacks CAP_SETUID and CAP_SETGID" in detail,
              f"alice's run is refused, naming the capabilities the server lacks: {r.status} {detail[:700]}")
    finally:
        engine.run("rm", "-f", "-v", name)
        engine.run("volume", "rm", "-f", volume)
