#!/usr/bin/env python3
"""Integration tests of charts from rollups and paged series (GET /runs/{id}/metrics),
against a real server. The runs are the fake trainer's `hold` script: it says hello
and falls silent, leaving its event socket and secret in hold.json, so that the test
writes the run's points itself through the event socket, as a reporter does (`metric`
events: loss into the steps table, grad_norm a series of its own), tens of thousands
of them, with a planted spike, dip and null. Then:

- paging without max_points walks every point exactly once, in order, as sent;
- a chart of max_points N equals, bucket by bucket of `bucket_steps`, the lowest and
  highest point of the full series (a null the highest; the first of equals), in step
  order, then its last point; for several N, with and without `after`, for both tables;
- a run whose script writes its steps in a shuffled order and writes some again (a
  hostile or careless script) gets the same charts as its points in order;
- bad parameters get a 400 that names them.

Usage: test_server_charts.py CASE --ddpd PATH --fake-trainer PATH [--trainer PATH]"""
import json, math, os, random, sys

from ddpd_harness import Server, check, cases_in, wait_until, args_for, main  # noqa: E402
from fake_trainer import Conn  # noqa: E402

HOLD = {"name": "hold", "distributed": {"world_size": 1}}
N = 40000
SPIKE, DIP, NULL = 12345, 23456, 777


def value(step, key):
    if key == "loss":
        if step == SPIKE:
            return 1e6
        if step == DIP:
            return -1e6
        if step == NULL:
            return None
        return round(2.0 / (1 + step / 1000.0) + 0.01 * ((step * 7919) % 13), 6)
    return round(1.0 + math.sin(step / 500.0) + 0.001 * (step % 7), 6)


def hold(s, rid):
    path = os.path.join(s.run_dir(rid), "hold.json")

    def read():
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    info = wait_until(read, f"run {rid}'s trainer to write hold.json", timeout=60)
    conn = Conn(info["events"], info["run"], 0)
    conn.hello(info["secret"], epochs=1, steps_per_epoch=N, total_steps=N)
    return conn


def send(conn, steps, bump=0.0):
    """Each step's loss and grad_norm as one reporter's metric event, 500 a line."""
    batch = []
    for g in steps:
        loss = value(g, "loss")
        batch.append(conn.ev("metric", global_step=g, values={
            "loss": None if loss is None else loss + bump, "grad_norm": value(g, "grad_norm") + bump}))
        if len(batch) == 500:
            conn.send(*batch)
            batch = []
    if batch:
        conn.send(*batch)


def series(s, rid, key, want_count):
    """Every point, page by page (limit 7000): each page's next_after is the next's after."""
    def landed():
        r = s.get(f"/runs/{rid}/metrics?key={key}&limit=1")
        return r.status == 200 and r.json()["count"] == want_count
    wait_until(landed, f"run {rid}'s {want_count} {key} points to be stored", timeout=120)
    points, after, pages = [], None, 0
    while True:
        r = s.get(f"/runs/{rid}/metrics?key={key}&limit=7000" + (f"&after={after}" if after is not None else ""))
        if not check(r.status == 200, f"a page: {r.status} {r.body[:200]!r}"):
            return points
        page = r.json()
        pages += 1
        check(page["bucket_steps"] == 1 and not page["downsampled"] and len(page["points"]) <= 7000,
              f"a page is points themselves, at most limit: {len(page['points'])}")
        points += page["points"]
        after = page["next_after"]
        if after is None:
            break
        check(after == page["points"][-1][0], f"next_after is the page's last step: {after}")
    check(pages == (want_count + 6999) // 7000, f"{want_count} points in {pages} pages of 7000")
    return points


def higher(a, b):
    """a ranks above b: a null above every number."""
    if a is None:
        return b is not None
    return b is not None and a > b


def expected_chart(points, bucket):
    """Each bucket's lowest and highest point (first of equals), in step order, then the last point."""
    out, cur, lo, hi = [], None, None, None

    def flush():
        if hi is None:
            return
        pair = [hi] if lo is None or lo[0] == hi[0] else sorted([lo, hi], key=lambda p: p[0])
        for p in pair:
            if not out or out[-1][0] != p[0]:
                out.append(p)
    for p in points:
        b = p[0] // bucket
        if b != cur:
            flush()
            cur, lo, hi = b, None, None
        if p[1] is not None and (lo is None or p[1] < lo[1]):
            lo = p
        if hi is None or higher(p[1], hi[1]):
            hi = p
    flush()
    if points and out[-1][0] != points[-1][0]:
        out.append(points[-1])
    return out


def check_charts(s, rid, key, full, what):
    for n in (5, 60, 333, 2000, 100000):
        for after in (None, 0, 777, 20000, 39990):
            tail = [p for p in full if after is None or p[0] > after]
            r = s.get(f"/runs/{rid}/metrics?key={key}&max_points={n}" + (f"&after={after}" if after is not None else ""))
            if not check(r.status == 200, f"{what}: chart {n} after {after}: {r.status} {r.body[:200]!r}"):
                continue
            c = r.json()
            b = c["bucket_steps"]
            want = tail if len(tail) <= n and b == 1 else expected_chart(tail, b)
            ok = check(c["points"] == want and c["count"] == len(tail) and len(c["points"]) <= n,
                       f"{what}: {key} chart of {n} after {after}: bucket {b}, {len(c['points'])} points"
                       f" (want {len(want)}), count {c['count']} (want {len(tail)}); first differences: "
                       f"{[(g, w) for g, w in zip(c['points'], want) if g != w][:3]}")
            if ok and len(tail) > n:
                check(c["downsampled"] and b > 1 and (tail[-1][0] - tail[0][0]) // b + 1 <= (n - 1) // 2 + 1,
                      f"{what}: {key} chart of {n}: buckets of {b} steps fit")


def case_chart_equals_full_series(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        rid = s.submit(HOLD)
        s.wait_status(rid, "running", timeout=60)
        conn = hold(s, rid)
        send(conn, range(1, N + 1))
        loss = series(s, rid, "loss", N)
        check([p[0] for p in loss] == list(range(1, N + 1)), "paging walks every step once, in order")
        check([p[1] for p in loss] == [value(g, "loss") for g in range(1, N + 1)], "the values as sent")
        grad = series(s, rid, "grad_norm", N)
        check([(p[0], p[1]) for p in grad] == [(g, value(g, "grad_norm")) for g in range(1, N + 1)],
              "the named series as sent, every point once")
        check_charts(s, rid, "loss", loss, "in order")
        check_charts(s, rid, "grad_norm", grad, "in order")
        c = s.get(f"/runs/{rid}/metrics?key=loss&max_points=60").json()
        check([SPIKE, 1e6] in [p[:2] for p in c["points"]] and [DIP, -1e6] in [p[:2] for p in c["points"]]
              and [NULL, None] in [p[:2] for p in c["points"]], "the spike, the dip and the null survive 60 points")
        conn.close()


def case_shuffled_and_rewritten(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        rid = s.submit(HOLD)
        s.wait_status(rid, "running", timeout=60)
        conn = hold(s, rid)
        order = list(range(1, 20001))
        random.Random(49).shuffle(order)
        send(conn, order[:15000])
        series(s, rid, "loss", 15000)
        send(conn, order[15000:])
        send(conn, range(9000, 9100), bump=5.0)  # written again, higher: 9000..9099 now peak their buckets

        def rewritten():  # one connection's events land in order: the last one's value says all did
            r = s.get(f"/runs/{rid}/metrics?key=grad_norm&after=9098&limit=1")
            return r.status == 200 and r.json()["points"][0][1] == value(9099, "grad_norm") + 5.0
        wait_until(rewritten, "the steps written again to be stored", timeout=60)
        loss = series(s, rid, "loss", 20000)
        want = [[g, None if value(g, "loss") is None else value(g, "loss") + (5.0 if 9000 <= g < 9100 else 0)]
                for g in range(1, 20001)]
        check([p[:2] for p in loss] == want, "the points are the newest written for each step")
        check_charts(s, rid, "loss", loss, "shuffled")
        check_charts(s, rid, "grad_norm", series(s, rid, "grad_norm", 20000), "shuffled")
        conn.close()


def case_bad_parameters(a):
    with Server(a.ddpd, a.fake_trainer) as s:
        rid = s.submit(HOLD)
        s.wait_status(rid, "running", timeout=60)
        conn = hold(s, rid)
        send(conn, range(1, 101))
        series(s, rid, "loss", 100)
        for q, word in (("limit=0", "limit"), ("limit=100001", "limit"), ("limit=x", "limit"),
                        ("max_points=2", "max_points"), ("max_points=60&limit=10", "max_points")):
            r = s.get(f"/runs/{rid}/metrics?key=loss&{q}")
            check(r.status == 400 and word in r.body.decode(), f"{q}: 400 naming {word}: {r.status} {r.body[:200]!r}")
        r = s.get(f"/runs/{rid}/metrics?key=loss&after=100")
        check(r.status == 200 and r.json()["points"] == [] and r.json()["next_after"] is None and r.json()["count"] == 0,
              f"after the last step: an empty last page: {r.body[:200]!r}")
        r = s.get(f"/runs/{rid}/metrics?key=nope")
        check(r.status == 400 and "grad_norm" in r.body.decode(), f"an unknown key names the run's: {r.body[:200]!r}")
        conn.close()


CASES = cases_in(globals())

if __name__ == "__main__":
    main(CASES, args_for(CASES))
