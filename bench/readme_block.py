#!/usr/bin/python3
"""Replaces a generated block of a Markdown file: the lines between
"<!-- BEGIN NAME -->" and "<!-- END NAME -->" become TEXT_FILE's text, up
to a line starting "plot: " (the scripts' note of where the PNG went).

Usage: readme_block.py FILE NAME TEXT_FILE
"""
import sys


def main():
    path, name, text_file = sys.argv[1:4]
    lines = []
    for line in open(text_file):
        if line.startswith("plot: ") or line.startswith("no plot: "):
            break
        lines.append(line)
    block = "".join(lines).rstrip() + "\n"
    doc = open(path).read()
    begin, end = "<!-- BEGIN %s -->\n" % name, "<!-- END %s -->" % name
    i, j = doc.index(begin) + len(begin), doc.index(end)
    open(path, "w").write(doc[:i] + block + doc[j:])
    print("%s: the %s block updated" % (path, name))


if __name__ == "__main__":
    main()
