"""The data of the Keras suites (tests/tensorflow/test_keras.py,
tests/keras3): a global batch of n * B samples per step, STEPS steps;
rank r trains on its B samples of every global batch, so n ranks with
averaged gradients must match one process on the global batches."""
import numpy as np

B, STEPS = 4, 3


def data(n):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(n * B * STEPS, 4)).astype(np.float32)
    y = rng.normal(size=(n * B * STEPS, 2)).astype(np.float32)
    return x, y


def shard(a, n, r):
    """Rank r's samples: its B of every global batch of n * B."""
    return np.concatenate([a[s * n * B + r * B: s * n * B + (r + 1) * B] for s in range(STEPS)])
