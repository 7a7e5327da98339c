"""hvd.spark.run_elastic on the Spark standalone cluster of the 4 emulated
hosts (the driver on h0): the executors' hosts, one slot each
(spark.task.cpus 2 of their 2 cores), are what hvdrun's elastic driver
discovers, and it starts a worker on each over ssh; the worker of rank 1
is killed mid-job, the others re-form and finish, and the final workers'
values come back by rank, agreeing on every committed step
(fn_checks.check_elastic); nothing of the job is left on any host; the
job's secret is in none of the event log, the daemons' logs, the
executors' output or the driver's.  (This file runs before
test_spark_cluster.py, whose last test takes Spark down.)"""
import os
import shutil
import sys
import textwrap
import uuid

from hvdcluster import STATE, run_driver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runner"))
import fn_checks  # noqa: E402

STEPS, DIE_AT = 12, 4

DRIVER = textwrap.dedent("""
    import json, os, sys, tempfile, time
    sys.path.insert(0, %(runner)r)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import cloudpickle, fn_checks
    cloudpickle.register_pickle_by_value(fn_checks)
    from pyspark.sql import SparkSession
    import hvd.spark
    from hvd.runner import channel

    keys, new_key = [], channel.new_key  # the job's secret, to look for in what Spark wrote
    channel.new_key = lambda: keys.append(new_key()) or keys[-1]
    events = tempfile.mkdtemp(prefix="hvd-spark-events-")
    spark = (SparkSession.builder.master(%(master)r).appName("hvd-cluster-spark-elastic")
             .config("spark.driver.host", %(addr)r).config("spark.ui.enabled", "false")
             .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", events)
             .config("spark.eventLog.compress", "false")
             .config("spark.executor.memory", "1g").config("spark.task.cpus", "2")
             .getOrCreate())
    sc = spark.sparkContext
    deadline = time.monotonic() + 180  # every worker's executor
    while len(hvd.spark.spark_hosts(sc)) < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    out = {"hosts": hvd.spark.spark_hosts(sc)}
    marker = os.path.join(tempfile.mkdtemp(prefix="hvd-spark-elastic-"), "died")
    out["values"] = hvd.spark.run_elastic(fn_checks.elastic_steps,
                                          args=(%(steps)d, %(die_at)d, marker),
                                          num_proc=4, min_np=2, max_np=4, start_timeout=60,
                                          elastic_timeout=60, env={%(token)r: "1"})
    out["died"] = int(open(marker).read())
    spark.stop()
    out["keys"], out["events"] = [k.hex() for k in keys], events
    print("RESULT " + json.dumps(out))
    """)


def test_run_elastic_survives_a_killed_worker(spark_cluster, build_dir):
    cluster = spark_cluster
    cluster.check()
    master = cluster.cmd("spark", "address", check=True).stdout.strip()
    token = "HVD_TEST_ELASTIC_SPARK_" + uuid.uuid4().hex
    script = DRIVER % dict(runner=os.path.dirname(os.path.abspath(fn_checks.__file__)),
                           master=master, addr=cluster.addr(0), token=token, steps=STEPS,
                           die_at=DIE_AT)
    env = cluster.env(PYTHONPATH=os.path.join(build_dir, "python"),
                      HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    r, out = run_driver(cluster, script, env)
    assert sorted(out["hosts"]) == [[cluster.addr(i), 1] for i in range(4)], out["hosts"]
    fn_checks.check_elastic(out["values"], STEPS, DIE_AT, first_size=4)
    assert not fn_checks.pid_alive(out["died"])
    assert fn_checks.procs_left(token) == []  # the workers, hvdrun's agents
    # The job's secret (hvd.run's channel key, in hex as the workers get
    # it) is nowhere in what Spark wrote, nor in the driver's output.
    keys = [k.encode() for k in out["keys"]]
    assert len(keys) == 1
    written = {"driver's stderr": r.stderr.encode(),
               "driver's stdout": r.stdout.replace(r.result_line, "").encode()}
    for top in (out["events"], os.path.join(STATE, "spark")):
        for d, _, files in os.walk(top):
            for f in files:
                with open(os.path.join(d, f), "rb") as fh:
                    written[os.path.join(d, f)] = fh.read()
    assert len(written) > 5  # event log, master's and workers' logs, executors' stderr
    assert not [w for w in written if any(k in written[w] for k in keys)]
    shutil.rmtree(out["events"], ignore_errors=True)
