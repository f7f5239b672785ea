#!/usr/bin/env python3
"""The table at the end of bench/trainer.sh and bench/cnn.sh: for each measurement its
samples/s over the repetitions (min / median / max) and the load average seen around
them; then the ratios asked for, each as the ratio of the medians and the spread of
the per-repetition ratios, against its target where it has one; then where ddpd's
steps spent their time (each rank's median per phase).

usage: summarize.py RESULTS.jsonl [--ratio 'LABEL=NUM/DEN[>=TARGET]'] ..."""
import argparse, json, statistics, sys


def fmt(v, spec="9.0f"):
    return "n/a".rjust(9) if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--ratio", action="append", default=[])
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.results) if line.strip()]
    order, by = [], {}
    for r in rows:
        if r["what"] not in by:
            order.append(r["what"])
        by.setdefault(r["what"], []).append(r)

    def values(what):
        return [r["samples_per_s"] for r in by.get(what, []) if r.get("samples_per_s") is not None]

    def median(what):
        v = values(what)
        return statistics.median(v) if v else None

    print(f"{'samples/s':<26}{'reps':>5}{'min':>10}{'median':>10}{'max':>10}   load (1 min) around them")
    for what in order:
        v = values(what)
        loads = [float(x.split()[0]) for r in by[what] for x in (r["load_before"], r["load_after"])]
        spread = f"{min(loads):.2f}-{max(loads):.2f}"
        if not v:
            why = by[what][0].get("missing", "no figure")
            print(f"{what:<26}{len(by[what]):>5}   n/a ({why})")
            continue
        print(f"{what:<26}{len(v):>5}{fmt(min(v), '10.0f')}{fmt(statistics.median(v), '10.0f')}"
              f"{fmt(max(v), '10.0f')}   {spread}")

    print()
    missed = 0
    for spec in a.ratio:
        label, _, rest = spec.partition("=")
        expr, _, target = rest.partition(">=")
        num, _, den = expr.partition("/")
        n, d = median(num), median(den)
        if n is None or d is None or d == 0:
            print(f"{label:<52} n/a")
            continue
        per_rep = {}
        for r in by[num]:
            for s in by[den]:
                if r["rep"] == s["rep"] and r.get("samples_per_s") and s.get("samples_per_s"):
                    per_rep[r["rep"]] = r["samples_per_s"] / s["samples_per_s"]
        spread = f" (per repetition {min(per_rep.values()):.2f}-{max(per_rep.values()):.2f})" if per_rep else ""
        verdict = ""
        if target:
            ok = n / d >= float(target)
            missed += not ok
            verdict = f"   target >= {float(target):.2f}: {'met' if ok else 'MISSED'}"
        print(f"{label:<52}{n / d:6.2f}x{spread}{verdict}")

    profiled = [w for w in order if any(r.get("profile") for r in by[w])]
    if profiled:
        print("\nddpd's steps, ms per step by phase (median over repetitions; the rank's own clock):")
        for what in profiled:
            ranks = sorted({k for r in by[what] for k in (r.get("profile") or {})}, key=int)
            for rank in ranks:
                phases = {}
                for r in by[what]:
                    for k, v in ((r.get("profile") or {}).get(rank, {}).get("phases", {})).items():
                        phases.setdefault(k, []).append(v)
                med = {k: statistics.median(v) for k, v in phases.items()}
                parts = ", ".join(f"{k} {v:.3f}" for k, v in med.items() if k not in ("step", "syncs"))
                print(f"  {what} rank {rank}: {med.get('step', 0):.3f} ms/step, {med.get('syncs', 0):.1f} "
                      f"synchronisations/step: {parts}")
    return missed


if __name__ == "__main__":
    main()
    sys.exit(0)
