"""examples/tensorflow: keras_fashion_mnist.py, Horovod's Keras recipe, reaches
Fashion-MNIST's usual accuracy at np 2 in two epochs on a subset, and np 1
with the same global batch (and so the same learning rate) lands close.
Run once by ctest (not in every rank): it starts the jobs itself."""
import os
import re
import subprocess
import sys

import pytest

BUILD = os.environ["HVD_BUILD_DIR"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "tensorflow", "keras_fashion_mnist.py")
SUBSET = ["--epochs", "2", "--train-limit", "12000", "--test-limit", "2000"]


def accuracy(np_, batch, lr):
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.fail("Debian's dataset-fashion-mnist is not installed (scripts/deps.sh test)")
    cmd = [os.path.join(BUILD, "hvdrun"), "-np", str(np_), sys.executable, EXAMPLE, *SUBSET,
           "--batch-size", str(batch), "--lr", str(lr)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    found = re.findall(r"test_accuracy=([0-9.]+)", p.stdout)
    assert len(found) == 1, p.stdout[-3000:]
    return float(found[0])


def test_recipe_at_np2_and_np1_with_the_same_global_batch():
    two = accuracy(2, 64, 0.001)      # global batch 128, lr 0.002 after scaling
    one = accuracy(1, 128, 0.002)
    assert two >= 0.80, two
    assert one >= 0.80, one
    assert abs(two - one) <= 0.04, (two, one)


def test_synthetic_benchmark_runs_and_reports_the_total():
    """examples/tensorflow/synthetic_benchmark.py (DistributedGradientTape,
    broadcast_variables inside tf.function) at np 2, a few batches."""
    cmd = [os.path.join(BUILD, "hvdrun"), "-np", "2", sys.executable,
           os.path.join(ROOT, "examples", "tensorflow", "synthetic_benchmark.py"),
           "--batch-size", "4", "--num-iters", "2", "--num-batches-per-iter", "1",
           "--num-warmup-batches", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert re.search(r"Total img/sec on 2 CPU\(s\): [0-9.]+ \+-[0-9.]+", p.stdout), p.stdout
