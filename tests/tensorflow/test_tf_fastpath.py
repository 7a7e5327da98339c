"""hvd.tensorflow's fast path (python/_C/fast.c's eager_allreduce): an
eager allreduce() of one CPU tf.Tensor goes through one hvd._C call
instead of the HorovodAllreduce op.  Its results are bitwise the op's
(dtypes, ops, scale factors, shapes); the ranks pair whichever path each
takes (eager ops are unnamed on both); hvd's errors come through it with
the op's tf.errors types, on every rank; and what it must not take
(graphs, tapes, variables, sets, compression...) goes to the op.  Every
test counts the calls that took the fast path (hvd._C.eager_fast_calls()),
so that a fast path that silently stopped being used fails here."""
import functools
import re

import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from hvd import _C
from hvd.tensorflow import mpi_ops
import fast_path
from rank_data import rank_input

DTYPES = [np.uint8, np.int8, np.int32, np.int64, np.float16, tf.bfloat16.as_numpy_dtype,
          np.float32, np.float64, np.bool_]


general_path = functools.partial(fast_path.general_path, mpi_ops)
fast_calls = functools.partial(fast_path.counted, _C.eager_fast_calls)


def outcome(call):
    """('ok', dtype, shape, bytes) of call()'s tensor, or ('error', type)
    of what it raised: compared after every rank made its calls."""
    try:
        out = call()
    except Exception as e:  # noqa: BLE001
        return ("error", type(e), str(e))
    return ("ok", out.dtype, tuple(out.shape), out.numpy().tobytes())


def same(fast, general):
    assert fast[:2] == general[:2], (fast, general)
    if fast[0] == "ok":
        assert fast == general, (fast, general)
    else:  # the op's message is hvd's (its generated name the next), in TensorFlow's frame
        assert unnumbered(fast[2]) in unnumbered(general[2]), (fast, general)


def unnumbered(message):
    return re.sub(r"noname\.\d+", "noname.N", message)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_fast_path_is_bitwise_the_op(dtype):
    x = tf.constant(rank_input((3, 5), dtype, hvd.rank(), seed=61, low=1, high=4))
    fast_path.assert_paths_agree(hvd, mpi_ops, outcome, lambda **kw: hvd.allreduce(x, **kw),
                                 same)


@pytest.mark.parametrize("shape", [(), (1,), (2, 1, 3), (2, 2, 2, 2, 2, 2, 2)], ids=str)
def test_shapes_default_op_and_given_names(shape):
    x = tf.constant(rank_input(shape, np.float32, hvd.rank(), seed=62))
    with fast_calls(2):
        fast = [outcome(lambda: hvd.allreduce(x)),
                outcome(lambda: hvd.allreduce(x, name="fast.named", average=False))]
    with general_path(), fast_calls(0):
        general = [outcome(lambda: hvd.allreduce(x)),
                   outcome(lambda: hvd.allreduce(x, name="fast.named", average=False))]
    for f, g in zip(fast, general):
        same(f, g)
    assert fast[0][0] == "ok"


def test_ranks_pair_whichever_path_each_takes():
    # Half the ranks take the fast path: eager calls pair in call order,
    # named or not, as the op's do.
    fast = hvd.rank() % 2 == 0
    with general_path(not fast), fast_calls(6 if fast else 0):
        outs = [hvd.allreduce(tf.fill([3], float(i + hvd.rank())), op=hvd.Sum,
                              name=None if i % 2 else "fast.mixed.%d" % hvd.rank())
                for i in range(6)]
    n = hvd.size()
    for i, out in enumerate(outs):
        assert out.numpy().tolist() == [float(n * i + n * (n - 1) // 2)] * 3


def test_declined_calls_take_the_op():
    x = tf.constant([1.0, 2.0, 3.0])
    n = float(hvd.size())
    want = (x * n).numpy().tolist()
    with fast_calls(0):
        outs = [hvd.allreduce(tf.Variable(x), op=hvd.Sum),
                hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16),
                hvd.allreduce(tf.constant([], tf.float32), op=hvd.Sum),
                tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum))(x)]
        with tf.device("/CPU:0"):
            outs.append(hvd.allreduce(x, op=hvd.Sum))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = hvd.allreduce(x, op=hvd.Sum)  # the tape records the op
        grad = tape.gradient(y, x)
        outs.append(y)
        if hvd.size() & (hvd.size() - 1) == 0:
            hvd.allreduce(tf.constant([1.0, 2.0], tf.float64), op=hvd.Adasum)
        if hvd.size() > 1:
            ps = hvd.add_process_set([0, 1] if hvd.size() > 2 else [1])  # not the global set
            try:
                if ps.included():
                    assert hvd.allreduce(x, op=hvd.Sum, process_set=ps).numpy().tolist() == (
                        (x * len(ps.ranks)).numpy().tolist())
            finally:
                hvd.remove_process_set(ps)
    assert grad.numpy().tolist() == [n] * 3
    for out in outs[:2] + outs[3:]:
        assert out.numpy().tolist() == want
    with fast_calls(1):  # another tape, not watching x, records nothing of it
        with tf.GradientTape():
            assert hvd.allreduce(x, op=hvd.Sum).numpy().tolist() == want


def test_hvds_refusals_are_the_ops_errors():
    calls = [lambda: hvd.allreduce(tf.constant([True, False]), op=hvd.Average),
             lambda: hvd.allreduce(tf.constant([1.0]), op=12345),
             lambda: hvd.allreduce(tf.constant([1 + 1j]))]
    for call in calls:
        fast = outcome(call)
        with general_path():
            general = outcome(call)
        same(fast, general)
        assert fast[0] == "error", fast


def test_mismatched_shapes_raise_on_every_rank():
    if hvd.size() == 1:
        pytest.skip("needs two ranks")  # same on every rank
    x = tf.ones([2 + hvd.rank() % 2])
    with fast_calls(1):
        fast = outcome(lambda: hvd.allreduce(x))
    with general_path():
        general = outcome(lambda: hvd.allreduce(x))
    assert fast[:2] == general[:2] == ("error", tf.errors.FailedPreconditionError), (fast,
                                                                                       general)
    assert hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy().tolist() == [hvd.size()] * 2


def test_after_shutdown_the_ops_error():
    hvd.barrier()
    hvd.shutdown()
    try:
        with fast_calls(0):
            fast = outcome(lambda: hvd.allreduce(tf.ones([2])))
        with general_path():
            general = outcome(lambda: hvd.allreduce(tf.ones([2])))
    finally:
        hvd.init()
    assert fast[:2] == general[:2] == ("error", tf.errors.FailedPreconditionError), (fast,
                                                                                       general)
