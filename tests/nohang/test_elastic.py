"""No hang under hvdrun's elastic driver: survivors fewer than --min-np
wait --elastic-timeout for hosts and then end, saying so (Horovod's open
deadlock, horovod#3494), leaving nothing running and nothing in /dev/shm.
The case before any job formed is tests/launcher/test_elastic.py's
test_below_min_np_until_the_elastic_timeout; this one is mid-job."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launcher"))
from elastic_check import leftovers, shm_segments  # noqa: E402


def test_survivors_below_min_np_end_after_the_elastic_timeout(hvdrun, test_program):
    """Host 127.0.0.1's worker is killed, and its replacement too: the host
    is blacklisted, one survivor is left for --min-np 2."""
    worker = test_program("elastic_worker")
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="10", HOROVOD_START_TIMEOUT="20",
               ELASTIC_STEPS="150", ELASTIC_FAULTS="1:step:40,2:step:45")
    before = shm_segments()
    t0 = time.monotonic()
    p = subprocess.run([hvdrun, "-np", "2", "--min-np", "2", "-H", "localhost:1,127.0.0.1:1",
                        "--elastic-timeout", "3", worker], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=90)
    elapsed = time.monotonic() - t0
    alive, segments = leftovers(worker, before)
    assert not alive, "left running: %s\n%s" % (alive, p.stderr[-3000:])
    assert not segments, "left in /dev/shm: %s" % segments
    assert p.returncode != 0, p.stderr
    assert ("elastic: stopping the job: fewer than --min-np 2 workers for longer than "
            "--elastic-timeout 3 s") in p.stderr, p.stderr
    assert elapsed < 60, elapsed
