#!/usr/bin/env python3
"""fashion_mnist.py's training on Spark: the ranks are the tasks of
hvd.spark.run's barrier stage, placed by Spark's scheduler.

    python examples/torch/fashion_mnist_spark.py --num-proc 2 -- --epochs 1

Arguments after `--` go to fashion_mnist.py's main().  --master picks the
cluster (default local[N]); its executors need hvd and the Fashion-MNIST
files (Debian's dataset-fashion-mnist) at the same paths, and run this
Python (PYSPARK_PYTHON is set to it).  Prints `test_accuracy=0.NNNN` as
the plain example does.
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


def main():
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.appName("hvd-fashion-mnist")
             .master(args.master or "local[%d]" % args.num_proc)
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        accuracy = hvd.spark.run(example.main, args=(rest,), num_proc=args.num_proc,
                                 env={"OMP_NUM_THREADS": "1"})
    finally:
        spark.stop()
    print("test_accuracy=%.4f" % accuracy[0], flush=True)


if __name__ == "__main__":
    main()
