#!/usr/bin/env python3
"""schema/openapi.json under a standard outside linter: npm's @redocly/cli (`redocly
lint`, its built-in recommended rules), installed by scripts/install-deps.sh from
package-lock.json. The document must come out with no error and no warning: every
$ref resolves offline (the run-config and sweep schemas by relative references, the
files beside it), every operation declares its security (the open GETs `security: []`), every
operation documents a 4xx.

It runs offline: without the network where this host lets a user make a namespace
without one (unshare -rn), and always with Redocly's telemetry and update check off,
so that it passes on a machine cut off from the internet once npm ci has run. A copy
of the document with one operation's security removed and the reference made
root-relative again must fail, so that a linter that checks nothing cannot pass.

Usage: test_openapi_lint.py --source REPO"""
import argparse, json, os, shutil, subprocess, sys, tempfile

import ddpd_harness  # noqa: E402
from ddpd_harness import check  # noqa: E402


def offline_prefix():
    """unshare -rn (a user and network namespace: no network at all) where it works."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        return [unshare, "-rn"]
    print("note: unshare -rn is not allowed here: the linter runs with the network, telemetry off", flush=True)
    return []


def lint(redocly, document, cwd):
    """(exit status, the JSON report or None, stderr) of `redocly lint` on `document`."""
    env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true", NO_COLOR="1")
    p = subprocess.run(offline_prefix() + [redocly, "lint", "--format=json", document], cwd=cwd, env=env,
                       capture_output=True, timeout=120)
    try:
        report = json.loads(p.stdout.decode())
    except ValueError:
        report = None
    return p.returncode, report, p.stderr.decode(errors="replace")


def problems(report):
    return [f"{p.get('ruleId')}: {p.get('message')} at {[l.get('pointer') for l in p.get('location', [])]}"
            for p in (report or {}).get("problems", [])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    redocly = os.path.join(a.source, "node_modules", ".bin", "redocly")
    if not check(os.access(redocly, os.X_OK), f"{redocly} is installed (scripts/install-deps.sh runs npm ci)"):
        return
    work = tempfile.mkdtemp(prefix="ddpd-openapi-lint-")  # no redocly.yaml here: the recommended rules
    try:
        for name in ("openapi.json", "run-config.schema.json", "sweep.schema.json"):
            shutil.copy(os.path.join(a.source, "schema", name), os.path.join(work, name))
        rc, report, err = lint(redocly, "openapi.json", work)
        check(report is not None, f"redocly printed its JSON report (exit {rc}): {err[-2000:]}")
        totals = (report or {}).get("totals", {})
        check(rc == 0 and totals.get("errors") == 0 and totals.get("warnings") == 0,
              f"schema/openapi.json is lint clean (exit {rc}, {totals}): {problems(report)}")

        # the same linter on a broken copy: it must see what this test guards
        with open(os.path.join(work, "openapi.json")) as f:
            doc = json.load(f)
        del doc["paths"]["/healthz"]["get"]["security"]
        doc["components"]["schemas"]["RunConfig"]["$ref"] = "/schema/run-config.schema.json"
        with open(os.path.join(work, "broken.json"), "w") as f:
            json.dump(doc, f, indent=2)
        rc, report, err = lint(redocly, "broken.json", work)
        rules = {p.get("ruleId") for p in (report or {}).get("problems", [])}
        check(rc != 0 and {"security-defined", "no-unresolved-refs"} <= rules,
              f"a copy without /healthz's security and with a root-relative $ref fails (exit {rc}): {sorted(rules)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        import traceback
        traceback.print_exc()
        check(False, "the test raised")
    ddpd_harness.checks.finish("openapi_lint")
