"""No hang, ever, through the bindings (tests/nohang/frameworks.py): a
certain deadlock ends within 5 s (bound 10 s) on every rank with what the
binding's Horovod counterpart raises for a failed collective:
HorovodInternalError in hvd.torch; under jax.jit, the runtime error XLA
raises, its message "HorovodInternalError: ..." (hvd.jax's marker, which
hvd.jax.elastic takes for HorovodInternalError); in hvd.tensorflow, eager
and inside a tf.function, tf.errors.UnknownError (what Horovod's ops raise
for a broken job).  Out-of-order asynchronous submission in hvd.torch, and
a TensorFlow rank that computes while the other waits, complete first, in
the same job.
The project's venv runs them (PyTorch 2.x, JAX); the jobs start together.
"""
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_c import LINE, Job  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frameworks.py")
ASYNC_SECONDS = 7  # rank 0 computes between 'a' and 'b': more than the 5 s window


@pytest.fixture(scope="module")
def jobs(hvdrun, build_dir, python_extension):
    py = os.environ.get("HVD_VENV_PYTHON")
    if not py:
        pytest.skip("no venv python (configure with -DHVD_VENV_PYTHON=...)")
    os.environ["PYTHONPATH"] = os.path.join(build_dir, "python")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    started = {
        "torch2": Job(hvdrun, py, 2, PROGRAM, "torch", "async,desync", ASYNC_SECONDS, limit=150),
        "jax2": Job(hvdrun, py, 2, PROGRAM, "jax", "desync", limit=150),
        "tf2": Job(hvdrun, py, 2, PROGRAM, "tensorflow", "slow,desync", ASYNC_SECONDS,
                   limit=150),
        "tfgraph2": Job(hvdrun, py, 2, PROGRAM, "tensorflow", "graph", limit=150),
        "torch4": Job(hvdrun, py, 4, PROGRAM, "torch", "desync", limit=150),
        "jax4": Job(hvdrun, py, 4, PROGRAM, "jax", "desync", limit=150),
        "tfgraph4": Job(hvdrun, py, 4, PROGRAM, "tensorflow", "graph", limit=150),
        "torch-frozen3": Job(hvdrun, py, 3, PROGRAM, "torch", "frozen", limit=150),
        "jax-frozen2": Job(hvdrun, py, 2, PROGRAM, "jax", "frozen", limit=150),
        "tensorflow-frozen2": Job(hvdrun, py, 2, PROGRAM, "tensorflow", "frozen", limit=150),
    }
    yield started
    for job in started.values():
        job.end()


def lines_by_rank(p):
    """{rank: [(code or "completed", seconds, message), ...]} in order."""
    found = {}
    for line in p.stdout.splitlines():
        m = LINE.match(line)
        if m:
            found.setdefault(int(m.group(2)), []).append(
                (m.group(4) or "completed", float(m.group(5)), m.group(6) or ""))
    return found


def check_desync(p, np, outcome, exception):
    assert sorted(outcome) == list(range(np)), p.stdout + p.stderr
    for r, (got, seconds, msg) in outcome.items():
        assert re.fullmatch(exception, got), (r, got, msg)
        assert seconds < 10, "rank %d took %.1f s (bound 10 s)" % (r, seconds)
        assert "HVD_E_DESYNC" in msg or "wait on each other" in msg or "waits on" in msg, msg
        for q in range(np):
            missing = ", ".join(str(x) for x in range(np) if x % 2 != q % 2)
            assert "rank %d waits on 'grad.%s' (missing ranks [%s])" % (
                q, "ab"[q % 2], missing) in msg, msg
    assert p.returncode != 0


def test_torch_async_out_of_order_completes(jobs):
    p, _ = jobs["torch2"].result()
    seen = lines_by_rank(p)
    assert sorted(seen) == [0, 1], p.stdout + p.stderr
    for r, outcomes in seen.items():
        got, seconds, _ = outcomes[0]
        assert got == "completed" and seconds >= ASYNC_SECONDS, (r, outcomes)


@pytest.mark.parametrize("np", [2, 4])
def test_torch_desync_raises_horovod_internal_error(jobs, np):
    p, _ = jobs["torch%d" % np].result()
    last = {r: outcomes[-1] for r, outcomes in lines_by_rank(p).items()}
    check_desync(p, np, last, "HorovodInternalError")


@pytest.mark.parametrize("np", [2, 4])
def test_jax_desync_under_jit_ends_every_rank(jobs, np):
    p, _ = jobs["jax%d" % np].result()
    last = {r: outcomes[-1] for r, outcomes in lines_by_rank(p).items()}
    check_desync(p, np, last, r"\w*RuntimeError")
    for _, _, msg in last.values():
        assert "HorovodInternalError: " in msg, msg


def test_tensorflow_slow_rank_is_not_ended(jobs):
    """Rank 0 computes for longer than the window while rank 1 waits in an
    eager allreduce: a stall (rank 0 could still submit), never ended."""
    p, _ = jobs["tf2"].result()
    seen = lines_by_rank(p)
    assert sorted(seen) == [0, 1], p.stdout + p.stderr
    for r, outcomes in seen.items():
        got, seconds, _ = outcomes[0]
        assert got == "completed" and seconds >= ASYNC_SECONDS, (r, outcomes)


def test_tensorflow_eager_desync_ends_every_rank(jobs):
    """Eager ops are matched by call order (their names are hvd's): rank 0
    waits in an allreduce, rank 1 in an allgather; TensorFlow waits for
    each op's done, so the engine is told the caller waits."""
    p, _ = jobs["tf2"].result()
    last = {r: outcomes[-1] for r, outcomes in lines_by_rank(p).items()}
    assert sorted(last) == [0, 1], p.stdout + p.stderr
    for r, (got, seconds, msg) in last.items():
        assert got == "UnknownError", (r, got, msg)
        assert seconds < 10, "rank %d took %.1f s (bound 10 s)" % (r, seconds)
        assert re.search(r"rank 0 waits on 'allreduce\.noname\.\d+' \(missing ranks \[1\]\)",
                         msg), msg
        assert "rank 1 waits on 'allgather.noname.1' (missing ranks [0])" in msg, msg
    assert p.returncode != 0


@pytest.mark.parametrize("np", [2, 4])
def test_tensorflow_graph_desync_ends_every_rank(jobs, np):
    """The same inside a tf.function: the executor's threads submit, and
    the rank is blocked once every graph op alive is in flight."""
    p, _ = jobs["tfgraph%d" % np].result()
    last = {r: outcomes[-1] for r, outcomes in lines_by_rank(p).items()}
    check_desync(p, np, last, "UnknownError")


FROZEN = {"torch": ("torch-frozen3", 3, "HorovodInternalError"),
          "jax": ("jax-frozen2", 2, r"\w*RuntimeError"),
          "tensorflow": ("tensorflow-frozen2", 2, "UnknownError")}


@pytest.mark.parametrize("framework", sorted(FROZEN))
def test_frozen_rank_is_named_through_the_binding(jobs, framework):
    """A rank that stops (SIGSTOP) mid-loop: every other rank's eager (jit
    in JAX) allreduce fails within 10 s (bound 20 s), naming it, with the
    binding's exception for a broken job."""
    job, np, exception = FROZEN[framework]
    p, _ = jobs[job].result()
    last = {r: outcomes[-1] for r, outcomes in lines_by_rank(p).items()}
    assert sorted(last) == list(range(np - 1)), p.stdout + p.stderr
    for r, (got, seconds, msg) in last.items():
        assert re.fullmatch(exception, got), (r, got, msg)
        assert seconds < 20, "rank %d took %.1f s (bound 20 s)" % (r, seconds)
        assert "rank %d" % (np - 1) in msg and "no sign of life" in msg, msg
    assert p.returncode != 0
