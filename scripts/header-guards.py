#!/usr/bin/env python3
"""Rewrites every header's include guard to name its path (the rule and the check:
tests/layout/test_header_guards.py): the #ifndef, the #define and an #endif comment
that names the old guard.
  scripts/header-guards.py --fix      rewrite them
  scripts/header-guards.py            list what would change"""
import os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "layout"))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from test_header_guards import GUARD, expected_guard, headers  # noqa: E402

fix = sys.argv[1:] == ["--fix"]
changed = 0
for rel in headers(ROOT):
    path = os.path.join(ROOT, rel)
    with open(path) as f:
        text = f.read()
    m = GUARD.search(text)
    want = expected_guard(rel)
    if not m or (m.group(1) == want and m.group(2) == want):
        continue
    old = m.group(1)
    text = text[:m.start()] + f"#ifndef {want}\n#define {want}" + text[m.end():]
    text = re.sub(rf"(#endif\s*/[*/]\s*){re.escape(old)}", rf"\g<1>{want}", text)
    changed += 1
    print(f"{rel}: {old} -> {want}")
    if fix:
        with open(path, "w") as f:
            f.write(text)
print(f"{changed} header(s) {'rewritten' if fix else 'to rewrite (--fix)'}")
