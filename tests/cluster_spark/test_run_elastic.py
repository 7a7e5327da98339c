"""hvd.spark.run_elastic on the Spark standalone cluster of the 4 emulated
hosts (the driver on h0): the executors' hosts, one slot each
(spark.task.cpus 2 of their 2 cores).

- The default route: the workers start inside the Spark tasks of a
  background job (holders), through the relay hvdrun runs as its
  ssh-command; no ssh is run (an `ssh` first in PATH that only records
  being run is never run).  The holder on h3 (the task's Python worker,
  the parent of hvdrun's agent there) killed while the workers wait at
  step 4: its worker dies with it, the others re-form and finish (Spark
  retries the task, which may bring h3 back).
- use_ssh=True (the listing from the live executors, the workers over
  ssh): the worker of rank 1 killed mid-job; the others re-form and
  finish.

Each time the final workers' values come back by rank, agreeing on every
committed step (fn_checks.check_elastic).  Nothing of the jobs is left
on any host; the jobs' secrets are in none of the event log, the
daemons' logs, the executors' output or the driver's.  (This file runs
before test_spark_cluster.py, whose last test takes Spark down.)"""
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
    import json, os, shutil, signal, sys, tempfile, threading, time
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
                                          elastic_timeout=60, env={%(token)r: "1"},
                                          use_ssh=True)
    out["died"] = int(open(marker).read())

    hold = os.path.join(os.path.dirname(marker), "hold")
    ssh_called = fn_checks.poisoned_ssh(os.path.dirname(marker))
    os.environ["PATH"] = os.path.dirname(marker) + ":" + os.environ["PATH"]

    def lose_holder():  # h3's holder killed once the workers wait at step die_at
        kill = lambda: fn_checks.kill_holder(%(token)r, %(h3)r)
        out["holder"], out["agent"] = fn_checks.lose_host(hold, kill, %(token)r, %(h3)r)

    t = threading.Thread(target=lose_holder)
    t.start()
    out["holder_values"] = hvd.spark.run_elastic(
        fn_checks.elastic_steps, args=(%(steps)d, %(die_at)d, marker, hold), num_proc=4,
        min_np=2, max_np=4, start_timeout=60, elastic_timeout=60, env={%(token)r: "1"})
    t.join()
    out["ssh_called"] = os.path.exists(ssh_called)
    shutil.rmtree(os.path.dirname(marker))
    spark.stop()
    out["keys"], out["events"] = [k.hex() for k in keys], events
    print("RESULT " + json.dumps(out))
    """)


def test_run_elastic_survives_a_killed_worker_or_holder(spark_cluster, build_dir):
    cluster = spark_cluster
    cluster.check()
    master = cluster.cmd("spark", "address", check=True).stdout.strip()
    token = "HVD_TEST_ELASTIC_SPARK_" + uuid.uuid4().hex
    script = DRIVER % dict(runner=os.path.dirname(os.path.abspath(fn_checks.__file__)),
                           master=master, addr=cluster.addr(0), token=token, steps=STEPS,
                           die_at=DIE_AT, h3=cluster.addr(3))
    env = cluster.env(PYTHONPATH=os.path.join(build_dir, "python"),
                      HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    r, out = run_driver(cluster, script, env)
    assert sorted(out["hosts"]) == [[cluster.addr(i), 1] for i in range(4)], out["hosts"]
    fn_checks.check_elastic(out["values"], STEPS, DIE_AT, first_size=4)
    assert not fn_checks.pid_alive(out["died"])
    # h3's holder lost: it was the Spark task's Python worker, and hvdrun's
    # agent (the worker's parent) ran under it; the job went on (Spark
    # retries the task, which may bring h3 back: 3 or 4 final workers).
    assert "pyspark" in (out["holder"] or "") and "--agent" in (out["agent"] or ""), out
    fn_checks.check_elastic(out["holder_values"], STEPS, DIE_AT, first_size=4)
    assert not out["ssh_called"], "the job without ssh ran ssh"
    assert fn_checks.procs_left(token) == []  # the workers, hvdrun's agents
    # The jobs' secrets (hvd.run's channel keys, in hex as the workers get
    # them, and the holders' key) are nowhere in what Spark wrote, nor in
    # the driver's output.
    keys = [k.encode() for k in out["keys"]]
    assert len(keys) == 3
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
