"""Elastic jobs across hosts: hvdrun in h0 is the elastic driver, workers
(tests/mpi/elastic_worker.c) run on the emulated hosts over ssh, the hosts
come from a discovery script that reads a file the test edits.

Covered: a worker killed on another host (the survivors re-form, a new
worker takes its slot); a host taken out of the listing and put back (its
worker leaves at a commit, a new one joins at a later commit); a host
whose link is cut (its worker is lost after the transports' deadline, the
others go on).  Each time the job finishes, every job's ranks agree bit
for bit, no committed step is lost, and nothing is left running on any
host (tests/launcher/elastic_check.py).  The same faults on one machine,
and many more: tests/launcher/test_elastic.py.
"""
import os
import re
import signal
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher"))
from elastic_check import Run, check  # noqa: E402

LIMIT = 120


@pytest.fixture(scope="module")
def build_dir():
    path = os.path.abspath(os.environ.get(
        "HVD_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build")))
    if not os.access(os.path.join(path, "tests", "elastic_worker"), os.X_OK):
        pytest.fail("no tests/elastic_worker in %s: build it, or set HVD_BUILD_DIR" % path)
    return path


@pytest.fixture
def listing(tmp_path):
    """The discovery script's file (the hosts share /tmp) and the script."""
    hosts = tmp_path / "hosts"
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\ncat %s\n" % hosts)
    script.chmod(0o755)

    def put(*names):
        tmp = hosts.with_suffix(".new")
        tmp.write_text("".join("%s:1\n" % n for n in names))
        os.replace(tmp, hosts)

    put.script = str(script)
    return put


def start(cluster, build_dir, args, env):
    cluster.check()
    e = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="5", HOROVOD_START_TIMEOUT="20",
             ELASTIC_STEP_MS="40", **env)
    argv = [os.path.join(build_dir, "hvdrun"), "--ssh-command",
            "ssh -F %s" % cluster.ssh_config, *args,
            os.path.join(build_dir, "tests", "elastic_worker")]
    import subprocess
    return cluster.popen("h0", argv, env=e, cwd=build_dir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def finish(cluster, proc, link_was_cut=False):
    out, err = proc.communicate(timeout=LIMIT)
    left = cluster.wait_no_pids(timeout=10)
    if link_was_cut:
        # The sshd of a session whose link was cut lingers until TCP gives
        # up on it: no fault of hvd's.  Its agent and workers must be gone.
        left = [p for p in left if not cmdline(p).startswith("sshd:")]
    assert not left, "left running on the hosts: %s\n%s" % (
        [(p, cmdline(p)) for p in left], err[-3000:])
    return Run(out, err, proc.returncode)


def worker_pid(cluster, host):
    """The elastic worker's pid on a host (one PID namespace: visible here)."""
    end = time.monotonic() + 20
    while time.monotonic() < end:
        pid = cluster.pid_of(host, b"elastic_worker")
        if pid:
            return pid
        time.sleep(0.1)
    pytest.fail("no elastic worker on %s" % host)


def test_worker_killed_on_another_host(cluster, build_dir, listing):
    listing("h0", "h1", "h2", "h3")
    proc = start(cluster, build_dir, ["-np", "4", "--min-np", "2", "--host-discovery-script",
                                      listing.script], {"ELASTIC_STEPS": "150"})
    time.sleep(3)
    os.kill(worker_pid(cluster, "h2"), signal.SIGKILL)
    run = finish(cluster, proc)
    sizes = check(run, 150)
    assert sizes[0] == 4 and len(sizes) >= 2, str(run)
    assert re.search(r"worker \d+ on h2 \(pid \d+\) was killed by signal 9", run.stderr), str(run)


def test_host_removed_and_added_back(cluster, build_dir, listing):
    listing("h0", "h1", "h2", "h3")
    proc = start(cluster, build_dir, ["-np", "4", "--min-np", "2", "--host-discovery-script",
                                      listing.script], {"ELASTIC_STEPS": "250"})

    def edit():
        time.sleep(3)
        listing("h0", "h1", "h2")
        time.sleep(3)
        listing("h0", "h1", "h2", "h3")

    t = threading.Thread(target=edit)
    t.start()
    try:
        run = finish(cluster, proc)
    finally:
        t.join()
    sizes = check(run, 250)
    assert sizes[0] == 4 and 3 in sizes and sizes[-1] == 4, str(run)
    assert "@h3" in run.stderr.splitlines()[-1] or re.search(
        r"job \d+ formed with 4 workers .*@h3\)\s*$", run.stderr, re.M), str(run)


def test_host_whose_link_is_cut(cluster, build_dir, listing):
    listing("h0", "h1", "h2")
    proc = start(cluster, build_dir, ["-np", "3", "--min-np", "2", "--host-discovery-script",
                                      listing.script], {"ELASTIC_STEPS": "200"})
    try:
        time.sleep(3)
        cluster.link("h2", "down")
        listing("h0", "h1")  # as a cloud's discovery would: the host is gone
        run = finish(cluster, proc, link_was_cut=True)
    finally:
        cluster.link("h2", "up")
    sizes = check(run, 200, final_size=2)
    assert sizes[0] == 3 and sizes[-1] == 2, str(run)
