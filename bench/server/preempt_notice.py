#!/usr/bin/env python3
"""The work a preemption throws away, with the notice answered and without: a real
ddpd (one slot), a real preemption, the lost device-seconds as the usage ledger
charges them to the preemptor (GET /usage's `charged`, phase `lost`).

  command, answers   a torch script (an MLP on random data, ddpd.log_step at every
                     step, a checkpoint at step 1 only) that asks
                     ddpd.preempt_requested() at every step: at the notice it saves
                     there (torch.save, then ddpd.checkpoint_saved) and is stopped
  command, ignores   the same script without preempt_requested(): it gets SIGTERM at
                     the notice and loses everything since step 1
  built-in           ddp-trainer, 2 ranks, checkpoint.every_epochs 5, preempted after:
                     it checkpoints at its next step (the ledger's lost); "without" is
                     what it would have lost stopped there without that checkpoint:
                     its devices times the time since its newest epoch checkpoint

Each victim runs --before seconds of steps after its checkpoint, then a run of
priority 10 preempts it; once it has restarted and ended, its charge is read.

Usage: PYTHONPATH=tests/support bench/server/preempt_notice.py --ddpd build/bin/ddpd
         --runner build/bin/ddp-run --trainer build/bin/ddp-trainer [--before 5]"""
import argparse, datetime, os, shutil, tempfile, time

from ddpd_harness import Server, fmnist_config, wait_until

SCRIPT = """import os, time, torch, ddpd
torch.manual_seed(0)
k = int(os.environ['TORCHELASTIC_RESTART_COUNT'])
ckpt = os.path.join({root!r}, {name!r} + '.pt')
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
start = 1
if k > 0 and os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state['model']); opt.load_state_dict(state['opt']); start = state['step'] + 1
def save(step):
    torch.save({{'model': model.state_dict(), 'opt': opt.state_dict(), 'step': step}}, ckpt + '.tmp')
    os.replace(ckpt + '.tmp', ckpt)
    ddpd.checkpoint_saved(step, ckpt)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
for step in range(start, start + (100000 if k == 0 else 5)):
    t = time.time()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    ddpd.log_step(step, loss=loss.item())
    if step == 1:
        save(step)
    if {answers} and ddpd.preempt_requested():
        save(step)
        while True:
            time.sleep(0.1)
    time.sleep(max(0.0, 0.1 - (time.time() - t)))
"""


def stamp(x):
    return datetime.datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp()


def urgent(root):
    go = os.path.join(root, "go")
    return {"name": "urgent", "priority": 10, "distributed": {"world_size": 1},
            "command": ["/usr/bin/python3", "-c", f"import os, time\nwhile not os.path.exists({go!r}): "
                        f"time.sleep(0.05)\n"]}, go


def lost_of(s, rid):
    return sum(c["device_s"] for c in s.get("/usage").json()["charged"] if c["run"] == rid and c["phase"] == "lost")


def preempt(s, root, rid):
    """Preempts run rid with an urgent run, lets it restart and end: the urgent run's id."""
    cfg, go = urgent(root)
    rush = s.post("/runs", cfg).json()["id"]
    s.wait_status(rid, "queued", timeout=120)
    open(go, "w").close()
    s.wait_status(rush, ("succeeded", "failed", "canceled"), timeout=120)
    return rush


def command_case(a, answers):
    root = os.path.realpath(tempfile.mkdtemp(prefix="ddpd-bench-notice-"))
    os.chmod(root, 0o777)
    try:
        with Server(a.ddpd, None, slots=1, extra_args=["--allow-commands", "--work-root", root, "--runner", a.runner,
                                                        "--preempt-grace", "30"]) as s:
            cfg = {"name": "victim", "preemptible": True, "distributed": {"world_size": 1},
                   "command": ["/usr/bin/python3", "-c", SCRIPT.format(root=root, name="victim", answers=answers)]}
            rid = s.post("/runs", cfg).json()["id"]
            steps = int(a.before / 0.1) + 1
            wait_until(lambda: s.get(f"/runs/{rid}/metrics?key=loss").json()["count"] >= steps,
                       f"{steps} steps", 300)
            t0 = time.monotonic()
            preempt(s, root, rid)
            stopped = time.monotonic() - t0
            s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=300)
            return lost_of(s, rid), stopped
    finally:
        shutil.rmtree(root, ignore_errors=True)


def builtin_case(a):
    with Server(a.ddpd, a.trainer, slots=2, extra_args=["--preempt-grace", "30"]) as s:
        cfg = fmnist_config(**{"model.hidden": [512, 256], "train.epochs": 10, "train.batch_size": 16,
                               "checkpoint.every_epochs": 5, "preemptible": True})
        rid = s.post("/runs", cfg).json()["id"]

        def past_epoch_ckpt():
            tl = s.get(f"/runs/{rid}/timeline").json()["entries"]
            ck = [stamp(e["t"]) for e in tl if e["kind"] == "checkpoint"]
            return ck and time.time() - ck[-1] >= a.before
        wait_until(past_epoch_ckpt, f"{a.before} s past its epoch 0 checkpoint", 600)
        t0 = time.monotonic()
        cfg_u = fmnist_config(**{"priority": 10, "train.epochs": 1, "data.limit": 500})
        rush = s.post("/runs", cfg_u).json()["id"]
        s.wait_status(rid, "queued", timeout=120)
        stopped = time.monotonic() - t0
        tl = s.get(f"/runs/{rid}/timeline").json()["entries"]
        ck = [stamp(e["t"]) for e in tl if e["kind"] == "checkpoint"]
        notice = [stamp(e["t"]) for e in tl if e["kind"] == "notice"]
        before = [c for c in ck if notice and c <= notice[-1]]
        without = 2 * (notice[-1] - before[-1]) if before else float("nan")
        s.wait_status(rush, ("succeeded", "failed", "canceled"), timeout=300)
        s.wait_status(rid, ("succeeded", "failed", "canceled"), timeout=600)
        return lost_of(s, rid), without, stopped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddpd", required=True)
    ap.add_argument("--runner", required=True)
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--before", type=float, default=5.0, help="seconds of steps after its checkpoint, then preempted")
    a = ap.parse_args()
    a.ddpd, a.runner, a.trainer = (os.path.abspath(x) for x in (a.ddpd, a.runner, a.trainer))
    answered, t_answered = command_case(a, True)
    ignored, t_ignored = command_case(a, False)
    b_with, b_without, t_builtin = builtin_case(a)
    print(f"lost device-seconds of one preemption, {a.before:g} s of steps after the victim's last checkpoint")
    print(f"{'victim':<28}{'with notice':>12}{'without':>12}{'ratio':>10}   preempted to queued")
    ratio = ignored / answered if answered > 0 else float("inf")
    print(f"{'command run (torch script)':<28}{answered:>12.3f}{ignored:>12.3f}{ratio:>9.1f}x   "
          f"{t_answered:.1f} s answered, {t_ignored:.1f} s ignored")
    ratio = b_without / b_with if b_with > 0 else float("inf")
    print(f"{'built-in (ddp-trainer, 2)':<28}{b_with:>12.3f}{b_without:>12.3f}{ratio:>9.1f}x   "
          f"{t_builtin:.1f} s (without: its devices x the time since its epoch checkpoint)")


if __name__ == "__main__":
    main()
