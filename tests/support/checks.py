"""The one pass/fail count every Python test shares, and how a test file's cases are
found.

A test file defines its cases as functions named case_<name>; cases_in() collects
them, and answers `--list-cases` (how tests/CMakeLists.txt registers each case as its
own ctest test, so a case is written once). check() counts; finish() prints the count
and exits non-zero on any failure and on a case that checked nothing.

Standard library only."""
import sys

PASSED = FAILED = 0


def check(cond, what):
    """Counts one check; prints `what` when it fails. Returns cond."""
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print(f"FAILED: {what}", file=sys.stderr, flush=True)
    return cond


def cases_in(namespace):
    """{name: function} of the case_<name> functions in a module's globals(). In the
    script being run, with --list-cases as the only argument: prints the names, one
    a line, and exits."""
    cases = {name[len("case_"):]: fn for name, fn in namespace.items()
             if name.startswith("case_") and callable(fn)}
    if sys.argv[1:] == ["--list-cases"] and namespace.get("__name__") == "__main__":
        print("\n".join(sorted(cases)))
        sys.exit(0)
    return cases


def finish(label):
    """Prints `label: N passed, M failed` and exits: 1 on a failure or when nothing
    was checked (a test that made no check proves nothing), else 0."""
    print(f"{label}: {PASSED} passed, {FAILED} failed", flush=True)
    if not PASSED and not FAILED:
        print(f"FAILED: {label} made no check", file=sys.stderr, flush=True)
    sys.exit(1 if FAILED or not PASSED else 0)
