"""examples/torch/fashion_mnist_ray.py itself, as a user runs it, on the
Ray cluster of the 4 emulated hosts (its driver in h0): 4 ranks, one per
node (--num-hosts 4), reach the plain example's accuracy under hvdrun and
agree on it and on their final weights (fashion_example.py).  This file
runs first in the directory, before test_ray_elastic.py takes a node away."""
import os

import fashion_example


def test_fashion_mnist_ray_example_across_hosts(ray_cluster, build_dir, tmp_path):
    cluster = ray_cluster
    cluster.check()
    address = cluster.cmd("ray", "address", check=True).stdout.strip()
    engine = ["--address", address, "--num-hosts", "4", "--num-workers-per-host", "1"]
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"),
               RAY_AUTH_MODE="disabled")
    reports, accuracy = fashion_example.run(cluster, "fashion_mnist_ray.py", engine, env,
                                            str(tmp_path))
    fashion_example.check(reports, accuracy, cluster.hosts)
