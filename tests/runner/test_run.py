"""hvd.run on one host: the values by rank, the failing rank's exception,
the environment, collectives inside the function, and nothing left
running once it fails.  ctest runs this file under Debian's python3 and
under the venv's; PYTHONPATH names the build tree's python/."""
import os
import pickle
import signal
import time
import uuid

import sys

import cloudpickle
import pytest

import hvd
import fn_checks

# The ranks cannot import this file: its functions travel by value, as a
# notebook's do.
for _m in (sys.modules[__name__], fn_checks):
    cloudpickle.register_pickle_by_value(_m)


@pytest.mark.parametrize("np", [1, 2, 4])
def test_values_by_rank_with_collectives_and_env(np):
    out = hvd.run(fn_checks.collectives, args=(3.0,), np=np, env={"HVD_TEST_VALUE": "v%d" % np})
    assert out == fn_checks.expected(np, 3.0, "v%d" % np)


def test_kwargs_and_closures_travel():
    base = {"k": [1, 2]}

    def f(a, b=0):
        return (int(os.environ["HOROVOD_RANK"]), a + b, base["k"])

    assert hvd.run(f, args=(1,), kwargs={"b": 2}, np=2) == [(0, 3, [1, 2]), (1, 3, [1, 2])]


def _raise_on_last(kind):
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    if rank == size - 1:
        if kind == "value":
            raise ValueError("rank %d says no" % rank)
        raise _Unpicklable("cannot travel")
    time.sleep(120)  # stopped by hvdrun once the last rank fails


class _Unpicklable(Exception):
    def __reduce__(self):
        raise pickle.PicklingError("not this one")


@pytest.mark.parametrize("np", [1, 2, 4])
def test_failing_rank_exception(np):
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="rank %d says no" % (np - 1)) as info:
        hvd.run(_raise_on_last, args=("value",), np=np)
    assert time.monotonic() - t0 < 100  # the sleeping ranks were stopped, not waited for
    e = info.value
    assert e.hvd_rank == np - 1
    assert "hvd: raised by rank %d of %d" % (np - 1, np) in "".join(getattr(e, "__notes__", []))
    assert "_raise_on_last" in str(e.__cause__)  # the rank's traceback


def test_exception_that_cannot_travel_comes_as_runtime_error():
    with pytest.raises(RuntimeError, match=r"_Unpicklable: cannot travel") as info:
        hvd.run(_raise_on_last, args=("unpicklable",), np=2)
    assert info.value.hvd_rank == 1


def _die_or_sleep():
    if os.environ["HOROVOD_RANK"] == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def test_rank_killed_fails_run_and_nothing_is_left():
    token = "HVD_TEST_TOKEN_" + uuid.uuid4().hex
    with pytest.raises(RuntimeError, match=r"hvdrun exited with code \d+; ranks 0, 1, 2 did "
                                           r"not return") as info:
        hvd.run(_die_or_sleep, np=3, env={token: "1"})
    assert "rank 1" in str(info.value)  # hvdrun's last words name the killed rank
    assert fn_checks.procs_left(token) == []


def test_elastic_on_one_host():
    def f():
        from hvd import _C
        _C.init()
        return (_C.rank(), _C.size())

    assert hvd.run(f, np=2, min_np=1, max_np=2, hosts="localhost:2") == [(0, 2), (1, 2)]


def test_argument_errors():
    with pytest.raises(ValueError, match="hosts or hostfile"):
        hvd.run(len, np=1, hosts="a:1", hostfile="/x")
    with pytest.raises(ValueError, match="use_gloo and use_mpi"):
        hvd.run(len, use_gloo=True, use_mpi=True)
    with pytest.raises(TypeError, match="callable"):
        hvd.run(3)
    with pytest.raises(RuntimeError, match="-np needs a number of processes"):
        hvd.run(len, num_proc=5000)  # hvdrun's own check, in its last words


def test_horovod_names_are_accepted():
    assert hvd.run(lambda: os.environ["HOROVOD_SIZE"], num_proc=2, verbose=True,
                   use_gloo=True) == ["2", "2"]


def test_hvdrun_missing_says_so(monkeypatch):
    monkeypatch.setenv("HVD_HVDRUN", "/nonexistent/hvdrun")
    with pytest.raises(RuntimeError, match="HVD_HVDRUN names /nonexistent/hvdrun, not a program"):
        hvd.run(len, np=1)


def _sent_away():
    from hvd.common.exceptions import HorovodInternalError

    raise HorovodInternalError("forming the next job: hvdrun refused the registration: its "
                               "host was removed from the job")


def test_elastic_worker_sent_away_reports_nothing(monkeypatch):
    """An elastic worker whose host hvdrun removed is refused when it tries
    to join the next job; hvdrun stops it and judges the job itself, so the
    worker must not report that as the function's failure (run() would
    raise it).  Outside an elastic job the same error is reported."""
    from hvd.runner.task import call

    payload = cloudpickle.dumps((_sent_away, (), {}))
    sent = []
    monkeypatch.setenv("HOROVOD_ELASTIC_WORKER_ID", "3")
    assert call(payload, 0, sent.append) is True and sent == []
    monkeypatch.delenv("HOROVOD_ELASTIC_WORKER_ID")
    assert call(payload, 0, sent.append) is False and sent[0][0] == "err"
