"""The stall inspector: a tensor that some ranks submitted and others did
not, for too long, is reported by rank 0 -- naming the tensor and the
missing ranks -- and, past HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, turned into
an error on every rank instead of a silent hang.

The ranks run tests/mpi/engine_stall.c, which prints "rank R: OK ..." or
"rank R: FAILED ..." per expectation; these tests read that and rank 0's
stderr (the warning is a log line).  Every run has a timeout.
"""
import os
import re
import subprocess
import time

import pytest

LIMIT = 60  # seconds; no run here should come near it


def run(hvdrun, program, np, mode, **knobs):
    # A clean slate: no HOROVOD_* knob from the caller's environment
    # (a log level above WARNING would hide the warning).
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(HOROVOD_GLOO_TIMEOUT_SECONDS="30", **knobs)
    t0 = time.monotonic()
    p = subprocess.run([hvdrun, "-np", str(np), program, mode], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LIMIT)
    return p, time.monotonic() - t0


def lines(text, rank, stream):
    """rank's lines of hvdrun's prefixed output."""
    prefix = "[%d]<%s>:" % (rank, stream)
    return [l[len(prefix):] for l in text.splitlines() if l.startswith(prefix)]


def outcomes(p, np):
    """{rank: [the OK/FAILED lines engine_stall printed]}."""
    return {r: [l for l in lines(p.stdout, r, "stdout") if re.match(r"rank \d+: (OK|FAILED)", l)]
            for r in range(np)}


def assert_all_ok(p, np, per_rank):
    seen = outcomes(p, np)
    for r in range(np):
        want = per_rank(r)
        got = seen[r]
        assert len(got) == want and all(": OK " in l for l in got), \
            "rank %d: expected %d OK lines, got %r\n%s%s" % (r, want, got, p.stdout, p.stderr)


def ranks_named(text):
    """Every rank number a message lists after the word rank/ranks:
    "missing ranks: [1, 2]", "ranks 1-3", "rank 2" (ranges expanded)."""
    found = set()
    for group in re.findall(r"ranks?[\s:=\[(]*([\d,\s-]+)", text, re.I):
        for a, b in re.findall(r"(\d+)(?:\s*-\s*(\d+))?", group):
            found.update(range(int(a), int(b or a) + 1))
    return found


def stall_warnings(text, rank):
    return [l for l in lines(text, rank, "stderr") if re.search("stall", l, re.I)]


@pytest.mark.parametrize("np", [2, 3])
def test_stall_warning_names_tensor_and_missing_ranks(hvdrun, test_program, np):
    p, elapsed = run(hvdrun, test_program("engine_stall"), np, "warn",
                     HOROVOD_STALL_CHECK_TIME_SECONDS="1")
    assert p.returncode == 0, p.stdout + p.stderr
    # The late ranks did arrive: the allreduce completed with the right sum.
    assert_all_ok(p, np, lambda r: 1)
    missing = set(range(1, np))
    warnings = [l for l in stall_warnings(p.stderr, 0) if "late" in l]
    assert warnings, "rank 0 logged no stall warning naming 'late':\n" + p.stderr
    assert any(missing <= ranks_named(l) for l in warnings), \
        "no warning names the missing ranks %s:\n%s" % (sorted(missing), "\n".join(warnings))
    assert elapsed < 30, elapsed


@pytest.mark.parametrize("np", [2, 3])
def test_stall_shutdown_fails_every_rank(hvdrun, test_program, np):
    p, elapsed = run(hvdrun, test_program("engine_stall"), np, "shutdown",
                     HOROVOD_STALL_CHECK_TIME_SECONDS="1",
                     HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="2")
    # Rank 0: the stalled wait fails (HVD_E_TIMEOUT naming 'never'), then
    # the next call is refused; the late ranks' first call is refused.
    assert_all_ok(p, np, lambda r: 2 if r == 0 else 1)
    assert p.returncode == 0, p.stdout + p.stderr
    failed = [l for l in outcomes(p, np)[0] if "stalled 'never'" in l][0]
    assert "HVD_E_TIMEOUT" in failed, failed
    missing = set(range(1, np))
    assert missing <= ranks_named(failed.split("HVD_E_TIMEOUT", 1)[1]), \
        "the error does not name the missing ranks %s: %s" % (sorted(missing), failed)
    # Not before the 2 s shutdown time, and soon after it.
    took = float(re.search(r"after ([\d.]+) s", failed).group(1))
    assert 1.5 <= took < 10, failed
    assert elapsed < 40, elapsed


def test_stall_check_disabled(hvdrun, test_program):
    # Even with short check and shutdown times, DISABLE turns both off.
    p, elapsed = run(hvdrun, test_program("engine_stall"), 2, "disabled",
                     HOROVOD_STALL_CHECK_DISABLE="1",
                     HOROVOD_STALL_CHECK_TIME_SECONDS="1",
                     HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert_all_ok(p, 2, lambda r: 1)
    for r in range(2):
        assert not stall_warnings(p.stderr, r), p.stderr
    assert elapsed < 30, elapsed


@pytest.mark.parametrize("np", [2, 3])
def test_join_waiting_for_others_is_reported(hvdrun, test_program, np):
    p, elapsed = run(hvdrun, test_program("engine_stall"), np, "join",
                     HOROVOD_STALL_CHECK_TIME_SECONDS="1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert_all_ok(p, np, lambda r: 1)
    # Every rank's hvd_join returned the same last rank.
    returned = {re.search(r"returned (\d+)", outcomes(p, np)[r][0]).group(1) for r in range(np)}
    assert len(returned) == 1, returned
    warnings = [l for l in stall_warnings(p.stderr, 0) if "hvd_join" in l]
    assert warnings, "rank 0 logged no stall warning about hvd_join:\n" + p.stderr
    missing = set(range(1, np))
    assert any(missing <= ranks_named(l.split("missing")[-1]) for l in warnings), warnings
    assert elapsed < 30, elapsed


OUT_OF_STEP = os.path.join(os.path.dirname(__file__), "out_of_step.py")


def run_out_of_step(build_dir, hvdrun, np, mode):
    """tests/launcher/out_of_step.py under hvdrun with Debian's python3."""
    if os.environ.get("HVD_SANITIZE"):
        pytest.skip("sanitizer builds cannot load into python")
    if not os.path.isdir(os.path.join(build_dir, "python", "hvd")):
        pytest.skip("hvd._C is not built")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env.update(PYTHONPATH=os.path.join(build_dir, "python"), HOROVOD_GLOO_TIMEOUT_SECONDS="30",
               HOROVOD_STALL_CHECK_TIME_SECONDS="1", HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="3")
    return subprocess.run([hvdrun, "-np", str(np), "/usr/bin/python3", OUT_OF_STEP, mode],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=LIMIT)


def waits_named(text, waits):
    """Whether text's "waiting, by rank:" part says, for each rank, what it waits on."""
    part = text.split("waiting, by rank:", 1)
    return len(part) == 2 and all(re.search(r"\brank %d: %s(;|\.|$)" % (r, re.escape(w)), part[1])
                                  for r, w in waits.items())


@pytest.mark.parametrize("np", [2, 3])
def test_out_of_step_ranks_are_named_with_their_tensors(build_dir, hvdrun, np):
    """Rank 0 waits in 'scale.check', the others in 'next.test': within the
    stall-check time rank 0 warns naming, for each rank, the tensor it
    waits on; at the shutdown time every rank's wait fails with that
    message and the job ends."""
    p = run_out_of_step(build_dir, hvdrun, np, "scale")
    waits = {r: "'scale.check'" if r == 0 else "'next.test'" for r in range(np)}
    warnings = [l for l in stall_warnings(p.stderr, 0) if "waiting, by rank" in l]
    assert warnings and waits_named(warnings[0], waits), p.stdout + p.stderr
    assert p.returncode != 0, p.stdout + p.stderr
    for r in range(np):
        errors = [l for l in lines(p.stdout, r, "stdout") if l.startswith("rank %d: ERROR" % r)]
        assert errors, "rank %d did not fail:\n%s%s" % (r, p.stdout, p.stderr)
        assert "HorovodInternalError" in errors[0] and "stall shutdown" in errors[0], errors
        assert waits_named(errors[0], waits), errors[0]


def test_rank_waiting_in_join_for_a_rank_that_never_joins(build_dir, hvdrun):
    """Rank 0 waits in join(); rank 1 went on without joining: the warning
    says rank 0 is in hvd_join() and rank 1 waits on nothing, and at the
    shutdown time rank 0's join() fails with that message; the job ends
    without waiting for rank 1's 20 s."""
    p = run_out_of_step(build_dir, hvdrun, 2, "join")
    waits = {0: "in hvd_join()", 1: "nothing"}
    warnings = [l for l in stall_warnings(p.stderr, 0) if "hvd_join" in l]
    assert warnings and waits_named(warnings[0], waits), p.stdout + p.stderr
    assert p.returncode != 0, p.stdout + p.stderr
    errors = [l for l in lines(p.stdout, 0, "stdout") if l.startswith("rank 0: ERROR")]
    assert errors and "stall shutdown" in errors[0] and "hvd_join()" in errors[0], \
        p.stdout + p.stderr
    assert waits_named(errors[0], waits), errors[0]
    # hvdrun ended the job when rank 0 failed: rank 1 never woke up
    assert not [l for l in lines(p.stdout, 1, "stdout") if l.startswith("rank 1:")], p.stdout
