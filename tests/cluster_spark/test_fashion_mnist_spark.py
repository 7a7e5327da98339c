"""examples/torch/fashion_mnist_spark.py itself, as a user runs it, on
the Spark standalone cluster of the 4 emulated hosts (its driver in h0):
4 ranks, one per host, reach the plain example's accuracy under hvdrun
and agree on it and on their final weights (fashion_example.py).  This
file runs first in the directory, on the cluster as `spark up` left it."""
import os

import fashion_example


def test_fashion_mnist_spark_example_across_hosts(spark_cluster, build_dir, tmp_path):
    cluster = spark_cluster
    cluster.check()
    master = cluster.cmd("spark", "address", check=True).stdout.strip()
    # 8 cores: the 4 workers' 2 each, so the job waits for every executor
    # and Spark gives each one of the 4 tasks.
    engine = ["--master", master, "--driver-host", cluster.addr(0),
              "--total-executor-cores", "8", "--num-proc", "4", "--start-timeout", "180"]
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"))
    reports, accuracy = fashion_example.run(cluster, "fashion_mnist_spark.py", engine, env,
                                            str(tmp_path))
    fashion_example.check(reports, accuracy, cluster.hosts)
