#!/usr/bin/python3
"""Records the real outputs test_failure_class.c classifies: each scenario run with
Debian's /usr/bin/python3 (python3-torch for the torch ones), its stdout and stderr
kept as NAME.txt and its end (exit code or signal) as the file's first line,
"# exit N" or "# signal N". Run it from this directory to record them again:
    /usr/bin/python3 record.py
The CUDA and NCCL texts cannot be made on a host without GPUs: they are transcribed
(cuda_oom.txt, nccl_*.txt; each says where from) and this script leaves them alone."""
import os
import signal
import subprocess
import sys
import tempfile

PY = "/usr/bin/python3"

GLOO_TIMEOUT = r"""
import datetime, os, sys, time, torch, torch.distributed as dist
rank = int(sys.argv[1])
dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=3))
if rank == 0:
    dist.all_reduce(torch.ones(4))   # rank 1 never joins it
else:
    time.sleep(8)
"""

GLOO_PEER_GONE = r"""
import os, sys, time, torch, torch.distributed as dist
rank = int(sys.argv[1])
dist.init_process_group("gloo", rank=rank, world_size=2)
dist.all_reduce(torch.ones(4))
if rank == 1:
    os._exit(1)                      # gone without a word
time.sleep(0.5)
dist.all_reduce(torch.ones(4))
"""

SINGLE = {
    "memory_error": "x = bytearray(1 << 62)\n",
    "torch_cpu_oom": "import torch\nx = torch.empty(1 << 46)\n",
    "module_not_found": "import no_such_module\n",
    "syntax_error": "def train(:\n    pass\n",
    "file_not_found": "open('/data/no-such-dir/train.bin', 'rb')\n",
    "segfault": "import ctypes, faulthandler\nfaulthandler.enable()\nprint('step 3', flush=True)\nctypes.string_at(0)\n",
    "value_error_late": "for step in range(1, 38):\n    print(f'step {step} loss 0.5', flush=True)\nraise ValueError('loss is nan at step 37')\n",
    "abort": "import os\nprint('step 1', flush=True)\nos.abort()\n",
}


def end_line(rc):
    return "# signal %d\n" % -rc if rc < 0 else "# exit %d\n" % rc


def run_single(name, code, tmp):
    path = os.path.join(tmp, "train.py")
    with open(path, "w") as f:
        f.write(code)
    p = subprocess.run([PY, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp)
    out = p.stdout.decode("utf-8", "replace").replace(tmp, "/home/alice/job")
    with open(name + ".txt", "w") as f:
        f.write(end_line(p.returncode) + out)


def run_pair(name, code, tmp, keep_rank):
    path = os.path.join(tmp, "train.py")
    with open(path, "w") as f:
        f.write(code)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT="29731")
    procs = [subprocess.Popen([PY, path, str(r)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp, env=env)
             for r in range(2)]
    outs = [p.communicate()[0].decode("utf-8", "replace").replace(tmp, "/home/alice/job") for p in procs]
    with open(name + ".txt", "w") as f:
        f.write(end_line(procs[keep_rank].returncode) + outs[keep_rank])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name, code in SINGLE.items():
            run_single(name, code, tmp)
        run_pair("gloo_timeout", GLOO_TIMEOUT, tmp, 0)
        run_pair("gloo_peer_gone", GLOO_PEER_GONE, tmp, 0)


if __name__ == "__main__":
    main()
