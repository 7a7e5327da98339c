"""Shared set-up for hvd.mxnet's tests (the MXNet venv, scripts/venv-mxnet.sh).

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as tests/python does for hvd.torch: every rank
collects the same tests in the same order and makes the same collective
calls.  Rank r's input is a deterministic function of (r, seed), so each
test computes its reference with NumPy from every rank's input.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hvd.mxnet as hvd  # noqa: E402

# The dtypes MXNet and Horovod share.
DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8]


@pytest.fixture(scope="session", autouse=True)
def hvd_session():
    hvd.init()
    yield hvd
    hvd.shutdown()


def rank_input(shape, dtype, rank, seed, low=0, high=10):
    """Rank `rank`'s input: small integers in [low, high) as `dtype`
    (exact in every dtype, so sums compare exactly)."""
    g = np.random.default_rng(1000003 * seed + 7919 * rank + 17)
    return g.integers(low, high, size=shape).astype(dtype)


def every_rank(shape, dtype, seed, n=None, **kw):
    """Every rank's input, in rank order."""
    return [rank_input(shape, dtype, r, seed, **kw) for r in range(n or hvd.size())]
