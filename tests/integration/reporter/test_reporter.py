#!/usr/bin/env python3
"""The reporters of command runs against a real Unix socket, as a script uses them:
the `ddpd` Python module (reporter/python/ddpd) and the C header
(reporter/c/ddpd_report.h, through tests/integration/reporter/report_c_demo.c). a no-op outside ddpd; under ddpd every point reaches the socket
in order after a hello that carries the secret, and the journal, without the secret;
a server that goes away and comes back gets a new hello and the points after it,
while the journal keeps everything; a full queue drops and counts, never blocks; the
module `cmake --install` puts where python3 finds it is a no-op outside a run.

Usage: test_reporter.py CASE [--c-demo PATH]"""
import json, os, socket, subprocess, sys, tempfile, textwrap, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.join(HERE, "..", "..", "..", "reporter", "python")
import ddpd_harness  # noqa: E402
from ddpd_harness import check, cases_in  # noqa: E402
from fake_ingest import Listener  # noqa: E402


def run_script(body, env, timeout=60):
    code = "import ddpd, os, sys, time\n" + textwrap.dedent(body)
    full_env = dict(os.environ, PYTHONPATH=PYTHON_DIR, **env)
    for k in [k for k in full_env if k.startswith("DDPD_") and k not in env]:
        del full_env[k]
    return subprocess.run(["/usr/bin/python3", "-c", code], env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def reporter_env(d):
    return {"DDPD_EVENTS_SOCKET": os.path.join(d, "ingest.sock"), "DDPD_EVENTS_JOURNAL": os.path.join(d, "events.jsonl"),
            "DDPD_RUN_ID": "12", "DDPD_RUN_SECRET": "s3cret", "RANK": "1", "WORLD_SIZE": "2"}


def journal(d):
    with open(os.path.join(d, "events.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def case_outside_ddpd(d):
    p = run_script("""
        print(ddpd.enabled())
        ddpd.log_step(1, loss=0.5); ddpd.log_epoch(0, test_acc=0.9); ddpd.status("done"); ddpd.checkpoint_saved(1)
        print(ddpd.dropped())
    """, {})
    check(p.returncode == 0 and p.stdout.split() == ["False", "0"], f"every call is a no-op: {p.stdout!r} {p.stderr!r}")
    check(not os.listdir(d), "and nothing is written anywhere")
    p = run_script('ddpd.status("sleeping")', {})
    check(p.returncode != 0 and "must be one of init, loading, training" in p.stderr,
          f"a state that does not exist is refused, inside ddpd or not: {p.stderr[-200:]!r}")


def case_points_in_order(d):
    env = reporter_env(d)
    srv = Listener(env["DDPD_EVENTS_SOCKET"])
    p = run_script("""
        for i in range(1, 20001):
            ddpd.log_step(i, loss=1.0 / i, lr=1e-3, grad_norm=float("nan"), note="skipped")
        ddpd.log_epoch(0, lr=1e-3, train_loss=0.5, test_loss=0.4, test_acc=0.875, top5=0.99)
        ddpd.status("checkpointing")
        ddpd.checkpoint_saved(20000, "ckpt/last.pt")
        ddpd.checkpoint_saved(20000)
        ddpd.status("done", "finished")
        print(ddpd.dropped())
    """, env)
    check(p.returncode == 0 and p.stdout.strip() == "0", f"the script ran, nothing dropped: {p.stdout!r} {p.stderr[-300:]!r}")
    check(srv.drained(), "the connection was read to its end")
    check(len(srv.connections) == 1, f"one connection: {len(srv.connections)}")
    ev = srv.events(0) if srv.connections else []
    check(ev and ev[0]["type"] == "hello" and ev[0]["secret"] == "s3cret" and ev[0]["rank"] == 1
          and ev[0]["world_size"] == 2 and ev[0]["run"] == "12", f"the hello comes first with the secret: {ev[:1]}")
    steps = [e for e in ev if e["type"] == "metric" and "global_step" in e]
    check([e["global_step"] for e in steps] == list(range(1, 20001)), "every step, in order")
    check(steps and steps[-1]["values"] == {"loss": 1.0 / 20000, "lr": 1e-3, "grad_norm": None},
          f"numbers exact, NaN as null, non-numbers skipped: {steps[-1:]}")
    seqs = [e["seq"] for e in ev]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq increases")
    epochs = [e for e in ev if e["type"] == "metric" and "epoch" in e]
    check(epochs and epochs[0]["values"]["top5"] == 0.99 and epochs[0]["values"]["test_acc"] == 0.875,
          f"the epoch's figures: {epochs}")
    ckpts = [e for e in ev if e["type"] == "checkpoint"]
    check([(e["global_step"], e["path"]) for e in ckpts] == [(20000, "ckpt/last.pt"), (20000, "step-20000")],
          f"ddpd.checkpoint_saved: a checkpoint event with its step and path (step-N without one): {ckpts}")
    check(ev and ev[-1]["type"] == "status" and ev[-1]["state"] == "done", f"then the status: {ev[-1:]}")
    j = journal(d)
    check(len(j) == len(ev) and all(e.get("secret") is None for e in j), "the journal has every event and no secret")
    srv.close()


def case_server_restarts(d):
    env = reporter_env(d)
    srv = Listener(env["DDPD_EVENTS_SOCKET"])
    p = subprocess.Popen(["/usr/bin/python3", "-c", textwrap.dedent("""
        import ddpd, sys, time
        for i in range(1, 61):
            ddpd.log_step(i, loss=float(i))
            time.sleep(0.05)
        """)], env=dict(os.environ, PYTHONPATH=PYTHON_DIR, **env))
    time.sleep(1.0)
    srv.close()  # the server dies ...
    time.sleep(0.5)
    srv2 = Listener(env["DDPD_EVENTS_SOCKET"])  # ... and a new one listens
    check(p.wait(timeout=60) == 0, "the script never noticed")
    check(srv.drained() and srv2.drained(), "both connections were read to their end")
    first = srv.events(0)
    again = srv2.events(0) if srv2.connections else []
    check(again and again[0]["type"] == "hello" and again[0]["secret"] == "s3cret" and again[0]["seq"] == 0,
          f"the new connection starts with the original hello: {again[:1]}")
    got = [e["global_step"] for e in first + again if e["type"] == "metric"]
    check(got and got[-1] == 60 and got == sorted(got), f"points after the restart arrive: {got[-3:]}")
    steps = [e["global_step"] for e in journal(d) if e["type"] == "metric"]
    check(steps == list(range(1, 61)), "the journal holds all 60, for the server to catch up")
    srv2.close()


def case_full_queue_drops(d):
    env = reporter_env(d)
    env["DDPD_EVENTS_SOCKET"] = os.path.join(d, "nobody-listens.sock")
    p = run_script("""
        import ddpd
        ddpd.QUEUE_MAX = 1000
        t = time.time()
        for i in range(200000):
            ddpd.log_step(i, loss=0.1)
        print(ddpd.dropped() > 0, time.time() - t < 30)
    """, env)
    check(p.returncode == 0 and p.stdout.split() == ["True", "True"], f"full queue: dropped and counted: {p.stdout!r}")


def case_c_header(d):
    env = reporter_env(d)
    srv = Listener(env["DDPD_EVENTS_SOCKET"])
    p = subprocess.run([C_DEMO, "5000"], env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.split() == ["1", "0"], f"the C program ran, nothing dropped: {p.stdout!r}")
    check(srv.drained(), "the connection was read to its end")
    ev = srv.events(0) if srv.connections else []
    check(ev and ev[0]["type"] == "hello" and ev[0]["secret"] == "s3cret" and ev[0]["rank"] == 1, f"hello first: {ev[:1]}")
    steps = [e for e in ev if e["type"] == "metric" and "global_step" in e]
    check([e["global_step"] for e in steps] == list(range(1, 5001)), "every step, in order")
    check(steps and steps[-1]["values"] == {"loss": 1.0 / 5000, "lr": 1e-3, 'grad "norm"': None},
          f"exact numbers, NaN as null, names escaped: {steps[-1:]}")
    check(ev and ev[-1]["type"] == "status" and ev[-1]["detail"] == "finished", f"the status last: {ev[-1:]}")
    j = journal(d)
    check(len(j) == len(ev) and all(e.get("secret") is None for e in j), "the journal has every event and no secret")
    p = subprocess.run([C_DEMO, "10"], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.split() == ["0", "0"], f"outside ddpd: a no-op: {p.stdout!r}")
    srv.close()


def case_installed_outside_ddpd(d):
    """`cmake --install` puts `ddpd` where Python finds it (DDPD_PYTHON_INSTALL_DIR
    under the prefix): a script that reports runs under plain python3, every call a
    no-op, nothing written."""
    prefix, work = os.path.join(d, "prefix"), os.path.join(d, "work")
    os.makedirs(work)
    p = subprocess.run([CMAKE, "--install", BUILD, "--prefix", prefix], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"cmake --install: {p.stderr[-500:]!r}")
    site = os.path.join(prefix, PYTHON_INSTALL_DIR)
    check(os.path.isfile(os.path.join(site, "ddpd", "__init__.py")) and
          not os.path.exists(os.path.join(site, "ddpd", "__pycache__")),
          f"the module is installed in {PYTHON_INSTALL_DIR}, without a __pycache__: {os.listdir(prefix)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_")}
    env["PYTHONPATH"] = site
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    code = ("import ddpd, sys\n"
            "ddpd.log_step(1, loss=0.5, lr=0.1); ddpd.log_epoch(0, train_loss=0.4, test_acc=0.9)\n"
            "ddpd.status('training', 'epoch 0'); ddpd.flush()\n"
            "print(ddpd.__file__, ddpd.enabled(), ddpd.dropped())\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code], env=env, cwd=work, capture_output=True, text=True, timeout=60)
    out = p.stdout.split()
    check(p.returncode == 0 and out[1:] == ["False", "0"] and out[0].startswith(os.path.realpath(site) + os.sep),
          f"the installed module, imported outside a run: every call a no-op, exit 0: {p.returncode} {p.stdout!r} "
          f"{p.stderr[-300:]!r}")
    check(os.listdir(work) == [] and sorted(os.listdir(os.path.join(site, "ddpd"))) == ["__init__.py"],
          f"nothing written: {os.listdir(work)} {os.listdir(os.path.join(site, 'ddpd'))}")
    # where it lands is where /usr/bin/python3 itself looks, for the prefixes it knows
    p = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"], capture_output=True,
                       text=True, timeout=60, env={"PATH": os.environ["PATH"]})
    seen = [x for x in p.stdout.splitlines() if x.startswith(("/usr/lib/", "/usr/local/lib/"))]
    default_dir = "lib/python3.%d/dist-packages" % sys.version_info[1]
    if PYTHON_INSTALL_DIR in ("lib/python3/dist-packages", default_dir):
        check(any(x.endswith("/" + PYTHON_INSTALL_DIR) for x in seen),
              f"/usr/bin/python3 looks in {PYTHON_INSTALL_DIR} under /usr or /usr/local: {seen}")


CASES = cases_in(globals())

if __name__ == "__main__":
    case = sys.argv[1]
    C_DEMO = sys.argv[sys.argv.index("--c-demo") + 1] if "--c-demo" in sys.argv else None
    CMAKE = sys.argv[sys.argv.index("--cmake") + 1] if "--cmake" in sys.argv else "cmake"
    BUILD = sys.argv[sys.argv.index("--build") + 1] if "--build" in sys.argv else "build"
    PYTHON_INSTALL_DIR = (sys.argv[sys.argv.index("--python-install-dir") + 1] if "--python-install-dir" in sys.argv
                          else "lib/python3/dist-packages")
    with tempfile.TemporaryDirectory(prefix="ddpd-reporter-") as d:
        CASES[case](d)
    ddpd_harness.checks.finish(f"reporter {case}")
