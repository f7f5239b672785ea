#!/usr/bin/env python3
"""ddp-trainer's optimizers and LR schedules against PyTorch's own: torch.optim (Adam,
AdamW, SGD: single-tensor, float32 on the CPU) and torch.optim.lr_scheduler (LinearLR
for the warm-up, CosineAnnealingLR, StepLR). An independent comparison: optim_replay
runs the trainer's code (optim.c, lr_schedule.c; with --gpu the GPU's update,
optim_cuda.c and optim_kernels.cu) over the same parameters and gradients.

Usage: test_optim_torch.py CASE --replay PATH [--gpu]. Needs torch (Debian's
python3-torch; the GPU bundle runs it with the target's own): without it, SKIPPED and
exit 77. Standard library otherwise (no numpy)."""
import argparse, json, os, struct, subprocess, sys, tempfile

import checks  # noqa: E402  (the one pass/fail count)
from checks import check, cases_in  # noqa: E402

REPLAY, GPU = None, False
N, STEPS, SPE = 4099, 12, 4  # parameters, steps, steps per epoch
# Float rounding (torch's CPU kernels may fuse a multiply-add where ours round
# twice): the largest difference over the buffer's largest value, as the GPU tests
# measure; exp_avg_sq (positive, no cancellation) element by element, where
# (1 - beta2) in float was 1.3e-5 away everywhere.
TOL = 2e-6


def torch_or_skip():
    try:
        import torch
    except ImportError as e:
        print(f"SKIPPED: no torch here ({e}): install python3-torch")
        sys.exit(77)
    torch.set_num_threads(1)
    return torch


def run_config(optimizer, schedule=None, clip=0.0, epochs=3):
    data = {"images": "unused-images.gz", "labels": "unused-labels.gz"}
    cfg = {"name": "optim-vs-torch", "seed": 1, "data": {"train": data, "test": data},
           "train": {"epochs": epochs, "batch_size": 8, "optimizer": optimizer,
                     "lr_schedule": schedule or {"type": "constant"}, "grad_clip_norm": clip}}
    return cfg


def floats(t):
    return struct.pack(f"{t.numel()}f", *t.flatten().tolist())


def replay(work, cfg, params, grads, spe=SPE):
    """optim_replay over params [N] and grads [steps, N]: (params, {state: tensor}, lrs)."""
    import torch
    paths = {k: os.path.join(work, k) for k in ("run.json", "p.f32", "g.f32", "out.f32")}
    with open(paths["run.json"], "w") as f:
        json.dump(cfg, f)
    for key, t in (("p.f32", params), ("g.f32", grads)):
        with open(paths[key], "wb") as f:
            f.write(floats(t))
    cmd = [REPLAY, "--config", paths["run.json"], "--steps-per-epoch", str(spe), "--params", paths["p.f32"],
           "--grads", paths["g.f32"], "--out", paths["out.f32"]] + (["--gpu"] if GPU else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if not check(p.returncode == 0, f"optim_replay exited {p.returncode}: {p.stderr.strip()}"):
        sys.exit(checks.finish("optim_torch"))
    answer = json.loads(p.stdout)
    with open(paths["out.f32"], "rb") as f:
        raw = f.read()
    n = params.numel()
    values = struct.unpack(f"{len(raw) // 4}f", raw)
    bufs = [torch.tensor(values[k * n:(k + 1) * n], dtype=torch.float32) for k in range(len(raw) // 4 // n)]
    return bufs[0], dict(zip(answer["states"], bufs[1:])), answer["lrs"]


def worst(ours, theirs, elementwise=False):
    """The largest difference relative to the buffer's largest value, or (elementwise)
    to each element's own."""
    if elementwise:
        return ((ours - theirs).abs() / theirs.abs().clamp(min=1e-30)).max().item()
    return (ours - theirs).abs().max().item() / max(theirs.abs().max().item(), 1e-30)


def data(torch, scale_by_step=True):
    g = torch.Generator().manual_seed(7)
    params = torch.randn(N, generator=g) * 0.1
    grads = torch.randn(STEPS, N, generator=g)
    if scale_by_step:  # gradients of different sizes from step to step, as in training
        grads *= torch.logspace(-3, 0, STEPS).unsqueeze(1)
    return params, grads


def torch_run(torch, make_opt, params, grads, lrs, clip=0.0):
    """torch.optim over the same data, each step at the trainer's LR (the schedules are
    compared on their own)."""
    p = params.clone().requires_grad_(True)
    opt = make_opt([p])
    for t in range(grads.shape[0]):
        opt.param_groups[0]["lr"] = lrs[t]
        p.grad = grads[t].clone()
        if clip:
            torch.nn.utils.clip_grad_norm_([p], clip)
        opt.step()
    return p.detach(), opt.state[p]


def compare_optimizer(work, name, optimizer, make_opt, clip=0.0):
    torch = torch_or_skip()
    params, grads = data(torch)
    ours_p, ours_state, lrs = replay(work, run_config(optimizer, clip=clip), params, grads)
    theirs_p, theirs_state = torch_run(torch, make_opt, params, grads, lrs, clip)
    errs = {"params": worst(ours_p, theirs_p)}
    for key, buf in ours_state.items():
        errs[key] = worst(buf, theirs_state[key], elementwise=key == "exp_avg_sq")
    for key, err in errs.items():
        check(err <= TOL, f"{name}: {key} after {STEPS} steps within {TOL} of torch's: {err:.3g}")
    print(f"  {name}{' (GPU update)' if GPU else ''}: after {STEPS} steps, largest relative difference to torch.optim: "
          + ", ".join(f"{k} {v:.2e}" for k, v in errs.items()))
    return ours_state, theirs_state


# ---- optimizers ---------------------------------------------------------------------

def case_adam(work):
    """Adam: parameters, exp_avg and exp_avg_sq follow torch.optim.Adam to float rounding,
    from the first step on (exp_avg_sq was 1.3e-5 off with (1 - beta2) in float)."""
    torch = torch_or_skip()
    compare_optimizer(work, "adam", {"type": "adam", "lr": 1e-3},
                      lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False))
    params, grads = data(torch)
    ours_p, ours_state, lrs = replay(work, run_config({"type": "adam", "lr": 1e-3}), params, grads[:1])
    _, theirs_state = torch_run(torch, lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False), params, grads[:1], lrs)
    err = worst(ours_state["exp_avg_sq"], theirs_state["exp_avg_sq"], elementwise=True)
    check(err <= 4e-7, f"exp_avg_sq after one step within two float roundings of torch's: {err:.3g}")


def case_adam_weight_decay(work):
    """Adam with L2 weight decay and other betas and eps."""
    torch = torch_or_skip()
    opt = {"type": "adam", "lr": 3e-3, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.05}
    compare_optimizer(work, "adam, weight decay 0.05", opt,
                      lambda ps: torch.optim.Adam(ps, lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05,
                                                  foreach=False))


def case_adamw(work):
    """AdamW (decoupled weight decay), with gradient clipping by global norm."""
    torch = torch_or_skip()
    compare_optimizer(work, "adamw, weight decay 0.1, clipped to norm 1", {"type": "adamw", "lr": 1e-3,
                                                                          "weight_decay": 0.1},
                      lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, foreach=False), clip=1.0)


def case_sgd(work):
    """SGD with momentum, nesterov and weight decay."""
    torch = torch_or_skip()
    compare_optimizer(work, "sgd nesterov 0.9, weight decay 0.01",
                      {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
                      lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01,
                                                 foreach=False))


# ---- LR schedules --------------------------------------------------------------------

def torch_lrs(torch, base_lr, make_sched, steps):
    """The LR torch's scheduler gives each step, stepped once per step."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = make_sched(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def compare_schedule(work, name, schedule, make_sched, epochs=5, spe=10, base_lr=0.01):
    torch = torch_or_skip()
    steps = epochs * spe
    params = torch.zeros(8)
    _, _, ours = replay(work, run_config({"type": "sgd", "lr": base_lr}, schedule, epochs=epochs), params,
                        torch.zeros(steps, 8), spe)
    theirs = torch_lrs(torch, base_lr, make_sched, steps)
    err = max(abs(a - b) / b for a, b in zip(ours, theirs))
    check(len(ours) == steps and err <= 1e-9, f"{name}: every step's LR as torch's ({steps} steps): worst {err:.3g}")
    check(max(ours) <= base_lr, f"{name}: the LR never exceeds optimizer.lr {base_lr}: it reaches {max(ours)!r}")
    print(f"  {name}: {steps} steps, worst relative difference to torch {err:.1e}; first steps "
          + ", ".join(f"{x:.5g}" for x in ours[:4]) + f"; highest {max(ours):.5g}")


def case_cosine_fractional_warmup(work):
    """cosine after a quarter-epoch warm-up of 10 steps a epoch (3 steps: 1/3, 2/3, 1 of
    the LR; it reached 1.2 x lr before): LinearLR then CosineAnnealingLR."""
    torch = torch_or_skip()
    S = torch.optim.lr_scheduler
    W, total = 3, 50
    compare_schedule(work, "cosine, warm-up 0.25 epochs", {"type": "cosine", "warmup_epochs": 0.25, "min_lr": 1e-4},
                     lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=1 / W, total_iters=W - 1),
                                                  S.CosineAnnealingLR(o, T_max=total - W, eta_min=1e-4)], [W]))


def case_constant_warmup(work):
    """constant with a warm-up of 1.5 epochs (it was ignored): LinearLR."""
    torch = torch_or_skip()
    S = torch.optim.lr_scheduler
    compare_schedule(work, "constant, warm-up 1.5 epochs", {"type": "constant", "warmup_epochs": 1.5},
                     lambda o: S.LinearLR(o, start_factor=1 / 15, total_iters=14))


def case_step_warmup(work):
    """step (x0.5 every 2 epochs) with a warm-up of 2.5 epochs (it was ignored): LinearLR
    chained with StepLR, the decays at their epochs."""
    torch = torch_or_skip()
    S = torch.optim.lr_scheduler
    compare_schedule(work, "step, warm-up 2.5 epochs", {"type": "step", "step_epochs": 2, "gamma": 0.5,
                                                        "warmup_epochs": 2.5},
                     lambda o: S.ChainedScheduler([S.LinearLR(o, start_factor=1 / 25, total_iters=24),
                                                   S.StepLR(o, step_size=20, gamma=0.5)]))


def case_step(work):
    """The tutorial's step decay: StepLR every step_epochs epochs."""
    torch = torch_or_skip()
    S = torch.optim.lr_scheduler
    compare_schedule(work, "step x0.3 every 2 epochs", {"type": "step", "step_epochs": 2, "gamma": 0.3},
                     lambda o: S.StepLR(o, step_size=20, gamma=0.3))


CASES = cases_in(globals())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--replay", required=True, help="the optim_replay executable")
    ap.add_argument("--gpu", action="store_true", help="the optimizer's update on the GPU (optim_replay --gpu)")
    a = ap.parse_args()
    global REPLAY, GPU
    REPLAY, GPU = a.replay, a.gpu
    with tempfile.TemporaryDirectory(prefix="ddpd-optim-torch-") as work:
        CASES[a.case](work)
    checks.finish(f"optim_torch_{a.case}")


if __name__ == "__main__":
    main()
