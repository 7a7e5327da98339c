"""examples/mxnet under hvdrun at np 2: the Gluon Fashion-MNIST CNN with
DistributedTrainer reaches its usual accuracy on a subset (12,000
training samples, two epochs: about 0.83; one process on the same data
gets as much), and the synthetic benchmark runs a small model and prints
Horovod's lines."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build"))
FASHION = "/usr/share/datasets/fashion-mnist"


def hvdrun(np_, script, *args):
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
    return subprocess.run([os.path.join(BUILD, "hvdrun"), "-np", str(np_), sys.executable,
                           os.path.join(ROOT, "examples/mxnet", script)] + list(args),
                          env=env, capture_output=True, text=True, timeout=600)


def test_fashion_mnist_reaches_its_accuracy():
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        pytest.fail("no Fashion-MNIST in %s (Debian's dataset-fashion-mnist)" % FASHION)
    p = hvdrun(2, "fashion_mnist.py", "--epochs", "2", "--train-limit", "12000",
               "--test-limit", "2000")
    assert p.returncode == 0, p.stdout + p.stderr
    acc = [l.split("test_accuracy=")[1] for l in p.stdout.splitlines() if "test_accuracy=" in l]
    assert len(acc) == 1 and "[0]<stdout>:test_accuracy=" in p.stdout, p.stdout  # rank 0 only
    assert float(acc[0]) > 0.78, p.stdout
    losses = [float(x) for x in re.findall(r"epoch \d: loss ([0-9.]+)", p.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0], p.stdout


def test_synthetic_benchmark_prints_its_rates():
    p = hvdrun(2, "synthetic_benchmark.py", "--model", "resnet18_v1", "--batch-size", "2",
               "--image-size", "32", "--num-warmup-batches", "1", "--num-batches-per-iter", "1",
               "--num-iters", "2", "--fp16-allreduce")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[0]<stdout>:Number of CPUs: 2" in p.stdout, p.stdout
    assert len(re.findall(r"Iter #\d: [0-9.]+ img/sec per CPU", p.stdout)) == 2, p.stdout
    assert re.search(r"\[0\]<stdout>:Total img/sec on 2 CPU\(s\): [0-9.]+ \+-[0-9.]+", p.stdout)
    assert "[1]<stdout>:Total" not in p.stdout  # rank 0 only
