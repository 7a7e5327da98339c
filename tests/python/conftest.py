"""Shared set-up for hvd.torch's tests.

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as Horovod's own suite runs under mpirun.  So
every rank collects the same tests in the same order and makes the same
collective calls; a test's body may depend on hvd.size() (the same on every
rank) but never skips on only some ranks.  References are computed inside
each test from inputs every rank can rebuild: rank r's input is a
deterministic function of (r, seed) (tests/rank_data.py's, as tensors).
tests/conftest.py starts and ends hvd.
"""
import hashlib
import os

import numpy as np
import pytest
import rank_data
import torch

torch.set_num_threads(1)
# A Horovod script that adds process sets after init() sets this; hvd may
# not need it, but setting it keeps the scripts runnable on both.
os.environ.setdefault("HOROVOD_DYNAMIC_PROCESS_SETS", "1")

import hvd.torch as hvd  # noqa: E402


@pytest.fixture(scope="session")
def hvd_binding():
    return hvd


def rank_input(shape, dtype, rank, seed, low=0, high=10):
    """Rank `rank`'s input: small integers in [low, high), as `dtype`
    (tests/rank_data.py's, as a tensor).

    Any rank can rebuild any other rank's input, so a test computes the
    expected result of a collective locally."""
    t = torch.from_numpy(rank_data.rank_input(shape, np.int64, rank, seed, low, high))
    if dtype == torch.bool:
        return t % 2 == 1
    return t.to(dtype)


def rank_float(shape, rank, seed, dtype=torch.float32):
    """Rank `rank`'s random normal input (for tests with tolerances)."""
    return torch.from_numpy(rank_data.rank_float(shape, rank, seed, np.float64)).to(dtype)


def digest(tensors):
    """sha256 of the bytes of tensors (bitwise comparison across ranks)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        h.update(str(t.dtype).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def assert_same_on_all_ranks(tensors, what="tensors"):
    """Every rank holds bitwise the same tensors (compares sha256 digests)."""
    mine = digest(tensors)
    everyone = hvd.allgather_object(mine)
    assert all(d == mine for d in everyone), "%s differ across ranks: %s" % (what, everyone)
