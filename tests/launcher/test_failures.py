"""Failure, not hang: a rank that dies or freezes mid-allreduce becomes an
error on every survivor, naming the lost rank, and hvdrun ends the job
non-zero, naming it too, within a bounded time."""
import os
import re
import subprocess
import time

import pytest


def run_job(hvdrun, program, np, mode, timeout_s=2, limit=60):
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS=str(timeout_s))
    t0 = time.monotonic()
    p = subprocess.run([hvdrun, "-np", str(np), program, mode], env=env,
                       capture_output=True, text=True, timeout=limit)
    return p, time.monotonic() - t0


def reporters(out, victim):
    """Ranks that printed an error naming the victim (see test_peer_loss.c)."""
    pattern = re.compile(r"\]<stdout>:rank (\d+): lost rank %d detected" % victim)
    return sorted(int(m.group(1)) for m in map(pattern.search, out.splitlines()) if m)


@pytest.mark.parametrize("np", [2, 4, 8])
def test_sigkill_mid_allreduce(hvdrun, test_program, np):
    p, elapsed = run_job(hvdrun, test_program("test_peer_loss"), np, "kill")
    victim = np - 1
    assert reporters(p.stdout, victim) == list(range(victim)), p.stdout + p.stderr
    assert p.returncode == 128 + 9, p.stderr
    assert re.search(r"rank %d .*signal 9" % victim, p.stderr), p.stderr
    # Survivors see the closed connection at once: no waiting for the deadline.
    assert elapsed < 15, elapsed


@pytest.mark.parametrize("np", [2, 3, 8])
def test_frozen_rank_hits_the_deadline(hvdrun, test_program, np):
    p, elapsed = run_job(hvdrun, test_program("test_peer_loss"), np, "stop", timeout_s=2)
    victim = np - 1
    assert reporters(p.stdout, victim) == list(range(victim)), p.stdout + p.stderr
    assert "HVD_E_TIMEOUT" in p.stdout, p.stdout
    assert p.returncode != 0
    # 2 s deadline + hvdrun's teardown (at most 5 s), with slack for a loaded machine.
    assert elapsed < 25, elapsed
