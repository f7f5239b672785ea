#!/usr/bin/env python3
"""Command runs refused before anything is stored, against a real ddpd: off by
default (403 naming the flag), and each wrong field named (400): an empty or
non-string argv, the built-in model beside a command, a variable ddpd sets, a
working_dir that climbs out of its work root or leads out through a symlink, an
absolute one outside every work root (one inside is taken), a working_dir on a
server with no work root.

Usage: test_command_refusals.py CASE --ddpd PATH"""
import argparse, os, shutil, sys, tempfile

import ddpd_harness  # noqa: E402
from ddpd_harness import Server, check, cases_in  # noqa: E402


def stored(s):
    return s.get("/runs").json()["runs"]


def case_off_by_default(a):
    with Server(a.ddpd, None) as s:
        r = s.post("/runs", {"command": ["python3", "train.py"]})
        detail = (r.json() or {}).get("detail", "") if r.status != 201 else ""
        check(r.status == 403 and "--allow-commands" in detail and "DDPD_ALLOW_COMMANDS" in detail,
              f"403 naming the flag: {r.status} {detail!r}")
        check(stored(s) == [], "nothing stored")
        r = s.post("/runs", {"name": "builtin", "train": {"epochs": 1}, "data": {"limit": 10}})
        check(r.status == 201, f"a built-in run still goes in: {r.status}")


def case_fields_named(a):
    root = tempfile.mkdtemp(prefix="ddpd-work-")
    outside = tempfile.mkdtemp(prefix="ddpd-outside-")
    try:
        os.mkdir(os.path.join(root, "proj"))
        os.symlink(outside, os.path.join(root, "out"))
        with Server(a.ddpd, None, extra_args=["--allow-commands", "--work-root", root]) as s:
            bad = [
                ({"command": []}, "/command", "at least 1 item"),
                ({"command": [""]}, "/command/0", "at least 1 character"),
                ({"command": ["python3", 5]}, "/command/1", "must be a string"),
                ({"command": "python3 train.py"}, "/command", "must be an array"),
                ({"command": ["python3"], "model": {"hidden": [8]}}, "", "/model belongs to the built-in models"),
                ({"command": ["python3"], "env": {"RANK": "3"}}, "/env", "cannot set RANK"),
                ({"command": ["python3"], "env": {"MASTER_PORT": "29500"}}, "/env", "cannot set MASTER_PORT"),
                ({"command": ["python3"], "working_dir": "../x"}, "/working_dir", "escapes the work roots"),
                ({"command": ["python3"], "working_dir": "out"}, "/working_dir", "leads out of the work roots"),
                ({"command": ["python3"], "working_dir": "nope"}, "/working_dir", "no directory \"nope\""),
                ({"command": ["python3"], "working_dir": "/etc"}, "/working_dir",
                 "\"/etc\" is not inside any of the work roots (<work-root>): give a directory inside one of them, "
                 "absolute or relative to the root (ddpctl run --workdir DIR)"),
                ({"command": ["python3"], "working_dir": os.path.join(root, "out")}, "/working_dir",
                 "is not inside any of the work roots"),
                ({"command": ["python3"], "working_dir": os.path.join(root, "nope")}, "/working_dir", "no directory"),
                ({"working_dir": "proj"}, "", "applies to command runs only"),
            ]
            for cfg, pointer, words in bad:
                r = s.post("/runs", cfg)
                errors = (r.json() or {}).get("errors", []) if r.status == 400 else []
                hit = [e for e in errors if e.get("pointer") == pointer and words in e.get("message", "")]
                check(r.status == 400 and hit, f"{cfg}: 400 naming {pointer!r} ({words!r}): {r.status} {errors}")
            check(stored(s) == [], f"nothing stored: {stored(s)}")
            r = s.post("/runs", {"command": ["python3", "-c", "pass"], "working_dir": "proj"})
            check(r.status == 201, f"a good one is taken: {r.status} {r.body[:300]!r}")
            cfg = r.json().get("config", {}) if r.status == 201 else {}
            check(cfg.get("working_dir") == "proj" and "model" not in cfg and "train" not in cfg,
                  f"stored as given, without the built-in sections: {cfg}")
            r = s.post("/runs", {"command": ["python3", "-c", "pass"],
                                 "working_dir": os.path.join(os.path.realpath(root), "proj")})
            check(r.status == 201, f"an absolute working_dir inside the work root is taken: {r.status} {r.body[:300]!r}")
        with Server(a.ddpd, None, extra_args=["--allow-commands"]) as s:
            r = s.post("/runs", {"command": ["python3"], "working_dir": "proj"})
            errors = (r.json() or {}).get("errors", []) if r.status == 400 else []
            check(r.status == 400 and any("--work-root" in e.get("message", "") for e in errors),
                  f"no work root: the flag named: {errors}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--ddpd", required=True)
    args = ap.parse_args()
    ddpd_harness.main(CASES, args)
