"""hvd.jax's collectives, eagerly and under jax.jit, exact against NumPy
references built from every rank's input."""
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hvd.jax as hvd
from hvd.jax import mpi_ops
from rank_data import rank_input

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.float16]


def everyone(shape, dtype, seed):
    return [rank_input(shape, dtype, r, seed) for r in range(hvd.size())]


def test_rank_family_matches_the_job():
    n = hvd.size()
    assert 0 <= hvd.rank() < n and hvd.is_initialized()
    assert 0 <= hvd.local_rank() < hvd.local_size() <= n
    ranks = hvd.allgather(jnp.asarray([hvd.rank()], jnp.int32))
    assert ranks.tolist() == list(range(n))


def _reduce_refs(inputs, n):
    stack = np.stack(inputs)
    return {hvd.Sum: stack.sum(0, dtype=stack.dtype), hvd.Min: stack.min(0),
            hvd.Max: stack.max(0)}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_allreduce_ops_over_a_pytree_of_mixed_dtypes(jit):
    n, me = hvd.size(), hvd.rank()
    shapes = {dt: (3, 2) if i % 2 else (5,) for i, dt in enumerate(DTYPES)}
    tree = {np.dtype(dt).name: jnp.asarray(rank_input(shapes[dt], dt, me, 1 + i))
            for i, dt in enumerate(DTYPES)}

    def run(t):
        return {op: hvd.allreduce(t, op=op, name="ops.%s.%d" % (jit, op))
                for op in (hvd.Sum, hvd.Min, hvd.Max)}

    out = (jax.jit(run) if jit else run)(tree)
    for i, dt in enumerate(DTYPES):
        key = np.dtype(dt).name
        refs = _reduce_refs([rank_input(shapes[dt], dt, r, 1 + i) for r in range(n)], n)
        for op, ref in refs.items():
            got = np.asarray(out[op][key])
            assert got.dtype == ref.dtype, key
            np.testing.assert_array_equal(got, ref, err_msg="%s op %d" % (key, op))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_allreduce_average_and_scale_factors(jit):
    n, me = hvd.size(), hvd.rank()
    x = jnp.asarray(rank_input((4, 3), np.float64, me, 7))

    def run(x):
        return (hvd.allreduce(x),
                hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
                hvd.allreduce(x, average=False))

    avg, scaled, total = (jax.jit(run) if jit else run)(x)
    ref = np.stack(everyone((4, 3), np.float64, 7)).sum(0)
    np.testing.assert_allclose(np.asarray(avg), ref / n, rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(scaled), ref * 1.5)
    np.testing.assert_array_equal(np.asarray(total), ref)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_grouped_allreduce_of_mixed_dtypes(jit):
    me = hvd.size(), hvd.rank()
    seeds = [(np.float32, 11), (np.int32, 12), (np.float32, 13)]
    xs = [jnp.asarray(rank_input((6,), dt, me[1], s)) for dt, s in seeds]
    run = lambda xs: hvd.grouped_allreduce(xs, op=hvd.Sum, name="grouped.%s" % jit)  # noqa
    out = (jax.jit(run) if jit else run)(xs)
    for got, (dt, s) in zip(out, seeds):
        ref = np.stack(everyone((6,), dt, s)).sum(0, dtype=dt)
        np.testing.assert_array_equal(np.asarray(got), ref)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_allgather_broadcast_alltoall_reducescatter(jit):
    n, me = hvd.size(), hvd.rank()
    root = n - 1
    a = jnp.asarray(rank_input((2, 3), np.float32, me, 21))
    b = {"w": jnp.asarray(rank_input((3,), np.int64, me, 22)),
         "v": jnp.asarray(rank_input((2, 2), np.float16, me, 23)),
         "h": jnp.asarray(rank_input((4,), np.float32, me, 26)).astype(jnp.bfloat16),
         "m": jnp.asarray(rank_input((5,), np.bool_, me, 27))}
    c = jnp.asarray(rank_input((2 * n, 2), np.int32, me, 24))
    d = jnp.asarray(rank_input((2 * n + 1, 3), np.float64, me, 25))

    def run(a, b, c, d):
        return (hvd.allgather(a), hvd.broadcast(b, root_rank=root), hvd.alltoall(c),
                hvd.reducescatter(d, op=hvd.Sum), hvd.reducescatter(d, op=hvd.Max))

    g, bc, at, rs, rmax = (jax.jit(run) if jit else run)(a, b, c, d)
    np.testing.assert_array_equal(np.asarray(g), np.concatenate(everyone((2, 3), np.float32, 21)))
    np.testing.assert_array_equal(np.asarray(bc["w"]), rank_input((3,), np.int64, root, 22))
    np.testing.assert_array_equal(np.asarray(bc["v"]), rank_input((2, 2), np.float16, root, 23))
    assert bc["h"].dtype == jnp.bfloat16 and bc["m"].dtype == jnp.bool_
    np.testing.assert_array_equal(np.asarray(bc["h"], np.float32),
                                  rank_input((4,), np.float32, root, 26))
    np.testing.assert_array_equal(np.asarray(bc["m"]), rank_input((5,), np.bool_, root, 27))
    blocks = [x[2 * me:2 * me + 2] for x in everyone((2 * n, 2), np.int32, 24)]
    np.testing.assert_array_equal(np.asarray(at), np.concatenate(blocks))
    ds = np.stack(everyone((2 * n + 1, 3), np.float64, 25))
    rows = [(2 * n + 1) // n + (1 if r < (2 * n + 1) % n else 0) for r in range(n)]
    lo = sum(rows[:me])
    np.testing.assert_array_equal(np.asarray(rs), ds.sum(0)[lo:lo + rows[me]])
    np.testing.assert_array_equal(np.asarray(rmax), ds.max(0)[lo:lo + rows[me]])


def test_alltoall_with_splits():
    """Equal splits also under jit; unequal ones eagerly: rank r sends
    r + k rows to rank k."""
    n, me = hvd.size(), hvd.rank()
    x = jnp.arange(2 * n, dtype=jnp.float32)
    out, splits = hvd.alltoall(x, splits=[2] * n)
    assert splits.tolist() == [2] * n and out.shape == (2 * n,)
    sends = [me + k for k in range(n)]
    rows = rank_input((sum(sends), 2), np.int64, me, 81)
    got, received = hvd.alltoall(jnp.asarray(rows), splits=sends, name="alltoall.ragged")
    assert received.tolist() == [r + me for r in range(n)]
    want = []
    for r in range(n):
        theirs = rank_input((sum(r + k for k in range(n)), 2), np.int64, r, 81)
        start = sum(r + k for k in range(me))
        want.append(theirs[start:start + r + me])
    np.testing.assert_array_equal(np.asarray(got), np.concatenate(want))
    if n > 1:
        with pytest.raises(NotImplementedError, match="unequal splits"):
            jax.jit(lambda x: hvd.alltoall(x, splits=sends)[0])(jnp.asarray(rows))


def test_barrier_eager_and_jit():
    hvd.barrier()
    jax.jit(lambda x: (hvd.barrier(), x + 1)[1])(jnp.zeros(()))


def test_process_set_collectives():
    n, me = hvd.size(), hvd.rank()
    ranks = list(range(0, n, 2))
    # [0] at size 1: the global set, not added again
    ps = hvd.add_process_set(ranks) if n > 1 else hvd.global_process_set
    try:
        if me in ranks:
            x = jnp.asarray(rank_input((4,), np.float32, me, 31))
            total = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum, process_set=ps))(x)
            ref = np.stack([rank_input((4,), np.float32, r, 31) for r in ranks]).sum(0)
            np.testing.assert_array_equal(np.asarray(total), ref)
            got = hvd.allgather(x, process_set=ps)
            assert got.shape == (4 * len(ranks),)
            bc = hvd.broadcast(x, root_rank=ranks[-1], process_set=ps)
            np.testing.assert_array_equal(np.asarray(bc), rank_input((4,), np.float32,
                                                                     ranks[-1], 31))
            hvd.barrier(process_set=ps)
        else:
            with pytest.raises((ValueError, hvd.HorovodInternalError)):
                hvd.allreduce(jnp.zeros(2), process_set=ps)
    finally:
        hvd.remove_process_set(ps)


def test_mismatched_shapes_fail_naming_the_tensor():
    if hvd.size() < 2:
        pytest.skip("a mismatch needs two ranks")
    me = hvd.rank()
    with pytest.raises(hvd.HorovodInternalError, match="'mismatch.eager'"):
        hvd.allreduce(jnp.zeros(3 + me), name="mismatch.eager")
    with pytest.raises(jax.errors.JaxRuntimeError,
                       match="HorovodInternalError: .*'mismatch.gather'.*different element counts"):
        jax.jit(lambda x: hvd.allgather(x, name="mismatch.gather"))(jnp.zeros(2 + me))
    with pytest.raises(hvd.HorovodInternalError, match="'mismatch.dtype'"):
        hvd.allreduce(jnp.zeros(3, jnp.float32 if me else jnp.int32), name="mismatch.dtype")
    hvd.barrier()


def test_bad_arguments_are_refused_before_the_call():
    with pytest.raises(ValueError, match="unknown reduction op"):
        hvd.allreduce(jnp.zeros(2), op=99)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(jnp.zeros(2), process_set=hvd.ProcessSet([0]))
    with pytest.raises(hvd.HorovodInternalError, match="scalar"):
        hvd.reducescatter(jnp.zeros(()))


def test_eager_calls_under_new_names_reuse_the_compiled_call(caplog):
    """Names travel as an operand, not an attribute: an eager call under a
    new name (every unnamed call has one) compiles nothing new; a new
    shape compiles once.  (On the general path: the fast path, which these
    calls take by default, compiles nothing.)"""
    x, y = jnp.ones(3, jnp.float32), jnp.ones(4, jnp.float32)
    mpi_ops._fast_enabled = False
    hvd.allreduce(x, name="compile.first")
    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING):
            hvd.allreduce(x)
            hvd.allreduce(x, name="compile.another.name")
            hvd.allreduce(y, name="compile.new.shape")
    finally:
        jax.config.update("jax_log_compiles", False)
        mpi_ops._fast_enabled = True
    compiles = [r.getMessage() for r in caplog.records
                if "XLA compilation of jit(ffi_call)" in r.getMessage()]
    assert len(compiles) == 1, compiles


def test_eager_allgather_of_different_first_dimensions():
    n, me = hvd.size(), hvd.rank()
    x = jnp.asarray(rank_input((1 + me, 2), np.int32, me, 71))
    got = hvd.allgather(x, name="ragged")
    want = np.concatenate([rank_input((1 + r, 2), np.int32, r, 71) for r in range(n)])
    np.testing.assert_array_equal(np.asarray(got), want)
    if n > 1:
        with pytest.raises(hvd.HorovodInternalError, match="'ragged.trailing'.*beyond the first"):
            hvd.allgather(jnp.zeros((2, 1 + me)), name="ragged.trailing")
