"""hvd.torch collectives against references computed in the test:
allreduce (every op and dtype Horovod allows, in-place and async forms,
prescale/postscale, compression), grouped_allreduce, allgather (uneven
first dimensions), broadcast, alltoall (with and without splits),
reducescatter (uneven first dimension), integer scale factors (against
numpy), poll/synchronize, barrier, join, Adasum and process sets."""
import time

import numpy as np
import pytest
import torch

import hvd.torch as hvd
from conftest import assert_same_on_all_ranks, rank_float, rank_input

INT_TYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
FLOAT_TYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
REDUCE_TYPES = INT_TYPES + FLOAT_TYPES
ALL_TYPES = REDUCE_TYPES + [torch.bool]
SIGNED = {torch.int8, torch.int16, torch.int32, torch.int64} | set(FLOAT_TYPES)


def inputs(shape, dtype, seed, low=0, high=10):
    n = hvd.size()
    return [rank_input(shape, dtype, r, seed, low, high) for r in range(n)]


def ref_reduce(ts, op, dtype):
    """Reference reduction of the per-rank tensors ts (computed exactly:
    integers in int64, floats in float64, then cast back)."""
    n = len(ts)
    if dtype in FLOAT_TYPES:
        w = [t.to(torch.float64) for t in ts]
    else:
        w = [t.to(torch.int64) for t in ts]
    if op in (hvd.Sum, hvd.Average):
        out = sum(w[1:], w[0].clone())
        if op == hvd.Average:
            out = out / n if dtype in FLOAT_TYPES else torch.div(out, n, rounding_mode="trunc")
    elif op == hvd.Min:
        out = torch.stack(w).min(0).values
    elif op == hvd.Max:
        out = torch.stack(w).max(0).values
    elif op == hvd.Product:
        out = w[0].clone()
        for t in w[1:]:
            out = out * t
    return out.to(dtype)


def assert_equal(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.equal(got, want), (got, want)


def test_topology():
    import os
    assert hvd.is_initialized()
    size = int(os.environ.get("HOROVOD_SIZE", "1"))
    assert hvd.size() == size
    assert hvd.rank() == int(os.environ.get("HOROVOD_RANK", "0"))
    # hvdrun starts every rank on this host.
    assert hvd.local_size() == size and hvd.local_rank() == hvd.rank()
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert hvd.allgather_object(hvd.rank()) == list(range(size))
    assert len({hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product}) == 6


@pytest.mark.parametrize("dtype", REDUCE_TYPES, ids=str)
@pytest.mark.parametrize("opname", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_dtypes_ops(dtype, opname):
    op = getattr(hvd, opname)
    signed = dtype in SIGNED
    low, high = ((1, 3) if opname == "Product" else (-5 if signed else 0, 10))
    ts = inputs((3, 5), dtype, seed=11, low=low, high=high)
    mine = ts[hvd.rank()]
    before = mine.clone()
    out = hvd.allreduce(mine, op=op, name="ar.%s.%s" % (opname, dtype))
    assert_equal(mine, before)  # the input is not modified
    assert_equal(out, ref_reduce(ts, op, dtype))


@pytest.mark.parametrize("dtype", REDUCE_TYPES, ids=str)
def test_allreduce_default_is_average_and_inplace(dtype):
    ts = inputs((4, 3), dtype, seed=12, low=-5 if dtype in SIGNED else 0)
    want = ref_reduce(ts, hvd.Average, dtype)
    assert_equal(hvd.allreduce(ts[hvd.rank()]), want)
    t = ts[hvd.rank()].clone()
    res = hvd.allreduce_(t, op=hvd.Average)
    assert_equal(t, want)
    assert_equal(res, want)


def test_allreduce_average_flag_backwards_compatible():
    ts = inputs((6,), torch.float32, seed=13)
    assert_equal(hvd.allreduce(ts[hvd.rank()], average=False), ref_reduce(ts, hvd.Sum, torch.float32))
    assert_equal(hvd.allreduce(ts[hvd.rank()], average=True),
                 ref_reduce(ts, hvd.Average, torch.float32))


@pytest.mark.parametrize("dtype", REDUCE_TYPES, ids=str)
def test_allreduce_async_forms(dtype):
    ts = inputs((2, 7), dtype, seed=14)
    mine = ts[hvd.rank()]
    h1 = hvd.allreduce_async(mine, op=hvd.Sum, name="async.sum.%s" % dtype)
    inplace = mine.clone()
    h2 = hvd.allreduce_async_(inplace, op=hvd.Max, name="async.max.%s" % dtype)
    # Complete out of order.
    out2 = hvd.synchronize(h2)
    out1 = hvd.synchronize(h1)
    assert_equal(out1, ref_reduce(ts, hvd.Sum, dtype))
    assert_equal(inplace, ref_reduce(ts, hvd.Max, dtype))
    assert_equal(out2, ref_reduce(ts, hvd.Max, dtype))


def test_poll_then_synchronize():
    ts = inputs((1000,), torch.float32, seed=15)
    handles = [hvd.allreduce_async(ts[hvd.rank()] + i, op=hvd.Sum, name="poll.%d" % i)
               for i in range(4)]
    deadline = time.monotonic() + 30
    for h in handles:
        while not hvd.poll(h):
            assert time.monotonic() < deadline, "poll() never reported completion"
            time.sleep(0.001)
    outs = [hvd.synchronize(h) for h in handles]
    base = ref_reduce(ts, hvd.Sum, torch.float32)
    for i, out in enumerate(outs):
        assert_equal(out, base + i * hvd.size())


def test_many_async_ops_of_mixed_dtypes():
    hs = []
    for i, dtype in enumerate(REDUCE_TYPES * 2):
        ts = inputs((i + 1, 3), dtype, seed=100 + i)
        hs.append((hvd.allreduce_async(ts[hvd.rank()], op=hvd.Sum, name="mixed.%d" % i),
                   ref_reduce(ts, hvd.Sum, dtype)))
    for h, want in reversed(hs):
        assert_equal(hvd.synchronize(h), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_prescale_postscale(dtype):
    ts = inputs((5, 4), dtype, seed=16)
    mine = ts[hvd.rank()]
    n = hvd.size()
    ssum = ref_reduce(ts, hvd.Sum, dtype).to(torch.float64)
    out = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    torch.testing.assert_close(out, (ssum * 0.5 * 3.0).to(dtype), rtol=1e-6, atol=1e-6)
    out = hvd.allreduce(mine, op=hvd.Average, prescale_factor=0.25, postscale_factor=2.0)
    torch.testing.assert_close(out, (ssum * 0.25 / n * 2.0).to(dtype), rtol=1e-6, atol=1e-6)
    t = mine.clone()
    hvd.allreduce_(t, op=hvd.Sum, prescale_factor=2.0)
    torch.testing.assert_close(t, (ssum * 2.0).to(dtype), rtol=1e-6, atol=1e-6)
    h = hvd.allreduce_async(mine, op=hvd.Sum, postscale_factor=0.5)
    torch.testing.assert_close(hvd.synchronize(h), (ssum * 0.5).to(dtype), rtol=1e-6, atol=1e-6)


def np_dtype(dtype):
    return torch.empty(0, dtype=dtype).numpy().dtype


def np_scale(x, factor, dtype):
    """x (int64) times factor in double precision, rounded toward zero and
    saturated at dtype's range: hvd's (and Horovod's) integer scaling."""
    info = torch.iinfo(dtype)
    return np.clip(np.trunc(x.astype(np.float64) * factor), info.min, info.max).astype(np.int64)


def int_scaled_reference(ts, op, pre, post, dtype):
    """Reference of an integer allreduce with scale factors, in numpy:
    each input scaled, summed in dtype (two's complement), divided toward
    zero for Average, then scaled again."""
    scaled = np.stack([np_scale(t.numpy().astype(np.int64), pre, dtype) for t in ts])
    total = scaled.astype(np_dtype(dtype)).sum(axis=0, dtype=np_dtype(dtype)).astype(np.int64)
    if op == hvd.Average:
        total = np.sign(total) * (np.abs(total) // len(ts))
    return torch.from_numpy(np_scale(total, post, dtype)).to(dtype)


INT_SCALES = [(2.5, 0.75), (-1.5, 1.0), (1.0, -0.4), (0.3, 3.7)]


@pytest.mark.parametrize("dtype", INT_TYPES, ids=str)
@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_integer_prescale_postscale(dtype, opname):
    op = getattr(hvd, opname)
    low = -20 if dtype in SIGNED else 0
    ts = inputs((4, 5), dtype, seed=18, low=low, high=low + 40)
    mine = ts[hvd.rank()]
    for i, (pre, post) in enumerate(INT_SCALES):
        want = int_scaled_reference(ts, op, pre, post, dtype)
        out = hvd.allreduce(mine, op=op, prescale_factor=pre, postscale_factor=post,
                            name="int.scale.%s.%s.%d" % (opname, dtype, i))
        assert_equal(out, want)
        t = mine.clone()
        hvd.allreduce_(t, op=op, prescale_factor=pre, postscale_factor=post)
        assert_equal(t, want)
        grouped = hvd.grouped_allreduce([mine, mine[:1]], op=op, prescale_factor=pre,
                                        postscale_factor=post)
        assert_equal(grouped[0], want)
        assert_equal(grouped[1], want[:1])


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16], ids=str)
def test_integer_scaling_saturates(dtype):
    info = torch.iinfo(dtype)
    low = -9 if dtype in SIGNED else 1
    ts = inputs((6,), dtype, seed=19, low=low, high=10)
    mine = ts[hvd.rank()]
    big = 2.0 * (info.max - info.min)
    for pre, post in ((1.0, big), (1.0, -big), (big, 1.0)):
        want = int_scaled_reference(ts, hvd.Sum, pre, post, dtype)
        out = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=pre, postscale_factor=post)
        assert_equal(out, want)
    assert int(hvd.allreduce(torch.tensor([5], dtype=dtype), op=hvd.Sum,
                             postscale_factor=big)) == info.max


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_integer_reducescatter_scaling(dtype):
    n, me = hvd.size(), hvd.rank()
    dim0 = 2 * n + 1
    ts = inputs((dim0, 2), dtype, seed=22, low=-20, high=20)
    start, rows = _scatter_rows(dim0, n, me)
    for op in (hvd.Sum, hvd.Average):
        want = int_scaled_reference(ts, op, 1.5, -0.5, dtype)[start:start + rows]
        out = hvd.reducescatter(ts[me], op=op, prescale_factor=1.5, postscale_factor=-0.5)
        assert_equal(out, want)


def test_half_precision_reduces_in_float32_and_rounds_once():
    # Rank 0 holds 1.0, the others 0.75 half-ulps of 1.0 each: added one by
    # one in half precision they would all vanish; summed in float32 and
    # rounded once they carry (1 + 2.25 half-ulps -> 1 + 1 ulp at size 4).
    n, me = hvd.size(), hvd.rank()
    for dtype in (torch.float16, torch.bfloat16):
        small = torch.finfo(dtype).eps / 2 * 0.75
        vals = [1.0] + [small] * (n - 1)
        mine = torch.tensor([vals[me], 2.0 * vals[me]], dtype=dtype)
        out = hvd.allreduce(mine, op=hvd.Sum)
        exact = torch.tensor([sum(vals), 2.0 * sum(vals)], dtype=torch.float64)
        assert_equal(out, exact.to(torch.float32).to(dtype))


def test_compression():
    t = rank_float((17,), hvd.rank(), seed=17)
    c, ctx = hvd.Compression.fp16.compress(t)
    assert c.dtype == torch.float16
    assert hvd.Compression.fp16.decompress(c, ctx).dtype == torch.float32
    c, ctx = hvd.Compression.none.compress(t)
    assert c is t or torch.equal(c, t)
    ts = [rank_float((17,), r, seed=17) for r in range(hvd.size())]
    want = sum(x.to(torch.float64) for x in ts) / hvd.size()
    for comp in (hvd.Compression.none, hvd.Compression.fp16):
        out = hvd.allreduce(t, compression=comp)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.to(torch.float64), want, rtol=2e-3, atol=2e-3)


def test_grouped_allreduce_all_forms():
    shapes = [(3,), (2, 5), (1, 1, 4), (7,)]
    ts = [inputs(s, torch.float32, seed=20 + i) for i, s in enumerate(shapes)]
    mine = [t[hvd.rank()] for t in ts]
    want_sum = [ref_reduce(t, hvd.Sum, torch.float32) for t in ts]
    want_avg = [ref_reduce(t, hvd.Average, torch.float32) for t in ts]
    outs = hvd.grouped_allreduce(mine, op=hvd.Sum, name="grouped.sum")
    for o, w in zip(outs, want_sum):
        assert_equal(o, w)
    outs = hvd.grouped_allreduce(mine)  # Average by default
    for o, w in zip(outs, want_avg):
        assert_equal(o, w)
    h = hvd.grouped_allreduce_async(mine, op=hvd.Sum)
    for o, w in zip(hvd.synchronize(h), want_sum):
        assert_equal(o, w)
    copies = [m.clone() for m in mine]
    hvd.grouped_allreduce_(copies, op=hvd.Sum, postscale_factor=0.5)
    for o, w in zip(copies, want_sum):
        assert_equal(o, w * 0.5)
    copies = [m.clone() for m in mine]
    h = hvd.grouped_allreduce_async_(copies, op=hvd.Average)
    hvd.synchronize(h)
    for o, w in zip(copies, want_avg):
        assert_equal(o, w)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=str)
def test_allgather_uneven_first_dim(dtype):
    n = hvd.size()
    ts = [rank_input((r + 1, 2, 3), dtype, r, seed=30) for r in range(n)]
    want = torch.cat(ts)
    out = hvd.allgather(ts[hvd.rank()], name="gather.%s" % dtype)
    assert_equal(out, want)
    out = hvd.synchronize(hvd.allgather_async(ts[hvd.rank()]))
    assert_equal(out, want)


def test_allgather_zero_rows_and_scalars_rows():
    n = hvd.size()
    # Rank 0 contributes no rows.
    ts = [torch.full((r, 4), float(r)) for r in range(n)]
    assert_equal(hvd.allgather(ts[hvd.rank()]), torch.cat(ts))
    ts = [torch.tensor([r * 10 + 1], dtype=torch.int64) for r in range(n)]
    assert_equal(hvd.allgather(ts[hvd.rank()]), torch.cat(ts))


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=str)
def test_broadcast_every_root(dtype):
    n = hvd.size()
    for root in range(n):
        ts = [rank_input((3, 4), dtype, r, seed=40 + root) for r in range(n)]
        mine = ts[hvd.rank()]
        before = mine.clone()
        out = hvd.broadcast(mine, root_rank=root, name="bcast.%s.%d" % (dtype, root))
        assert_equal(mine, before)
        assert_equal(out, ts[root])
        t = mine.clone()
        res = hvd.broadcast_(t, root)
        assert_equal(t, ts[root])
        assert_equal(res, ts[root])
        assert_equal(hvd.synchronize(hvd.broadcast_async(mine, root)), ts[root])
        t = mine.clone()
        hvd.synchronize(hvd.broadcast_async_(t, root))
        assert_equal(t, ts[root])


def _alltoall_tensor(src, n, rows_to, dtype):
    """Rank src's alltoall input: rows_to[d] rows for rank d, each row
    encoding (src, d, j)."""
    rows = []
    for d in range(n):
        for j in range(rows_to[d]):
            rows.append(torch.tensor([src, d, j]))
    if not rows:
        return torch.zeros((0, 3), dtype=dtype)
    return torch.stack(rows).to(dtype)


@pytest.mark.parametrize("dtype", ALL_TYPES, ids=str)
def test_alltoall_equal_splits(dtype):
    n, me = hvd.size(), hvd.rank()
    if dtype == torch.bool:
        ts = [rank_input((2 * n, 3), dtype, r, seed=50) for r in range(n)]
        want = torch.cat([ts[s][2 * me:2 * me + 2] for s in range(n)])
    else:
        ts = [_alltoall_tensor(s, n, [2] * n, dtype) for s in range(n)]
        want = torch.cat([_alltoall_tensor(s, n, [2] * n, dtype)[2 * me:2 * me + 2]
                          for s in range(n)])
    out = hvd.alltoall(ts[me])
    assert isinstance(out, torch.Tensor)  # no splits given: just the tensor
    assert_equal(out, want)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.float16, torch.float32,
                                   torch.float64])
def test_alltoall_with_splits(dtype):
    n, me = hvd.size(), hvd.rank()

    def splits_of(s):
        return [(s + d) % 3 for d in range(n)]  # some zero-row pieces

    ts = [_alltoall_tensor(s, n, splits_of(s), dtype) for s in range(n)]
    want = torch.cat([torch.stack([torch.tensor([s, me, j]) for j in range(splits_of(s)[me])])
                      .to(dtype) if splits_of(s)[me] else torch.zeros((0, 3), dtype=dtype)
                      for s in range(n)])
    want_recv = [splits_of(s)[me] for s in range(n)]
    out, recv = hvd.alltoall(ts[me], splits=torch.tensor(splits_of(me), dtype=torch.int32))
    assert_equal(out, want)
    assert [int(x) for x in recv] == want_recv
    # splits as a list, and the async form
    out, recv = hvd.alltoall(ts[me], splits=splits_of(me))
    assert_equal(out, want)
    assert [int(x) for x in recv] == want_recv
    out, recv = hvd.synchronize(hvd.alltoall_async(ts[me], splits=splits_of(me)))
    assert_equal(out, want)
    assert [int(x) for x in recv] == want_recv


def _scatter_rows(dim0, n, r):
    base, extra = divmod(dim0, n)
    start = r * base + min(r, extra)
    return start, base + (1 if r < extra else 0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float16, torch.bfloat16,
                                   torch.float32, torch.float64])
def test_reducescatter_uneven(dtype):
    n, me = hvd.size(), hvd.rank()
    dim0 = 2 * n + 1
    ts = inputs((dim0, 3), dtype, seed=60)
    start, rows = _scatter_rows(dim0, n, me)
    for op in (hvd.Sum, hvd.Average):
        out = hvd.reducescatter(ts[me], op=op)
        assert_equal(out, ref_reduce(ts, op, dtype)[start:start + rows])
    # the default op is Average, as Horovod's
    assert_equal(hvd.reducescatter(ts[me]), ref_reduce(ts, hvd.Average, dtype)[start:start + rows])


def test_reducescatter_scaling():
    n, me = hvd.size(), hvd.rank()
    ts = inputs((3 * n, 2), torch.float32, seed=61)
    start, rows = _scatter_rows(3 * n, n, me)
    out = hvd.reducescatter(ts[me], op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0)
    assert_equal(out, ref_reduce(ts, hvd.Sum, torch.float32)[start:start + rows] * 2.0)


def test_barrier():
    for _ in range(3):
        hvd.barrier()


def _adasum_pair(a, b):
    dot = torch.dot(a, b)
    na, nb = torch.dot(a, a), torch.dot(b, b)
    return a + b - dot / (2 * na) * a - dot / (2 * nb) * b


def _adasum_ref(vs):
    while len(vs) > 1:
        vs = [_adasum_pair(vs[i], vs[i + 1]) for i in range(0, len(vs), 2)]
    return vs[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adasum_allreduce(dtype):
    n, me = hvd.size(), hvd.rank()  # 1, 2 and 4: all powers of two
    vs = [rank_float((33,), r, seed=70, dtype=torch.float64) for r in range(n)]
    out = hvd.allreduce(vs[me].to(dtype), op=hvd.Adasum, name="adasum.%s" % dtype)
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(out.to(torch.float64), _adasum_ref(vs), rtol=tol, atol=tol)
    assert_same_on_all_ranks([out], "adasum results")
    # identical inputs: Adasum of equal vectors is the vector itself
    same = rank_float((9,), 0, seed=71, dtype=dtype)
    torch.testing.assert_close(hvd.allreduce(same, op=hvd.Adasum), same, rtol=tol, atol=tol)


def test_join_uneven_batches():
    """Rank r has r+1 batches; ranks that run out call join(), and the
    others' allreduces then see zeros from them (Average still divides by
    the full size).  (An allgather meanwhile fails: see test_torch_errors.)"""
    n, me = hvd.size(), hvd.rank()

    def value(r, i):
        return torch.full((4,), float(10 * r + i + 1))

    got, errors = [], []
    for i in range(me + 1):
        # errors are kept for the end, so that every rank still joins (a
        # failure here must not shift the next tests' calls)
        try:
            s = hvd.allreduce(value(me, i), op=hvd.Sum, name="join.sum.%d" % i)
            a = hvd.allreduce(value(me, i), name="join.avg.%d" % i)
            got.append((s, a))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    last = hvd.join()
    after = hvd.allreduce(torch.ones(3), op=hvd.Sum, name="join.after")
    if errors:
        raise errors[0]
    assert last == n - 1
    for i, (s, a) in enumerate(got):
        active = [r for r in range(n) if r >= i]
        want = sum(value(r, i) for r in active)
        assert_equal(s, want)
        assert_equal(a, want / n)
    # after join the job goes on normally
    assert_equal(after, torch.full((3,), float(n)))


def test_join_with_int_average():
    n, me = hvd.size(), hvd.rank()
    got = None
    if me == n - 1:
        got = hvd.allreduce(torch.tensor([7, -7, 9], dtype=torch.int32), name="join.int")
    hvd.join()
    if me == n - 1:
        want = torch.div(torch.tensor([7, -7, 9], dtype=torch.int32), n, rounding_mode="trunc")
        assert_equal(got, want)


def _process_sets_for(n):
    """Sets of one rank and of several, none of them every rank (adding
    the global set again is refused, as in Horovod)."""
    if n == 1:
        return []
    sets = [[0], [n - 1]]
    if n >= 4:
        sets += [[0, 1], [0, 2], [1, 2, 3]]
    return sets


def test_global_process_set():
    ps = hvd.global_process_set
    assert ps.size() == hvd.size()
    assert ps.rank() == hvd.rank()
    assert ps.included()
    ts = inputs((3,), torch.int32, seed=80)
    assert_equal(hvd.allreduce(ts[hvd.rank()], op=hvd.Sum, process_set=ps),
                 ref_reduce(ts, hvd.Sum, torch.int32))


def test_process_sets_collectives():
    n, me = hvd.size(), hvd.rank()
    added = [hvd.add_process_set(ranks) for ranks in _process_sets_for(n)]
    try:
        for ranks, ps in zip(_process_sets_for(n), added):
            assert list(ps.ranks) == ranks
            assert ps.included() == (me in ranks)
            if me not in ranks:
                continue
            assert ps.size() == len(ranks)
            assert ps.rank() == ranks.index(me)
            members = [rank_input((2, 3), torch.float32, r, seed=81) for r in ranks]
            mine = members[ranks.index(me)]
            assert_equal(hvd.allreduce(mine, op=hvd.Sum, process_set=ps),
                         ref_reduce(members, hvd.Sum, torch.float32))
            assert_equal(hvd.allreduce(mine, process_set=ps),
                         ref_reduce(members, hvd.Average, torch.float32))
            rows = [rank_input((r + 1, 2), torch.int64, r, seed=82) for r in ranks]
            assert_equal(hvd.allgather(rows[ranks.index(me)], process_set=ps), torch.cat(rows))
            root = ranks[-1]
            assert_equal(hvd.broadcast(mine, root_rank=root, process_set=ps),
                         members[ranks.index(root)])
            groups = hvd.grouped_allreduce([mine, mine * 2], op=hvd.Sum, process_set=ps)
            assert_equal(groups[1], ref_reduce(members, hvd.Sum, torch.float32) * 2)
            assert hvd.broadcast_object({"root": root, "me": me}, root_rank=root,
                                        process_set=ps) == {"root": root, "me": root}
            assert hvd.allgather_object(me, process_set=ps) == ranks
            hvd.barrier(process_set=ps)
    finally:
        removed = [hvd.remove_process_set(ps) for ps in added]
    assert all(removed)


def test_process_set_object_and_reuse():
    n = hvd.size()
    if n == 1:
        pytest.skip("only the global process set at size 1")  # same on every rank
    ps = hvd.ProcessSet([n - 1, 0])
    if n == 2:  # every rank: Horovod's ValueError for a duplicate set
        with pytest.raises(ValueError, match="duplicate process set.*global"):
            hvd.add_process_set(ps)
        ps = hvd.ProcessSet([1])
    ps = hvd.add_process_set(ps)
    assert list(ps.ranks) == ([0, n - 1] if n > 2 else [1])
    with pytest.raises(ValueError, match="duplicate process set"):
        hvd.add_process_set(list(reversed(ps.ranks)))  # the same ranks, in any order
    if ps.included():
        out = hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum, process_set=ps)
        assert_equal(out, torch.tensor([float(sum(r + 1 for r in ps.ranks))]))
    assert hvd.remove_process_set(ps)
    # a set added again after removal works as new
    ps = hvd.add_process_set(ps.ranks)
    if ps.included():
        out = hvd.allreduce(torch.tensor([1], dtype=torch.int64), op=hvd.Sum, process_set=ps)
        assert_equal(out, torch.tensor([len(ps.ranks)]))
    assert hvd.remove_process_set(ps)


def test_results_bitwise_identical_across_ranks():
    x = rank_float((1001,), hvd.rank(), seed=90)
    outs = [hvd.allreduce(x), hvd.allreduce(x, op=hvd.Sum),
            hvd.allreduce(x.to(torch.float16)), hvd.allreduce(x.to(torch.bfloat16), op=hvd.Sum),
            hvd.allreduce(x, prescale_factor=0.3, postscale_factor=1.7)]
    assert_same_on_all_ranks(outs, "allreduce results")
