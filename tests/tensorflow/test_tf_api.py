"""hvd.tensorflow beyond the ops, as horovod.tensorflow's (facts from
Horovod's test_tensorflow.py): horovod.tensorflow.util's names, Python
objects and variables broadcast eagerly and in a TensorFlow 1 graph,
SyncBatchNormalization, DistributedGradientTape's groups and local
sources, and the TensorFlow 1 DistributedOptimizer in a graph (averaged
gradients, backward_passes_per_step)."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd


def test_util_names():
    from hvd.tensorflow.util import _executing_eagerly
    assert hvd.util._executing_eagerly is _executing_eagerly
    assert hvd._executing_eagerly() is True
    with tf.Graph().as_default():
        assert hvd._executing_eagerly() is False
    assert tf.function(lambda: tf.constant(hvd._executing_eagerly()))().numpy() == False  # noqa
    calls = []
    cached = hvd._cache(lambda a: calls.append(a) or len(calls))
    assert cached(1) == cached(1) == 1 and cached(2) == 2
    v = tf.Variable(1.0)
    assert hvd.refs_to_vars(hvd.vars_to_refs([v, [v]])) == [v, [v]]
    assert hvd.handle_average_backwards_compatibility(None, False) == hvd.Sum
    assert hvd.check_num_rank_power_of_2(4) and not hvd.check_num_rank_power_of_2(6)


@pytest.mark.parametrize("graph", [False, True])
def test_objects(graph):
    n, me = hvd.size(), hvd.rank()
    obj = {"hello": 123, 0: [1, 2]}

    def both():
        got = hvd.broadcast_object(obj if me == 0 else {}, root_rank=0)
        every = hvd.allgather_object({"r": me, **({"x": 42} if me == 1 else {})})
        fn = hvd.broadcast_object_fn(root_rank=n - 1)(("from", me))
        return got, every, fn
    if graph:
        with tf.Graph().as_default(), tf.compat.v1.Session().as_default():
            got, every, fn = both()
    else:
        got, every, fn = both()
    assert got == obj
    assert every == [{"r": r, **({"x": 42} if r == 1 else {})} for r in range(n)]
    assert fn == ("from", n - 1)


def test_variables_eagerly():
    n, me = hvd.size(), hvd.rank()
    v = tf.Variable(tf.fill([3], float(me + 1)))
    w = tf.Variable([me], dtype=tf.int64)
    hvd.broadcast_variables([v, w], root_rank=n - 1)
    np.testing.assert_array_equal(v.numpy(), [float(n)] * 3)
    assert w.numpy().tolist() == [n - 1]
    x = tf.Variable(tf.fill([2, 2], me), dtype=tf.int32)
    got, = hvd.broadcast_([x], 0)
    np.testing.assert_array_equal(got.numpy(), np.zeros([2, 2]))
    np.testing.assert_array_equal(x.numpy(), np.zeros([2, 2]))
    with pytest.raises(RuntimeError, match="eager"):
        hvd.broadcast_global_variables(0)


def test_keras_model_variables_eagerly():
    """A model's variables outside any tf.function, as Horovod's examples
    broadcast them after the first step: Keras 3's are keras.Variable, not
    tf.Variable (tf-keras 2's are tf.Variable)."""
    n, me = hvd.size(), hvd.rank()
    layer = tf.keras.layers.Dense(2, kernel_initializer=tf.keras.initializers.Constant(me + 1.0))
    layer.build((None, 3))
    hvd.broadcast_variables(layer.variables, root_rank=n - 1)
    np.testing.assert_array_equal(np.asarray(layer.kernel), np.full([3, 2], float(n)))
    np.testing.assert_array_equal(np.asarray(layer.bias), np.zeros([2]))


@pytest.mark.parametrize("resource", [True, False])
def test_variables_in_a_graph(resource):
    """Horovod's broadcast_ on resource and reference variables, and
    broadcast_global_variables, in a TensorFlow 1 graph."""
    n, me = hvd.size(), hvd.rank()
    with tf.Graph().as_default():
        make = (tf.compat.v1.Variable if not resource else
                lambda v: tf.Variable(v))
        with tf.compat.v1.variable_scope("v", use_resource=resource):
            a = make(tf.fill([2], float(me)))
            b = make(tf.fill([3], me + 10))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            out = session.run(hvd.broadcast_([a, b], n - 1))
            np.testing.assert_array_equal(out[0], [n - 1.0] * 2)
            np.testing.assert_array_equal(session.run(b), [n - 1 + 10] * 3)
            session.run(a.assign(tf.fill([2], float(me))))
            session.run(hvd.broadcast_global_variables(0))
            np.testing.assert_array_equal(session.run(a), [0.0, 0.0])


@pytest.mark.parametrize("graph", [False, True])
def test_sync_batch_normalization(graph):
    """Horovod's: every rank normalizes its own sample with the statistics
    of the global batch, which plain BatchNormalization over all ranks'
    samples in one process gives."""
    n, me = hvd.size(), hvd.rank()
    x = np.stack([np.array([[r, r + 1], [r * 2, r * 2 + 1], [r * 3, r * 3 + 1]], np.float32)
                  for r in range(n)])

    def both():
        bn = tf.keras.layers.BatchNormalization(axis=1)
        sync = hvd.SyncBatchNormalization(axis=1)
        return bn(x, training=True), sync(x[me:me + 1], training=True), bn, sync
    if graph:
        with tf.Graph().as_default():
            want, got, bn, sync = both()
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                want, got = session.run([want, got])
    else:
        want, got, bn, sync = both()
        want, got = want.numpy(), got.numpy()
        # The moving statistics follow the global batch's too (a graph
        # updates them only when asked to: not compared there).
        np.testing.assert_allclose(np.asarray(sync.moving_mean), np.asarray(bn.moving_mean),
                                   rtol=1e-5)
        np.testing.assert_allclose(np.asarray(sync.moving_variance),
                                   np.asarray(bn.moving_variance), rtol=1e-5)
    np.testing.assert_allclose(got, want[me:me + 1], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="fused"):
        hvd.SyncBatchNormalization(fused=True)


def test_gradient_tape_groups_locals_and_sets():
    n, me = hvd.size(), hvd.rank()
    a, b, c = (tf.Variable(tf.ones([2])) for _ in range(3))
    with tf.GradientTape() as tape:
        loss = (tf.reduce_sum(a) + 2 * tf.reduce_sum(b) + 3 * tf.reduce_sum(c)) * (me + 1.0)
    tape = hvd.DistributedGradientTape(tape, groups=[[a, b]], op=hvd.Sum)
    assert isinstance(tape, tf.GradientTape)
    tape.register_local_source(c)
    local, shared = tape.get_local_and_global_gradients(loss, [a, b, c])
    total = n * (n + 1) / 2
    np.testing.assert_allclose(shared[0][1].numpy(), [total] * 2)
    np.testing.assert_allclose(shared[1][1].numpy(), [2 * total] * 2)
    # A local source's gradient stays local, divided by the set's size
    # (scale_local_gradients, Horovod's default).
    np.testing.assert_allclose(local[0][1].numpy(), [3 * (me + 1.0) / n] * 2)


def test_gradient_tape_on_a_process_set():
    """Horovod's: ranks outside the tape's set keep their own gradients."""
    n, me = hvd.size(), hvd.rank()
    # [0] at size 1: the global set, not added again
    evens = hvd.add_process_set(list(range(0, n, 2))) if n > 1 else hvd.global_process_set
    try:
        x = tf.constant(float(me))
        with tf.GradientTape() as g:
            g.watch(x)
            y = x * x
        dy, = hvd.DistributedGradientTape(g, process_set=evens).gradient(y, [x])
        want = 2.0 * np.mean(evens.ranks) if me % 2 == 0 else 2.0 * me
        assert float(dy.numpy()) == pytest.approx(want)
    finally:
        hvd.remove_process_set(evens)


def test_tf1_distributed_optimizer_in_a_graph():
    """A tf.compat.v1.train.Optimizer: compute_gradients() averages, and
    with backward_passes_per_step=4 (average_aggregated_gradients) the
    variable moves only every 4th step, by the average (Horovod's)."""
    n, me = hvd.size(), hvd.rank()

    class Add(tf.compat.v1.train.Optimizer):
        def __init__(self):
            super().__init__(use_locking=False, name="add")

        def _apply_dense(self, grad, var):
            return var.assign_add(grad)

        _resource_apply_dense = _apply_dense

    def steps(passes, count):
        with tf.Graph().as_default():
            var = tf.compat.v1.Variable([0.0], use_resource=True)
            opt = hvd.DistributedOptimizer(Add(), backward_passes_per_step=passes,
                                           average_aggregated_gradients=True)
            pairs = opt.compute_gradients(var * float(me + 1), var_list=[var])
            step = opt.apply_gradients(pairs)
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                seen = []
                for _ in range(count):
                    session.run(step)
                    seen.append(float(session.run(var)[0]))
                return seen
    mean = (n + 1) / 2
    assert steps(1, 2) == pytest.approx([mean, 2 * mean])
    # grads are (me + 1) each pass; summed over 4 passes, divided by 4,
    # averaged over the ranks: mean, applied on passes 4 and 8.
    assert steps(4, 8) == pytest.approx([0, 0, 0, mean, mean, mean, mean, 2 * mean])
