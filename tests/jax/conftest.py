"""Shared set-up for hvd.jax's tests (the project's venv, with JAX).

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as tests/python does for hvd.torch: every
rank collects the same tests in the same order and makes the same
collective calls.  Rank r's input is a deterministic function of (r,
seed), so each test computes its reference with NumPy from every rank's
input.  JAX compiles slowly on the CI's two cores: tests jit few
functions, each once, over small arrays.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hvd.jax as hvd  # noqa: E402

# int64 and float64 arrays stay 64-bit, so every dtype hvd takes is tested.
jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session", autouse=True)
def hvd_session():
    hvd.init()
    yield hvd
    hvd.shutdown()


def rank_input(shape, dtype, rank, seed, low=0, high=10):
    """Rank `rank`'s input: small integers in [low, high) as `dtype`
    (exact in every dtype, so sums compare exactly)."""
    g = np.random.default_rng(1000003 * seed + 7919 * rank + 17)
    x = g.integers(low, high, size=shape)
    return (x % 2 == 1) if dtype == np.bool_ else x.astype(dtype)


def rank_float(shape, rank, seed):
    """Rank `rank`'s random normal float32 input (for gradients)."""
    g = np.random.default_rng(1000003 * seed + 7919 * rank + 29)
    return g.standard_normal(shape).astype(np.float32)
