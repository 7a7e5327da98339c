"""hvd.spark.run on a local Spark (local[4], started once for the file):
ranks as the tasks of a barrier stage, values by rank, collectives exact,
a rank that raises or a task killed (run() raises, naming the rank where
it can; every rank's process is gone), the tasks' Python (the driver's
unless PYSPARK_PYTHON says), and the job's secret nowhere in
Spark's event log (what its UI shows) or its log output; run_elastic on
the local master (workers under hvdrun's elastic driver) and its min_np
failure.  Runs under the
venv's python (pyspark and torch from scripts/venv.sh)."""
import glob
import os
import signal
import sys
import time

import cloudpickle
import pytest

pyspark = pytest.importorskip("pyspark")  # the venv has it; ctest runs this only there
import hvd.spark  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runner"))
import fn_checks  # noqa: E402

# The tasks cannot import this file: its functions travel by value.
for _m in (sys.modules[__name__], fn_checks):
    cloudpickle.register_pickle_by_value(_m)
    pyspark.cloudpickle.register_pickle_by_value(_m)

NSLOTS = 4


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    events = tmp_path_factory.mktemp("spark-events")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the tasks' python: this one
    session = (SparkSession.builder.master("local[%d]" % NSLOTS).appName("hvd-spark-test")
               .config("spark.ui.enabled", "false")
               .config("spark.eventLog.enabled", "true")
               .config("spark.eventLog.dir", "file://%s" % events)
               .config("spark.eventLog.compress", "false")
               .getOrCreate())
    session.events_dir = str(events)
    try:
        yield session
    finally:
        session.stop()


ROUNDS = []  # every Rendezvous the file's runs made: their secrets


@pytest.fixture(scope="module", autouse=True)
def record_rounds():
    real = hvd.spark.Rendezvous

    class Recorded(real):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            ROUNDS.append(self)

    hvd.spark.Rendezvous = Recorded
    yield
    hvd.spark.Rendezvous = real


def test_run_collectives_by_rank(spark):
    n = NSLOTS
    got = hvd.spark.run(fn_checks.collectives, args=(2.0,), num_proc=n,
                        env={"HVD_TEST_VALUE": "s"})
    assert got == fn_checks.expected(n, 2.0, "s")
    assert hvd.spark.run(lambda: os.environ["HOROVOD_RANK"], num_proc=2) == ["0", "1"]
    # Spark reuses the tasks' Pythons: one run's env stays out of the next,
    # and each run's ranks see their own round's secret.
    got = hvd.spark.run(lambda: (os.environ.get("HVD_TEST_VALUE"),
                                 os.environ["_HOROVOD_SECRET_KEY"]), num_proc=n)
    assert [v for v, _ in got] == [None] * n
    assert [k for _, k in got] == [ROUNDS[-1].secret] * n


def test_tasks_run_the_drivers_python_unless_told(spark, tmp_path, monkeypatch):
    """With no PYSPARK_PYTHON when the context was made (Spark then runs
    the `python3` PATH finds, here pyenv's, without hvd), run()'s tasks run
    this driver's interpreter, as Horovod's ranks do; a PYSPARK_PYTHON the
    user set is kept.  The context's own setting is left as it was."""
    sc = spark.sparkContext
    made_with = sc.pythonExec
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(sc, "pythonExec", "python3")  # what Spark took without PYSPARK_PYTHON
    assert hvd.spark.run(lambda: sys.executable, num_proc=2) == [sys.executable] * 2
    assert sc.pythonExec == "python3"
    wrapper = tmp_path / "python"
    wrapper.write_text('#!/bin/sh\nHVD_TEST_VIA=wrapper exec %s "$@"\n' % sys.executable)
    wrapper.chmod(0o755)
    monkeypatch.setenv("PYSPARK_PYTHON", str(wrapper))
    monkeypatch.setattr(sc, "pythonExec", str(wrapper))
    assert hvd.spark.run(lambda: os.environ.get("HVD_TEST_VIA"), num_proc=2) == ["wrapper"] * 2
    monkeypatch.setattr(sc, "pythonExec", made_with)


def _fail_on(rank, how, pid_dir):
    from hvd import _C

    _C.init()
    with open(os.path.join(pid_dir, str(_C.rank())), "w") as f:
        f.write(str(os.getpid()))
    _C.barrier()  # every pid written before anyone fails
    if _C.rank() == rank:
        if how == "raise":
            raise KeyError("rank %d gives up" % rank)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(300)  # ended by the cancelled stage, not waited for


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_failing_rank_ends_the_job(spark, tmp_path, how):
    t0 = time.monotonic()
    if how == "raise":
        with pytest.raises(KeyError, match="rank 1 gives up") as info:
            hvd.spark.run(_fail_on, args=(1, how, str(tmp_path)), num_proc=3)
        assert "hvd: raised by rank 1 of 3" in "".join(info.value.__notes__)
    else:
        # The survivors sleep, outside any collective: Spark's word ends it.
        with pytest.raises(RuntimeError, match=r"(?s)hvd.spark.run: the Spark job failed: .*"
                                               r"Python worker exited unexpectedly"):
            hvd.spark.run(_fail_on, args=(1, how, str(tmp_path)), num_proc=3)
    assert time.monotonic() - t0 < 250
    pids = [int(open(p).read()) for p in glob.glob(str(tmp_path / "*"))]
    assert len(pids) == 3
    deadline = time.monotonic() + 60
    while any(fn_checks.pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [p for p in pids if fn_checks.pid_alive(p)] == []


def _rank_size():
    from hvd import _C

    _C.init()
    return (_C.rank(), _C.size())


def test_run_elastic_on_the_local_master(spark):
    """A local master's executor is the driver: hvdrun's elastic driver
    discovers localhost with the context's slots and starts the workers
    here, inside holder tasks though it is this machine (hvdrun
    --ssh-this-host: the relay, no ssh; the emulated hosts' suite,
    cluster.spark, kills one mid-job)."""
    assert hvd.spark.spark_hosts(spark.sparkContext) == [("localhost", NSLOTS)]
    got = hvd.spark.run_elastic(fn_checks.rank_and_starters, num_proc=2, min_np=1, max_np=2,
                                start_timeout=60)
    assert [g[:2] for g in got] == [(0, 2), (1, 2)], got
    for _, _, agent, holder in got:
        assert "--agent" in agent and "pyspark" in holder, got


def test_run_elastic_min_np_never_reached(spark):
    """More workers than slots, ever: hvdrun waits elastic_timeout, then
    run_elastic raises saying why; no worker started."""
    with pytest.raises(RuntimeError, match="fewer than --min-np 5"):
        hvd.spark.run_elastic(_rank_size, num_proc=5, elastic_timeout=3, start_timeout=30)
    with pytest.raises(ValueError, match="min_np <= num_proc <= max_np"):
        hvd.spark.run_elastic(_rank_size, num_proc=2, min_np=3)


def test_fashion_mnist_example_on_spark(spark, tmp_path):
    """What examples/torch/fashion_mnist_spark.py runs: the plain example's
    main() on 2 tasks, to its usual accuracy (> 0.5 on this subset)."""
    example, argv = fn_checks.fashion_mnist_example(str(tmp_path))
    if example is None:
        pytest.skip("no Fashion-MNIST in %s" % fn_checks.FASHION)
    pyspark.cloudpickle.register_pickle_by_value(example)
    accuracy = hvd.spark.run(example.main, args=(argv,), num_proc=2,
                             env={"OMP_NUM_THREADS": "1"})
    assert accuracy[0] == accuracy[1] and accuracy[0] > 0.5, accuracy


def test_secrets_not_in_spark_logs(spark, capfd):
    """Last: stops Spark, so that its event log is complete."""
    secrets = [r.secret.encode() for r in ROUNDS]
    assert len(secrets) >= 4  # the runs above
    spark.stop()
    out, err = capfd.readouterr()
    assert not [s for s in secrets if s in out.encode() + err.encode()]
    data = b""
    for path in glob.glob(os.path.join(spark.events_dir, "**"), recursive=True):
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data += f.read()
    # The log holds the jobs, their descriptions and every property: not the secrets.
    assert b"SparkListenerJobStart" in data and b"hvd.spark.run: 4 ranks" in data
    assert not [s for s in secrets if s in data]
