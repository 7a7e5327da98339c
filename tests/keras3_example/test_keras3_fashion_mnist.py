"""examples/keras/fashion_mnist.py, Horovod's Keras recipe with Keras 3, at
np 2 on the backend ctest names (KERAS_BACKEND, python.keras3.example.*):
it learns (4,000 samples, one epoch: far above chance, 0.7 to 0.8) and every
rank ends with the same model and optimizer state, bitwise.  Run once by
ctest (not in every rank): it starts the job itself."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(ROOT, "build"))
EXAMPLE = os.path.join(ROOT, "examples", "keras", "fashion_mnist.py")
FASHION = "/usr/share/datasets/fashion-mnist"


def test_recipe_learns_and_ends_the_same_on_every_rank():
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        pytest.fail("no Fashion-MNIST in %s (Debian's dataset-fashion-mnist)" % FASHION)
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    cmd = [os.path.join(BUILD, "hvdrun"), "-np", "2", sys.executable, EXAMPLE, "--epochs", "1",
           "--train-limit", "4000", "--test-limit", "1000"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    found = re.findall(r"\[0\]<stdout>:test_accuracy=([0-9.]+)", p.stdout)
    assert len(found) == 1, p.stdout[-3000:]
    assert float(found[0]) >= 0.65, (backend, found[0])
    digests = dict(re.findall(r"\[(\d)\]<stdout>:weights_sha256=([0-9a-f]+)", p.stdout))
    assert sorted(digests) == ["0", "1"] and digests["0"] == digests["1"], p.stdout[-3000:]
