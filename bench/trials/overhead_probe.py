"""A command run's rank of bench/trials/trial_overhead.py: writes, to $PROBE_OUT, the
time of each phase of its start (the interpreter's own start, from /proc; the script's
first line; `import torch`; `import ddpd`; the data; gloo's rendezvous; the first
step of a DDP model), so that the bench can say where a trial's start goes."""
import json, os, time

T = {"script": time.time()}


def proc_start():
    """When this process was forked (an exec keeps the time), to a clock tick."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return time.time() - (up - start_ticks / os.sysconf("SC_CLK_TCK"))


T["process"] = proc_start()
import torch  # noqa: E402
T["torch"] = time.time()
import torch.distributed as dist  # noqa: E402
import ddpd  # noqa: E402
T["ddpd"] = time.time()
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(512, 784)
y = torch.randint(0, 10, (512,))
T["data"] = time.time()
dist.init_process_group("gloo")
T["rendezvous"] = time.time()
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rank = dist.get_rank()
for step in range(2):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x[rank::2]), y[rank::2]).backward()
    opt.step()
    if step == 0:
        T["first_step"] = time.time()
        ddpd.log_step(step, loss=1.0)
        ddpd.flush()
with open(os.path.join(os.environ["PROBE_OUT"], f"probe-{os.environ['DDPD_RUN_ID']}-{rank}.json"), "w") as f:
    json.dump(T, f)
dist.destroy_process_group()
