"""hvd.torch's fast path (python/_C/fast.c): allreduce_, allreduce and
allreduce_async(_) of one plain contiguous CPU tensor go through one
hvd._C call.  Its results are bitwise the general path's (every form,
dtypes, ops, scale factors, process sets); generated names agree across
ranks whichever path each rank takes; hvd's errors come through it with
the general path's types and messages, on every rank; Ctrl-C interrupts
its wait; and what it must not take goes the general way.  Every test
counts the calls that took the fast path (hvd._C.torch_fast_calls()), so
that a fast path that silently stopped being used fails here."""
import contextlib
import functools

import pytest
import torch

import hvd.torch as hvd
import fast_path
from conftest import digest, rank_input
from hvd import _C
from hvd.common.exceptions import HorovodInternalError
from hvd.torch import mpi_ops
from test_torch_errors import SHAPES, assert_names_tensor_and_shapes, mismatched_tensor, raised
from test_torch_interrupt import interrupted_after, needs_a_peer_and_python_sigint

DTYPES = [torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64]
OPS = ["Sum", "Average", "Min", "Max", "Product"]
FACTORS = [(1.0, 1.0), (0.5, 3.0), (3, 0.25)]


general_path = functools.partial(fast_path.general_path, mpi_ops)
fast_calls = functools.partial(fast_path.counted, _C.torch_fast_calls)


def every_form(tensor, **kw):
    """The outputs of the four forms on copies of tensor (named apart)."""
    name = kw.pop("name", None)
    named = (lambda s: None) if name is None else (lambda s: "%s.%s" % (name, s))
    a = tensor.clone()
    hvd.allreduce_(a, name=named("inplace"), **kw)
    b = hvd.allreduce(tensor, name=named("out"), **kw)
    c = tensor.clone()
    out_c = hvd.synchronize(hvd.allreduce_async_(c, name=named("async_"), **kw))
    assert out_c is c
    d = hvd.synchronize(hvd.allreduce_async(tensor, name=named("async"), **kw))
    return [a, b, c, d]


def assert_bitwise(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert digest([g]) == digest([w]), (g, w)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("opname", OPS)
@pytest.mark.parametrize("factors", FACTORS, ids=str)
def test_fast_path_is_bitwise_the_general_path(dtype, opname, factors):
    low, high = (1, 3) if opname == "Product" else (0, 10)
    x = rank_input((3, 5), dtype, hvd.rank(), seed=41, low=low, high=high)
    kw = dict(op=getattr(hvd, opname), prescale_factor=factors[0], postscale_factor=factors[1])
    with fast_calls(4):
        fast = every_form(x, name="fast.%s.%s" % (opname, dtype), **kw)
    with general_path(), fast_calls(0):
        general = every_form(x, name="general.%s.%s" % (opname, dtype), **kw)
    assert_bitwise(fast, general)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 1, 3)], ids=str)
def test_scalars_empty_and_default_op(shape):
    x = rank_input(shape, torch.float32, hvd.rank(), seed=42)
    with fast_calls(4):
        fast = every_form(x)
    with general_path():
        general = every_form(x)
    assert_bitwise(fast, general)


def test_parameter_in_place_and_reused_name():
    p = torch.nn.Parameter(rank_input((4,), torch.float32, hvd.rank(), seed=43))
    want = p.detach().clone()
    with general_path():
        hvd.allreduce_(want, op=hvd.Sum, name="fast.reused")
    with fast_calls(4), torch.no_grad():
        for _ in range(3):
            q = p.detach().clone()
            hvd.allreduce_(q, op=hvd.Sum, name="fast.reused")
            assert torch.equal(q, want)
        assert hvd.allreduce_(p, op=hvd.Sum, name="fast.reused") is p is not None
    assert torch.equal(p.detach(), want)


def test_generated_names_agree_whichever_path_each_rank_takes():
    # Half the ranks take the fast path: unnamed calls would stall if the
    # two paths generated names out of step.
    fast = hvd.rank() % 2 == 0
    mpi_ops._fast_enabled = fast
    try:
        with fast_calls(8 if fast else 0):
            outs = [every_form(torch.full((3,), float(i))) for i in range(2)]
    finally:
        mpi_ops._fast_enabled = True
    for i, forms in enumerate(outs):
        for out in forms:
            assert torch.equal(out, torch.full((3,), float(i)))


def test_process_sets_named_and_unnamed():
    if hvd.size() == 1:
        pytest.skip("the one rank's set is the global set")  # same on every rank
    ps = hvd.add_process_set([0, 1] if hvd.size() > 2 else [1])  # not the global set
    try:
        if ps.included():
            x = rank_input((2, 3), torch.float64, hvd.rank(), seed=44)
            fast_first = hvd.rank() == 0  # members take different paths
            for use_fast in (fast_first, not fast_first):
                mpi_ops._fast_enabled = use_fast
                counted = _C.torch_fast_calls()
                named = every_form(x, op=hvd.Sum, process_set=ps, name="fast.set")
                unnamed = every_form(x, op=hvd.Sum, process_set=ps)
                assert _C.torch_fast_calls() - counted == (8 if use_fast else 0)
                want = sum(rank_input((2, 3), torch.float64, r, seed=44) for r in ps.ranks)
                for out in named + unnamed:
                    assert torch.equal(out, want)
            assert ps._unnamed == 8
    finally:
        mpi_ops._fast_enabled = True
        hvd.remove_process_set(ps)


def test_declined_calls_take_the_general_path():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    n = float(hvd.size())
    with fast_calls(0):
        assert torch.equal(hvd.allreduce(x.t(), op=hvd.Sum), x.t() * n)  # not contiguous
        assert torch.equal(hvd.allreduce(x, op=hvd.Sum, prescale_factor=torch.tensor(2.0)),
                           x * 2 * n)
        if hvd.size() & (hvd.size() - 1) == 0:
            y = x.double().clone()
            hvd.allreduce_(y, op=hvd.Adasum)
    # These reach the autograd function, whose forward enqueues through
    # allreduce_async (fast, one call each) with what it was given.
    with fast_calls(2):
        assert torch.equal(hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16),
                           x * n)
        with pytest.warns(DeprecationWarning):
            assert torch.equal(hvd.allreduce(x, average=False), x * n)
    with fast_calls(0):
        g = x.clone().requires_grad_()
        out = hvd.allreduce(g, op=hvd.Sum)  # autograd must see it
        assert out.grad_fn is not None
        out.sum().backward()  # the gradient (expanded: not contiguous)
    assert torch.equal(g.grad, torch.full_like(x, n))


def test_invalid_arguments_raise_the_general_paths_errors():
    x = torch.ones(3)
    unregistered = hvd.ProcessSet([0])
    for call in (lambda: hvd.allreduce_(x, op=12345), lambda: hvd.allreduce(x, op="Sum"),
                 lambda: hvd.allreduce_(x, process_set=unregistered),
                 lambda: hvd.allreduce_(torch.ones(3, dtype=torch.complex64)),
                 lambda: hvd.allreduce([1.0, 2.0])):
        with fast_calls(0):
            fast = raised(call)
        with general_path():
            general = raised(call)
        assert type(fast) is type(general) and str(fast) == str(general), (fast, general)
        assert isinstance(fast, (ValueError, TypeError)), fast


def test_hvds_refusal_at_enqueue_through_the_fast_path():
    errors = []
    for path in (contextlib.nullcontext, general_path):
        with path():
            for form in (hvd.allreduce_, hvd.allreduce):
                errors.append(raised(lambda: form(torch.ones(2, dtype=torch.bool),
                                                  op=hvd.Average, name="fast.bool")))
    fast, general = errors[:2], errors[2:]
    for f, g in zip(fast, general):
        assert isinstance(f, HorovodInternalError), f
        assert type(f) is type(g) and str(f) == str(g), (f, g)


@pytest.mark.parametrize("form", ["allreduce_", "allreduce", "async_"])
def test_mismatched_shapes_raise_on_every_rank(form):
    if hvd.size() == 1:
        pytest.skip("needs two ranks")  # same on every rank
    name = "fast.mismatch.%s" % form
    calls = {"allreduce_": lambda: hvd.allreduce_(mismatched_tensor(), name=name),
             "allreduce": lambda: hvd.allreduce(mismatched_tensor(), name=name),
             "async_": lambda: hvd.synchronize(hvd.allreduce_async_(mismatched_tensor(),
                                                                    name=name))}
    with fast_calls(1):
        error = raised(calls[form])
    with general_path():
        general = raised(calls[form])
    assert isinstance(error, HorovodInternalError), error
    assert_names_tensor_and_shapes(error, name)
    assert str(error) == str(general), (error, general)
    assert hvd.allreduce(torch.ones(SHAPES[0]), op=hvd.Sum, name="after." + name).sum() > 0


@pytest.mark.parametrize("form", ["allreduce_", "allreduce"])
def test_ctrl_c_interrupts_a_fast_wait(form):
    needs_a_peer_and_python_sigint()
    n, me = hvd.size(), hvd.rank()
    name = "fast.ctrl-c.%s" % form
    x = torch.arange(6, dtype=torch.float32) + me
    want = sum(torch.arange(6, dtype=torch.float32) + r for r in range(n))
    latency = None
    if me == 0:
        call = getattr(hvd, form)
        with fast_calls(1):
            latency = interrupted_after(lambda: call(x, op=hvd.Sum, name=name))
        assert len(mpi_ops._parked) == 1  # the operation goes on, its tensors kept
    hvd.allreduce(torch.ones(1), name=name + ".meanwhile")  # it holds nobody up
    if me != 0:
        hvd.allreduce_(x, op=hvd.Sum, name=name)
    else:
        handle = mpi_ops._parked.pop()
        out = handle.wait()  # what the interrupted call would have returned
        if form == "allreduce_":
            assert out is x
        assert torch.equal(out, want)
        assert latency is not None, "the call returned before the others sent the tensor"
    if me != 0 or form == "allreduce_":
        assert torch.equal(x, want)
