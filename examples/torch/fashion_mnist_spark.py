#!/usr/bin/env python3
"""fashion_mnist.py's training on Spark: the ranks are the tasks of
hvd.spark.run's barrier stage, placed by Spark's scheduler.

    python examples/torch/fashion_mnist_spark.py --num-proc 2 -- --epochs 1
    python examples/torch/fashion_mnist_spark.py --master spark://h0:7077 \\
        --total-executor-cores 8 --num-proc 4 -- --epochs 2

Arguments after `--` go to fashion_mnist.py's main().  --master picks the
cluster (default local[N]); its executors need hvd and the Fashion-MNIST
files (Debian's dataset-fashion-mnist) at the same paths, and run this
Python (PYSPARK_PYTHON is set to it).  A barrier stage starts on the
executors registered at the time: --total-executor-cores (spark-submit's
flag on a standalone cluster) makes the application wait for that many
cores, so that Spark can spread the ranks over all the hosts.  Prints a
line per rank (its host, test accuracy and final weights' SHA-256), then
`test_accuracy=0.NNNN` as the plain example does.
"""
import argparse
import os
import sys

import pyspark
from pyspark.sql import SparkSession

import fashion_mnist as example
import hvd.spark

# The tasks cannot import the example's module: it travels by value.
pyspark.cloudpickle.register_pickle_by_value(example)

parser = argparse.ArgumentParser(description="Fashion-MNIST on Spark (hvd.spark)")
parser.add_argument("--num-proc", type=int, default=2, help="ranks (Spark tasks)")
parser.add_argument("--master", default=None, help="Spark master (default: local[num-proc])")
parser.add_argument("--driver-host", default=None,
                    help="the address the executors reach this driver at, where the ranks "
                         "meet (spark.driver.host; default: Spark's choice)")
parser.add_argument("--total-executor-cores", type=int, default=None,
                    help="the application's cores on a standalone master (spark.cores.max); "
                         "the job waits until they have registered")
parser.add_argument("--start-timeout", type=int, default=600,
                    help="seconds to wait for the executors and for the ranks to meet")


def session(args):
    builder = (SparkSession.builder.appName("hvd-fashion-mnist")
               .master(args.master or "local[%d]" % args.num_proc)
               .config("spark.ui.enabled", "false"))
    if args.driver_host:
        builder = builder.config("spark.driver.host", args.driver_host)
    if args.total_executor_cores:
        # Spark waits for every core before it runs a job (its check).
        builder = (builder.config("spark.cores.max", str(args.total_executor_cores))
                   .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
                   .config("spark.scheduler.maxRegisteredResourcesWaitingTime",
                           "%ds" % args.start_timeout))
    return builder.getOrCreate()


def main():
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = session(args)
    try:
        reports = hvd.spark.run(example.rank_report, args=(rest,), num_proc=args.num_proc,
                                start_timeout=args.start_timeout, env={"OMP_NUM_THREADS": "1"})
    finally:
        spark.stop()
    example.print_reports(reports)


if __name__ == "__main__":
    main()
