"""hvd.spark.run on a Spark standalone cluster of the 4 emulated hosts
(master on h0, a worker with 2 cores on every host, the driver on h0 as
launchers run inside a host): 4 hosts x 1 and x 2 ranks, numbered host by
host with the places hvdrun would give (ranks of one executor host share
memory, as their debug lines in the executors' output say, hosts talk TCP); at x 2 the core collectives exact across hosts
(hvd.torch); a task killed mid-job makes run() raise Spark's reason, and
every rank's process is gone from every host; the rounds' secrets are in
none of the event log, the daemons' logs and the executors' output; `spark down` stops every
Spark process of the hosts and nothing outside them."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

from hvdcluster import STATE, run_driver

DRIVER = textwrap.dedent("""
    import glob, json, os, signal, socket, sys, tempfile, time
    sys.path.insert(0, %(runner)r)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import pyspark, cloudpickle, fn_checks
    for m in (fn_checks,):
        cloudpickle.register_pickle_by_value(m)
        pyspark.cloudpickle.register_pickle_by_value(m)
    from pyspark.sql import SparkSession
    import hvd.spark

    secrets = []  # every round's secret, to look for in what Spark wrote

    class Recorded(hvd.spark.Rendezvous):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            secrets.append(self.secret)

    hvd.spark.Rendezvous = Recorded
    events = tempfile.mkdtemp(prefix="hvd-spark-events-")
    spark = (SparkSession.builder.master(%(master)r).appName("hvd-cluster-spark")
             .config("spark.driver.host", %(addr)r).config("spark.ui.enabled", "false")
             .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", events)
             .config("spark.eventLog.compress", "false")
             .config("spark.executor.memory", "1g")
             .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
             .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "180s")
             .getOrCreate())
    sc = spark.sparkContext
    deadline = time.monotonic() + 180  # every worker's executor, so all 8 slots are there
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 5 and time.monotonic() < deadline:
        time.sleep(0.5)

    def place():
        from hvd import _C
        _C.init()  # the job forms across the hosts: hvd's view of the place
        got = [_C.rank(), _C.local_rank(), _C.local_size(), _C.cross_rank(), _C.cross_size()]
        _C.barrier()
        _C.shutdown()
        return got + [socket.gethostname()]

    def die_on(rank, pid_dir):
        from hvd import _C
        _C.init()
        with open(os.path.join(pid_dir, str(_C.rank())), "w") as f:
            f.write(str(os.getpid()))
        _C.barrier()  # every pid written before one dies
        if _C.rank() == rank:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(300)  # ended by the failed stage, not waited for

    out = {}
    debug = {"HOROVOD_LOG_LEVEL": "DEBUG"}  # the ranks say which way they talk
    out["place1"] = hvd.spark.run(place, num_proc=4, start_timeout=120, env=debug)
    out["place2"] = hvd.spark.run(place, num_proc=8, start_timeout=120, env=debug)
    out["coll"] = hvd.spark.run(fn_checks.collectives, args=(1.5,), num_proc=8,
                                env={"HVD_TEST_VALUE": "c"}, start_timeout=120)
    pid_dir = tempfile.mkdtemp(prefix="hvd-spark-kill-")  # /tmp: every host shares it
    t0 = time.monotonic()
    try:
        hvd.spark.run(die_on, args=(5, pid_dir), num_proc=8, start_timeout=120)
        out["killed"] = "returned"
    except RuntimeError as e:
        out["killed"] = str(e)
    out["killed_after"] = time.monotonic() - t0
    pids = [int(open(p).read()) for p in glob.glob(os.path.join(pid_dir, "*"))]
    deadline = time.monotonic() + 60
    alive = lambda: [p for p in pids if fn_checks.pid_alive(p)]
    while alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    out["pids"], out["alive"] = len(pids), alive()
    out["after"] = hvd.spark.run(lambda: 1, num_proc=8, start_timeout=120)  # Spark still serves
    spark.stop()
    out["secrets"], out["events"] = secrets, events
    print("RESULT " + json.dumps(out))
    """)


def test_spark_run_across_hosts(spark_cluster, build_dir):
    cluster = spark_cluster
    cluster.check()
    master = cluster.cmd("spark", "address", check=True).stdout.strip()
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runner")
    script = DRIVER % dict(runner=os.path.abspath(runner), master=master, addr=cluster.addr(0))
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"))
    r, out = run_driver(cluster, script, env)
    for per_host in (1, 2):
        n = 4 * per_host
        places = out["place%d" % per_host]
        hosts = [p[5] for p in places]
        # Ranks host by host: each host's ranks adjacent, every host used,
        # local_* counting within an executor host, cross_* across them.
        assert sorted(set(hosts)) == ["h0", "h1", "h2", "h3"], places
        assert [hosts[i] for i in range(0, n, per_host)] == list(dict.fromkeys(hosts)), places
        assert [p[:5] for p in places] == [
            [r, r % per_host, per_host, r // per_host, 4] for r in range(n)], places
    # The ways the ranks talk, from their debug lines in the executors'
    # stderr: every rank of the 8-rank jobs shares memory with the other
    # rank of its host (Spark reuses the ranks' Pythons, and hvd reads its
    # log level once per process, so the later 8-rank runs say so too).
    shm = []
    for path in glob.glob(os.path.join(STATE, "spark", "work-worker-h*", "app-*", "*", "stderr")):
        with open(path, errors="replace") as f:
            shm += re.findall(r"rank (\d+): shared memory with (\d+) ranks of its host",
                              f.read())
    assert sorted({(int(r), int(k)) for r, k in shm}) == [(r, 2) for r in range(8)], shm
    n = 8
    coll = out["coll"]
    assert [c["rank"] for c in coll] == list(range(n))
    for c in coll:
        assert c["size"] == n and c["env"] == "c" and c["local_rank"] == c["rank"] % 2
        assert c["summed"] == [1.5 * sum(range(n)), float(sum(range(1, n + 1)))]
        assert c["gathered"] == list(range(n)) and c["root"] == [n - 1 + 10]
    assert out["killed"].startswith("hvd.spark.run: the Spark job failed: "), out["killed"]
    assert "barrier" in out["killed"].lower(), out["killed"]
    assert out["pids"] == n and out["alive"] == [], out
    assert out["after"] == [1] * n
    # The rounds' secrets are nowhere in what Spark wrote: the event log
    # (what its UI shows), the daemons' logs, every executor's output, the
    # driver's output.
    secrets = [x.encode() for x in out["secrets"]]
    assert len(secrets) == 5
    written = [r.stderr.encode(), r.stdout.replace(r.result_line, "").encode()]
    for top in (out["events"], os.path.join(STATE, "spark")):
        for d, _, files in os.walk(top):
            for f in files:
                with open(os.path.join(d, f), "rb") as fh:
                    written.append(fh.read())
    assert len(written) > 10  # event log, master's and workers' logs, executors' stderr
    assert not [x for x in secrets if any(x in w for w in written)]
    shutil.rmtree(out["events"], ignore_errors=True)


def test_spark_down_stops_only_the_hosts_spark(spark_cluster):
    """`spark down` leaves nothing running on any host, and a process
    outside the hosts that looks like Spark's (this machine's own Spark,
    say) keeps running."""
    cluster = spark_cluster
    assert cluster.pids(), "the Spark daemons should be running on the hosts"
    outside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                "org.apache.spark.deploy.worker.Worker", "-m pyspark.daemon"])
    try:
        r = cluster.cmd("spark", "down", check=True)
        assert "spark down" in r.stdout
        assert cluster.wait_no_pids(timeout=10.0) == []
        assert outside.poll() is None, "spark down stopped a process outside the hosts"
        r = cluster.cmd("spark", "up", "--cores", "0")
        assert r.returncode != 0 and "bad --cores '0'" in r.stderr, r.stderr
    finally:
        outside.kill()
        outside.wait()
