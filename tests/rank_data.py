"""Each rank's test input, as numpy arrays, rebuilt on any rank.

pytest runs in every rank of a job, and rank r's input is a deterministic
function of (r, seed), so a test computes the expected result of a
collective locally from every rank's input.  One seeded generator for the
Python suites (tests/unit/ranks.h is the C tests' counterpart); a suite
converts the arrays to its framework's tensors.
"""
import numpy as np


def _generator(rank, seed, stream):
    return np.random.default_rng(1000003 * seed + 7919 * rank + stream)


def rank_input(shape, dtype, rank, seed, low=0, high=10):
    """Small integers in [low, high) as `dtype` (exact in every dtype, so
    sums compare exactly); for bool, the odd ones."""
    a = np.asarray(_generator(rank, seed, 17).integers(low, high, size=shape))
    if dtype == np.bool_:
        return a % 2 == 1
    return a.astype(dtype)


def rank_float(shape, rank, seed, dtype=np.float32):
    """Standard normal values as `dtype` (for tests with tolerances)."""
    return np.asarray(_generator(rank, seed, 29).standard_normal(shape)).astype(dtype)
