"""The gradients of hvd.tensorflow's ops, as Horovod registers them
(horovod/tensorflow/mpi_ops.py), eagerly (a GradientTape), inside
tf.function and in a TensorFlow 1 graph (tf.gradients), against
hand-computed values:

- allreduce: the same allreduce (op, scale factors) of the gradient;
- allgather: the Average allreduce of the gradient, this rank's rows;
- broadcast: the Average allreduce of the gradient at the root, zeros
  elsewhere;
- alltoall: the gradient sent back the way the rows came;
- reducescatter: the allgather of the gradient, times the set's size for
  Sum and times the scale factors;
- the grouped ops: each tensor's as the single op's.

Rank r's upstream weights depend on r, so a Sum where Horovod averages
(or the reverse) shows."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from tf_modes import MODES


def gradient(mode, loss_fn, *xs):
    """d loss_fn(*xs) / d xs (xs numpy arrays), per mode."""
    if mode == "graph":
        with tf.Graph().as_default():
            ts = [tf.constant(x) for x in xs]
            grads = tf.gradients(loss_fn(*ts), ts)
            with tf.compat.v1.Session() as session:
                return session.run(grads)

    def grads(*ts):
        with tf.GradientTape() as tape:
            tape.watch(ts)
            loss = loss_fn(*ts)
        return tape.gradient(loss, ts)
    ts = [tf.constant(x) for x in xs]
    out = grads(*ts) if mode == "eager" else tf.function(grads)(*ts)
    return [g.numpy() for g in out]


def weight(n=None):
    """This rank's upstream weight r + 1, and the weights' sum and mean."""
    n = n or hvd.size()
    return float(hvd.rank() + 1), n * (n + 1) / 2, (n + 1) / 2


@pytest.mark.parametrize("mode", MODES)
def test_allreduce_gradient(mode):
    me = hvd.rank()
    w, total, mean = weight()
    x = np.full([3], me + 1.0, np.float32)

    def loss(x):
        return (tf.reduce_sum(hvd.allreduce(x * x, op=hvd.Sum) * w)
                + tf.reduce_sum(hvd.allreduce(x, prescale_factor=2.0, postscale_factor=3.0) * w))
    g, = gradient(mode, loss, x)
    # Sum: the weights summed, times 2x; Average with scales: the weights
    # averaged, times 2 * 3.
    np.testing.assert_allclose(g, total * 2 * x + mean * 6.0, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allreduce_gradient(mode):
    w, total, mean = weight()
    a, b = np.ones([2], np.float32), np.ones([3], np.float64)

    def loss(a, b):
        ra, rb = hvd.grouped_allreduce([a, b], op=hvd.Sum)
        return tf.reduce_sum(ra) * w + tf.cast(tf.reduce_sum(rb), tf.float32) * 2 * w
    ga, gb = gradient(mode, loss, a, b)
    np.testing.assert_allclose(ga, [total] * 2)
    np.testing.assert_allclose(gb, [2 * total] * 3)


@pytest.mark.parametrize("mode", MODES)
def test_allgather_gradient_with_different_first_dimensions(mode):
    n, me = hvd.size(), hvd.rank()
    rows = [r + 1 for r in range(n)]  # rank r gathers r + 1 rows
    x = np.ones([rows[me], 2], np.float64)

    def loss(x):
        g = hvd.allgather(x)
        k = tf.cast(tf.reshape(tf.range(tf.shape(g)[0] * 2), [-1, 2]), tf.float64)
        return tf.reduce_sum(g * (k + 10.0 * me))
    g, = gradient(mode, loss, x)
    # Every rank's upstream gradient is k + 10 r; averaged over the ranks,
    # k + 10 (n - 1) / 2; this rank's rows.
    k = np.arange(sum(rows) * 2, dtype=np.float64).reshape(-1, 2) + 10.0 * (n - 1) / 2
    start = sum(rows[:me])
    np.testing.assert_allclose(g, k[start:start + rows[me]])


@pytest.mark.parametrize("mode", MODES)
def test_grouped_allgather_gradient(mode):
    n, me = hvd.size(), hvd.rank()
    w, _, mean = weight()
    a, b = np.ones([me + 1], np.float32), np.ones([2, 2], np.float32)

    def loss(a, b):
        ga, gb = hvd.grouped_allgather([a, b])
        return tf.reduce_sum(ga) * w + tf.reduce_sum(gb) * 2.0
    ga, gb = gradient(mode, loss, a, b)
    np.testing.assert_allclose(ga, [mean] * (me + 1))
    np.testing.assert_allclose(gb, np.full([2, 2], 2.0))


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_gradient(mode):
    n, me = hvd.size(), hvd.rank()
    w, _, mean = weight()
    root = n - 1
    g, = gradient(mode, lambda x: tf.reduce_sum(hvd.broadcast(x, root) * w),
                  np.ones([2], np.float32))
    np.testing.assert_allclose(g, [mean if me == root else 0.0] * 2)


@pytest.mark.parametrize("mode", MODES)
def test_alltoall_gradient(mode):
    n, me = hvd.size(), hvd.rank()
    # Rank me sends d + 1 rows to rank d; weights say where each row went.
    splits = np.array([d + 1 for d in range(n)], np.int32)

    def loss(x):
        out, received = hvd.alltoall(x, splits=splits)
        k = tf.range(tf.shape(out)[0], dtype=tf.float32)
        return tf.reduce_sum(out * (100.0 * me + k))
    g, = gradient(mode, loss, np.ones([int(splits.sum())], np.float32))
    # Rank d received d + 1 rows from each rank, in rank order: rows
    # me*(d+1) ... of its output came from rank me's rows to d.
    want = [100.0 * d + me * (d + 1) + i for d in range(n) for i in range(d + 1)]
    np.testing.assert_allclose(g, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["sum", "average"])
def test_reducescatter_gradient(mode, op):
    n, me = hvd.size(), hvd.rank()
    reduce_op = hvd.Sum if op == "sum" else hvd.Average

    def loss(x):
        return (tf.reduce_sum(hvd.reducescatter(x, op=reduce_op) * (me + 1.0))
                + tf.reduce_sum(hvd.reducescatter(x, op=reduce_op, prescale_factor=0.5,
                                                  postscale_factor=3.0)))
    g, = gradient(mode, loss, np.ones([2 * n, 1], np.float32))
    # Horovod's: the allgather of every rank's output gradient (2 rows of
    # weight r + 1), times n for Sum; the second term's 1s times 1.5.
    scale = n if reduce_op == hvd.Sum else 1.0
    want = (np.repeat(np.arange(1, n + 1, dtype=np.float32), 2) + 1.5) * scale
    np.testing.assert_allclose(g, want.reshape(-1, 1), rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_grouped_reducescatter_gradient(mode):
    n, me = hvd.size(), hvd.rank()

    def loss(a, b):
        ra, rb = hvd.grouped_reducescatter([a, b], op=hvd.Sum)
        return tf.reduce_sum(ra) * (me + 1.0) + tf.reduce_sum(rb) * 2.0
    ga, gb = gradient(mode, loss, np.ones([n], np.float32), np.ones([n, 2], np.float32))
    np.testing.assert_allclose(ga, np.arange(1, n + 1, dtype=np.float32) * n)
    np.testing.assert_allclose(gb, np.full([n, 2], 2.0 * n))
