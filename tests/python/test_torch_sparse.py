"""Sparse gradients: sparse_allreduce_async against the allreduce of the
densified tensors, its handle (callable, and taken by synchronize() and
poll()), and DistributedOptimizer on nn.Embedding(sparse=True), with and
without sparse_as_dense, against a single-process run on the global
batch."""
import copy

import pytest
import torch

import hvd.torch as hvd
from conftest import rank_input


def sparse_input(r, seed, dtype=torch.float32, size=(12, 3)):
    """Rank r's sparse tensor: a few rows of a (12, 3) matrix, rows
    repeated within the rank and shared between ranks (so coalescing has
    sums to do), values small integers (exact in every dtype)."""
    g = torch.Generator().manual_seed(7919 * r + seed)
    nnz = 3 + r % 3
    rows = torch.randint(0, size[0], (nnz,), generator=g)
    cols = torch.randint(0, size[1], (nnz,), generator=g)
    values = rank_input((nnz,), dtype, r, seed, low=-4, high=5)
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), values, size)


def dense_reference(op, seed, dtype=torch.float32):
    """The allreduce of the densified tensors: what the sparse result must
    densify to."""
    return hvd.allreduce(sparse_input(hvd.rank(), seed, dtype).to_dense(), op=op,
                         name="sparse.dense.ref.%d" % seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_sparse_allreduce_matches_dense(opname, dtype):
    op = getattr(hvd, opname)
    seed = 3 if opname == "Sum" else 4
    mine = sparse_input(hvd.rank(), seed, dtype)
    handle = hvd.sparse_allreduce_async(mine, name="sparse.%s.%s" % (opname, dtype), op=op)
    got = handle()
    assert got.is_sparse and got.is_coalesced()
    assert got.dtype == dtype and got.shape == mine.shape
    assert torch.equal(got.to_dense(), dense_reference(op, seed, dtype))
    assert handle() is got  # calling it again returns the same result


def test_sparse_handle_with_poll_and_synchronize():
    mine = sparse_input(hvd.rank(), seed=5)
    handle = hvd.sparse_allreduce_async(mine, name="sparse.sync", op=hvd.Sum)
    while not hvd.poll(handle):
        pass
    got = hvd.synchronize(handle)
    assert torch.equal(got.to_dense(), dense_reference(hvd.Sum, seed=5))
    # unnamed, and hybrid (values with a dense dimension)
    hybrid = torch.sparse_coo_tensor(torch.tensor([[hvd.rank() % 3, 4]]),
                                     torch.ones(2, 5) * (hvd.rank() + 1), (6, 5))
    got = hvd.sparse_allreduce_async(hybrid, name=None, op=hvd.Sum)()
    want = hvd.allreduce(hybrid.to_dense(), op=hvd.Sum)
    assert torch.equal(got.to_dense(), want)


def test_sparse_allreduce_rejects_other_ops():
    with pytest.raises(ValueError):
        hvd.sparse_allreduce_async(sparse_input(0, seed=6), name="sparse.max", op=hvd.Max)


class EmbeddingModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(77)
        self.emb = torch.nn.Embedding(20, 4, sparse=True)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, idx):
        return self.out(self.emb(idx).mean(1))


def batch(r, step):
    g = torch.Generator().manual_seed(1009 * step + 31 * r)
    return torch.randint(0, 20, (3, 5), generator=g), torch.randn(3, 1, generator=g)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_distributed_optimizer_sparse_embedding(sparse_as_dense):
    """Every rank trains on its batch; a reference model trains on the
    concatenation of every rank's batch.  SGD is linear in the gradient,
    so the average of the per-rank gradients gives the reference's
    update."""
    n, me = hvd.size(), hvd.rank()
    model = EmbeddingModel()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=sparse_as_dense)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    for step in range(3):
        opt.zero_grad()
        x, y = batch(me, step)
        torch.nn.functional.mse_loss(model(x), y).backward()
        assert model.emb.weight.grad.is_sparse
        opt.step()
        ref_opt.zero_grad()
        xs, ys = zip(*[batch(r, step) for r in range(n)])
        # the mean over the global batch: the average of the ranks' means
        sum(torch.nn.functional.mse_loss(ref(xr), yr) for xr, yr in zip(xs, ys)).div(n).backward()
        ref_opt.step()
    for (name, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
