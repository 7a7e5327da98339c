"""Failure, not hang: a rank that dies or freezes mid-allreduce becomes an
error on every survivor, naming the lost rank, and hvdrun ends the job
non-zero, naming it too, within a bounded time."""
import os
import re
import subprocess
import time

import pytest

BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
HVDRUN = os.path.join(BUILD, "hvdrun")
PEER_LOSS = os.path.join(BUILD, "tests", "test_peer_loss")


def run_job(np, args, timeout_s=2, limit=60):
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS=str(timeout_s))
    t0 = time.monotonic()
    p = subprocess.run([HVDRUN, "-np", str(np), PEER_LOSS] + args, env=env,
                       capture_output=True, text=True, timeout=limit)
    return p, time.monotonic() - t0


def survivors_report(out, np, victim):
    lines = [l for l in out.splitlines() if "detected" in l]
    reporters = sorted(int(m.group(1)) for l in lines
                       for m in [re.search(r"\]<stdout>:rank (\d+): lost rank %d detected" % victim, l)] if m)
    return lines, reporters


@pytest.mark.parametrize("np", [2, 4, 8])
def test_sigkill_mid_allreduce(np):
    p, elapsed = run_job(np, ["kill"])
    victim = np - 1
    lines, reporters = survivors_report(p.stdout, np, victim)
    assert reporters == list(range(victim)), p.stdout + p.stderr
    assert p.returncode == 128 + 9, p.stderr
    assert re.search(r"rank %d .*signal 9" % victim, p.stderr), p.stderr
    # Survivors see the closed connection at once: no waiting for the deadline.
    assert elapsed < 15, elapsed


@pytest.mark.parametrize("np", [2, 3, 8])
def test_frozen_rank_hits_the_deadline(np):
    p, elapsed = run_job(np, ["stop"], timeout_s=2)
    victim = np - 1
    lines, reporters = survivors_report(p.stdout, np, victim)
    assert reporters == list(range(victim)), p.stdout + p.stderr
    assert any("HVD_E_TIMEOUT" in l for l in lines), lines
    assert p.returncode != 0
    # 2 s deadline + hvdrun's teardown (at most 5 s), with slack for a loaded machine.
    assert elapsed < 25, elapsed
