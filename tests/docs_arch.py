#!/usr/bin/env python3
"""docs/architecture.md and the tree agree: every file and folder its code
blocks (the layers and the layout) name exists, and every folder of src/
is named there.

An entry of the layout starts at the first column with its paths
("src/coll/", "src/reduce.c, half.c"); a bare name in its description
("ring.c", "cuda/") is that entry's: it must be in the entry's folder or
below it, or in a folder the entry named before it ("_mxnet/ (op.c").  A name with a slash that is not an entry's resolves from the
repository's top, a page name ("gpu.md") from docs/, a public header
("hvd.h") from include/.  Generated files
are named by the template they come from (GENERATED).

Usage: tests/docs_arch.py [REPO_ROOT]     (ctest: docs.architecture; well under a second)
"""
import os
import re
import sys

DOC = os.path.join("docs", "architecture.md")

# Files the build writes, which the doc may name: name -> its template.
GENERATED = {
    "hvd_build_config.h": "src/build_config.h.in",
}
# Other projects' files the doc names: not hvd's to have.
EXTERNAL = {
    "c_api.h",  # MXNet's C API (python/_mxnet is written over it)
}

FENCE = re.compile(r"^\s*(```|~~~)")
# A path-like word: a file with an extension the tree uses, or a folder.
NAME = re.compile(r"(?<![\w./-])((?:[\w+-]+/)*[\w+-]+(?:\.(?:c|h|cc|py|sh|md|txt|toml|in|json|"
                  r"exports|supp))+|(?:[\w+-]+/)+)(?![\w/-])")
# An entry starts at the first column: its head ("src/coll/",
# "collectives (src/coll/)", "src/reduce.c, half.c"), then its description
# after two spaces or more.
ENTRY = re.compile(r"^(\S.*?)(?:\s{2,}|$)")


def code_blocks(text):
    """Lists of (line number, line) of each fenced block."""
    blocks, block = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            if block is None:
                block = []
            else:
                blocks.append(block)
                block = None
        elif block is not None:
            block.append((number, line))
    return blocks


def entry_heads(line):
    """The paths in the head of an entry line ("src/reduce.c, half.c" ->
    both, half.c being src/'s), or None for a continuation line."""
    m = ENTRY.match(line)
    if not m:
        return None
    heads, folder = [], ""
    for name in NAME.findall(m.group(1)):
        if "/" in name.rstrip("/"):
            folder = os.path.dirname(name.rstrip("/"))
        heads.append(name if "/" in name else os.path.join(folder, name))
    return heads


def files_below(root, folder, cache={}):
    if folder not in cache:
        found = set()
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = os.path.relpath(dirpath, root)
            found.update(os.path.join(rel, n) for n in filenames + dirnames)
        cache[folder] = found
    return cache[folder]


def resolve(root, name, folders):
    """The repository path name stands for, or None."""
    name = GENERATED.get(name, name)
    bare = name.rstrip("/")
    candidates = [os.path.join(folder, bare) for folder in folders]
    candidates += [bare, os.path.join("docs", bare),  # from the top; a page
                   os.path.join("include", bare)]     # a public header, as #include <hvd.h>
    for c in candidates:
        if os.path.exists(os.path.join(root, c)) and (not name.endswith("/") or
                                                      os.path.isdir(os.path.join(root, c))):
            return os.path.normpath(c)
    for folder in folders:  # below the entry's folder: a unique match
        hits = [p for p in files_below(root, folder) if p.endswith("/" + bare)]
        if len(hits) == 1:
            return os.path.normpath(hits[0])
    return None


def check(root):
    text = open(os.path.join(root, DOC), encoding="utf-8").read()
    problems, named = [], set()
    for block in code_blocks(text):
        folders = []
        for number, line in block:
            heads = entry_heads(line)
            if heads is not None:
                folders = [h.rstrip("/") if h.endswith("/") else os.path.dirname(h) for h in heads]
                folders = [f for f in folders if f]
            for name in NAME.findall(line):
                if name in EXTERNAL:
                    continue
                own = heads is not None and any(h == name or h.endswith("/" + name) for h in heads)
                where = resolve(root, [h for h in heads if h.endswith("/" + name)][0]
                                if own and "/" not in name else name, [] if own else folders)
                if where is None:
                    problems.append("%s:%d: names %s, which is not there (looked in %s)" %
                                    (DOC, number, name, ", ".join(folders[:3] + ["the top"])))
                    continue
                named.add(where)
                if name.endswith("/") and not own and where not in folders:
                    folders = [where] + folders  # its files may follow by their names
    for dirpath, dirnames, _ in os.walk(os.path.join(root, "src")):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for d in dirnames:
            rel = os.path.relpath(os.path.join(dirpath, d), root)
            if rel not in named:
                problems.append("%s: names no %s/" % (DOC, rel))
    return problems, len(named)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    problems, n = check(root)
    for p in problems:
        print("docs_arch: " + p)
    if problems:
        print("docs_arch: FAILED: %d problem(s)" % len(problems))
        return 1
    print("docs_arch: ok: the %d paths %s names exist, and so does every folder of src/ in it"
          % (n, DOC))
    return 0


if __name__ == "__main__":
    sys.exit(main())
