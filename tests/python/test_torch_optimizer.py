"""hvd.DistributedOptimizer against a single-process run on the same
global batch: every rank trains the distributed model on its own batch and
also a local reference model on the concatenation of all ranks' batches;
the two must agree (exactly up to float rounding, or within a stated
tolerance with fp16 compression), and the distributed parameters must be
bitwise identical on every rank."""
import copy

import pytest
import torch

import hvd.torch as hvd
from conftest import assert_same_on_all_ranks

STEPS = 3
BATCH = 4
TOL = dict(rtol=1e-5, atol=1e-6)


def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def batch(r, step, micro=0, rows=BATCH):
    g = torch.Generator().manual_seed(10007 * step + 101 * r + micro)
    return torch.randn(rows, 5, generator=g), torch.randn(rows, 3, generator=g)


def global_batch(step, micro=0):
    xs, ys = zip(*[batch(r, step, micro) for r in range(hvd.size())])
    return torch.cat(xs), torch.cat(ys)


def make_opt(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    return torch.optim.Adam(params, lr=0.01)


def loss_fn(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


def train_pair(kind, steps=STEPS, passes=1, ref_scale=1.0, **dist_kwargs):
    """Trains (distributed, reference) and returns both models."""
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(make_opt(kind, model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **dist_kwargs)
    ref_opt = make_opt(kind, ref.parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    step_pair(model, opt, ref, ref_opt, steps, passes, ref_scale)
    return model, ref


def step_pair(model, opt, ref, ref_opt, steps=STEPS, passes=1, ref_scale=1.0):
    """steps steps of both: the distributed model on this rank's batches,
    the reference on the union of every rank's."""
    for step in range(steps):
        opt.zero_grad()
        ref_opt.zero_grad()
        for micro in range(passes):
            x, y = batch(hvd.rank(), step, micro)
            loss_fn(model, x, y).backward()
            gx, gy = global_batch(step, micro)
            (loss_fn(ref, gx, gy) * ref_scale).backward()
        opt.step()
        ref_opt.step()


def assert_models_close(model, ref, **tol):
    tol = tol or TOL
    for (name, a), b in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, msg=lambda m: "%s: %s" % (name, m), **tol)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_matches_single_process_run(kind):
    model, ref = train_pair(kind)
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_backward_passes_per_step_accumulates_without_dividing(kind):
    # Horovod's torch optimizer sums the local passes (the user scales the
    # loss if they want a mean), then averages across ranks.
    model, ref = train_pair(kind, passes=2)
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref)


def test_fp16_compression():
    model, ref = train_pair("sgd", compression=hvd.Compression.fp16)
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref, rtol=1e-2, atol=2e-3)


def test_gradient_predivide_factor():
    model, ref = train_pair("sgd", gradient_predivide_factor=2.0)
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref)


def test_op_sum():
    # Sum of the per-rank mean gradients = size x the global mean gradient.
    model, ref = train_pair("sgd", op=hvd.Sum, ref_scale=float(hvd.size()))
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref)


@pytest.mark.parametrize("grouping", [dict(num_groups=2), "explicit"])
def test_groups(grouping):
    if grouping == "explicit":
        # groups: lists of parameters reduced together
        model = make_model()
        ps = list(model.parameters())
        ref = copy.deepcopy(model)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(),
                                       groups=[[ps[0], ps[2]], [ps[1], ps[3]]])
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        step_pair(model, opt, ref, ref_opt)
    else:
        model, ref = train_pair("sgd", **grouping)
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref)


def test_without_named_parameters():
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    step_pair(model, opt, ref, ref_opt)
    assert_models_close(model, ref)


def test_sparse_as_dense():
    def make():
        torch.manual_seed(77)
        return torch.nn.Embedding(10, 3, sparse=True)

    model, ref = make(), make()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                   named_parameters=model.named_parameters(),
                                   sparse_as_dense=True)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)

    def idx(r, step):
        return torch.tensor([(3 * r + step) % 10, (r + 5 * step) % 10, 7])

    for step in range(STEPS):
        opt.zero_grad()
        ref_opt.zero_grad()
        model(idx(hvd.rank(), step)).pow(2).mean().backward()
        # reference: mean of the per-rank means
        sum(ref(idx(r, step)).pow(2).mean() for r in range(hvd.size())).div(hvd.size()).backward()
        opt.step()
        ref_opt.step()
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    torch.testing.assert_close(model.weight, ref.weight, **TOL)


def test_adasum_optimizer_runs_and_agrees_across_ranks():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    for step in range(STEPS):
        opt.zero_grad()
        loss_fn(model, *batch(hvd.rank(), step)).backward()
        opt.step()
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    if hvd.size() == 1:  # Adasum of one rank is plain SGD
        ref = make_model()
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for step in range(STEPS):
            ref_opt.zero_grad()
            loss_fn(ref, *batch(0, step)).backward()
            ref_opt.step()
        assert_models_close(model, ref)


@pytest.mark.parametrize("max_norm", [1e9, 0.05])
def test_amp_pattern_synchronize_unscale_clip_skip_synchronize(max_norm):
    """The pattern Horovod documents for torch.cuda.amp's GradScaler, with
    manual loss scaling on CPU: scaled backward, synchronize(), unscale and
    clip, then step() inside skip_synchronize()."""
    scale = 1024.0
    model = make_model()
    ref = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.5)
    for step in range(STEPS):
        opt.zero_grad()
        (loss_fn(model, *batch(hvd.rank(), step)) * scale).backward()
        opt.synchronize()
        for p in model.parameters():
            p.grad.div_(scale)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        with opt.skip_synchronize():
            opt.step()

        ref_opt.zero_grad()
        loss_fn(ref, *global_batch(step)).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), max_norm)
        ref_opt.step()
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
    assert_models_close(model, ref)


def test_optimizer_state_broadcast_then_training_stays_in_sync():
    # Rank-dependent start, made identical by broadcasts, then trained.
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(5, 3)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(hvd.rank(), step)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    assert_same_on_all_ranks(list(model.parameters()), "parameters")
