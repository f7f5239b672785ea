#!/usr/bin/env python3
"""A stand-in for ddp-trainer that reports steps at a steady, high rate in many small
writes: what a fast model on a fast GPU looks like to the server. The real trainer
batches its reports, so on a small CPU run its steps reach the server in a few
bursts; this one sends `rate` steps a second, `per_write` per line, for `seconds`
seconds, with 2 ranks' statuses and heartbeats, an epoch event each second, and the
launcher's `end`. It follows the trainer contract (--config/--run-dir/--events,
DDPD_RUN_ID and DDPD_RUN_SECRET, one connection per process, a hello first).

The config's name says the pace: "paced-RATE-SECONDS" (default 3000 steps/s, 4 s)."""
import json, os, socket, sys, time


def main():
    argv = sys.argv[1:]
    opts = {argv[i]: argv[i + 1] for i in range(0, len(argv) - 1, 2)}
    cfg = json.load(open(opts["--config"]))
    events = opts["--events"]
    run, secret = os.environ["DDPD_RUN_ID"], os.environ["DDPD_RUN_SECRET"]
    parts = cfg.get("name", "").split("-")
    rate = int(parts[1]) if len(parts) > 1 else 3000
    seconds = int(parts[2]) if len(parts) > 2 else 4
    per_write = 5
    world = 2
    total = rate * seconds
    seq = {}

    def conn(rank):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(events)
        seq[rank] = 0
        return s

    def send(s, rank, *evs):
        out = []
        for type_, fields in evs:
            e = {"run": run, "rank": rank, "seq": seq[rank], "t": int(time.time() * 1000), "type": type_}
            seq[rank] += 1
            e.update(fields)
            out.append(e)
        s.sendall((json.dumps(out[0] if len(out) == 1 else out) + "\n").encode())

    launcher = conn(-1)
    send(launcher, -1, ("hello", {"pid": os.getpid(), "host": "paced", "device": None, "world_size": world, "secret": secret}))
    ranks = [conn(r) for r in range(world)]
    for r, c in enumerate(ranks):
        extra = {"epochs": seconds, "steps_per_epoch": rate, "total_steps": total} if r == 0 else {}
        send(c, r, ("hello", {"pid": os.getpid(), "host": "paced", "device": "cpu", "world_size": world,
                              "secret": secret, **extra}),
             ("status", {"state": "training", "detail": "epoch 0"}))
    start = time.monotonic()
    g, last_hb = 0, 0.0
    while g < total:
        due = int((time.monotonic() - start) * rate)
        if g >= due:
            time.sleep(per_write / rate)
            continue
        batch = []
        for _ in range(per_write):
            if g == total:
                break
            epoch, step = divmod(g, rate)
            g += 1
            batch.append(("step", {"epoch": epoch, "step": step, "global_step": g, "loss": 2.0 / (1 + g / 500.0),
                                   "lr": 0.001 * 0.3 ** epoch, "samples_per_s": rate * 128.0}))
        send(ranks[0], 0, *batch)
        if g % rate == 0:
            epoch = g // rate - 1
            send(ranks[0], 0, ("epoch", {"epoch": epoch, "lr": 0.001 * 0.3 ** epoch, "train_loss": 1.0 / (epoch + 1),
                                         "test_loss": 1.1 / (epoch + 1), "test_acc": 0.6 + epoch / 20, "seconds": 1.0,
                                         "samples_per_s": rate * 128.0}))
            for r, c in enumerate(ranks):
                send(c, r, ("status", {"state": "training", "detail": f"epoch {epoch + 1}"}))
        if time.monotonic() - last_hb > 0.2:
            last_hb = time.monotonic()
            for r, c in enumerate(ranks):
                send(c, r, ("heartbeat", {"global_step": g, "step_ms": 1000.0 / rate}))
    for r, c in enumerate(ranks):
        send(c, r, ("status", {"state": "done", "detail": ""}))
        c.close()
    send(launcher, -1, ("end", {"status": "succeeded", "reason": ""}))
    launcher.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
