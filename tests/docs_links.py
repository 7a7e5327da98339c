#!/usr/bin/env python3
"""Every relative link and image in README.md and docs/*.md resolves: the
file (or folder) exists in the repository, and a #anchor names a heading of
the file it points into, spelled as GitHub makes heading anchors.  Links in
code (fenced blocks, `spans`) are not links; http(s) and mailto links are
not fetched.

Usage: tests/docs_links.py [REPO_ROOT]     (ctest: docs.links; well under a second)
"""
import os
import re
import sys

# Pages written on other branches that the docs index already lists: a
# link to one that is not here yet is reported, not failed.  Remove each
# entry once its page has been merged.
PENDING = {
}

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)((?:(?!\n\s*\n).)+?)\1", re.S)
# [text](target) and ![alt](target); the text may hold one level of [..].
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)   # a link: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        text = open(path, encoding="utf-8").read()
        for _, line in prose_lines(text):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
            found.update(HTML_ANCHOR.findall(line))
        cache[path] = found
    return cache[path]


def prose(text):
    """The text with fenced code blocks and code spans blanked out (newlines
    kept, so offsets still give line numbers): a link may span lines."""
    lines = text.split("\n")
    fenced = False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            lines[i] = ""
        elif fenced:
            lines[i] = ""
    text = "\n".join(lines)
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def check_file(root, rel, problems, pending_seen):
    path = os.path.join(root, rel)
    text = prose(open(path, encoding="utf-8").read())
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):     # http:, https:, mailto:
            continue
        where = "%s:%d: %s" % (rel, text.count("\n", 0, m.start()) + 1, target)
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        dest_rel = os.path.relpath(dest, root)
        if dest_rel.startswith(".."):
            problems.append("%s: points outside the repository" % where)
            continue
        if not os.path.exists(dest):
            if dest_rel in PENDING:
                pending_seen.add(dest_rel)
            else:
                problems.append("%s: no such file %s" % (where, dest_rel))
            continue
        if anchor:
            if not dest.endswith(".md") or os.path.isdir(dest):
                problems.append("%s: an anchor into %s, which is not Markdown" % (where, dest_rel))
            elif anchor not in anchors(dest):
                problems.append("%s: %s has no heading with anchor #%s" % (where, dest_rel, anchor))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs"))
                                   if f.endswith(".md"))
    problems, pending_seen = [], set()
    for rel in files:
        check_file(root, rel, problems, pending_seen)
    for rel in sorted(pending_seen):
        print("docs_links: note: %s is linked but not merged yet (PENDING)" % rel)
    for p in problems:
        print("docs_links: " + p)
    if problems:
        print("docs_links: FAILED: %d broken link(s) in %d files" % (len(problems), len(files)))
        return 1
    print("docs_links: ok: every link in %d files resolves" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
