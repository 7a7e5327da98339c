"""examples/jax/fashion_mnist.py under hvdrun at np 2 and 4 reaches an MLP's
usual accuracy on a subset of Fashion-MNIST (12,000 training samples, two
epochs: about 0.83; one process on the same data gets the same)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build"))
FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.parametrize("np_", [2, 4])
def test_fashion_mnist_reaches_its_accuracy(np_):
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        pytest.fail("no Fashion-MNIST in %s (Debian's dataset-fashion-mnist)" % FASHION)
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false")
    p = subprocess.run([os.path.join(BUILD, "hvdrun"), "-np", str(np_), sys.executable,
                        os.path.join(ROOT, "examples/jax/fashion_mnist.py"), "--epochs", "2",
                        "--train-limit", "12000", "--test-limit", "2000"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    acc = [l.split("test_accuracy=")[1] for l in p.stdout.splitlines()
           if "test_accuracy=" in l]
    assert len(acc) == 1, p.stdout  # rank 0 only
    assert p.stdout.count("[0]<stdout>:test_accuracy=") == 1, p.stdout
    assert float(acc[0]) > 0.78, p.stdout
