"""The shared-memory transport from the outside: it is the default on one
host, it leaves nothing in /dev/shm however the job ends, two jobs do not
meet, a frozen rank is named, and HOROVOD_SHM_DISABLE=1 means TCP."""
import base64
import os
import re
import subprocess
import threading
import time

import pytest

SHM = "/dev/shm"


def segment_name(key, leader=0):
    """hvd__shm_name(): FNV-1a of the job's 32-byte secret, and the rank
    that leads the host's group (rank 0 for a job on one host)."""
    h = 1469598103934665603
    for b in base64.b64decode(key):
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "hvd-%016x-%d" % (h, leader)


def job_key(stdout):
    keys = set(re.findall(r"<stdout>:rank \d+: key (\S+)", stdout))
    assert len(keys) == 1, stdout
    return keys.pop()


def run(hvdrun, program, np, mode, timeout_s=5, extra_env=None):
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS=str(timeout_s), **(extra_env or {}))
    return subprocess.run([hvdrun, "-np", str(np), program, mode], env=env,
                          capture_output=True, text=True, timeout=120)


def assert_gone(stdout):
    name = segment_name(job_key(stdout))
    assert not os.path.exists(os.path.join(SHM, name)), name


@pytest.mark.parametrize("np", [2, 4])
def test_normal_job_leaves_nothing(hvdrun, test_program, np):
    p = run(hvdrun, test_program("shm_probe"), np, "ok")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": sums ok") == np, p.stdout
    assert_gone(p.stdout)


# auto: the shm allreduce (its syncs see the loss); ring: the byte rings.
@pytest.mark.parametrize("algorithm", ["auto", "ring"])
@pytest.mark.parametrize("mode", ["exit", "kill"])
def test_lost_rank_is_named_and_leaves_nothing(hvdrun, test_program, mode, algorithm):
    np = 3
    t0 = time.monotonic()
    p = run(hvdrun, test_program("shm_probe"), np, mode,
            extra_env={"HOROVOD_ALLREDUCE_ALGORITHM": algorithm})
    survivors = sorted(int(r) for r in
                       re.findall(r"<stdout>:rank (\d+): lost rank %d:" % (np - 1), p.stdout))
    assert survivors == list(range(np - 1)), p.stdout + p.stderr
    assert "UNNAMED" not in p.stdout
    assert p.returncode != 0
    # A dead process is noticed at once, not at the 5 s deadline.
    assert time.monotonic() - t0 < 15
    assert_gone(p.stdout)


def test_launcher_removes_a_leftover_segment(hvdrun, test_program):
    """A job that dies before rank 0 unlinks the segment: hvdrun removes it."""
    proc = subprocess.Popen([hvdrun, "-np", "2", test_program("shm_probe"), "leak"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    planted = None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        m = re.search(r"rank \d+: key (\S+)", line)
        if m and planted is None:
            planted = os.path.join(SHM, segment_name(m.group(1)))
            with open(planted, "w") as f:
                f.write("left behind")
    proc.wait(timeout=60)
    assert planted, "".join(lines)
    assert proc.returncode != 0
    assert not os.path.exists(planted)


def test_two_jobs_at_once(hvdrun, test_program):
    results = [None, None]

    def job(i):
        results[i] = run(hvdrun, test_program("shm_probe"), 3, "ok")

    threads = [threading.Thread(target=job, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in results:
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.count(": sums ok") == 3, p.stdout
    assert job_key(results[0].stdout) != job_key(results[1].stdout)


def test_frozen_rank_is_named(hvdrun, test_program):
    np = 3
    env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="2")
    p = subprocess.run([hvdrun, "-np", str(np), test_program("test_peer_loss"), "stop"],
                       env=env, capture_output=True, text=True, timeout=60)
    named = re.findall(r"<stdout>:rank (\d+): lost rank %d detected" % (np - 1), p.stdout)
    assert sorted(map(int, named)) == list(range(np - 1)), p.stdout + p.stderr
    assert "HVD_E_TIMEOUT" in p.stdout, p.stdout
    assert p.returncode != 0


@pytest.mark.parametrize("disable,transport", [(None, "shm"), ("1", "tcp")])
def test_shm_disable_picks_tcp(hvdrun, build_dir, disable, transport):
    env = dict(os.environ)
    env.pop("HOROVOD_SHM_DISABLE", None)
    if disable:
        env["HOROVOD_SHM_DISABLE"] = disable
    p = subprocess.run([hvdrun, "-np", "2", os.path.join(build_dir, "hvd-bench"), "--op",
                        "allreduce", "--max-bytes", "1K", "--batches", "1"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "transport %s," % transport in p.stdout, p.stdout


@pytest.mark.parametrize("flag", ["shm", "tcp"])
def test_bench_transport_flag(hvdrun, build_dir, flag):
    env = dict(os.environ, HOROVOD_SHM_DISABLE="0" if flag == "tcp" else "1")
    p = subprocess.run([hvdrun, "-np", "2", os.path.join(build_dir, "hvd-bench"), "--op",
                        "allreduce", "--max-bytes", "1K", "--batches", "1", "--transport", flag],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "transport %s," % flag in p.stdout, p.stdout


# Single copy: refused on one rank (or by the kernel), the job says so
# once, at INFO level, and its allreduces are still right; allowed (this
# machine lets a process read its siblings), nothing is said.
@pytest.mark.parametrize("refuse", [True, False])
def test_single_copy_refusal_said_once(hvdrun, test_program, refuse):
    env = {"HOROVOD_LOG_LEVEL": "INFO"}
    if refuse:
        env["HOROVOD_SHM_SINGLE_COPY"] = "0"
    p = run(hvdrun, test_program("shm_probe"), 3, "ok", extra_env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": sums ok") == 3, p.stdout
    said = re.findall(r"copies large allreduces twice.*", p.stderr)
    if refuse:
        assert len(said) == 1, p.stderr
        assert "HOROVOD_SHM_SINGLE_COPY=0" in said[0], said
    else:
        assert said == [], p.stderr
