"""Every exit path leaves nothing behind (issue 42): beyond the processes
and /dev/shm segments the other cases check, no open port.  A port can
only outlive a job through a process that inherited its socket, so every
descriptor hvd opens (listener, peer and watch connections, eventfds,
shared-memory segments) must be close-on-exec: a rank that starts a
child with every inheritable descriptor passed on must pass none of hvd's.
On one host (shared memory) and over TCP only."""
import os
import subprocess
import sys

import pytest

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spawner.py")


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_child_of_a_rank_inherits_nothing_of_hvd(hvdrun, build_dir, python_extension,
                                                   transport):
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"), OMP_NUM_THREADS="1")
    if transport == "tcp":
        env["HOROVOD_SHM_DISABLE"] = "1"
    p = subprocess.run([hvdrun, "-np", "2", sys.executable, PROGRAM], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = sorted(line for line in p.stdout.splitlines() if "child holds" in line)
    assert len(lines) == 2, p.stdout + p.stderr
    for line in lines:
        assert line.endswith("child holds: []"), line
