"""Adasum on float16 and float32 CPU tensors, with Horovod's Adasum tests
(test_adasum_pytorch.py: orthogonal, parallel, stability, stability_2)
and their tolerance: |expected - got| / |expected| / 100 < the dtype's
machine epsilon.  Orthogonal vectors add; parallel ones average.  The
sizes are smaller than Horovod's 2**19 to keep the suite quick."""
import math

import numpy as np
import pytest
import torch

import hvd.torch as hvd
from conftest import assert_same_on_all_ranks

DTYPES = [np.float16, np.float32]


def are_close(dtype, want, got):
    ratio = np.linalg.norm(want - got) / np.linalg.norm(want) / 100.0
    return ratio < np.finfo(dtype).eps, ratio


def reduce_columns(qs, dtype, what):
    """Rank r's input is column r of each q; returns the reduced tensors."""
    tensors = [torch.from_numpy(np.ascontiguousarray(q[:, hvd.rank()].astype(dtype)))
               for q in qs]
    handles = [hvd.allreduce_async(t, op=hvd.Adasum, name="adasum.%s.%d" % (what, i))
               for i, t in enumerate(tensors)]
    out = [hvd.synchronize(h) for h in handles]
    assert all(o.dtype == tensors[0].dtype for o in out)
    assert_same_on_all_ranks(out, "Adasum results")
    return out


def check(dtype, wants, outs):
    for want, got in zip(wants, outs):
        ok, ratio = are_close(dtype, want, got.numpy().astype(np.float64))
        assert ok, "off by %g (eps %g)" % (ratio, np.finfo(dtype).eps)


def columns(dtype, seed, extra, make):
    """make(rng, n, size) for Horovod's four lengths, rounded to dtype."""
    size = hvd.size()
    rng = np.random.default_rng(seed)
    return [make(rng, n, size).astype(dtype).astype(np.float64)
            for n in (size * 20 - extra, size * 2 + 1, size + 2, 4096)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_orthogonal_vectors_add(dtype):
    qs = columns(dtype, 2, 17, lambda rng, n, size: np.linalg.qr(rng.normal(0, 1, (n, size)))[0])
    outs = reduce_columns(qs, dtype, "orthogonal")
    check(dtype, [q.sum(axis=1) for q in qs], outs)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_parallel_vectors_average(dtype):
    qs = columns(dtype, 3, 13, lambda rng, n, size: np.dot(rng.normal(0, 1, (n, 1)),
                                                           rng.normal(0, 1, (size, 1)).T))
    outs = reduce_columns(qs, dtype, "parallel")
    check(dtype, [q.sum(axis=1) / hvd.size() for q in qs], outs)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_stability_tiny_values(dtype):
    size = hvd.size()
    rng = np.random.default_rng(4)
    a = rng.normal(0, np.finfo(dtype).tiny, (1024, 1))
    r = rng.normal(0, 1, (size, 1))
    q = np.dot(a, r.T).astype(dtype).astype(np.float64)
    t = torch.from_numpy(np.ascontiguousarray(q[:, hvd.rank()].astype(dtype)))
    hvd.allreduce_(t, op=hvd.Adasum, name="adasum.tiny")
    check(dtype, [q.sum(axis=1) / size], [t])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_stability_wide_range_of_magnitudes(dtype):
    size = hvd.size()
    rng = np.random.default_rng(5)
    lo, hi = float(np.finfo(dtype).tiny), math.sqrt(float(np.finfo(dtype).max))
    a = rng.normal(0, 1, (1024, 1))
    r = np.array([hi ** ((i + 1) / size) * lo ** ((size - i - 1) / size)
                  for i in range(size)]).reshape(size, 1)
    rng.shuffle(r)
    q = np.dot(a, r.T).astype(dtype).astype(np.float64)
    t = torch.from_numpy(np.ascontiguousarray(q[:, hvd.rank()].astype(dtype)))
    hvd.allreduce_(t, op=hvd.Adasum, name="adasum.wide")
    check(dtype, [q.sum(axis=1) / size], [t])
