#!/usr/bin/env python3
"""The Python harness (tests/support/checks.py) itself: a case that made no check fails, as
does one with a failed check; one whose checks passed succeeds; --list-cases lists
the case_* functions of the script being run, and only of it.

Usage: test_checks.py CASE"""
import os, subprocess, sys, tempfile, textwrap

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402


def script_status(body, *argv):
    """Runs a small test script that uses checks.py; returns (status, stdout)."""
    with tempfile.TemporaryDirectory(prefix="ddpd-checks-") as d:
        path = os.path.join(d, "t.py")
        with open(path, "w") as f:
            f.write("import checks\nfrom checks import check\n")  # found on PYTHONPATH, as every test finds it
            f.write(textwrap.dedent(body))
        r = subprocess.run([sys.executable, path, *argv], capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout


def case_verdicts(_):
    rc, out = script_status("checks.finish('none')\n")
    check(rc == 1 and "none: 0 passed, 0 failed" in out, f"no check: fails ({rc}, {out!r})")
    rc, _ = script_status("check(True, 'x')\ncheck(True, 'y')\nchecks.finish('ok')\n")
    check(rc == 0, f"checks that passed: succeeds ({rc})")
    rc, _ = script_status("check(True, 'x')\ncheck(False, 'y')\nchecks.finish('bad')\n")
    check(rc == 1, f"a failed check: fails ({rc})")


def case_listing(_):
    body = textwrap.dedent("""
        def case_b(a): pass
        def case_a(a): pass
        def helper(): pass
        CASES = checks.cases_in(globals())
        print("not listed")
    """)
    rc, out = script_status(body, "--list-cases")
    check(rc == 0 and out.split() == ["a", "b"], f"the cases, sorted: {out!r}")
    rc, out = script_status(body + "print(sorted(CASES))\n", "a")
    check(rc == 0 and "['a', 'b']" in out, f"run with a case, the table is returned: {out!r}")


CASES = cases_in(globals())

if __name__ == "__main__":
    CASES[sys.argv[1]](None)
    checks.finish(f"checks {sys.argv[1]}")
