#!/usr/bin/env python3
"""The docs hold together: every relative link in README.md, CONTRIBUTING.md and
docs/*.md names a file or folder of the repository, and every `#anchor` (in the same
file or in another .md) a heading there, as GitHub makes a heading's anchor (lower
case, punctuation dropped, spaces to hyphens, -1, -2 for repeats); and the README
stays a newcomer's few screens (under README_MAX_LINES lines).

Links are Markdown's inline `[text](target)` and reference `[label]: target`, outside
fenced code blocks and inline code; http(s), mailto and other schemes are not
followed. The detector is shown planted faults it must name (a missing file, a missing
heading in another file and in the same one, a link out of the repository), and the
links in code it must not.

Usage: test_doc_links.py CASE --source REPO"""
import argparse, os, re, sys

import checks  # noqa: E402
from checks import check, cases_in  # noqa: E402

README_MAX_LINES = 300
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def doc_files(root):
    """The docs this test holds, relative to the root."""
    rels = ["README.md", "CONTRIBUTING.md"]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        rels += sorted(os.path.join("docs", n) for n in os.listdir(docs) if n.endswith(".md"))
    return [r for r in rels if os.path.isfile(os.path.join(root, r))]


def prose_lines(text, blank_code=True):
    """(line number, line) outside fenced code blocks, inline code blanked out (kept
    with blank_code False: a heading's code is part of its anchor)."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line) if blank_code else line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown file's headings make (repeats get -1, -2, ...)."""
    seen, out = {}, set()
    for _, line in prose_lines(text, blank_code=False):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(text):
    """(line number, target) of every link in a Markdown text."""
    for n, line in prose_lines(text):
        m = REF_LINK.match(line)
        if m:
            yield n, m.group(1)
            continue
        for m in INLINE_LINK.finditer(line):
            yield n, m.group(1)


def broken_links(root, texts=None):
    """'FILE:LINE: TARGET: why' for each link of the docs that leads nowhere. `texts`
    ({relative path: text}) stands in for files' contents (the planted cases)."""
    texts = dict(texts or {})
    root = os.path.realpath(root)

    def read(rel):
        if rel not in texts:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                texts[rel] = f.read()
        return texts[rel]

    bad = []
    for rel in sorted(set(doc_files(root)) | set(texts)):
        for n, target in links(read(rel)):
            if SCHEME.match(target):
                continue
            path, _, anchor = target.partition("#")
            where = f"{rel}:{n}: {target}"
            if path:
                dest = os.path.normpath(os.path.join(os.path.dirname(rel), path))
                full = os.path.realpath(os.path.join(root, dest))
                if dest.startswith("..") or not full.startswith(root + os.sep):
                    bad.append(f"{where}: leads out of the repository")
                    continue
                if dest not in texts and not os.path.exists(full):
                    bad.append(f"{where}: no such file ({dest})")
                    continue
            else:
                dest = rel
            if anchor:
                if not dest.endswith(".md"):
                    bad.append(f"{where}: an anchor into {dest}, which is not Markdown")
                elif anchor not in anchors(read(dest)):
                    bad.append(f"{where}: {dest} has no heading whose anchor is #{anchor}")
    return bad


def case_links_resolve(a):
    files = doc_files(a.source)
    check({"README.md", "CONTRIBUTING.md", os.path.join("docs", "security.md")} <= set(files),
          f"the docs are there: {files}")
    total = sum(1 for rel in files for _ in links(open(os.path.join(a.source, rel), encoding="utf-8").read()))
    check(total > 50, f"the docs link to each other ({total} links)")
    bad = broken_links(a.source)
    check(not bad, "every link in the docs leads to a file and heading that exist:\n  " + "\n  ".join(bad))


def case_readme_is_short(a):
    with open(os.path.join(a.source, "README.md"), encoding="utf-8") as f:
        n = len(f.read().splitlines())
    check(n < README_MAX_LINES, f"README.md is a newcomer's few screens: under {README_MAX_LINES} lines, "
                                f"the rest in docs/ (it has {n})")


def case_finds_planted_broken_links(a):
    # The real docs with faults planted in docs/using.md and README.md: each is named,
    # with its file and line, and nothing else is.
    using = os.path.join("docs", "using.md")
    with open(os.path.join(a.source, using), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(a.source, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    n0 = len(text.splitlines())
    planted = text + "\n".join([
        "",
        "A [missing file](no-such-file.md) and [a missing heading](security.md#no-such-heading),",
        "[one here](#nowhere-in-this-file), [out of the tree](../../etc/passwd),",
        "and [a good one](security.md#each-run-bounded) [and another](#a-checkpoint-in-pytorch).",
        "In code, `[not a link](nowhere.md)`, and:",
        "```",
        "[not a link either](nowhere-either.md)",
        "```",
        "[ref]: missing-by-reference.md",
        ""])
    readme_planted = readme.replace("(docs/security.md#who-can-do-what)", "(docs/security.md#who-can-do-that)", 1)
    check(readme_planted != readme, "README.md links to docs/security.md#who-can-do-what, where the fault is planted")
    bad = broken_links(a.source, {using: planted, "README.md": readme_planted})
    want = [f"{using}:{n0 + 2}: no-such-file.md: no such file",
            f"{using}:{n0 + 2}: security.md#no-such-heading: docs/security.md has no heading",
            f"{using}:{n0 + 3}: #nowhere-in-this-file: {using} has no heading",
            f"{using}:{n0 + 3}: ../../etc/passwd: leads out of the repository",
            f"{using}:{n0 + 9}: missing-by-reference.md: no such file",
            "README.md:", "docs/security.md#who-can-do-that: docs/security.md has no heading"]
    for w in want[:5]:
        check(sum(1 for b in bad if b.startswith(w)) == 1, f"the planted {w!r} is named once: {bad}")
    check(sum(1 for b in bad if b.startswith(want[5]) and want[6] in b) == 1, f"and the README's: {bad}")
    check(len(bad) == 6, f"and nothing else (the good links and those in code are not named): {bad}")


def case_slug_is_githubs(a):
    # Anchors as GitHub makes them, on this repository's own kinds of heading.
    check(slug("Across several machines (`ddpd agent`)") == "across-several-machines-ddpd-agent", "code and brackets")
    check(slug("The server's rights") == "the-servers-rights", "an apostrophe")
    check(slug("Setting up a box: `ddpd check`") == "setting-up-a-box-ddpd-check", "a colon")
    check(slug("Cheap reads: GET /runs/{id} from a cache") == "cheap-reads-get-runsid-from-a-cache", "slashes, braces")
    check(anchors("# A\n## A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1", "a-2"}, "repeats, and code skipped")
    check(anchors("## Setting up a box: `ddpd check`\n") == {"setting-up-a-box-ddpd-check"}, "a heading's code counts")


CASES = cases_in(globals())

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    CASES[args.case](args)
    checks.finish(f"doc_links {args.case}")
