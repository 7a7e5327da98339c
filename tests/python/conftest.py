"""Shared set-up for hvd.torch's tests.

pytest runs in every rank of the job (ctest starts it alone, and under
`hvdrun -np 2` and `-np 4`), as Horovod's own suite runs under mpirun.  So
every rank collects the same tests in the same order and makes the same
collective calls; a test's body may depend on hvd.size() (the same on every
rank) but never skips on only some ranks.  References are computed inside
each test from inputs every rank can rebuild: rank r's input is a
deterministic function of (r, seed).
"""
import hashlib
import os

import pytest
import torch

torch.set_num_threads(1)
# A Horovod script that adds process sets after init() sets this; hvd may
# not need it, but setting it keeps the scripts runnable on both.
os.environ.setdefault("HOROVOD_DYNAMIC_PROCESS_SETS", "1")

import hvd.torch as hvd  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def hvd_session():
    hvd.init()
    yield hvd
    hvd.shutdown()


def rank_input(shape, dtype, rank, seed, low=0, high=10):
    """Rank `rank`'s input: small integers in [low, high), as `dtype`.

    Any rank can rebuild any other rank's input, so a test computes the
    expected result of a collective locally."""
    g = torch.Generator().manual_seed(1000003 * seed + 7919 * rank + 17)
    t = torch.randint(low, high, tuple(shape), generator=g, dtype=torch.int64)
    if dtype == torch.bool:
        return t % 2 == 1
    return t.to(dtype)


def rank_float(shape, rank, seed, dtype=torch.float32):
    """Rank `rank`'s random normal input (for tests with tolerances)."""
    g = torch.Generator().manual_seed(1000003 * seed + 7919 * rank + 29)
    return torch.randn(tuple(shape), generator=g, dtype=torch.float64).to(dtype)


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
