"""Gradients through hvd.torch's collectives, as Horovod defines them:
allreduce's backward is an allreduce of the gradient with the same op and
scale factors; allgather's an average allreduce of the gradient, narrowed
to this rank's rows; broadcast's an average allreduce kept on the root and
zero elsewhere; alltoall's an alltoall of the gradient back with the
received splits; reducescatter's an allgather of the gradient, scaled.
Upstream gradients differ per rank so that the reduction is visible."""
import torch

import hvd.torch as hvd
from conftest import rank_float


def upstream(shape, r, seed):
    return rank_float(shape, r, seed, dtype=torch.float64)


def avg(ts):
    return sum(ts) / len(ts)


def test_allreduce_grad():
    n, me = hvd.size(), hvd.rank()
    for op, name in ((hvd.Sum, "Sum"), (hvd.Average, "Average")):
        x = rank_float((4, 3), me, seed=1, dtype=torch.float64).requires_grad_()
        y = hvd.allreduce(x, op=op, name="grad.ar.%s" % name)
        gs = [upstream((4, 3), r, seed=2) for r in range(n)]
        y.backward(gs[me])
        want = sum(gs) if op == hvd.Sum else avg(gs)
        torch.testing.assert_close(x.grad, want, rtol=1e-12, atol=1e-12)


def test_allreduce_grad_with_scaling():
    n, me = hvd.size(), hvd.rank()
    x = rank_float((5,), me, seed=3, dtype=torch.float64).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    gs = [upstream((5,), r, seed=4) for r in range(n)]
    y.backward(gs[me])
    torch.testing.assert_close(x.grad, sum(gs) * 1.5, rtol=1e-12, atol=1e-12)


def test_grouped_allreduce_grad():
    n, me = hvd.size(), hvd.rank()
    xs = [rank_float((3,), me, seed=5 + i, dtype=torch.float64).requires_grad_()
          for i in range(2)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    gs = [[upstream((3,), r, seed=7 + i) for r in range(n)] for i in range(2)]
    torch.autograd.backward(ys, [g[me] for g in gs])
    for x, g in zip(xs, gs):
        torch.testing.assert_close(x.grad, sum(g), rtol=1e-12, atol=1e-12)


def test_allgather_grad_uneven():
    n, me = hvd.size(), hvd.rank()
    rows = [r + 1 for r in range(n)]
    x = rank_float((rows[me], 2), me, seed=9, dtype=torch.float64).requires_grad_()
    y = hvd.allgather(x)
    assert y.shape == (sum(rows), 2)
    gs = [upstream((sum(rows), 2), r, seed=10) for r in range(n)]
    y.backward(gs[me])
    start = sum(rows[:me])
    torch.testing.assert_close(x.grad, avg(gs)[start:start + rows[me]], rtol=1e-12, atol=1e-12)


def test_allgather_grad_same_upstream():
    # Horovod's own check: the same upstream gradient on every rank comes
    # back as this rank's slice of it.
    n, me = hvd.size(), hvd.rank()
    x = torch.ones((2, 3), dtype=torch.float32, requires_grad=True)
    y = hvd.allgather(x)
    g = torch.cat([torch.full((2, 3), float(r)) for r in range(n)])
    y.backward(g)
    assert torch.equal(x.grad, torch.full((2, 3), float(me)))


def test_broadcast_grad():
    n, me = hvd.size(), hvd.rank()
    for root in range(n):
        x = rank_float((3, 2), me, seed=11, dtype=torch.float64).requires_grad_()
        y = hvd.broadcast(x, root_rank=root)
        gs = [upstream((3, 2), r, seed=12 + root) for r in range(n)]
        y.backward(gs[me])
        want = avg(gs) if me == root else torch.zeros((3, 2), dtype=torch.float64)
        torch.testing.assert_close(x.grad, want, rtol=1e-12, atol=1e-12)


def test_alltoall_grad_with_splits():
    n, me = hvd.size(), hvd.rank()

    def splits_of(s):
        return [(s + d) % 3 + 1 for d in range(n)]

    x = rank_float((sum(splits_of(me)), 2), me, seed=13, dtype=torch.float64).requires_grad_()
    y, recv = hvd.alltoall(x, splits=splits_of(me))
    recv = [int(v) for v in recv]
    assert recv == [splits_of(s)[me] for s in range(n)]
    # upstream gradient of rank d: rows received from s marked 1000*d + 10*s + j
    def grad_of(d):
        return torch.cat([torch.tensor([[1000.0 * d + 10 * s + j] * 2
                                        for j in range(splits_of(s)[d])],
                                       dtype=torch.float64) for s in range(n)])
    y.backward(grad_of(me))
    # x's rows for rank d get d's gradient for the rows d received from me
    want = torch.cat([torch.tensor([[1000.0 * d + 10 * me + j] * 2
                                    for j in range(splits_of(me)[d])], dtype=torch.float64)
                      for d in range(n)])
    assert torch.equal(x.grad, want)


def test_alltoall_grad_equal_splits():
    n, me = hvd.size(), hvd.rank()
    x = torch.full((2 * n, 3), float(me), requires_grad=True)
    y = hvd.alltoall(x)
    # rows received from s get gradient s + 10 * me
    g = torch.cat([torch.full((2, 3), s + 10.0 * me) for s in range(n)])
    y.backward(g)
    want = torch.cat([torch.full((2, 3), me + 10.0 * d) for d in range(n)])
    assert torch.equal(x.grad, want)


def rows_of(dim0, n):
    """Horovod's split of dim0 rows over n ranks."""
    return [dim0 // n + (1 if r < dim0 % n else 0) for r in range(n)]


def test_reducescatter_grad_is_horovods():
    """Horovod's gradient of reducescatter: the allgather of the output
    gradients, times the set's size for Sum (not for Average), times the
    scale factors.  (Not the true derivative of the sum of the ranks'
    losses, which would be size times smaller: Horovod's convention, kept
    so that models moved from Horovod train the same.)"""
    n, me = hvd.size(), hvd.rank()
    dim0 = 2 * n + 1
    rows = rows_of(dim0, n)
    cases = [(hvd.Sum, "Sum", 1.0, 1.0, n), (hvd.Average, "Average", 1.0, 1.0, 1),
             (hvd.Sum, "Sum.scaled", 0.5, 3.0, n * 1.5),
             (hvd.Average, "Average.scaled", 2.0, 0.25, 0.5)]
    for op, label, pre, post, factor in cases:
        x = rank_float((dim0, 3), me, seed=14, dtype=torch.float64).requires_grad_()
        y = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post,
                              name="grad.rs.%s" % label)
        assert y.shape == (rows[me], 3)
        gs = [upstream((rows[r], 3), r, seed=15) for r in range(n)]
        y.backward(gs[me])
        torch.testing.assert_close(x.grad, torch.cat(gs) * factor, rtol=1e-12, atol=1e-12,
                                   msg=label)
