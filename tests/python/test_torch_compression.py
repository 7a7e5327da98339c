"""hvd.PowerSGD and hvd.TopK: gradient compression with error feedback
(docs/compression.md), at every job size the suite runs (1, 2, 4).

Rank r's gradient is a deterministic function of r, so every rank builds
every other rank's and computes the expected result itself:
PowerSGD at full rank is the plain average; at rank 1 it sends less, and
fed zero gradients afterwards it delivers the rest (error feedback);
top-k is exactly the average of every rank's k largest (ties to the
smaller index), and the next step sends the largest of what was kept;
results are bitwise identical on every rank; in DistributedOptimizer,
small and 1-D tensors go uncompressed, and bad options are refused."""
import io

import pytest
import torch

import hvd.torch as hvd
from hvd.common.process_sets import global_process_set
from hvd.torch.powersgd import orthogonalize
from hvd.torch.topk import select
from conftest import assert_same_on_all_ranks

ROWS, COLS = 10, 24


def grad_of(r, seed=0, batch=4):
    """Rank r's gradient: a sum of `batch` outer products (rank <= batch)."""
    g = torch.Generator().manual_seed(7919 * r + 31 * seed + 5)
    return torch.randn(ROWS, batch, generator=g) @ torch.randn(batch, COLS, generator=g)


def reduce(compressor, tensor, name):
    handle = compressor.reduce_async(tensor, name, global_process_set)
    assert handle is not None, "not compressed"
    if hasattr(handle, "advance"):
        handle.advance()
    return handle.wait()


def test_orthogonalize():
    p = torch.randn(9, 4, generator=torch.Generator().manual_seed(3))
    orthogonalize(p)
    assert torch.allclose(p.t() @ p, torch.eye(4), atol=1e-5)


def test_powersgd_full_rank_is_the_average():
    c = hvd.PowerSGD(matrix_approximation_rank=ROWS, min_compression_rate=0)
    want = sum(grad_of(r) for r in range(hvd.size())) / hvd.size()
    for step in range(2):
        got = reduce(c, grad_of(hvd.rank()), "psgd.full")
        assert torch.allclose(got, want, atol=1e-4), (step, (got - want).abs().max())
        assert_same_on_all_ranks(got)


def test_powersgd_error_feedback_delivers_the_rest():
    c = hvd.PowerSGD(matrix_approximation_rank=1, seed=5)
    want = sum(grad_of(r, batch=6) for r in range(hvd.size())) / hvd.size()
    sent = reduce(c, grad_of(hvd.rank(), batch=6), "psgd.ef")
    first = float((sent - want).abs().max())
    assert first > 1e-3 * float(want.abs().max()), "rank 1 sent everything: not compressed?"
    for _ in range(40):
        got = reduce(c, torch.zeros(ROWS, COLS), "psgd.ef")
        assert_same_on_all_ranks(got)
        sent += got
    assert torch.allclose(sent, want, atol=1e-3 * float(want.abs().max()))


def test_powersgd_recovers_after_a_zero_gradient():
    # Q = M^T P is zero after a zero gradient; without redrawing its dead
    # columns nothing would be sent again
    c = hvd.PowerSGD(matrix_approximation_rank=ROWS, min_compression_rate=0)
    assert torch.equal(reduce(c, torch.zeros(ROWS, COLS), "psgd.zero"), torch.zeros(ROWS, COLS))
    want = sum(grad_of(r) for r in range(hvd.size())) / hvd.size()
    got = reduce(c, grad_of(hvd.rank()), "psgd.zero")
    assert torch.allclose(got, want, atol=1e-4)


def test_powersgd_same_seed_same_result():
    # the seed and the tensor's name decide Q: with both the same, the
    # same bits (and on every rank); another seed, another Q and result
    a = reduce(hvd.PowerSGD(2, seed=9), grad_of(hvd.rank()), "psgd.seed")
    b = reduce(hvd.PowerSGD(2, seed=9), grad_of(hvd.rank()), "psgd.seed")
    c = reduce(hvd.PowerSGD(2, seed=10), grad_of(hvd.rank()), "psgd.seed")
    assert torch.equal(a, b)
    assert_same_on_all_ranks(a)
    assert not torch.equal(a, c)


def test_topk_select_ties_and_nan():
    v = torch.tensor([1.0, -1.0, 1.0, -1.0, 3.0, float("nan"), 0.5])
    assert select(v, 1).tolist() == [5]
    assert select(v, 3).tolist() == [0, 4, 5]
    assert select(v, 5).tolist() == [0, 1, 2, 4, 5]


def topk_reference(m, k):
    flat = m.reshape(-1)
    order = sorted(range(flat.numel()), key=lambda i: (-abs(float(flat[i])), i))[:k]
    kept = torch.zeros_like(flat)
    kept[order] = flat[order]
    rest = flat.clone()
    rest[order] = 0.0
    return kept, rest


def test_topk_exact_with_error_feedback():
    c = hvd.TopK(ratio=0.05)  # k = 12 of 240
    ms = [grad_of(r).reshape(-1) for r in range(hvd.size())]
    for step in range(3):
        g = grad_of(hvd.rank()) if step == 0 else torch.zeros(ROWS, COLS)
        got = reduce(c, g, "topk.ef")
        want = torch.zeros(ROWS * COLS)
        for r in range(hvd.size()):
            kept, ms[r] = topk_reference(ms[r], 12)
            want[kept != 0] += kept[kept != 0]
        want *= 1.0 / hvd.size()
        assert torch.equal(got.reshape(-1), want), step
        assert_same_on_all_ranks(got)


def test_small_and_vector_tensors_go_uncompressed():
    c = hvd.PowerSGD(4)
    assert c.reduce_async(torch.zeros(10), "v", global_process_set) is None
    assert c.reduce_async(torch.zeros(4, 4), "small", global_process_set) is None
    assert hvd.TopK(0.5).reduce_async(torch.zeros(10, 10), "t", global_process_set) is None


@pytest.mark.parametrize("compression", [lambda: hvd.PowerSGD(3, min_compression_rate=0),
                                         lambda: hvd.TopK(0.2)])
def test_distributed_optimizer_trains(compression):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(COLS, ROWS), torch.nn.Tanh(),
                                torch.nn.Linear(ROWS, 1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                   named_parameters=model.named_parameters(),
                                   compression=compression())
    g = torch.Generator().manual_seed(100 + hvd.rank())
    x = torch.randn(64, COLS, generator=g)
    y = x[:, :3].sum(dim=1, keepdim=True)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses
    for p in model.parameters():
        assert_same_on_all_ranks(p.detach())


def test_powersgd_start_iter_allreduces_first():
    # torch's start_powerSGD_iter: the first N reductions of each gradient
    # go uncompressed (the optimizer's plain allreduce), then PowerSGD
    c = hvd.PowerSGD(1, start_powerSGD_iter=2)
    for _ in range(2):
        assert c.reduce_async(grad_of(hvd.rank()), "psgd.start", global_process_set) is None
    assert c.reduce_async(grad_of(hvd.rank()), "psgd.other", global_process_set) is None
    reduce(c, grad_of(hvd.rank()), "psgd.start")
    assert c.state_dict()["steps"] == {"psgd.start": 3, "psgd.other": 1}


def round_trip(state):
    """What torch.save and torch.load make of a state dict."""
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False) if "weights_only" in \
        torch.load.__code__.co_varnames else torch.load(buf)


@pytest.mark.parametrize("make", [lambda: hvd.PowerSGD(1, seed=3, start_powerSGD_iter=1),
                                  lambda: hvd.TopK(0.05)])
def test_state_dict_resumes(make):
    # steps 0-3 uninterrupted, against 0-1, save, a new compressor loads
    # the state and does 2-3: the same bits (Q, error, step count restored)
    grads = [grad_of(hvd.rank(), seed=s) for s in range(4)]

    def run(c, steps):
        out = []
        for _, g in steps:
            handle = c.reduce_async(g, "resume", global_process_set)
            if handle is None:  # start_powerSGD_iter: the plain allreduce's business
                out.append(None)
                continue
            handle.advance() if hasattr(handle, "advance") else None
            out.append(handle.wait())
        return out

    whole = run(make(), enumerate(grads))
    first = make()
    run(first, enumerate(grads[:2]))
    saved = round_trip(first.state_dict())
    run(first, enumerate(grads[2:], 2))  # the saved copy does not move on
    second = hvd.PowerSGD(1, seed=99) if isinstance(first, hvd.PowerSGD) else hvd.TopK(0.05)
    second.load_state_dict(saved)
    resumed = run(second, enumerate(grads[2:], 2))
    assert resumed[0] is not None
    if isinstance(first, hvd.PowerSGD):  # a state of another rank is refused, by name
        third = hvd.PowerSGD(2)
        third.load_state_dict(saved)
        with pytest.raises(ValueError, match=r"resume: the loaded Q is \(24, 1\); expected \(24, 2\)"):
            third.reduce_async(grads[2], "resume", global_process_set)
    for a, b in zip(whole[2:], resumed):
        assert torch.equal(a, b)


def test_powersgd_sync_state_for_a_joining_worker():
    # elastic: rank 0 has compressed a step; every other rank is a new
    # worker with a fresh compressor.  After sync_state, all take rank 0's
    # Q and step count (so all compress the next step, from the same Q),
    # and rank 0 keeps its own error
    make = lambda: hvd.PowerSGD(2, min_compression_rate=0, start_powerSGD_iter=1)
    c = make()
    for seed in range(2):
        handle = c.reduce_async(grad_of(hvd.rank(), seed=seed), "psgd.join", global_process_set)
        if handle is not None:
            handle.advance()
            handle.wait()
    error = c._states["psgd.join"].error.clone()
    if hvd.rank() != 0:
        c = make()
    c.sync_state(hvd.broadcast_object)
    assert_same_on_all_ranks(c._states["psgd.join"].q)
    if hvd.rank() == 0:
        assert torch.equal(c._states["psgd.join"].error, error)
    handle = c.reduce_async(grad_of(hvd.rank(), seed=2), "psgd.join", global_process_set)
    assert all(hvd.allgather_object(handle is not None)), "a rank did not compress"
    handle.advance()
    assert_same_on_all_ranks(handle.wait())


def small_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(COLS, ROWS), torch.nn.Tanh(),
                               torch.nn.Linear(ROWS, 1))


def train(model, opt, steps, seed):
    g = torch.Generator().manual_seed(100 + 7 * seed + hvd.rank())
    for _ in range(steps):
        x = torch.randn(16, COLS, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), x[:, :3].sum(dim=1, keepdim=True)).backward()
        opt.step()


def test_optimizer_checkpoint_and_elastic_state_resume_compression():
    # a job that stops after 3 steps and resumes from the optimizer's
    # state_dict (a checkpoint), or rolls back to TorchState's commit,
    # takes the next step exactly as the uninterrupted job
    from hvd.torch.elastic import TorchState

    def make():
        model = small_model()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                       named_parameters=model.named_parameters(),
                                       compression=hvd.PowerSGD(2, min_compression_rate=0,
                                                                start_powerSGD_iter=1))
        return model, opt

    model, opt = make()
    train(model, opt, 3, seed=0)
    checkpoint = round_trip({"model": model.state_dict(), "opt": opt.state_dict()})
    state = TorchState(model, opt)
    train(model, opt, 2, seed=1)
    want = [p.detach().clone() for p in model.parameters()]

    state.restore()  # back to the commit (TorchState's save at creation)
    train(model, opt, 2, seed=1)
    for a, b in zip(want, model.parameters()):
        assert torch.equal(a, b.detach())

    model, opt = make()
    model.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["opt"])
    train(model, opt, 2, seed=1)
    for a, b in zip(want, model.parameters()):
        assert torch.equal(a, b.detach())
        assert_same_on_all_ranks(b.detach())


def test_named_in_compression():
    assert hvd.Compression.powersgd is hvd.PowerSGD
    assert hvd.Compression.topk is hvd.TopK


def test_bad_options():
    with pytest.raises(ValueError, match="matrix_approximation_rank 0"):
        hvd.PowerSGD(0)
    with pytest.raises(ValueError, match="start_powerSGD_iter -1"):
        hvd.PowerSGD(1, start_powerSGD_iter=-1)
    with pytest.raises(ValueError, match="ratio 1.5"):
        hvd.TopK(1.5)
    model = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="PowerSGD compression averages"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(),
                                 compression=hvd.PowerSGD(1), op=hvd.Sum)
