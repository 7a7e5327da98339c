"""hvd.jax's fast path (python/_C/fast.c's eager_allreduce): an eager
allreduce() of one concrete CPU jax.Array goes through one hvd._C call
instead of the FFI custom call.  Its results are bitwise the custom
call's (dtypes, ops, scale factors, shapes), on the same device, as
committed; its names are the general path's, so the ranks pair whichever
path each takes; hvd's errors come through it as HorovodInternalError
with the custom call's message, on every rank; and what it must not take
(tracers, pytrees, sets, compression...) goes the general way.  Every
test counts the calls that took the fast path (hvd._C.eager_fast_calls()),
so that a fast path that silently stopped being used fails here."""
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hvd.jax as hvd
from hvd import _C
from hvd.jax import mpi_ops
import fast_path
from rank_data import rank_input

# (JAX compiles the custom call for each dtype and case, 50-100 ms: the
# fast path takes every dtype alike, through one table)
DTYPES = [np.int32, np.int64, jnp.bfloat16, np.float32, np.float64]


general_path = functools.partial(fast_path.general_path, mpi_ops)
fast_calls = functools.partial(fast_path.counted, _C.eager_fast_calls)


def outcome(call):
    """What call() returned (its facts and bytes) or raised (type, message
    without the generated name's number): compared after every rank made
    its calls."""
    try:
        out = call()
    except Exception as e:  # noqa: BLE001
        return ("error", type(e), re.sub(r"jax\.allreduce\.\d+", "N", str(e)))
    return ("ok", type(out), out.dtype, out.shape, out.aval.weak_type, out.committed,
            out.sharding, np.asarray(out).tobytes())


def same(fast, general):
    assert fast == general, (fast, general)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_fast_path_is_bitwise_the_custom_call(dtype):
    x = jnp.asarray(rank_input((3, 5), dtype, hvd.rank(), seed=71, low=1, high=4))
    fast_path.assert_paths_agree(hvd, mpi_ops, outcome, lambda **kw: hvd.allreduce(x, **kw),
                                 same)


@pytest.mark.parametrize("shape", [(), (1,), (2, 1, 3), (2, 2, 2, 2, 2, 2, 2)], ids=str)
def test_shapes_weak_types_committed_and_default_op(shape):
    data = rank_input(shape, np.float32, hvd.rank(), seed=72)
    inputs = [jnp.asarray(data), jax.device_put(data, jax.devices()[0]),
              jnp.asarray(data.tolist())]  # committed; a scalar's weakly typed
    assert inputs[1].committed and inputs[2].aval.weak_type == (shape == ())
    with fast_calls(3):
        fast = [outcome(lambda: hvd.allreduce(x)) for x in inputs]
    with general_path(), fast_calls(0):
        general = [outcome(lambda: hvd.allreduce(x)) for x in inputs]
    assert fast == general and fast[0][0] == "ok", (fast, general)


def test_ranks_pair_whichever_path_each_takes():
    # Half the ranks take the fast path: unnamed calls would stall or
    # mismatch if the two paths drew names out of step.  A call the fast
    # path declines after drawing its name (a numpy scalar factor) runs
    # the general way under that name.
    fast = hvd.rank() % 2 == 0
    n = hvd.size()
    outs = []
    with general_path(not fast), fast_calls(8 if fast else 0):
        for i in range(4):
            x = jnp.full((3,), float(i + hvd.rank()))
            outs.append(hvd.allreduce(x, op=hvd.Sum))
            outs.append(hvd.allreduce(x, op=hvd.Sum, name="fast.mixed.%d" % i))
    with fast_calls(0):
        outs.append(hvd.allreduce(jnp.ones(3), op=hvd.Sum, prescale_factor=np.float64(2.0)))
    with fast_calls(1):
        outs.append(hvd.allreduce(jnp.ones(3), op=hvd.Sum))
    for i in range(4):
        want = [float(n * i + n * (n - 1) // 2)] * 3
        assert outs[2 * i].tolist() == outs[2 * i + 1].tolist() == want
    assert outs[8].tolist() == [2.0 * n] * 3 and outs[9].tolist() == [float(n)] * 3


def test_declined_calls_take_the_general_path():
    x = jnp.asarray([1.0, 2.0, 3.0])
    n = float(hvd.size())
    want = [n, 2 * n, 3 * n]
    with fast_calls(0):
        outs = [hvd.allreduce(np.asarray(x), op=hvd.Sum),
                hvd.allreduce([x], op=hvd.Sum)[0],
                hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16),
                jax.jit(lambda t: hvd.allreduce(t, op=hvd.Sum))(x),
                jax.jit(lambda: hvd.allreduce(x, op=hvd.Sum, name="fast.captured"))(),
                jax.grad(lambda t: hvd.allreduce(t, op=hvd.Sum).sum())(x)]
        with jax.transfer_guard("log"):  # declined: the general path's transfers only
            outs.append(hvd.allreduce(x, op=hvd.Sum))
        empty = hvd.allreduce(jnp.zeros((0, 2)), op=hvd.Sum)
        if hvd.size() & (hvd.size() - 1) == 0:
            hvd.allreduce(x, op=hvd.Adasum)
        if hvd.size() > 1:
            ps = hvd.add_process_set([0, 1] if hvd.size() > 2 else [1])  # not the global set
            try:
                if ps.included():
                    got = hvd.allreduce(x, op=hvd.Sum, process_set=ps)
                    assert got.tolist() == (x * len(ps.ranks)).tolist()
            finally:
                hvd.remove_process_set(ps)
    assert empty.shape == (0, 2)
    for out in outs[:5] + outs[6:]:
        assert out.tolist() == want
    assert outs[5].tolist() == [n] * 3


def test_hvds_refusals_are_the_custom_calls_errors():
    calls = [lambda: hvd.allreduce(jnp.asarray([True, False]), op=hvd.Average),
             lambda: hvd.allreduce(jnp.asarray([True]), prescale_factor=2.0, op=hvd.Sum)]
    for call in calls:
        with fast_calls(1):
            fast = outcome(call)
        with general_path():
            general = outcome(call)
        assert fast == general and fast[1] is hvd.HorovodInternalError, (fast, general)


def test_mismatched_shapes_raise_on_every_rank():
    if hvd.size() == 1:
        pytest.skip("needs two ranks")  # same on every rank
    x = jnp.ones([2 + hvd.rank() % 2])
    with fast_calls(1):
        fast = outcome(lambda: hvd.allreduce(x, name="fast.mismatch"))
    with general_path():
        general = outcome(lambda: hvd.allreduce(x, name="fast.mismatch"))
    assert fast == general and fast[1] is hvd.HorovodInternalError, (fast, general)
    assert "'fast.mismatch'" in fast[2], fast
    assert hvd.allreduce(jnp.ones([2]), op=hvd.Sum).tolist() == [hvd.size()] * 2


def test_after_shutdown_the_general_paths_error():
    hvd.allreduce(jnp.zeros(1), name="fast.before-shutdown")  # every rank here
    hvd.shutdown()
    try:
        with fast_calls(0):
            fast = outcome(lambda: hvd.allreduce(jnp.ones([2]), name="fast.down"))
        with general_path():
            general = outcome(lambda: hvd.allreduce(jnp.ones([2]), name="fast.down"))
    finally:
        hvd.init()
    assert fast == general and fast[1] is hvd.HorovodInternalError, (fast, general)
