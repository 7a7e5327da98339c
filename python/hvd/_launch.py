"""The commands pip installs with the package: hvdrun, hvd-bench and
hvd-report are C programs installed inside it (hvd/_bin, by setup.py);
each console script replaces itself with its program.  program_path()
finds them for the package's own use (hvd.run starts hvdrun)."""
import os
import shutil
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def program_path(name):
    """Where `name` is: inside the package (pip), beside the package in a
    CMake build tree (build/python/hvd -> build/NAME), or on PATH (the
    Debian package).  None when none of them has it."""
    for path in (os.path.join(_HERE, "_bin", name),
                 os.path.join(os.path.dirname(os.path.dirname(_HERE)), name)):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def _run(name):
    path = os.path.join(_HERE, "_bin", name)
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
