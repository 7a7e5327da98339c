"""grouped_allgather and grouped_reducescatter against their single-tensor
forms (and the references those are tested against): the same outputs,
whatever the mix of shapes, uneven first dimensions and dtypes, in the
async and blocking forms and on process sets; and the same gradients."""
import pytest
import torch

import hvd.torch as hvd
from conftest import rank_float, rank_input


def assert_equal(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.equal(got, want), (got, want)


def gather_inputs(r, seed):
    """Rank r's tensors: first dimensions that differ by rank (0 rows on
    rank 0 for one of them), several dtypes and ranks of tensor."""
    return [rank_input((r + 1, 3), torch.float32, r, seed),
            rank_input((r, 2, 2), torch.int64, r, seed + 1),
            rank_input((2,), torch.float64, r, seed + 2),
            rank_input((r + 2, 1), torch.bool, r, seed + 3)]


def test_grouped_allgather_matches_allgather():
    n, me = hvd.size(), hvd.rank()
    mine = gather_inputs(me, seed=1)
    want = [torch.cat([gather_inputs(r, seed=1)[i] for r in range(n)]) for i in range(len(mine))]
    singles = [hvd.allgather(t, name="single.gather.%d" % i) for i, t in enumerate(mine)]
    for s, w in zip(singles, want):
        assert_equal(s, w)
    for got, w in zip(hvd.grouped_allgather(mine, name="grouped.gather"), want):
        assert_equal(got, w)
    handle = hvd.grouped_allgather_async(mine)
    for got, w in zip(hvd.synchronize(handle), want):
        assert_equal(got, w)
    assert hvd.grouped_allgather([]) == []


def scatter_part(t, n, r):
    """Horovod's split: rank r of n gets dim0 // n rows, one more if
    r < dim0 % n."""
    base, extra = divmod(t.shape[0], n)
    start = r * base + min(r, extra)
    return t[start:start + base + (1 if r < extra else 0)]


def scatter_inputs(r, n, seed):
    return [rank_input((2 * n + 1, 3), torch.int32, r, seed),
            rank_input((n, 2, 2), torch.float32, r, seed + 1),
            rank_input((3 * n + 2,), torch.float64, r, seed + 2)]


@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_grouped_reducescatter_matches_reducescatter(opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    mine = scatter_inputs(me, n, seed=10)
    every = [scatter_inputs(r, n, seed=10) for r in range(n)]
    want = []
    for i in range(len(mine)):
        total = sum(e[i].to(torch.float64) for e in every)
        if op == hvd.Average:
            total = total / n
        if mine[i].dtype == torch.int32 and op == hvd.Average:
            total = torch.trunc(total)
        want.append(scatter_part(total.to(mine[i].dtype), n, me))
    singles = [hvd.reducescatter(t, op=op, name="single.rs.%s.%d" % (opname, i))
               for i, t in enumerate(mine)]
    grouped = hvd.grouped_reducescatter(mine, op=op, name="grouped.rs.%s" % opname)
    asynced = hvd.synchronize(hvd.grouped_reducescatter_async(mine, op=op))
    for s, g, a, w in zip(singles, grouped, asynced, want):
        assert_equal(s, w)
        assert_equal(g, w)
        assert_equal(a, w)


def test_grouped_reducescatter_scaling_and_default_average():
    n, me = hvd.size(), hvd.rank()
    mine = [rank_float((2 * n, 3), me, seed=20), rank_float((n + 1,), me, seed=21)]
    singles = [hvd.reducescatter(t, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
               for t in mine]
    grouped = hvd.grouped_reducescatter(mine, op=hvd.Sum, prescale_factor=0.5,
                                        postscale_factor=3.0)
    for s, g in zip(singles, grouped):
        assert_equal(g, s)
    for s, g in zip([hvd.reducescatter(t) for t in mine], hvd.grouped_reducescatter(mine)):
        assert_equal(g, s)
    assert hvd.grouped_reducescatter([]) == []


def test_grouped_on_a_process_set():
    n, me = hvd.size(), hvd.rank()
    if n == 1:
        pytest.skip("only the global process set at size 1")  # same on every rank
    ranks = [r for r in range(n) if r % 2 == 1]
    ps = hvd.add_process_set(ranks)
    try:
        if me in ranks:
            k = len(ranks)
            mine = gather_inputs(me, seed=30)
            want = [torch.cat([gather_inputs(r, seed=30)[i] for r in ranks])
                    for i in range(len(mine))]
            for got, w in zip(hvd.grouped_allgather(mine, process_set=ps), want):
                assert_equal(got, w)
            xs = [rank_input((2 * k + 1, 2), torch.int64, r, seed=31) for r in ranks]
            got = hvd.grouped_reducescatter([xs[ranks.index(me)]], op=hvd.Sum, process_set=ps)
            assert_equal(got[0], scatter_part(sum(xs), k, ranks.index(me)))
    finally:
        hvd.remove_process_set(ps)


def upstream(shape, r, seed):
    return rank_float(shape, r, seed, dtype=torch.float64)


def test_grouped_allgather_grads_match_allgather():
    n, me = hvd.size(), hvd.rank()
    shapes = [(me + 1, 2), (2, 3)]
    xs = [rank_float(s, me, seed=40 + i, dtype=torch.float64).requires_grad_()
          for i, s in enumerate(shapes)]
    ys = hvd.grouped_allgather(xs)
    gs = [upstream(y.shape, me, seed=42 + i) for i, y in enumerate(ys)]
    torch.autograd.backward(ys, gs)
    singles = [x.detach().clone().requires_grad_() for x in xs]
    for x, g in zip(singles, gs):
        hvd.allgather(x).backward(g)
    for x, s in zip(xs, singles):
        torch.testing.assert_close(x.grad, s.grad, rtol=0, atol=0)


@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_grouped_reducescatter_grads_match_reducescatter(opname):
    op = getattr(hvd, opname)
    n, me = hvd.size(), hvd.rank()
    xs = [rank_float((2 * n + 1, 2), me, seed=50, dtype=torch.float64).requires_grad_(),
          rank_float((n,), me, seed=51, dtype=torch.float64).requires_grad_()]
    ys = hvd.grouped_reducescatter(xs, op=op, prescale_factor=2.0, postscale_factor=0.25)
    gs = [upstream(y.shape, me, seed=52 + i) for i, y in enumerate(ys)]
    torch.autograd.backward(ys, gs)
    singles = [x.detach().clone().requires_grad_() for x in xs]
    for x, g in zip(singles, gs):
        hvd.reducescatter(x, op=op, prescale_factor=2.0, postscale_factor=0.25).backward(g)
    for x, s in zip(xs, singles):
        torch.testing.assert_close(x.grad, s.grad, rtol=0, atol=0)
