"""torch.compile (PyTorch 2.x) with hvd.torch.

A model wrapped by torch.compile trains under hvd.DistributedOptimizer --
its gradient hooks, backward_passes_per_step, fp16 compression -- to the
same parameters as the same model run eagerly; and collectives called
inside a compiled function either work (Dynamo runs them eagerly, between
graphs) or, with fullgraph=True, fail with Dynamo's error naming the call:
never a wrong result.

Compiling is slow on small machines, so there is one tiny model and few
steps; HVD_COMPILE_BACKEND picks the backend (default inductor, PyTorch's
own; the test command uses it).  Skipped under PyTorch 1.x, which has no
torch.compile.
"""
import os

import pytest
import torch

import hvd.torch as hvd
from conftest import assert_same_on_all_ranks, rank_float

pytestmark = pytest.mark.skipif(not hasattr(torch, "compile"),
                                reason="torch.compile needs PyTorch 2")

BACKEND = os.environ.get("HVD_COMPILE_BACKEND", "inductor")


def tiny_model():
    torch.manual_seed(11)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def train(model, params_of, passes, compression, steps=3):
    """steps optimizer steps of backward_passes_per_step=passes over rank
    r's own batches; returns the parameters."""
    opt = torch.optim.SGD(params_of.parameters(), lr=0.1, momentum=0.5)
    opt = hvd.DistributedOptimizer(opt, named_parameters=params_of.named_parameters(),
                                   backward_passes_per_step=passes, compression=compression)
    hvd.broadcast_parameters(params_of.state_dict(), root_rank=0)
    for s in range(steps):
        opt.zero_grad()
        for p in range(passes):
            x = rank_float((4, 6), hvd.rank(), seed=100 + s * passes + p)
            model(x).square().mean().backward()
        opt.step()
    return [t.detach().clone() for t in params_of.parameters()]


@pytest.mark.parametrize("passes,compression", [(1, "none"), (2, "fp16")])
def test_compiled_model_trains_like_the_eager_one(passes, compression):
    comp = getattr(hvd.Compression, compression)
    eager = tiny_model()
    want = train(eager, eager, passes, comp)
    plain = tiny_model()
    compiled = torch.compile(plain, backend=BACKEND)
    got = train(compiled, plain, passes, comp)
    for g, w in zip(got, want):
        # the compiled kernels may round differently from eager ones
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert_same_on_all_ranks(got, "compiled model's parameters")
    assert not all(torch.equal(g, t) for g, t in zip(got, tiny_model().parameters())), \
        "training changed nothing"


def reduce_in_compiled(t):
    return hvd.allreduce(t * 2, op=hvd.Sum, name="compiled.allreduce") + 1


def test_collective_inside_a_compiled_function_runs_eagerly():
    n = hvd.size()
    t = torch.arange(6, dtype=torch.float32) + hvd.rank()
    fn = torch.compile(reduce_in_compiled, backend=BACKEND)
    want = sum((torch.arange(6, dtype=torch.float32) + r) * 2 for r in range(n)) + 1
    for _ in range(2):  # the second call runs the cached graphs
        assert torch.equal(fn(t), want)


def test_collective_in_a_full_graph_fails_clearly():
    fn = torch.compile(reduce_in_compiled, backend=BACKEND, fullgraph=True)
    with pytest.raises(Exception) as err:
        fn(torch.ones(3))
    # Dynamo refuses the call it cannot trace, naming it; nothing ran
    assert "torch._dynamo" in type(err.value).__module__, repr(err.value)
    text = str(err.value)
    assert "allreduce" in text or "_C" in text, text
    # every rank failed before any collective: the job goes on
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after.fullgraph"),
                       torch.full((2,), float(hvd.size())))
