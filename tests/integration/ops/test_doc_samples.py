#!/usr/bin/env python3
"""The docs' samples against what the build really does, so that they cannot drift
(each case reads the file its sample stands in):

  check_sample  `cmake --install` into a temporary /usr/local, a home of its own with
                a database ddpd serve made, then docs/operating.md's `ddpd check
                --data-root /usr/share/datasets`: its output must be that sample line for
                line, once the temporary directory's prefix is taken off and what
                belongs to the host is set aside (library versions, core and run
                counts; the GPUs line on a host that has GPUs; the GPU backend's words
                in a build without CUDA; the accounts line's words when run as root).
  binaries      every build/bin/NAME the README, CONTRIBUTING.md and docs/*.md name is
                built, and `cmake --install` puts each in bin/; the README itself says
                where ddpd, ddpctl and ddp-trainer are.
  man_pages     man ddpd and man ddpctl after `cmake --install`: clean roff, every flag
                of ddpd's --help tables and every ddpctl command in them.
  checkpoint_layout  a real checkpoint read as docs/using.md's "A checkpoint in
                PyTorch" snippet reads it (a ModuleList `layers` of nn.Linear [out, in],
                the pixels divided by the snippet's divisor, its activation between),
                evaluated by hand in plain Python (no PyTorch needed): the trainer's own
                test loss and accuracy, and not when the pixels are not scaled.

Usage: test_doc_samples.py CASE --source REPO --build BUILD_DIR --cmake CMAKE"""
import argparse, gzip, json, math, operator, os, re, shutil, signal, struct, subprocess, sys, tempfile

import ddpd_harness  # noqa: E402
from ddpd_harness import check, cases_in  # noqa: E402


CHECK_SAMPLE_DOC = "docs/operating.md"  # `ddpd check`'s sample ("Setting up a box")
CHECKPOINT_DOC = "docs/using.md"        # "A checkpoint in PyTorch"
BINARIES_DOC = "README.md"              # where the programs are ("Two commands")


def doc(a, rel):
    with open(os.path.join(a.source, rel)) as f:
        return f.read()


def all_docs(a):
    """{relative path: text} of the README, CONTRIBUTING.md and docs/*.md."""
    rels = ["README.md", "CONTRIBUTING.md"] + sorted(
        os.path.join("docs", n) for n in os.listdir(os.path.join(a.source, "docs")) if n.endswith(".md"))
    return {rel: doc(a, rel) for rel in rels if os.path.isfile(os.path.join(a.source, rel))}


def check_sample_lines(text):
    """The lines of a doc's `$ ddpd check ...` sample (command first), unindented."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("$ ddpd check"):
            sample = [line.strip()]
            for more in lines[i + 1:]:
                if not more.startswith("    "):
                    break
                sample.append(more[4:])
            return sample
    return []


def install(a, prefix):
    p = subprocess.run([a.cmake, "--install", a.build, "--prefix", prefix], capture_output=True, timeout=300)
    check(p.returncode == 0, f"cmake --install --prefix {prefix}: {p.stderr.decode()[-1000:]}")
    return p.returncode == 0


def clean_env(home):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DDPD_") and k != "XDG_STATE_HOME"}
    e["HOME"] = home
    return e


def host_has_gpu():
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia")


def normalize(line, build_has_cuda):
    line = re.sub(r"(libmicrohttpd|SQLite|Jansson) [0-9][0-9.]*", r"\1 V", line)
    line = line.replace("sanitizers: address,undefined; ", "")  # the sanitizer build says so
    line = re.sub(r"\b\d+ (CPU slots?|slots?|runs?)\b", lambda m: "N " + m.group(1).rstrip("s"), line)
    line = re.sub(r"\b[\d.]+ (bytes|KiB|MiB|GiB|TiB|PiB) free\b", "N free", line)  # the room on this host's disk
    if not build_has_cuda:
        line = line.replace("cuda: no;", "cuda: yes;")
        line = re.sub(r"\(nccl backend: [^)]*\)(, which starts)?", "(nccl backend: ...)", line)
    return line


def case_check_sample(a):
    sample = check_sample_lines(doc(a, CHECK_SAMPLE_DOC))
    if not check(len(sample) >= 9, f"{CHECK_SAMPLE_DOC} has the ddpd check sample: {sample}"):
        return
    command, expected = sample[0], sample[1:]
    check(command == "$ ddpd check --data-root /usr/share/datasets", f"the sample's command: {command}")
    base = tempfile.mkdtemp(prefix="ddpd-readme-")
    try:
        prefix = os.path.join(base, "usr", "local")
        home = os.path.join(base, "home", "me")
        os.makedirs(home)
        if not install(a, prefix):
            return
        ddpd = os.path.join(prefix, "bin", "ddpd")
        # a database, made by the installed ddpd serving this home's default state dir
        serve = subprocess.Popen([ddpd, "serve", "--listen", "127.0.0.1:0", "--gpus", "none"], cwd=base,
                                 env=clean_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = serve.stdout.readline().decode()
        check("listening on" in line, f"the installed ddpd serves: {line!r}")
        serve.send_signal(signal.SIGTERM)
        serve.communicate(timeout=60)
        p = subprocess.run(command[2:].split(), cwd=base, env=dict(clean_env(home), PATH=f"{prefix}/bin:/usr/bin:/bin"),
                           capture_output=True, timeout=120)
        real = p.stdout.decode(errors="replace").replace(base, "").splitlines()
        check(p.returncode == 0, f"ddpd check exits 0 as the sample's does: {p.returncode}\n{p.stderr.decode()[-500:]}")
        build_has_cuda = bool(real) and "cuda: yes;" in real[0]
        if not build_has_cuda:
            print("note: this build has no CUDA: the GPU backend's words are not compared", flush=True)
        skip = set()
        if host_has_gpu():
            print("note: this host has GPUs: its GPUs line (and the summary's counts) are not compared", flush=True)
            skip = {i for i, l in enumerate(expected) if l.startswith("warn  GPUs") or l.startswith("ddpd check:")}
        if os.geteuid() == 0:  # the sample is a user's: root can switch accounts, and says so
            print("note: run as root: the accounts line's words are not compared", flush=True)
            at = next((i for i, l in enumerate(expected) if l.startswith("ok    accounts")), None)
            check(at is not None and real[at:at + 1] == ["ok    accounts    runs can run as other accounts (it runs as root)"],
                  f"root's accounts line: {real[at:at + 1] if at is not None else None}")
            skip.add(at)
            # and its cgroups: the sample's user cannot write them (runs go without a
            # memory or process limit, a warning), root here may
            at = next((i for i, l in enumerate(expected) if l.startswith("warn  limits")), None)
            got = real[at] if at is not None and at < len(real) else ""
            check(got.startswith("ok    limits      each run: memory ") or got.startswith("warn  limits      runs go "),
                  f"root's limits line: {got}")
            skip.add(at)
            if got.startswith("ok    limits"):  # one warning fewer in the summary than the sample's
                expected = [re.sub(r"^ddpd check: (\d+) ok, (\d+) warnings?", lambda m: "ddpd check: %d ok, %d warning%s"
                                   % (int(m.group(1)) + 1, int(m.group(2)) - 1, "" if int(m.group(2)) == 2 else "s"), l)
                            for l in expected]
        check(len(real) == len(expected), f"as many lines as the sample ({len(expected)}): got {len(real)}:\n" +
              "\n".join(real))
        for i, (want, got) in enumerate(zip(expected, real)):
            if i in skip:
                continue
            w, g = normalize(want, build_has_cuda), normalize(got, build_has_cuda)
            check(w == g, f"{CHECK_SAMPLE_DOC}'s sample line {i + 1} matches the real output:\n  doc:  {want}\n"
                          f"  real: {got}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def case_binaries(a):
    docs = all_docs(a)
    in_readme = set(re.findall(r"build/bin/([A-Za-z0-9_-]+)", docs[BINARIES_DOC]))
    check({"ddpd", "ddpctl", "ddp-trainer"} <= in_readme,
          f"{BINARIES_DOC} says where ddpd, ddp-trainer and ddpctl are: {sorted(in_readme)}")
    where = {}
    for rel, text in docs.items():
        for name in re.findall(r"build/bin/([A-Za-z0-9_-]+)", text):
            where.setdefault(name, rel)
    named = sorted(where)
    for name in named:
        check(os.access(os.path.join(a.build, "bin", name), os.X_OK), f"build/bin/{name}, which {where[name]} names, is built")
    base = tempfile.mkdtemp(prefix="ddpd-install-")
    try:
        if install(a, base):
            for name in named:
                check(os.access(os.path.join(base, "bin", name), os.X_OK), f"cmake --install puts {name} in bin/")
            check(os.path.isfile(os.path.join(base, "share", "ddpd", "web", "index.html")),
                  "and the dashboard in share/ddpd/web, where the installed ddpd looks")
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- the manual pages ----

def flags_of(help_text):
    """The flags a --help text lists, one per entry ("  --flag ..." lines)."""
    return sorted(set(m.group(1) for m in re.finditer(r"^  (--[a-z][a-z0-9-]*)", help_text, re.M)))


def case_man_pages(a):
    """`man ddpd` and `man ddpctl` work after `cmake --install`: the installed pages are
    clean roff (groff -ww warns of nothing), and they say every flag the programs'
    own --help lists (serve's, the agent's, a Slurm part's) and every ddpctl command."""
    base = tempfile.mkdtemp(prefix="ddpd-install-")
    try:
        if not install(a, base):
            return
        env = dict(os.environ, MANPATH=os.path.join(base, "share", "man"), MANWIDTH="200")
        pages = {}
        for page in ("ddpd", "ddpctl"):
            path = os.path.join(base, "share", "man", "man1", f"{page}.1")
            check(os.path.isfile(path), f"cmake --install puts {page}.1 in share/man/man1")
            p = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True, text=True, timeout=60)
            check(p.returncode == 0 and not p.stderr.strip(), f"{page}.1 is clean roff: {p.stderr[:500]}")
            p = subprocess.run(["man", "-P", "cat", page], capture_output=True, text=True, env=env, timeout=60)
            check(p.returncode == 0 and f"{page.upper()}(1)" in p.stdout, f"man {page} shows the page: {p.returncode} "
                  f"{p.stderr[:300]} {p.stdout[:200]!r}")
            pages[page] = p.stdout
        ddpd = os.path.join(a.build, "bin", "ddpd")
        for what in (["serve", "--help"], ["agent", "--help"], ["part", "--help"]):
            flags = flags_of(subprocess.run([ddpd, *what], capture_output=True, text=True, timeout=60).stdout)
            missing = [f for f in flags if f not in pages.get("ddpd", "")]
            check(len(flags) > 3 and not missing, f"man ddpd says every flag of ddpd {what[0]} --help ({len(flags)}): "
                  f"missing {missing}")
        usage = subprocess.run([os.path.join(a.build, "bin", "ddpctl"), "--help"], capture_output=True, text=True,
                               timeout=60).stdout
        commands = re.findall(r"^  ([a-z]+) ", usage, re.M)
        missing = [c for c in commands if not re.search(rf"^ +{c}\b", pages.get("ddpctl", ""), re.M)]
        check(len(commands) > 8 and not missing, f"man ddpctl has an entry for every command of ddpctl --help "
              f"({commands}): missing {missing}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- a checkpoint as the docs' PyTorch snippet reads it ----

FMNIST = "/usr/share/datasets/fashion-mnist"


def safetensors(path):
    """name -> (shape, list of floats) of an F32 safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        check(t["dtype"] == "F32", f"{name} is float32: {t['dtype']}")
        out[name] = (t["shape"], list(struct.unpack(f"<{(e - b) // 4}f", data[8 + n + b:8 + n + e])))
    return out


def idx(path, count):
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range((magic & 0xFF) - 1)]
        size = 1
        for d in dims:
            size *= d
        return [f.read(size) for _ in range(min(count, n))]


def snippet(a):
    """What docs/using.md's PyTorch snippet does to read a checkpoint: the divisor of the
    pixels (`x = images.flatten(1).float() / D`), the activation between its layers
    (`torch.NAME(x)`), its model's layers (`self.layers = nn.ModuleList(nn.Linear...`)
    and the names it keeps (`k.startswith("PREFIX")`); None for what it does not say."""
    text = doc(a, CHECKPOINT_DOC)
    m = re.search(r"^## A checkpoint in PyTorch\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    code = re.search(r"```python\n(.*?)```", m.group(1), re.S).group(1) if m and "```python" in m.group(1) else ""
    divisor = re.search(r"x = images\.flatten\(1\)\.float\(\) / (\d+)", code)
    act = re.search(r"x = torch\.(\w+)\(x\)", code)
    layers = re.search(r"self\.layers = nn\.ModuleList\(nn\.(\w+)", code)
    keep = re.search(r'k\.startswith\("([^"]+)"\)', code)
    return {"divisor": int(divisor.group(1)) if divisor else None, "activation": act.group(1) if act else None,
            "layer": layers.group(1) if layers else None, "keep": keep.group(1) if keep else None}


ACTIVATIONS = {"relu": lambda v: v if v > 0 else 0.0, "tanh": math.tanh,
               "gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2)))}  # the trainer's model.activation


def evaluate(layers, images, labels, scale, activation="relu"):
    """Mean cross-entropy and accuracy of the docs' MLP: x = pixels * scale, then
    layers[i] = (weight rows [out][in], bias), the activation between them, in plain Python."""
    total, right = 0.0, 0
    for image, label in zip(images, labels):
        x = [p * scale for p in image]
        for i, (rows, bias) in enumerate(layers):
            x = [sum(map(operator.mul, row, x)) + b for row, b in zip(rows, bias)]
            if i < len(layers) - 1:
                x = [ACTIVATIONS[activation](v) for v in x]
        top = max(x)
        total += top + math.log(sum(math.exp(v - top) for v in x)) - x[label]
        right += x.index(top) == label
    return total / len(images), right / len(images)


def case_checkpoint_layout(a):
    test_n = 200
    snip = snippet(a)
    if not check(snip["divisor"] and snip["activation"] in ACTIVATIONS and snip["layer"] == "Linear" and snip["keep"],
                 f"{CHECKPOINT_DOC}'s PyTorch snippet says how it scales the pixels, the activation between its "
                 f"layers (one of {sorted(ACTIVATIONS)}), a ModuleList of nn.Linear and the names it keeps: {snip}"):
        return
    # the model's default activation (the snippet's MLP is the default one), smaller layers
    config = {"name": "layout", "model": {"type": "mlp", "hidden": [32, 16]},
              "data": {"train": {"images": f"{FMNIST}/train-images-idx3-ubyte.gz", "labels": f"{FMNIST}/train-labels-idx1-ubyte.gz"},
                       "test": {"images": f"{FMNIST}/t10k-images-idx3-ubyte.gz", "labels": f"{FMNIST}/t10k-labels-idx1-ubyte.gz"},
                       "limit": 1024, "test_limit": test_n},
              "train": {"epochs": 1, "batch_size": 64}, "distributed": {"world_size": 1, "backend": "cpu"}}
    base = tempfile.mkdtemp(prefix="ddpd-layout-")
    try:
        cfg_path = os.path.join(base, "run.json")
        with open(cfg_path, "w") as f:
            json.dump(config, f)
        run_dir = os.path.join(base, "run")
        p = subprocess.run([os.path.join(a.build, "bin", "ddp-trainer"), "--config", cfg_path, "--run-dir", run_dir],
                           capture_output=True, timeout=300, env={k: v for k, v in os.environ.items() if not k.startswith("DDPD_")})
        if not check(p.returncode == 0, f"the trainer trains: {p.stderr.decode()[-800:]}"):
            return
        with open(os.path.join(run_dir, "events.jsonl")) as f:
            epoch = [e for e in map(json.loads, f) if e.get("type") == "epoch"][-1]
        t = safetensors(os.path.join(run_dir, "checkpoints", "epoch-0000.safetensors"))
        model = {k: v for k, v in t.items() if k.startswith(snip["keep"])}  # what the snippet loads
        sizes = [784, 32, 16, 10]
        want = {}
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            want[f"layers.{i}.weight"] = [n_out, n_in]
            want[f"layers.{i}.bias"] = [n_out]
        check({k: v[0] for k, v in model.items()} == want,
              f"a ModuleList of nn.Linear: layers.N.weight [out, in], layers.N.bias: {sorted((k, v[0]) for k, v in model.items())}")
        check(all(k.startswith(snip["keep"]) or k.startswith("optimizer.") for k in t),
              f"the rest, which the snippet leaves out, is the optimizer's: {sorted(t)}")
        if set(model) != set(want):
            return
        layers = []
        for i in range(len(sizes) - 1):
            shape, w = model[f"layers.{i}.weight"]
            layers.append(([w[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])], model[f"layers.{i}.bias"][1]))
        images = idx(f"{FMNIST}/t10k-images-idx3-ubyte.gz", test_n)
        labels = list(b"".join(idx(f"{FMNIST}/t10k-labels-idx1-ubyte.gz", test_n)))
        loss, acc = evaluate(layers, images, labels, 1 / snip["divisor"], snip["activation"])
        check(abs(loss - epoch["test_loss"]) < 1e-4 and abs(acc - epoch["test_acc"]) < 1e-9,
              f"read as {CHECKPOINT_DOC} says (pixels / {snip['divisor']}, {snip['activation']} between layers), the "
              f"checkpoint gives the trainer's test loss {epoch['test_loss']:.6f} and accuracy {epoch['test_acc']}: "
              f"{loss:.6f}, {acc}")
        raw, _ = evaluate(layers, images, labels, 1.0, snip["activation"])
        check(abs(raw - epoch["test_loss"]) > 1e-2, f"and read otherwise (raw bytes) it does not: {raw:.4f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--cmake", required=True)
    args = ap.parse_args()
    ddpd_harness.main(CASES, args)
