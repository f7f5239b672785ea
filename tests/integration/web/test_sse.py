"""Live updates (server-sent events) against a real ddpd and the real trainer:

  replay        ids strictly increase; a reconnect with Last-Event-ID (or
                ?last_event_id=) gets exactly the events it missed, from memory and,
                after a server restart, from the database; a run's stream has only
                its events; bad ids and unknown runs are refused
  coalesce      thousands of steps a second reach a stream at most ~10 times a
                second, while every status, rank and epoch event arrives
  many_streams  300 open streams: the API stays fast, training is not slowed, every
                stream gets the run's end, an idle server with them burns no CPU, and
                streams whose clients vanish are closed
  shutdown      SIGTERM with streams open: ddpd ends them and exits promptly

Usage: test_sse.py CASE --ddpd PATH --trainer PATH"""
import argparse, os, signal, socket, statistics, sys, time

import ddpd_harness as H  # noqa: E402

ENDS = ("succeeded", "failed", "canceled")


def succeeded(s, rid, timeout=240):
    """Waits for the run to end; it must have succeeded."""
    run = s.wait_status(rid, ENDS, timeout)
    H.check(run is not None and run["status"] == "succeeded",
            f"run {rid} succeeded: {run and run['status']} {run and run['reason']}")
    return run if run and run["status"] == "succeeded" else None
from ddpd_harness import check, cases_in, wait_until  # noqa: E402
from sse_client import Stream  # noqa: E402

HEARTBEAT_ENV = {"DDPD_SSE_HEARTBEAT_S": "1"}


def small_run(**over):
    """A few hundred steps of the real trainer: a second or two."""
    return H.fmnist_config(**{"train.epochs": 4, "train.batch_size": 32, "data.limit": 3000,
                              "train.lr_schedule": {"type": "step", "step_epochs": 2, "gamma": 0.3}, **over})


def durable(events):
    return [e for e in events if e.id is not None and e.event != "ready"]


def is_end(run_id):
    return lambda e: e.event == "run" and e.data and e.data.get("run") == run_id and \
        e.data.get("status") in ("succeeded", "failed", "canceled")


def case_replay(a):
    with H.Server(a.ddpd, a.trainer, env=HEARTBEAT_ENV) as s:
        live = Stream(s.port, "/events")
        check(live.status == 200 and live.headers.get("content-type", "").startswith("text/event-stream"),
              f"GET /events is an event stream ({live.status} {live.headers.get('content-type')})")
        ready = live.next()
        check(ready.event == "ready" and ready.id is not None, f"the stream opens with `ready` and an id: {ready}")
        start_id = ready.id
        rid = s.submit(small_run())
        # Read live until the first epoch, then drop the connection: a client that went away.
        seen, ok = live.events_until(lambda e: e.event == "epoch", timeout=120)
        check(ok, "an epoch event arrives live")
        seen = durable(seen)
        cut = seen[-1].id
        live.close()
        succeeded(s, rid)

        full_stream = Stream(s.port, "/events", last_id=start_id)
        full = durable(full_stream.until_quiet())
        full_stream.close()
        ids = [e.id for e in full]
        check(len(ids) > 10 and ids[0] == start_id + 1, f"a reconnect from the first id replays from the next one ({ids[:3]})")
        check(all(b == a_ + 1 for a_, b in zip(ids, ids[1:])), f"ids are consecutive and increasing: {ids}")
        check([e.key() for e in seen] == [e.key() for e in full if e.id <= cut],
              "what the live stream got before it dropped is the start of the full history, in order")
        statuses = [e.data["status"] for e in full if e.event == "run"]
        check(statuses == ["queued", "starting", "running", "succeeded"], f"every status change, in order: {statuses}")
        epochs = s.get(f"/runs/{rid}/epochs").json()["epochs"]
        got_epochs = [e.data["epoch"] for e in full if e.event == "epoch"]
        check(got_epochs == [e["epoch"] for e in epochs] == [0, 1, 2, 3], f"every epoch: {got_epochs}")
        check([e.data["lr"] for e in full if e.event == "epoch"] == [e["lr"] for e in epochs],
              "the epochs' learning rates are the stored ones")
        done = {e.data["rank"] for e in full if e.event == "rank" and e.data["state"] == "done"}
        check(done == {0, 1}, f"both ranks' states arrive, to done: {done}")
        ckpts = s.run(rid)["checkpoints"]
        written = [e.data for e in full if e.event == "checkpoint"]
        removed = {p for d in written for p in d.get("removed", [])}
        kept = [d["path"] for d in written if d["path"] not in removed]
        check(len(written) == 4, f"every checkpoint written: {len(written)}")
        check(sorted(c["path"] for c in ckpts) == sorted(kept),
              f"the run lists the ones its checkpoint.keep left: {[c['path'] for c in ckpts]} vs {kept}")

        # The reconnect: exactly what was missed, by header and by query.
        for how in ("header", "query"):
            st = Stream(s.port, "/events", last_id=cut) if how == "header" else Stream(s.port, "/events", query_last_id=cut)
            first = st.next()
            check(first.event == "ready" and first.id is None and first.data.get("resumed_from") == cut,
                  f"a resumed stream's ready ({how}) carries no id and says where it resumes: {first}")
            missed = durable(st.until_quiet())
            st.close()
            check([e.key() for e in missed] == [e.key() for e in full if e.id > cut],
                  f"the reconnect ({how}) from {cut} gets exactly the {len(full) - len(seen)} missed events "
                  f"(got {len(missed)}: {[e.id for e in missed][:5]}...)")

        per_run = Stream(s.port, f"/runs/{rid}/events", query_last_id=0)
        run_events = durable(per_run.until_quiet())
        per_run.close()
        check([e.key() for e in run_events] == [e.key() for e in full], "the run's own stream from 0: its whole history")

        r = s.get("/events", headers={"Last-Event-ID": "yesterday"})
        check(r.status == 400 and "Last-Event-ID" in r.json()["detail"], f"a bad Last-Event-ID is a 400: {r.status}")
        r = s.get("/runs/999/events")
        check(r.status == 404, f"an unknown run's stream is a 404: {r.status}")

        # After a restart the ring is empty: the same events come from the database.
        s.stop()
        s.start()
        st = Stream(s.port, "/events", last_id=cut)
        st.next()
        again = durable(st.until_quiet())
        st.close()
        check([e.key() for e in again] == [e.key() for e in full if e.id > cut],
              f"after a restart, the reconnect from {cut} gets the same events from the database ({len(again)})")
        fresh = Stream(s.port, "/events")
        r0 = fresh.next()
        check(r0.id == full[-1].id, f"a new server's first ready carries the last id given ({r0.id} vs {full[-1].id})")
        rid2 = s.submit(small_run(**{"train.epochs": 1}))
        nxt, _ = fresh.events_until(lambda e: e.id is not None, timeout=30)
        check(nxt and nxt[-1].id == full[-1].id + 1 and nxt[-1].data["run"] == rid2,
              f"ids go on from there across the restart: {nxt[-1:]}")
        fresh.close()
        succeeded(s, rid2)


PACED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paced_trainer.py")


def case_coalesce(a):
    # The real trainer batches its reports; paced_trainer.py sends 3000 steps a
    # second in lines of 5, as a fast GPU run would, for 4 s.
    with H.Server(a.ddpd, PACED, env=HEARTBEAT_ENV) as s:
        st = Stream(s.port, "/events")
        st.next()
        rid = s.submit(H.fmnist_config(name="paced-3000-4"))
        got, t_steps = [], []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            e = st.next(timeout=60)
            if e is None:
                break
            if e.comment:
                continue
            got.append(e)
            if e.event == "step" and e.data["run"] == rid:
                t_steps.append(time.monotonic())
            if is_end(rid)(e):
                break
        st.close()
        run = succeeded(s, rid)
        total = run["progress"]["total_steps"]
        steps = [e for e in got if e.event == "step"]
        check(all(e.id is None for e in steps), "step events carry no id (they are coalesced, not replayed)")
        gs = [e.data["global_step"] for e in steps]
        check(gs == sorted(gs) and len(set(gs)) == len(gs), "step events move forward")
        span = t_steps[-1] - t_steps[0] if len(t_steps) > 1 else 0
        worst = max(sum(1 for t in t_steps if t0 <= t < t0 + 1.0) for t0 in t_steps) if t_steps else 0
        # (arrival times jitter on a busy machine: a second may catch a few early or late ones)
        check(worst <= 15 and len(steps) <= 11 * span + 2,
              f"at most ~10 step events a second reach a stream (worst second: {worst}; "
              f"{len(steps)} for {total} steps over {span:.1f} s)")
        check(len(steps) >= 3 * span and span >= 2, f"and they keep coming while it runs ({len(steps)} over {span:.1f} s)")
        m = s.get(f"/runs/{rid}/metrics?key=loss").json()
        check(m["count"] == total == 12000, f"the store still has every step ({m['count']} of {total})")
        check([e.data["epoch"] for e in got if e.event == "epoch"] == [0, 1, 2, 3], "every epoch event arrives")
        states = [(e.data["rank"], e.data["state"]) for e in got if e.event == "rank"]
        check(states.count((0, "training")) >= 4 and (0, "done") in states and (1, "done") in states,
              f"every rank state change arrives: {states}")
        hb = [e for e in got if e.event == "heartbeat"]
        check(hb and all(e.data["rank"] in (0, 1) and e.data["step_ms"] > 0 for e in hb),
              "heartbeats name their rank and step time")


def open_raw_streams(port, n, path="/events"):
    socks = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port), timeout=30)
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n".encode())
        socks.append(c)
    return socks


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_seconds(run):
    from datetime import datetime
    p = lambda t: datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    return p(run["finished_at"]) - p(run["started_at"])


def case_many_streams(a):
    N = 300
    # all from one address (127.0.0.1): above the per-address caps, which guard against one client
    caps = ["--max-streams-per-address", str(N + 16), "--max-connections-per-address", str(N + 64)]
    with H.Server(a.ddpd, a.trainer, env=HEARTBEAT_ENV, extra_args=caps) as s:
        cfg = small_run(**{"model.hidden": [256, 128], "data.limit": 4000, "train.batch_size": 16, "train.epochs": 3})
        base_id = s.submit(cfg)
        base = succeeded(s, base_id)
        baseline_fds = fd_count(s.proc.pid)

        socks = open_raw_streams(s.port, N)
        wait_until(lambda: fd_count(s.proc.pid) >= baseline_fds + N - 5, f"ddpd holds {N} streams", timeout=60)
        rid = s.submit(cfg)
        wait_until(lambda: (s.run(rid) or {}).get("status") == "running", "the run to start", timeout=120)
        lat = []
        for _ in range(20):
            t0 = time.monotonic()
            r = s.get("/runs")
            lat.append(time.monotonic() - t0)
            check(r.status == 200, "GET /runs answers with the streams open")
            time.sleep(0.05)
        check(statistics.median(lat) < 0.3 and max(lat) < 3.0,
              f"with {N} streams open the API stays fast (median {statistics.median(lat) * 1000:.0f} ms, "
              f"max {max(lat) * 1000:.0f} ms)")
        run = succeeded(s, rid, timeout=240)
        if run and base:
            check(run_seconds(run) <= 2 * run_seconds(base) + 3,
                  f"training is not slowed by {N} streams ({run_seconds(run):.1f} s vs {run_seconds(base):.1f} s)")

        # Every stream got the end of the run.
        end = f'"run":{rid},"status":"succeeded"'.encode()
        got_end = 0
        deadline = time.monotonic() + 60
        bufs = [b""] * N
        for i, c in enumerate(socks):
            c.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                while end not in bufs[i]:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    bufs[i] += chunk
            except OSError:
                pass
            got_end += end in bufs[i]
        check(got_end == N, f"all {N} streams got the run's end ({got_end})")

        # Idle, with every stream parked: no thread spins.
        time.sleep(1.5)
        c0 = cpu_seconds(s.proc.pid)
        time.sleep(4)
        used = cpu_seconds(s.proc.pid) - c0
        check(used < 0.4, f"an idle ddpd with {N} open streams uses little CPU ({used:.2f} s in 4 s)")

        # The clients vanish: the heartbeats find out and the streams are closed.
        for c in socks:
            c.close()
        ok = wait_until(lambda: fd_count(s.proc.pid) <= baseline_fds + 5,
                        f"ddpd closes the {N} streams whose clients left", timeout=30)
        check(ok is not None, f"fds back to {fd_count(s.proc.pid)} (baseline {baseline_fds})")
        check(s.get("/healthz").status == 200, "the server is well afterwards")


def case_shutdown(a):
    s = H.Server(a.ddpd, a.trainer, env=HEARTBEAT_ENV)
    with s:
        streams = [Stream(s.port, "/events") for _ in range(20)] + [Stream(s.port, "/events", last_id=0)]
        for st in streams:
            st.next()
        t0 = time.monotonic()
        rc = s.stop()
        took = time.monotonic() - t0
        check(rc == 0 and took < 10, f"ddpd stops at once with streams open (exit {rc}, {took:.1f} s)")
        ended = 0
        for st in streams:
            try:
                while True:
                    e = st.next(timeout=5)
                    if e is None:
                        ended += 1
                        break
            except (socket.timeout, TimeoutError, OSError, Exception):
                ended += 1  # the connection was closed under it
        check(ended == len(streams), "every stream ended")


CASES = cases_in(globals())

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--ddpd", required=True)
    p.add_argument("--trainer", required=True)
    args = p.parse_args()
    args.ddpd, args.trainer = os.path.abspath(args.ddpd), os.path.abspath(args.trainer)
    H.main(CASES, args)
