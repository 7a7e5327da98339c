#!/usr/bin/env python3
"""fashion_mnist.py's training on Ray: the ranks are actors of
hvd.ray.RayExecutor, placed by Ray.

    python examples/torch/fashion_mnist_ray.py --num-workers 2 -- --epochs 1

Arguments after `--` go to fashion_mnist.py's main().  Without --address
it starts a local Ray of --num-workers CPUs; with one (a head's
host:port, or "auto") it joins that cluster, whose nodes need hvd and the
Fashion-MNIST files (Debian's dataset-fashion-mnist) at the same paths.
Prints `test_accuracy=0.NNNN` as the plain example does.
"""
import argparse
import os
import sys

import ray

import fashion_mnist as example
from hvd.ray import RayExecutor

# The actors cannot import the example's module: it travels by value.
ray.cloudpickle.register_pickle_by_value(example)

parser = argparse.ArgumentParser(description="Fashion-MNIST on Ray (hvd.ray)")
parser.add_argument("--num-workers", type=int, default=2, help="ranks (actors)")
parser.add_argument("--cpus-per-worker", type=int, default=1)
parser.add_argument("--address", default=None, help="a Ray cluster to join (default: local)")


def main():
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.num_workers * args.cpus_per_worker, include_dashboard=False)
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=120),
                           num_workers=args.num_workers, cpus_per_worker=args.cpus_per_worker)
    executor.start(extra_env_vars={"OMP_NUM_THREADS": "1"})
    try:
        accuracy = executor.run(example.main, args=(rest,))
    finally:
        executor.shutdown()
        ray.shutdown()
    print("test_accuracy=%.4f" % accuracy[0], flush=True)


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    main()
