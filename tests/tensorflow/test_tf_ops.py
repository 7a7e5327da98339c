"""hvd.tensorflow's collectives: every op eagerly and inside tf.function,
every dtype TensorFlow and hvd share, exact against numpy references
computed from every rank's input; gradients against hand-computed
references; mismatches raising tf.errors as horovod.tensorflow's do."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from rank_data import rank_input

DTYPES = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16, tf.bfloat16,
          tf.float32, tf.float64]
MODES = ["eager", "function"]


def run(mode, fn, *args):
    """fn(*args) eagerly or traced into a tf.function (graph mode)."""
    return fn(*args) if mode == "eager" else tf.function(fn)(*args)


def tensor(a, dtype):
    return tf.cast(tf.constant(a.astype(np.int64)), dtype) if dtype != tf.bool else tf.constant(a)


def value(t):
    return tf.cast(t, tf.float64).numpy() if t.dtype != tf.bool else t.numpy()


def inputs(shape, seed, n=None):
    return [rank_input(shape, np.int64, r, seed) for r in range(n or hvd.size())]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES + [tf.bool])
def test_allreduce_sum_every_dtype(mode, dtype):
    ins = inputs((3, 4), 1)
    if dtype == tf.bool:
        ins = [a % 2 == 1 for a in ins]
        want = np.any(ins, axis=0)
    else:
        want = np.sum(ins, axis=0).astype(np.float64)
    got = run(mode, lambda x: hvd.allreduce(x, op=hvd.Sum), tensor(ins[hvd.rank()], dtype))
    assert got.dtype == dtype and got.shape == (3, 4)
    np.testing.assert_array_equal(value(got), want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,ref", [(hvd.Min, np.min), (hvd.Max, np.max), (hvd.Product, np.prod)])
def test_allreduce_min_max_product(mode, op, ref):
    ins = inputs((5,), 2)
    got = run(mode, lambda x: hvd.allreduce(x, op=op), tensor(ins[hvd.rank()], tf.int32))
    np.testing.assert_array_equal(got.numpy(), ref(ins, axis=0))


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_average_scale_and_fp16_compression(mode):
    ins = inputs((6,), 3)
    x = tensor(ins[hvd.rank()], tf.float32)

    def fn(x):
        return (hvd.allreduce(x), hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0,
                                                 postscale_factor=0.5),
                hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16, name="fp16c"))
    avg, scaled, comp = run(mode, fn, x)
    np.testing.assert_allclose(avg.numpy(), np.mean(ins, axis=0), rtol=1e-6)
    np.testing.assert_array_equal(scaled.numpy(), np.sum(ins, axis=0))
    assert comp.dtype == tf.float32
    np.testing.assert_array_equal(comp.numpy(), np.sum(ins, axis=0))


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_mixed_types(mode):
    a, b = inputs((4,), 4), inputs((2, 3), 5)
    out = run(mode, lambda x, y: hvd.grouped_allreduce([x, y], op=hvd.Sum),
              tensor(a[hvd.rank()], tf.float32), tensor(b[hvd.rank()], tf.int64))
    np.testing.assert_array_equal(out[0].numpy(), np.sum(a, axis=0))
    np.testing.assert_array_equal(out[1].numpy(), np.sum(b, axis=0))
    assert out[1].dtype == tf.int64


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES + [tf.bool])
def test_allgather_ranks_with_different_rows(mode, dtype):
    ins = [rank_input((r + 1, 3), np.int64, r, 6) for r in range(hvd.size())]
    if dtype == tf.bool:
        ins = [a % 2 == 1 for a in ins]
    got = run(mode, hvd.allgather, tensor(ins[hvd.rank()], dtype))
    assert got.dtype == dtype
    np.testing.assert_array_equal(value(got), np.concatenate(ins).astype(value(got).dtype))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES + [tf.bool])
def test_broadcast_from_every_root(mode, dtype):
    ins = inputs((2, 5), 7)
    if dtype == tf.bool:
        ins = [a % 2 == 1 for a in ins]
    for root in range(hvd.size()):
        got = run(mode, lambda x: hvd.broadcast(x, root), tensor(ins[hvd.rank()], dtype))
        np.testing.assert_array_equal(value(got), ins[root].astype(value(got).dtype))


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_with_splits_and_equal_parts(mode):
    n, me = hvd.size(), hvd.rank()
    # Rank r sends (r + d) % 3 + 1 rows to rank d; row values say (sender, row).
    splits = [[(r + d) % 3 + 1 for d in range(n)] for r in range(n)]
    rows = [np.array([[100 * r + i, -i] for i in range(sum(splits[r]))]) for r in range(n)]
    out, received = run(mode, lambda x, s: hvd.alltoall(x, splits=s),
                        tensor(rows[me], tf.int32), tf.constant(splits[me], tf.int32))
    want = [rows[r][sum(splits[r][:me]):sum(splits[r][:me + 1])] for r in range(n)]
    np.testing.assert_array_equal(out.numpy(), np.concatenate(want))
    np.testing.assert_array_equal(received.numpy(), [splits[r][me] for r in range(n)])
    equal, _ = run(mode, hvd.alltoall, tensor(np.arange(2 * n) + 10 * me, tf.float64))
    np.testing.assert_array_equal(equal.numpy(),
                                  [10 * r + 2 * me + k for r in range(n) for k in range(2)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dim0", [4, 5])
def test_reducescatter_horovods_split(mode, dim0):
    n, me = hvd.size(), hvd.rank()
    ins = inputs((dim0, 3), 8)
    got = run(mode, lambda x: hvd.reducescatter(x, op=hvd.Sum), tensor(ins[me], tf.float32))
    rows = [dim0 // n + (1 if r < dim0 % n else 0) for r in range(n)]
    start = sum(rows[:me])
    np.testing.assert_array_equal(got.numpy(), np.sum(ins, axis=0)[start:start + rows[me]])


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allgather_and_reducescatter(mode):
    n, me = hvd.size(), hvd.rank()
    a = [rank_input((r + 1, 2), np.int64, r, 9) for r in range(n)]
    b = [rank_input((2,), np.int64, r, 10) for r in range(n)]
    ga, gb = run(mode, lambda x, y: hvd.grouped_allgather([x, y]),
                 tensor(a[me], tf.float32), tensor(b[me], tf.float32))
    np.testing.assert_array_equal(ga.numpy(), np.concatenate(a))
    np.testing.assert_array_equal(gb.numpy(), np.concatenate(b))
    c, d = inputs((5, 2), 11), inputs((2 * n,), 12)
    rc, rd = run(mode, lambda x, y: hvd.grouped_reducescatter([x, y], op=hvd.Sum),
                 tensor(c[me], tf.int32), tensor(d[me], tf.int32))
    rows = [5 // n + (1 if r < 5 % n else 0) for r in range(n)]
    start = sum(rows[:me])
    np.testing.assert_array_equal(rc.numpy(), np.sum(c, axis=0)[start:start + rows[me]])
    np.testing.assert_array_equal(rd.numpy(), np.sum(d, axis=0)[2 * me:2 * me + 2])


def test_grouped_gradients():
    n, me = hvd.size(), hvd.rank()
    x = tf.Variable(tf.ones([me + 1]))
    y = tf.Variable(tf.ones([2 * n]))
    with tf.GradientTape() as tape:
        gx, = hvd.grouped_allgather([x])
        ry, = hvd.grouped_reducescatter([y], op=hvd.Sum)
        loss = tf.reduce_sum(gx * 2.0) + tf.reduce_sum(ry * float(me + 1))
    dx, dy = tape.gradient(loss, [x, y])
    np.testing.assert_array_equal(dx.numpy(), [2.0 * n] * (me + 1))
    np.testing.assert_array_equal(dy.numpy(), np.repeat(np.arange(1, n + 1) * n, 2))


@pytest.mark.parametrize("mode", MODES)
def test_queries_join_and_barrier(mode):
    def fn():
        return hvd.size_op(), hvd.rank_op(), hvd.local_size_op(), hvd.local_rank_op(), \
            hvd.process_set_included_op()
    got = [int(t.numpy()) for t in run(mode, fn)]
    assert got == [hvd.size(), hvd.rank(), hvd.local_size(), hvd.local_rank(), 1]
    hvd.barrier()
    assert int(hvd.join().numpy()) in range(hvd.size())


def test_objects_and_variables():
    obj = hvd.broadcast_object({"from": hvd.rank(), "f": lambda v: v + 1}, root_rank=0)
    assert obj["from"] == 0 and obj["f"](1) == 2
    assert hvd.allgather_object(("r", hvd.rank())) == [("r", r) for r in range(hvd.size())]
    v = tf.Variable(tf.fill([3], float(hvd.rank() + 1)))
    w = tf.Variable([hvd.rank()], dtype=tf.int64)
    hvd.broadcast_variables([v, w], root_rank=hvd.size() - 1)
    np.testing.assert_array_equal(v.numpy(), [float(hvd.size())] * 3)
    assert w.numpy().tolist() == [hvd.size() - 1]


def test_more_collectives_than_threads():
    """TensorFlow has one inter-op thread here (conftest).  A step holds 24
    allreduces; each rank makes its inputs ready in a different order
    (chains of multiplications by a variable, long for the first tensors on
    even ranks and for the last on odd ones).  A kernel that held the
    thread while waiting for the others would wait forever on the first
    tensor it reached; hvd's kernels return after enqueueing."""
    n = 24
    one = tf.Variable(1.0)
    flip = hvd.rank() % 2 == 1

    @tf.function
    def step(xs):
        outs = []
        for i, x in enumerate(xs):
            for _ in range((n - i) if not flip else (i + 1)):
                x = x * one
            outs.append(hvd.allreduce(x, op=hvd.Sum, name="many.%d" % i))
        return outs
    xs = [tf.fill([7], float(i + hvd.rank())) for i in range(n)]
    outs = step(xs)
    s = hvd.size()
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o.numpy(), [s * i + s * (s - 1) / 2] * 7)


# ---- gradients, as Horovod defines them ----

def test_allreduce_gradient():
    x = tf.Variable(tf.fill([3], float(hvd.rank() + 1)))
    with tf.GradientTape() as tape:
        y = hvd.allreduce(x * x, op=hvd.Sum)
        loss = tf.reduce_sum(y * tf.constant([1.0, 2.0, 3.0]))
    # d/dx of sum over ranks: the gradient w.r.t. the allreduce output is
    # [1,2,3] on every rank, summed (n*[1,2,3]), times 2x.
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                               hvd.size() * np.array([1.0, 2.0, 3.0]) * 2 * (hvd.rank() + 1))


def test_allgather_gradient():
    me, n = hvd.rank(), hvd.size()
    x = tf.Variable(tf.ones([me + 1, 2]))
    with tf.GradientTape() as tape:
        g = hvd.allgather(x)
        w = tf.reshape(tf.range(tf.shape(g)[0] * 2, dtype=tf.float32), [-1, 2])
        loss = tf.reduce_sum(g * w)
    # Every rank's dloss/dg is w; summed over the ranks, this rank's rows.
    start = sum(r + 1 for r in range(me))
    w = np.arange(sum(r + 1 for r in range(n)) * 2, dtype=np.float32).reshape(-1, 2)
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), n * w[start:start + me + 1])


def test_broadcast_gradient():
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.broadcast(x, 0) * (hvd.rank() + 1))
    want = sum(r + 1 for r in range(hvd.size())) if hvd.rank() == 0 else 0
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), [want, want])


def test_alltoall_gradient():
    n, me = hvd.size(), hvd.rank()
    x = tf.Variable(tf.fill([2 * n], float(me)))
    with tf.GradientTape() as tape:
        out, _ = hvd.alltoall(x)
        loss = tf.reduce_sum(out * tf.range(2 * n, dtype=tf.float32))
    # out's rows 2r, 2r+1 came from rank r's rows 2me, 2me+1; the gradient
    # goes back: rank me's rows 2d, 2d+1 get rank d's weights 2me, 2me+1.
    want = np.array([2 * me + k for d in range(n) for k in range(2)], dtype=np.float32)
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), want)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average])
def test_reducescatter_gradient(op):
    n = hvd.size()
    x = tf.Variable(tf.ones([2 * n, 1]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(hvd.reducescatter(x, op=op) * float(hvd.rank() + 1))
    # Horovod's: allgather of the output gradient (each rank's 2 rows,
    # weight r+1), times n for Sum.
    want = np.repeat(np.arange(1, n + 1, dtype=np.float32), 2).reshape(-1, 1)
    if op == hvd.Sum:
        want = want * n
    np.testing.assert_array_equal(tape.gradient(loss, x).numpy(), want)


# ---- errors ----

def test_shape_mismatch_is_failed_precondition():
    shape = (2, 3) if hvd.rank() == 0 else (3, 2)
    if hvd.size() == 1:
        pytest.skip("needs two ranks to disagree")
    with pytest.raises(tf.errors.FailedPreconditionError, match="mismatch.shape|shape"):
        hvd.allreduce(tf.ones(shape), name="mismatch.shape")


def test_type_mismatch_is_failed_precondition():
    if hvd.size() == 1:
        pytest.skip("needs two ranks to disagree")
    dtype = tf.float32 if hvd.rank() == 0 else tf.int32
    with pytest.raises(tf.errors.FailedPreconditionError, match="mismatch.type"):
        hvd.allreduce(tf.ones([4], dtype), name="mismatch.type")


def test_allgather_other_dims_mismatch_is_failed_precondition():
    if hvd.size() == 1:
        pytest.skip("needs two ranks to disagree")

    @tf.function
    def fn(x):
        return hvd.allgather(x, name="mismatch.gather")
    x = tf.ones([2, 3]) if hvd.rank() == 0 else tf.ones([1, 4])
    with pytest.raises(tf.errors.FailedPreconditionError, match="mismatch.gather"):
        fn(x)


def test_bad_arguments():
    with pytest.raises(tf.errors.InvalidArgumentError, match="splits"):
        hvd.alltoall(tf.ones([hvd.size() + 1]), splits=[1] * (hvd.size() + 1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="scalar"):
        hvd.reducescatter(tf.constant(1.0))
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(tf.ones([1]), process_set=hvd.ProcessSet([0]))


def test_process_set_collectives():
    n = hvd.size()
    evens = hvd.add_process_set(list(range(0, n, 2)))
    try:
        if hvd.rank() % 2 == 0:
            x = tf.fill([3], float(hvd.rank()))
            got = hvd.allreduce(x, op=hvd.Sum, process_set=evens)
            np.testing.assert_array_equal(got.numpy(), [float(sum(range(0, n, 2)))] * 3)
            gathered = tf.function(lambda y: hvd.allgather(y, process_set=evens))(x)
            assert gathered.shape[0] == 3 * len(evens.ranks)
            assert int(hvd.process_set_included_op(evens.process_set_id).numpy()) == 1
        else:
            assert int(hvd.process_set_included_op(evens.process_set_id).numpy()) == 0
    finally:
        hvd.remove_process_set(evens)
