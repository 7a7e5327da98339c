#!/usr/bin/env python3
"""Start-up to the first collective: hvdrun over ssh, hvd.run,
hvd.ray.RayExecutor (start + run) and hvd.spark.run on the same hosts, in
one run.

Run on a host of a cluster whose hosts are ssh-reachable as HOSTS and,
for Ray, a Ray cluster at --ray-address with a node on each, for Spark a
Spark standalone master at --spark-master with a one-core worker on each
(the emulated one: tests/cluster/cluster.sh up 4; cluster.sh ray up;
cluster.sh spark up --cores 1):

    cluster.sh exec h0 PY bench/launch_from_python.py --hosts h0,h1,h2,h3 \
        --ray-address 10.231.N.1:6390 --spark-master spark://10.231.N.1:7077 --repeat 3

The Spark application (its executors) is started once before the runs,
as the Ray cluster is; its first hvd.spark.run also starts pyspark's
Python daemon on every executor, from which later runs fork their tasks'
Pythons.

Each measurement is the wall time from asking for the job to having the
result of one barrier on every rank (a fresh Python on every rank imports
hvd._C, joins and runs the barrier).  Prints one line per launcher with
the median and the ratio to hvdrun's.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

RANK = "from hvd import _C; _C.init(); _C.barrier(); print(_C.rank())"


def first_collective():
    from hvd import _C

    _C.init()
    _C.barrier()
    rank = _C.rank()
    _C.shutdown()
    return rank


def time_hvdrun(hosts, hvdrun):
    argv = [hvdrun, "-np", str(len(hosts)), "-H", ",".join(h + ":1" for h in hosts),
            sys.executable, "-c", RANK]
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    return time.monotonic() - t0


def time_hvd_run(hosts):
    import hvd

    t0 = time.monotonic()
    assert hvd.run(first_collective, np=len(hosts), hosts=",".join(h + ":1" for h in hosts)) \
        == list(range(len(hosts)))
    return time.monotonic() - t0


def time_ray(hosts):
    from hvd.ray import RayExecutor

    t0 = time.monotonic()
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=120), num_hosts=len(hosts),
                     num_workers_per_host=1)
    ex.start()
    assert ex.run(first_collective) == list(range(len(hosts)))
    dt = time.monotonic() - t0
    ex.shutdown()
    return dt


def spark_session(master, executors):
    """A Spark application on `master` with `executors` executors up."""
    from pyspark.sql import SparkSession

    from hvd.runner.rendezvous import route_address

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    host = master.split("://", 1)[-1].rsplit(":", 1)[0]
    spark = (SparkSession.builder.master(master).appName("hvd-launch-bench")
             .config("spark.driver.host", route_address(host))
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.scheduler.minRegisteredResourcesRatio", "1.0").getOrCreate())
    sc, deadline = spark.sparkContext, time.monotonic() + 120
    while sc._jsc.sc().getExecutorMemoryStatus().size() <= executors and time.monotonic() < deadline:
        time.sleep(0.2)  # the driver counts as one
    return spark


def time_spark(hosts):
    import hvd.spark

    t0 = time.monotonic()
    assert hvd.spark.run(first_collective, num_proc=len(hosts)) == list(range(len(hosts)))
    return time.monotonic() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", required=True, help="comma-separated hosts, one rank each")
    p.add_argument("--ray-address", default=None, help="a Ray cluster with a node per host")
    p.add_argument("--spark-master", default=None,
                   help="a Spark standalone master with a one-core worker per host")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--hvdrun", default=None, help="hvdrun (default: the package's)")
    a = p.parse_args()
    hosts = a.hosts.split(",")
    from hvd._launch import program_path

    hvdrun = a.hvdrun or program_path("hvdrun")
    runs = {"hvdrun (ssh)": lambda: time_hvdrun(hosts, hvdrun),
            "hvd.run (ssh)": lambda: time_hvd_run(hosts)}
    if a.ray_address:
        import ray

        ray.init(address=a.ray_address, log_to_driver=False)
        runs["RayExecutor.start+run"] = lambda: time_ray(hosts)
    if a.spark_master:
        spark_session(a.spark_master, len(hosts))
        runs["hvd.spark.run"] = lambda: time_spark(hosts)
    times = {name: [] for name in runs}
    for _ in range(a.repeat):  # interleaved, so that load drifts hit all alike
        for name, fn in runs.items():
            times[name].append(fn())
    base = statistics.median(times["hvdrun (ssh)"])
    print("start-up to the first collective, %d hosts x 1 rank, median of %d, load %s"
          % (len(hosts), a.repeat, " ".join("%.2f" % x for x in os.getloadavg())))
    for name, t in times.items():
        m = statistics.median(t)
        print("%-24s %7.2f s  x%.2f of hvdrun  (%s)" % (name, m, m / base,
                                                        " ".join("%.2f" % x for x in t)))


if __name__ == "__main__":
    main()
