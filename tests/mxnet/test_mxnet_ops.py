"""hvd.mxnet's collectives against NumPy references computed from every
rank's input: every dtype MXNet and Horovod share, in place and out of
place, grouped, on process sets, with scale factors; MXNet's dependencies
(inputs read after their earlier writers and before their later ones,
outputs read after the collective); errors raised as MXNetError with hvd's
message on every rank."""
import time

import mxnet as mx
import numpy as np
import pytest
from mxnet.base import MXNetError
from hvd_build import build_config
from rank_data import rank_input

import hvd.mxnet as hvd

# The dtypes MXNet and Horovod share.
DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8]

OPS = {"sum": hvd.Sum, "average": hvd.Average, "min": hvd.Min, "max": hvd.Max,
       "product": hvd.Product}


def every_rank(shape, dtype, seed, **kw):
    """Every rank's input, in rank order."""
    return [rank_input(shape, dtype, r, seed, **kw) for r in range(hvd.size())]


def reference(inputs, op, dtype):
    stack = np.stack([x.astype(np.float64) for x in inputs])
    if op == "sum":
        out = stack.sum(0)
    elif op == "average":
        out = stack.sum(0) / len(inputs)
        if np.issubdtype(dtype, np.integer):
            out = np.trunc(out)  # hvd's integer average rounds toward zero
    elif op == "min":
        out = stack.min(0)
    elif op == "max":
        out = stack.max(0)
    else:
        out = stack.prod(0)
    return out.astype(dtype)


def close(got, want, dtype):
    if dtype == np.float16:
        return np.allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3, atol=1e-2)
    return np.array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(OPS))
def test_allreduce_every_dtype_and_op(dtype, op):
    high = 4 if op == "product" else 10  # products of 4 ranks fit int8
    inputs = every_rank((3, 5), dtype, seed=len(op), high=high)
    x = mx.nd.array(inputs[hvd.rank()], dtype=dtype)
    before = x.asnumpy().copy()
    y = hvd.allreduce(x, op=OPS[op], name="ar.%s.%s" % (op, np.dtype(dtype).name))
    assert y is not x and y.dtype == dtype and y.shape == (3, 5)
    assert close(y.asnumpy(), reference(inputs, op, dtype), dtype), (y.asnumpy(), inputs)
    assert np.array_equal(x.asnumpy(), before)  # out of place: the input is untouched


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_allreduce_in_place(dtype):
    inputs = every_rank((4, 2, 3), dtype, seed=3)
    x = mx.nd.array(inputs[hvd.rank()], dtype=dtype)
    assert hvd.allreduce_(x, op=hvd.Sum) is x
    assert close(x.asnumpy(), reference(inputs, "sum", dtype), dtype)


def test_allreduce_average_is_the_default_and_average_flag():
    inputs = every_rank((6,), np.float32, seed=4)
    x = mx.nd.array(inputs[hvd.rank()])
    assert np.allclose(hvd.allreduce(x).asnumpy(), reference(inputs, "average", np.float32))
    with pytest.warns(DeprecationWarning, match="replaced with `op`"):
        y = hvd.allreduce(x, average=False)
    assert np.allclose(y.asnumpy(), reference(inputs, "sum", np.float32))
    with pytest.raises(ValueError, match="supersedes average"):
        hvd.allreduce(x, average=True, op=hvd.Sum)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_allreduce_prescale_and_postscale(dtype):
    inputs = every_rank((5,), dtype, seed=5)
    x = mx.nd.array(inputs[hvd.rank()], dtype=dtype)
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=3.0, postscale_factor=0.5)
    want = np.stack([i.astype(np.float64) * 3.0 for i in inputs]).sum(0) * 0.5
    if np.issubdtype(dtype, np.integer):
        want = np.trunc(np.stack([np.trunc(i * 3.0) for i in inputs]).sum(0) * 0.5)
    assert np.allclose(y.asnumpy(), want.astype(dtype))


def test_grouped_allreduce_of_several_dtypes_in_and_out_of_place():
    dtypes = [np.float32, np.int64, np.float64, np.float32]
    inputs = [every_rank((2, i + 1), d, seed=10 + i) for i, d in enumerate(dtypes)]
    xs = [mx.nd.array(inp[hvd.rank()], dtype=d) for inp, d in zip(inputs, dtypes)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grouped")
    for y, inp, d in zip(ys, inputs, dtypes):
        assert y.dtype == d and np.array_equal(y.asnumpy(), reference(inp, "sum", d))
    assert hvd.grouped_allreduce_(xs, op=hvd.Sum) == xs
    for x, inp, d in zip(xs, inputs, dtypes):
        assert np.array_equal(x.asnumpy(), reference(inp, "sum", d))
    assert hvd.grouped_allreduce([]) == []
    with pytest.raises(ValueError, match="more than once"):
        hvd.grouped_allreduce_([xs[0], xs[0]])


def test_allreduce_of_a_temporary_keeps_it_alive():
    """The input's NDArray may be dropped by Python at once (Horovod's
    test_horovod_allreduce_ndarray_lifetime)."""
    for i, shape in enumerate([(17,), (17, 17), (17, 17, 17)]):
        t = mx.nd.ones(shape)
        s = hvd.allreduce(t * (i + 1), op=hvd.Sum)
        assert np.array_equal(s.asnumpy(), np.full(shape, (i + 1) * hvd.size(), np.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_broadcast_from_every_root(dtype):
    for root in range(hvd.size()):
        inputs = every_rank((3, 4), dtype, seed=20 + root)
        x = mx.nd.array(inputs[hvd.rank()], dtype=dtype)
        y = hvd.broadcast(x, root_rank=root)
        assert np.array_equal(y.asnumpy(), inputs[root])
        assert np.array_equal(x.asnumpy(), inputs[hvd.rank()])
        assert hvd.broadcast_(x, root_rank=root, name="bcast_.%d" % root) is x
        assert np.array_equal(x.asnumpy(), inputs[root])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_allgather_of_different_first_dimensions(dtype):
    rows = [r + 1 for r in range(hvd.size())]
    inputs = [rank_input((rows[r], 2, 3), dtype, r, seed=30) for r in range(hvd.size())]
    y = hvd.allgather(mx.nd.array(inputs[hvd.rank()], dtype=dtype))
    assert y.dtype == dtype and np.array_equal(y.asnumpy(), np.concatenate(inputs))


def test_grouped_allgather_and_a_scalar_and_an_empty_part():
    a = [rank_input((r % 2, 3), np.int32, r, seed=31) for r in range(hvd.size())]
    b = [rank_input((2,), np.int32, r, seed=32) for r in range(hvd.size())]
    ys = hvd.grouped_allgather([mx.nd.array(a[hvd.rank()], dtype="int32"),
                                mx.nd.array(b[hvd.rank()], dtype="int32")])
    assert np.array_equal(ys[0].asnumpy(), np.concatenate(a).reshape(-1, 3))
    assert np.array_equal(ys[1].asnumpy(), np.concatenate(b))


def test_alltoall_with_and_without_splits():
    n, r = hvd.size(), hvd.rank()
    # Rank r sends (q + 1) rows to rank q, each row filled with 100 * r + q.
    splits = [q + 1 for q in range(n)]
    rows = np.concatenate([np.full((q + 1, 2), 100 * r + q) for q in range(n)]).astype(np.float32)
    out, received = hvd.alltoall(mx.nd.array(rows), splits=splits)
    want = np.concatenate([np.full((r + 1, 2), 100 * q + r) for q in range(n)])
    assert np.array_equal(out.asnumpy(), want)
    assert received.dtype == np.int32 and received.asnumpy().tolist() == [r + 1] * n
    even = mx.nd.array(np.arange(2 * n, dtype=np.int64) + 10 * r, dtype="int64")
    got = hvd.alltoall(even)
    assert not isinstance(got, tuple)
    assert got.asnumpy().tolist() == [10 * q + 2 * r + k for q in range(n) for k in range(2)]


@pytest.mark.parametrize("op", ["sum", "average"])
def test_reducescatter_uneven_first_dimension(op):
    n, r = hvd.size(), hvd.rank()
    dim0 = 2 * n + 1  # rank 0 keeps one row more than the others when n > 1
    inputs = every_rank((dim0, 3), np.float32, seed=40)
    y = hvd.reducescatter(mx.nd.array(inputs[r]), op=OPS[op])
    full = reference(inputs, op, np.float32)
    start = sum(dim0 // n + (1 if q < dim0 % n else 0) for q in range(r))
    mine = dim0 // n + (1 if r < dim0 % n else 0)
    assert y.shape == (mine, 3) and np.allclose(y.asnumpy(), full[start:start + mine])


def test_reducescatter_scale_factors_and_groups():
    n, r = hvd.size(), hvd.rank()
    a = every_rank((2 * n, 2), np.float64, seed=41)
    b = every_rank((n + 1,), np.int32, seed=42)
    ys = hvd.grouped_reducescatter([mx.nd.array(a[r], dtype="float64"),
                                    mx.nd.array(b[r], dtype="int32")], op=hvd.Sum,
                                   prescale_factor=2.0, postscale_factor=0.5)
    assert np.allclose(ys[0].asnumpy(), reference(a, "sum", np.float64)[2 * r:2 * r + 2])
    start = sum(1 + (1 if q < 1 else 0) for q in range(r)) if n > 1 else 0
    mine = (n + 1) // n + (1 if r < (n + 1) % n else 0)
    assert np.array_equal(ys[1].asnumpy(), reference(b, "sum", np.int32)[start:start + mine])
    with pytest.raises(ValueError, match="scalar"):
        hvd.reducescatter(mx.nd.array([1.0]).reshape(()))


def test_process_set_of_even_ranks():
    n, r = hvd.size(), hvd.rank()
    members = list(range(0, n, 2))
    # [0] at size 1: the global set, not added again
    ps = hvd.add_process_set(members) if n > 1 else hvd.global_process_set
    try:
        inputs = every_rank((4,), np.float32, seed=50)
        if r in members:
            y = hvd.allreduce(mx.nd.array(inputs[r]), op=hvd.Sum, process_set=ps)
            assert np.array_equal(y.asnumpy(), sum(inputs[m] for m in members))
            root = members[-1]
            b = hvd.broadcast(mx.nd.array(inputs[r]), root_rank=root, process_set=ps)
            assert np.array_equal(b.asnumpy(), inputs[root])
            g = hvd.allgather(mx.nd.array(inputs[r]), process_set=ps)
            assert np.array_equal(g.asnumpy(), np.concatenate([inputs[m] for m in members]))
        elif n > 1:
            with pytest.raises(MXNetError):
                hvd.allreduce(mx.nd.array(inputs[r]), process_set=ps)
    finally:
        hvd.remove_process_set(ps)


# ---- MXNet's dependencies ----

def late_on_rank_0():
    """Rank 0 enters the collective last, so the others' operations wait
    in hvd while their own later MXNet operations are pushed."""
    if hvd.rank() == 0 and hvd.size() > 1:
        time.sleep(0.5)


def test_a_later_write_of_the_input_waits_for_the_collective():
    x = mx.nd.ones((1000,))
    late_on_rank_0()
    y = hvd.allreduce(x, op=hvd.Sum, name="dep.input")
    x[:] = 5  # pushed after: MXNet must not run it before the allreduce read x
    assert np.array_equal(y.asnumpy(), np.full(1000, hvd.size(), np.float32))
    assert np.array_equal(x.asnumpy(), np.full(1000, 5, np.float32))


def test_readers_of_the_output_wait_and_earlier_readers_go_first():
    x = mx.nd.ones((1000,)) * 3  # the input, itself written by an MXNet operation
    before = x * 1               # an earlier reader of x
    late_on_rank_0()
    hvd.allreduce_(x, op=hvd.Sum, name="dep.output")
    after = x + 1                # a later reader: waits for the allreduce
    assert np.array_equal(before.asnumpy(), np.full(1000, 3, np.float32))
    assert np.array_equal(after.asnumpy(), np.full(1000, 3 * hvd.size() + 1, np.float32))


# ---- errors: MXNetError with hvd's message, on every rank ----

def need_two():
    if hvd.size() < 2:
        pytest.skip("a mismatch needs two ranks")


def test_allreduce_shape_and_count_mismatch():
    need_two()
    r = hvd.rank()
    with pytest.raises(MXNetError, match="Mismatched allreduce tensor counts for 'allreduce.err.count'"):
        hvd.allreduce(mx.nd.ones((17 + r, 3)), name="err.count").wait_to_read()
    shape = (17, 23 * 57) if r == 0 else (17, 23, 57)
    with pytest.raises(MXNetError, match=r"Mismatched allreduce tensor shapes for 'allreduce.err.shape': "
                                         r"rank 0 sent \[17, 1311\]"):
        hvd.allreduce(mx.nd.ones(shape), name="err.shape").wait_to_read()


def test_allreduce_dtype_mismatch():
    need_two()
    dtype = "float32" if hvd.rank() == 0 else "int32"
    with pytest.raises(MXNetError, match="Mismatched allreduce tensor dtypes for 'allreduce.err.dtype'"):
        hvd.allreduce(mx.nd.ones((5,), dtype=dtype), name="err.dtype").asnumpy()


def test_broadcast_root_mismatch():
    need_two()
    with pytest.raises(MXNetError, match="Mismatched broadcast tensor root ranks for 'broadcast.err.root'"):
        hvd.broadcast(mx.nd.ones((3,)), root_rank=hvd.rank(), name="err.root").wait_to_read()


def test_gather_dimension_mismatch_on_every_rank():
    """Ranks whose tensors differ after the first dimension fail alike: a
    single tensor's shape negotiated by hvd's engine, a grouped
    allgather's through the shapes every rank's rows carry."""
    need_two()
    r = hvd.rank()
    sent = r"rank 0 sent \[\*, 2\], rank 1 sent \[\*, 3\]"
    with pytest.raises(MXNetError, match="Mismatched allgather tensor dimensions after the "
                                         "first for 'allgather.err.gather': " + sent):
        hvd.allgather(mx.nd.ones((2, 2 + r)), name="err.gather")
    with pytest.raises(MXNetError, match="Mismatched alltoall tensor dimensions after the "
                                         "first for 'alltoall.err.a2a': " + sent):
        hvd.alltoall(mx.nd.ones((hvd.size(), 2 + r)), name="err.a2a")
    with pytest.raises(MXNetError, match="Mismatched allgather tensor dimensions after the "
                                         "first for 'allgather.err.group.1': " + sent):
        hvd.grouped_allgather([mx.nd.ones((1,)), mx.nd.ones((2, 2 + r))], name="err.group")


def test_alltoall_bad_splits():
    need_two()
    n = hvd.size()
    with pytest.raises(MXNetError, match="must be divisible by the number of processes"):
        hvd.alltoall(mx.nd.ones((n + 1, 2)))
    with pytest.raises(MXNetError, match="sum to the first dimension"):
        hvd.alltoall(mx.nd.ones((n, 2)), splits=[n + 1] + [0] * (n - 1) if n > 1 else [2])
    with pytest.raises(MXNetError, match="splits must be an int32 NDArray"):
        hvd.alltoall(mx.nd.ones((n, 2)), splits=mx.nd.ones((n,)))


def test_collective_after_errors_still_works():
    x = mx.nd.ones((3,))
    assert np.array_equal(hvd.allreduce(x, op=hvd.Sum).asnumpy(), np.full(3, hvd.size()))


# ---- objects and queries ----

def test_broadcast_object_and_allgather_object():
    obj = {"rank": hvd.rank(), "data": list(range(hvd.rank() + 2))}
    got = hvd.broadcast_object(obj, root_rank=hvd.size() - 1)
    assert got == {"rank": hvd.size() - 1, "data": list(range(hvd.size() + 1))}
    assert hvd.allgather_object(obj) == [{"rank": r, "data": list(range(r + 2))}
                                         for r in range(hvd.size())]


def test_capability_queries_and_topology():
    assert hvd.is_initialized()
    assert 0 <= hvd.rank() < hvd.size() and 0 <= hvd.local_rank() < hvd.local_size()
    assert hvd.gloo_built() and hvd.gloo_enabled()
    config = build_config()  # CUDA and NCCL as built, NCCL as nccl.h's version code
    assert hvd.nccl_built() == config["HVD_BUILT_NCCL_VERSION"]
    assert hvd.cuda_built() == bool(config["HVD_BUILT_CUDA"]) and not hvd.rocm_built()
    assert not hvd.ddl_built() and not hvd.ccl_built()
    assert hvd.mpi_built() in (True, False)


def test_a_collective_before_init_raises_at_the_call():
    """Horovod's words, at the call (rank 0 alone checks: a new process)."""
    if hvd.rank() != 0:
        return
    import subprocess
    import sys
    code = ("import mxnet as mx, hvd.mxnet as hvd\n"
            "try:\n"
            "    hvd.allreduce(mx.nd.ones((2,)))\n"
            "except mx.base.MXNetError as e:\n"
            "    print('raised:', e)\n")
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert "raised: Horovod has not been initialized; use hvd.init()." in p.stdout, \
        p.stdout + p.stderr
