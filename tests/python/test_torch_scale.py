"""prescale_factor and postscale_factor with Horovod's arithmetic, bit for
bit: float32 scaled in float32 (the factor rounded to float32 first),
float64 in float64, float16 and bfloat16 in float32 and rounded once,
integers in float64 and back toward zero.  Each reference is torch
arithmetic in that dtype, compared with torch.equal, for allreduce,
grouped_allreduce, reducescatter and grouped_reducescatter.

So that the sum across ranks is exact whatever order the ranks add in,
only one rank holds a nonzero value at each element of a prescaled input
(the others add zeros); postscaled inputs are small integers, whose sums
are exact in every dtype.
"""
import pytest
import torch

import hvd.torch as hvd
from conftest import rank_input

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.uint8, torch.int8, torch.int32, torch.int64]
# Factors whose float32 rounding shows: 0.1 * x in float32 differs from
# the product in double rounded to float32 for many x.
FACTORS = [0.1, 0.37, 2.7, -1.3]
SHAPE = (9, 7)


def horovod_scale(t, factor):
    """t * factor in Horovod's arithmetic, with torch."""
    if t.dtype == torch.float64:
        return t * torch.tensor(factor, dtype=torch.float64)
    if t.dtype.is_floating_point:  # float32, float16, bfloat16: in float32
        return (t.float() * torch.tensor(factor, dtype=torch.float32)).to(t.dtype)
    return (t.double() * factor).trunc().to(t.dtype)


def factors_for(dtype):
    return [f for f in FACTORS if f > 0 or dtype not in (torch.uint8,)]


def inputs(dtype, seed):
    return [rank_input(SHAPE, dtype, r, seed, low=1, high=10) for r in range(hvd.size())]


def one_holder(ts):
    """Rank r keeps its value where the element's flat index is r mod size,
    zeros elsewhere: every element's sum is one rank's (scaled) value."""
    n = hvd.size()
    owner = torch.arange(ts[0].numel()).reshape(ts[0].shape) % n
    return [torch.where(owner == r, t, torch.zeros_like(t)) for r, t in enumerate(ts)]


def total(ts):
    out = ts[0].clone()
    for t in ts[1:]:
        out += t
    return out


def scatter_rows(dim0, n, r):
    base, extra = divmod(dim0, n)
    return r * base + min(r, extra), base + (1 if r < extra else 0)


def check(got, want, what):
    assert got.dtype == want.dtype, what
    assert torch.equal(got, want), "%s: %d of %d elements differ\n%s\n%s" % (
        what, int((got != want).sum()), want.numel(), got, want)


def test_the_issues_example_postscale_float32():
    """hvd.allreduce(t, average=False, postscale_factor=f) ==
    (size * t) * torch.tensor(f).float(), in every bit."""
    t = torch.arange(64, dtype=torch.float32) * 0.5 - 7.0
    for f in FACTORS:
        got = hvd.allreduce(t, average=False, postscale_factor=f)
        check(got, (hvd.size() * t) * torch.tensor(f).float(), "postscale %g" % f)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_allreduce_scale_factors(dtype):
    me = hvd.rank()
    for i, f in enumerate(factors_for(dtype)):
        ts = inputs(dtype, seed=40 + i)
        got = hvd.allreduce(ts[me], op=hvd.Sum, postscale_factor=f)
        check(got, horovod_scale(total(ts), f), "postscale %g" % f)
        sparse = one_holder(ts)
        got = hvd.allreduce(sparse[me], op=hvd.Sum, prescale_factor=f)
        want = total([horovod_scale(t, f) for t in sparse])
        check(got, want, "prescale %g" % f)
        got = hvd.allreduce(sparse[me], op=hvd.Sum, prescale_factor=f, postscale_factor=0.3)
        check(got, horovod_scale(want, 0.3), "prescale %g, postscale 0.3" % f)
        grouped = hvd.grouped_allreduce([sparse[me], ts[me]], op=hvd.Sum, prescale_factor=f,
                                        postscale_factor=0.3)
        check(grouped[0], horovod_scale(want, 0.3), "grouped prescale %g" % f)
        grouped = hvd.grouped_allreduce([ts[me], sparse[me][:2]], op=hvd.Sum, postscale_factor=f)
        check(grouped[0], horovod_scale(total(ts), f), "grouped postscale %g" % f)
        check(grouped[1], horovod_scale(total(sparse)[:2], f), "grouped postscale %g (2nd)" % f)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
def test_reducescatter_scale_factors(dtype):
    n, me = hvd.size(), hvd.rank()
    start, rows = scatter_rows(SHAPE[0], n, me)
    for i, f in enumerate(factors_for(dtype)):
        ts = inputs(dtype, seed=60 + i)
        got = hvd.reducescatter(ts[me], op=hvd.Sum, postscale_factor=f)
        check(got, horovod_scale(total(ts), f)[start:start + rows], "postscale %g" % f)
        sparse = one_holder(ts)
        want = total([horovod_scale(t, f) for t in sparse])
        got = hvd.reducescatter(sparse[me], op=hvd.Sum, prescale_factor=f, postscale_factor=0.3)
        check(got, horovod_scale(want, 0.3)[start:start + rows], "pre %g post 0.3" % f)
        got = hvd.grouped_reducescatter([sparse[me], ts[me]], op=hvd.Sum, prescale_factor=f)
        check(got[0], want[start:start + rows], "grouped prescale %g" % f)
        got = hvd.grouped_reducescatter([ts[me], sparse[me]], op=hvd.Sum, postscale_factor=f)
        check(got[0], horovod_scale(total(ts), f)[start:start + rows], "grouped postscale %g" % f)
        check(got[1], horovod_scale(total(sparse), f)[start:start + rows],
              "grouped postscale %g (second)" % f)
