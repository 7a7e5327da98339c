#!/usr/bin/env python3
"""fashion_mnist.py's training on Ray: the ranks are actors of
hvd.ray.RayExecutor, placed by Ray.

    python examples/torch/fashion_mnist_ray.py --num-workers 2 -- --epochs 1
    python examples/torch/fashion_mnist_ray.py --address h0:6390 \\
        --num-hosts 4 --num-workers-per-host 1 -- --epochs 2

Arguments after `--` go to fashion_mnist.py's main().  Without --address
it starts a local Ray of --num-workers CPUs; with one (a head's
host:port, or "auto") it joins that cluster, whose nodes need hvd and the
Fashion-MNIST files (Debian's dataset-fashion-mnist) at the same paths.
--num-workers packs the actors on as few nodes as fit; --num-hosts spreads
them, --num-workers-per-host on each of that many nodes (RayExecutor's
parameters).  Prints a line per rank (its host, test accuracy and final
weights' SHA-256), then `test_accuracy=0.NNNN` as the plain example does.
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
parser.add_argument("--num-hosts", type=int, default=None,
                    help="spread the ranks over this many nodes (instead of --num-workers)")
parser.add_argument("--num-workers-per-host", type=int, default=1,
                    help="ranks on each of --num-hosts nodes")
parser.add_argument("--cpus-per-worker", type=int, default=1)
parser.add_argument("--address", default=None, help="a Ray cluster to join (default: local)")
parser.add_argument("--timeout", type=int, default=120,
                    help="seconds for the actors to start and the ranks to meet")


def executor(args):
    settings = RayExecutor.create_settings(timeout_s=args.timeout)
    if args.num_hosts:
        return RayExecutor(settings, num_hosts=args.num_hosts,
                           num_workers_per_host=args.num_workers_per_host,
                           cpus_per_worker=args.cpus_per_worker)
    return RayExecutor(settings, num_workers=args.num_workers,
                       cpus_per_worker=args.cpus_per_worker)


def main():
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.address:
        ray.init(address=args.address)
    else:
        workers = args.num_hosts * args.num_workers_per_host if args.num_hosts else args.num_workers
        ray.init(num_cpus=workers * args.cpus_per_worker, include_dashboard=False)
    ex = executor(args)
    ex.start(extra_env_vars={"OMP_NUM_THREADS": "1"})
    try:
        reports = ex.run(example.rank_report, args=(rest,))
    finally:
        ex.shutdown()
        ray.shutdown()
    example.print_reports(reports)


if __name__ == "__main__":
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    main()
