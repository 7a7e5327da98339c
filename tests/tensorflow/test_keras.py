"""hvd.keras (Keras 3; tf-keras 2 when run with TF_USE_LEGACY_KERAS=1, ctest
python.tensorflow.tfkeras.*) and hvd.tensorflow's gradient tapes with tiny
models: training on n shards with averaged gradients must equal training
on the global batch in one process; callbacks against their formulas; a
model saved with the wrapped optimizer loads wrapped again."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.keras as hvdk
import hvd.tensorflow as hvd
from hvd.keras._keras import LEGACY, keras  # the Keras hvd.keras works with
from hvd.tensorflow.keras_optimizer import _Reducing

from keras_shards import B, STEPS, data, shard  # tests/keras_shards.py


def model(seed):
    keras.utils.set_random_seed(seed)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"),
                          keras.layers.Dense(2)])
    return m


# tf-keras 2 has two optimizer families: its optimizer and OptimizerV2.
OPTIMIZERS = [lambda: keras.optimizers.SGD(0.1)]
if LEGACY:
    OPTIMIZERS.append(lambda: keras.optimizers.legacy.SGD(0.1))


@pytest.mark.parametrize("make_optimizer", OPTIMIZERS)
def test_fit_on_shards_equals_the_global_batch(make_optimizer):
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(100 + me)  # different on every rank: the callback makes them equal
    m.compile(optimizer=hvdk.DistributedOptimizer(make_optimizer()), loss="mse")
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=2, shuffle=False, verbose=0,
          callbacks=[hvdk.callbacks.BroadcastGlobalVariablesCallback(0)])
    ref = model(100)  # rank 0's start
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    ref.fit(x, y, batch_size=n * B, epochs=2, shuffle=False, verbose=0)
    for got, want in zip(m.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    digests = hvd.allgather_object([w.tobytes() for w in m.get_weights()])
    assert all(d == digests[0] for d in digests)  # bitwise the same on every rank


class Record(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses, self.lrs = [], []

    def on_batch_begin(self, batch, logs=None):
        self.lrs.append(float(np.asarray(self.model.optimizer.learning_rate)))

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(logs["loss"])


def test_metric_average_and_learning_rate_callbacks():
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(7)
    m.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    local = Record()
    lrs = Record()
    hist = m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=3, shuffle=False,
                 verbose=0,
                 callbacks=[local, hvdk.callbacks.MetricAverageCallback(),
                            hvdk.callbacks.LearningRateWarmupCallback(0.1, warmup_epochs=2,
                                                                      steps_per_epoch=STEPS),
                            hvdk.callbacks.LearningRateScheduleCallback(0.1, 0.5, start_epoch=2),
                            lrs])
    every = hvd.allgather_object(local.losses)
    np.testing.assert_allclose(hist.history["loss"], np.mean(every, axis=0), rtol=1e-6)
    want = [0.1 / n * ((e + b / STEPS) * (n - 1) / 2 + 1) for e in range(2) for b in range(STEPS)]
    want += [0.05] * STEPS
    np.testing.assert_allclose(lrs.lrs, want, rtol=1e-6)


def test_load_model_wraps_the_optimizer(tmp_path):
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(3)
    m.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    m.save(path)
    loaded = hvdk.load_model(path)
    assert isinstance(loaded.optimizer, _Reducing)
    assert type(loaded.optimizer).__name__ == "Adam"
    for got, want in zip(loaded.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(got, want)
    plain = keras.models.load_model(path)
    assert not isinstance(plain.optimizer, _Reducing)
    # The loaded optimizer averages: training goes on identically everywhere.
    loaded.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=1, verbose=0)
    digests = hvd.allgather_object([w.tobytes() for w in loaded.get_weights()])
    assert all(d == digests[0] for d in digests)


def local_grads(m, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(m(x) - y))
    return [g.numpy() for g in tape.gradient(loss, m.trainable_variables)]


def test_distributed_gradient_tape_averages():
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(11)
    xs, ys = shard(x, n, me)[:B], shard(y, n, me)[:B]
    every = hvd.allgather_object(local_grads(m, xs, ys))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(m(xs) - ys))
    grads = hvd.DistributedGradientTape(tape).gradient(loss, m.trainable_variables)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g.numpy(), np.mean([e[i] for e in every], axis=0),
                                   rtol=1e-5, atol=1e-7)


def test_partial_tape_keeps_local_layers_local():
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(12)
    xs, ys = shard(x, n, me)[:B], shard(y, n, me)[:B]
    mine = local_grads(m, xs, ys)
    every = hvd.allgather_object(mine)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(m(xs) - ys))
        tape = hvd.PartialDistributedGradientTape(tape, local_layers=[m.layers[1]])
        return tape.gradient(loss, m.trainable_variables)
    grads = step()
    for i, g in enumerate(grads):
        # local: this rank's, divided by the size (Horovod's scale_local_gradients)
        want = mine[i] / n if i >= 2 else np.mean([e[i] for e in every], axis=0)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-7)


def test_sparse_gradients_as_dense_and_as_slices():
    n, me = hvd.size(), hvd.rank()
    emb = keras.layers.Embedding(6, 2, embeddings_initializer="ones")
    emb.build((None,))
    ids = tf.constant([me % 6, (me + 1) % 6])
    for sparse_as_dense in (True, False):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(emb(ids))
        g = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense).gradient(
            loss, emb.trainable_variables)[0]
        if n > 1:  # alone, Horovod's tape hands the local gradients back untouched
            assert isinstance(g, tf.IndexedSlices) != sparse_as_dense
        dense = tf.convert_to_tensor(g).numpy()
        want = np.zeros((6, 2))
        for r in range(n):
            for i in (r % 6, (r + 1) % 6):
                want[i] += 1.0 / n
        np.testing.assert_allclose(dense, want, rtol=1e-6)


class Weights(keras.callbacks.Callback):
    """The model's weights at the end of every batch."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append([w.copy() for w in self.model.get_weights()])


@pytest.mark.parametrize("make_optimizer", OPTIMIZERS)
def test_backward_passes_per_step_aggregates_before_the_allreduce(make_optimizer):
    """Horovod's backward_passes_per_step=2 (average_aggregated_gradients):
    in model.fit the first batch changes nothing, the second takes one SGD
    step on the two batches' gradients averaged over passes and ranks; the
    iteration count advances on both."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(21)
    start = [w.copy() for w in m.get_weights()]
    opt = hvdk.DistributedOptimizer(make_optimizer(), backward_passes_per_step=2,
                                    average_aggregated_gradients=True)
    m.compile(optimizer=opt, loss="mse")
    xs, ys = shard(x, n, me)[:2 * B], shard(y, n, me)[:2 * B]
    passes = [(xs[k * B:(k + 1) * B], ys[k * B:(k + 1) * B]) for k in range(2)]
    every = hvd.allgather_object([local_grads(m, a, b) for a, b in passes])
    seen = Weights()
    m.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[seen])
    for got, want in zip(seen.seen[0], start):
        np.testing.assert_array_equal(got, want)
    for i, (got, w0) in enumerate(zip(m.get_weights(), start)):
        g = np.mean([np.mean([e[k][i] for k in range(2)], axis=0) for e in every], axis=0)
        np.testing.assert_allclose(got, w0 - 0.1 * g, rtol=1e-5, atol=1e-6)
    assert int(np.asarray(opt.iterations)) == 2
    assert int(np.asarray(opt._agg_helper.counter)) == 0


@pytest.mark.parametrize("make_optimizer", OPTIMIZERS)
def test_partial_distributed_optimizer_keeps_local_layers_local(make_optimizer):
    """Horovod's PartialDistributedOptimizer: the local layer's gradients
    stay this rank's, divided by the set's size; the others are averaged."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(22)
    start = [w.copy() for w in m.get_weights()]
    xs, ys = shard(x, n, me)[:B], shard(y, n, me)[:B]
    mine = local_grads(m, xs, ys)
    every = hvd.allgather_object(mine)
    opt = hvdk.PartialDistributedOptimizer(make_optimizer(), local_layers=m.layers[0])
    m.compile(optimizer=opt, loss="mse")
    m.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0)
    for i, (got, w0) in enumerate(zip(m.get_weights(), start)):
        g = mine[i] / n if i < 2 else np.mean([e[i] for e in every], axis=0)
        np.testing.assert_allclose(got, w0 - 0.1 * g, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="keras.layers.Layer"):
        hvdk.PartialDistributedOptimizer(make_optimizer(), local_layers=["not a layer"])


def test_broadcast_callback_leaves_local_variables_alone():
    n, me = hvd.size(), hvd.rank()
    root = n - 1
    keras.utils.set_random_seed(23)
    const = keras.initializers.Constant(float(me))
    m = keras.Sequential([keras.Input((3,)),
                          keras.layers.Dense(3, kernel_initializer=const, trainable=False),
                          keras.layers.Dense(2, kernel_initializer=const, trainable=False)])
    m.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    local = list(m.layers[0].variables)
    m.fit(np.ones((B, 3), np.float32), np.ones((B, 2), np.float32), batch_size=B, verbose=0,
          callbacks=[hvdk.callbacks.BroadcastGlobalVariablesCallback(root,
                                                                     local_variables=local)])
    np.testing.assert_array_equal(m.layers[0].get_weights()[0], np.full((3, 3), float(me)))
    np.testing.assert_array_equal(m.layers[1].get_weights()[0], np.full((3, 2), float(root)))


@pytest.mark.parametrize("sparse_as_dense", [True, False])
def test_sparse_as_dense_in_fit(sparse_as_dense):
    """An Embedding's gradient is sparse (IndexedSlices): averaged as dense,
    or allgathered, the weights end the same on every rank and equal one
    process training on the global batch."""
    n, me = hvd.size(), hvd.rank()
    ids = np.array([[r % 5, (r + 2) % 5] for r in range(n)], np.int32)
    target = np.ones((n, 2, 3), np.float32)

    def emb():
        keras.utils.set_random_seed(24)
        return keras.Sequential([keras.Input((2,), dtype="int32"), keras.layers.Embedding(5, 3)])
    m = emb()
    m.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.5),
                                                  sparse_as_dense=sparse_as_dense), loss="mse")
    m.fit(ids[me:me + 1], target[me:me + 1], batch_size=1, verbose=0)
    ref = emb()
    ref.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    ref.fit(ids, target, batch_size=n, verbose=0)
    np.testing.assert_allclose(m.get_weights()[0], ref.get_weights()[0], rtol=1e-5, atol=1e-6)


def test_optimizer_config_and_custom_optimizers(tmp_path):
    """The wrapped optimizer's config is the optimizer's (from_config gives
    it back); load_model wraps custom_optimizers too."""
    hopt = hvdk.DistributedOptimizer(keras.optimizers.Adam(0.02))
    cfg = hopt.get_config()
    assert hopt.from_config(cfg).get_config() == cfg
    assert type(hopt).from_config(cfg).get_config() == cfg

    class Slow(keras.optimizers.SGD):
        pass
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(25)
    m.compile(optimizer=hvdk.DistributedOptimizer(Slow(0.01)), loss="mse")
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=1, verbose=0)
    path = str(tmp_path / ("m.h5" if LEGACY else "m.keras"))
    m.save(path)
    loaded = hvdk.load_model(path, custom_optimizers=[Slow])
    assert isinstance(loaded.optimizer, _Reducing) and isinstance(loaded.optimizer, Slow)
    with pytest.raises(ValueError, match="Average and Sum"):
        hvdk.DistributedOptimizer(keras.optimizers.SGD(), op=hvd.Max)


def sgd_momentum_reference(w, b, x, y, lrs, momentum, correction, first_lr):
    """Plain SGD with momentum in numpy, float64, on the global batches of
    x, y, one epoch after another (one linear layer, MSE): v = momentum * v - lr * g; w += v.  With
    correction, Horovod's: where the lr goes from old to new, that step's
    momentum is momentum * new / old (old as the optimizer stored it, in
    float32)."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    old = float(np.float32(first_lr))
    gb = len(x) // STEPS  # one epoch of STEPS global batches, each epoch alike
    for step, lr in enumerate(lrs):
        k = step % STEPS
        xs, ys = x[k * gb:(k + 1) * gb], y[k * gb:(k + 1) * gb]
        r = xs @ w + b - ys
        gw, gbias = 2 * xs.T @ r / r.size, 2 * r.sum(axis=0) / r.size
        mom = momentum * lr / old if correction and lr != old else momentum
        vw, vb = mom * vw - np.float32(lr) * gw, mom * vb - np.float32(lr) * gbias
        w, b = w + vw, b + vb
        old = float(np.float32(lr))
    return w, b


# SGD with momentum in each optimizer family of the Keras under test.
MOMENTUM_SGD = [lambda: keras.optimizers.SGD(0.1, momentum=0.9)]
if LEGACY:
    MOMENTUM_SGD.append(lambda: keras.optimizers.legacy.SGD(0.1, momentum=0.9))


@pytest.mark.parametrize("make_optimizer", MOMENTUM_SGD)
@pytest.mark.parametrize("correction", [True, False])
def test_momentum_correction_against_a_hand_computed_reference(make_optimizer, correction):
    """Warmup (lr changes every batch) then a schedule step (x0.5) with
    SGD(momentum=0.9): the weights after 3 epochs equal plain numpy SGD
    with Horovod's momentum correction applied at every lr change (or not
    at all when momentum_correction=False), and not the other one."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    keras.utils.set_random_seed(31)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    w0, b0 = [a.copy() for a in m.get_weights()]
    m.compile(optimizer=hvdk.DistributedOptimizer(make_optimizer()), loss="mse")
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=3, shuffle=False, verbose=0,
          callbacks=[hvdk.callbacks.LearningRateWarmupCallback(
                         0.1, warmup_epochs=2, steps_per_epoch=STEPS,
                         momentum_correction=correction),
                     hvdk.callbacks.LearningRateScheduleCallback(
                         0.1, 0.5, start_epoch=2, momentum_correction=correction)])
    lrs = [0.1 / n * ((e + b / STEPS) * (n - 1) / 2 + 1) for e in range(2) for b in range(STEPS)]
    lrs += [0.05] * STEPS
    want = sgd_momentum_reference(w0, b0, x, y, lrs, 0.9, correction, 0.1)
    other = sgd_momentum_reference(w0, b0, x, y, lrs, 0.9, not correction, 0.1)
    for got, w in zip(m.get_weights(), want):
        np.testing.assert_allclose(got, w, rtol=2e-5, atol=1e-6)
    # The two references are far apart: the test tells them apart.
    assert not all(np.allclose(w, o, rtol=1e-3) for w, o in zip(want, other))
