"""hvd.SyncBatchNorm against torch.nn.BatchNorm on the concatenation of
every rank's batch: forward output, input gradients, weight/bias gradients
(each rank holds its local contribution; their sum is the reference's) and
running statistics.  Batches differ in size per rank."""
import pytest
import torch

import hvd.torch as hvd
from conftest import rank_float

TOL = dict(rtol=1e-5, atol=1e-5)


def rows(r):
    return 2 + r


@pytest.mark.parametrize("shape", [(3,), (3, 5), (3, 2, 2)], ids=["1d", "1d-seq", "2d"])
def test_sync_batch_norm_matches_batch_norm_on_global_batch(shape):
    n, me = hvd.size(), hvd.rank()
    c = shape[0]
    bn_cls = {1: torch.nn.BatchNorm1d, 2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm2d}[len(shape)]
    xs = [rank_float((rows(r),) + shape, r, seed=5, dtype=torch.float64) * (1 + r) + r
          for r in range(n)]
    gs = [rank_float((rows(r),) + shape, r, seed=6, dtype=torch.float64) for r in range(n)]

    sbn = hvd.SyncBatchNorm(c, momentum=0.3).double()
    ref = bn_cls(c, momentum=0.3).double()
    with torch.no_grad():
        for m in (sbn, ref):
            m.weight.copy_(torch.linspace(0.5, 1.5, c))
            m.bias.copy_(torch.linspace(-1, 1, c))
    sbn.train()
    ref.train()

    for _ in range(2):  # twice, to check the running stats' update twice
        x = xs[me].clone().requires_grad_()
        out = sbn(x)
        out.backward(gs[me])

        gx = torch.cat(xs).requires_grad_()
        ref.zero_grad()
        rout = ref(gx)
        rout.backward(torch.cat(gs))

        start = sum(rows(r) for r in range(me))
        sl = slice(start, start + rows(me))
        torch.testing.assert_close(out, rout[sl], **TOL)
        torch.testing.assert_close(x.grad, gx.grad[sl], **TOL)
        wsum = hvd.allreduce(sbn.weight.grad, op=hvd.Sum, name="sbn.wgrad")
        bsum = hvd.allreduce(sbn.bias.grad, op=hvd.Sum, name="sbn.bgrad")
        torch.testing.assert_close(wsum, ref.weight.grad, **TOL)
        torch.testing.assert_close(bsum, ref.bias.grad, **TOL)
        sbn.zero_grad()
    torch.testing.assert_close(sbn.running_mean, ref.running_mean, **TOL)
    torch.testing.assert_close(sbn.running_var, ref.running_var, **TOL)
    assert int(sbn.num_batches_tracked) == int(ref.num_batches_tracked)

    # eval mode: the running statistics, no communication
    sbn.eval()
    ref.eval()
    torch.testing.assert_close(sbn(xs[me]), ref(xs[me]), **TOL)


def test_sync_batch_norm_in_a_model_with_distributed_optimizer():
    n, me = hvd.size(), hvd.rank()

    def make(bn):
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Linear(4, 3), bn(3), torch.nn.ReLU(),
                                   torch.nn.Linear(3, 1))

    model = make(hvd.SyncBatchNorm)
    ref = make(torch.nn.BatchNorm1d)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        xs = [rank_float((3, 4), r, seed=10 + step) for r in range(n)]
        opt.zero_grad()
        ref_opt.zero_grad()
        model(xs[me]).sum().backward()  # sum losses: Sum of the ranks' grads
        ref(torch.cat(xs)).sum().backward()
        opt.step()
        ref_opt.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
