#!/usr/bin/env python3
"""A real Slurm cluster on this host, for the tests: munged on a socket of its own, a
slurmctld with an empty state, and two slurmd, nodes n1 and n2 (4 CPUs each), each
on its own port, everything in one directory and on free ports, so that nothing
clashes with another cluster or test. Debian 12's slurm-wlm and munge
(scripts/install-deps.sh installs them). Root only: slurmd starts jobs as their
users. It comes up in about a second; Slurm's first scheduling pass follows about
3 s after slurmctld starts.

The slurm_ cases share one cluster through a ctest fixture (tests/slurm.cmake): `up`
starts it and leaves it running, `down` stops it and what its jobs left. A case run
by hand, without one up, starts its own.

Usage: slurm_cluster.py up|down --dir DIR"""
import argparse, json, os, shutil, signal, socket, subprocess, sys, time

import checks  # noqa: E402
from checks import check  # noqa: E402
from procs import live_with_env  # noqa: E402

SKIP = 77
MARK = "DDPD_TEST_SLURM_CLUSTER"  # in the daemons' environment, so what they leave is found
DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "srun")
NODES = ("n1", "n2")
CPUS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def why_not():
    """Why a cluster cannot start here at all, or None."""
    if os.geteuid() != 0:
        return "not root: slurmd starts jobs as their users, so the test cluster needs root"
    missing = [p for p in DAEMONS.values() if not os.access(p, os.X_OK)]
    missing += [c for c in CLIENTS if not shutil.which(c)]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): scripts/install-deps.sh installs slurm-wlm and munge"
    return None


class Cluster:
    def __init__(self, d):
        self.d = os.path.abspath(d)
        self.conf = os.path.join(self.d, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.up_s = None

    # ---- start and stop ----

    def start(self):
        os.makedirs(self.d, exist_ok=True)
        for sub in ("state", "log", "munge"):
            os.makedirs(os.path.join(self.d, sub), exist_ok=True)
        key = os.path.join(self.d, "munge", "key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400), "wb") as f:
            f.write(os.urandom(1024))
        self.socket = os.path.join(self.d, "munge", "sock")
        ports = [free_port() for _ in range(1 + len(NODES))]
        nodes = "\n".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={p} CPUs={CPUS} State=UNKNOWN"
                          for n, p in zip(NODES, ports[1:]))
        d = self.d
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=ddpdtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports[0]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=300
KillWait=5
JobAcctGatherType=jobacct_gather/none
{nodes}
PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP
""")
        env = dict(self.env, **{MARK: self.d})
        t0 = time.monotonic()
        self._run([DAEMONS["munged"], f"--key-file={key}", f"--socket={self.socket}",
                   f"--pid-file={d}/munge/pid", f"--log-file={d}/munge/log", f"--seed-file={d}/munge/seed",
                   "--force"], env)
        self._run([DAEMONS["slurmctld"], "-i", "-f", self.conf], env)
        for n in NODES:
            self._run([DAEMONS["slurmd"], "-N", n, "-f", self.conf], env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.node_states() == ["idle"] * len(NODES):
                self.up_s = time.monotonic() - t0
                return True
            time.sleep(0.05)
        return False

    def _run(self, argv, env):
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")

    def stop(self):
        """Every job canceled, every daemon and what it left stopped."""
        self.cmd("scancel", "--user", "root", check_rc=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.cmd("squeue", "-h", "-t", "RUNNING,COMPLETING,PENDING",
                                                       check_rc=False).stdout.strip():
            time.sleep(0.2)
        for pid_file in [f"slurmd-{n}.pid" for n in NODES] + ["slurmctld.pid", "munge/pid"]:
            self._signal_pid_file(os.path.join(self.d, pid_file))
        for pid in live_with_env(MARK, self.d):  # slurmstepd, and anything a job left
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _signal_pid_file(self, path):
        try:
            with open(path) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            return
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.05)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    # ---- asking it ----

    def cmd(self, *argv, check_rc=True):
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60)
        if check_rc and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
        return r

    def node_states(self):
        r = self.cmd("sinfo", "-h", "-N", "-o", "%T", check_rc=False)
        return sorted(r.stdout.split()) if r.returncode == 0 else []

    def answers(self):
        return self.cmd("sinfo", "-h", check_rc=False).returncode == 0

    def job(self, job_id):
        """scontrol -o show job: {key: value}."""
        r = self.cmd("scontrol", "-o", "show", "job", str(job_id), check_rc=False)
        return dict(w.split("=", 1) for w in r.stdout.split() if "=" in w) if r.returncode == 0 else {}


# ---- the fixture: one cluster for every case ----

def info_path(d):
    return os.path.join(d, "cluster.json")


def shared(d):
    """The fixture's cluster when it is up ({"skip": why} when it could not start), or None."""
    try:
        with open(info_path(d)) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    if "skip" in info:
        return info
    c = Cluster(d)
    return c if c.answers() else None


def up(d):
    reason = why_not()
    if reason:
        os.makedirs(d, exist_ok=True)
        with open(info_path(d), "w") as f:
            json.dump({"skip": reason}, f)
        print(f"skipped: {reason}", flush=True)
        sys.exit(SKIP)
    if os.path.exists(d):  # a cluster a killed run left
        Cluster(d).stop()
        shutil.rmtree(d, ignore_errors=True)
    c = Cluster(d)
    ok = c.start()
    check(ok, f"the cluster came up: nodes {c.node_states()}")
    if ok:
        print(f"a slurmctld and {len(NODES)} slurmd up in {c.up_s:.2f} s", flush=True)
        with open(info_path(d), "w") as f:
            json.dump({"conf": c.conf, "up_s": round(c.up_s, 3)}, f)
    checks.finish("slurm_cluster up")


def down(d):
    if os.path.exists(d):
        Cluster(d).stop()
        check(not live_with_env(MARK, os.path.abspath(d)), "nothing of the cluster is left")
        shutil.rmtree(d, ignore_errors=True)
    else:
        check(True, "no cluster to stop")
    checks.finish("slurm_cluster down")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("up", "down"))
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    up(a.dir) if a.what == "up" else down(a.dir)
