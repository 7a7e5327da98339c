"""The commands pip installs with the package: hvdrun, hvd-bench and
hvd-report are C programs installed inside it (hvd/_bin, by setup.py);
each console script replaces itself with its program."""
import os
import sys


def _run(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", name)
    if not os.access(path, os.X_OK):
        sys.exit("%s: not installed with this hvd package (%s is missing); "
                 "pip install builds it" % (name, path))
    os.execv(path, [path] + sys.argv[1:])


def hvdrun():
    _run("hvdrun")


def hvd_bench():
    _run("hvd-bench")


def hvd_report():
    _run("hvd-report")
