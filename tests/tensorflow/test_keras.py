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

B, STEPS = 4, 3


def model(seed):
    keras.utils.set_random_seed(seed)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"),
                          keras.layers.Dense(2)])
    return m


def data(n):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(n * B * STEPS, 4)).astype(np.float32)
    y = rng.normal(size=(n * B * STEPS, 2)).astype(np.float32)
    return x, y


def shard(a, n, r):
    """Rank r's samples: its B of every global batch of n * B."""
    return np.concatenate([a[s * n * B + r * B: s * n * B + (r + 1) * B] for s in range(STEPS)])


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
    assert isinstance(loaded.optimizer, hvdk._Reducing)
    assert type(loaded.optimizer).__name__ == "Adam"
    for got, want in zip(loaded.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(got, want)
    plain = keras.models.load_model(path)
    assert not isinstance(plain.optimizer, hvdk._Reducing)
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
        want = mine[i] if i >= 2 else np.mean([e[i] for e in every], axis=0)
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


def test_backward_passes_per_step_aggregates_before_the_allreduce():
    """Two passes per step, averaged: each apply pair equals one SGD step
    on the mean of the two passes' gradients averaged over the ranks; the
    first pass changes nothing."""
    if LEGACY:
        with pytest.raises(NotImplementedError, match="backward_passes_per_step > 1 needs a "
                           "Keras 3 optimizer \\(SGD is tf-keras 2's\\)"):
            hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2)
        return
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(21)
    start = [w.copy() for w in m.get_weights()]
    opt = hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2,
                                    average_aggregated_gradients=True)
    xs, ys = shard(x, n, me), shard(y, n, me)
    passes = [(xs[k * B:(k + 1) * B], ys[k * B:(k + 1) * B]) for k in range(2)]
    every = hvd.allgather_object([local_grads(m, a, b) for a, b in passes])

    @tf.function
    def apply_pass(a, b):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(m(a) - b))
        opt.apply(tape.gradient(loss, m.trainable_variables), m.trainable_variables)
    apply_pass(*passes[0])
    for got, want in zip(m.get_weights(), start):
        np.testing.assert_array_equal(got, want)
    apply_pass(*passes[1])
    for i, (got, w0) in enumerate(zip(m.get_weights(), start)):
        g = np.mean([np.mean([e[k][i] for k in range(2)], axis=0) for e in every], axis=0)
        np.testing.assert_allclose(got, w0 - 0.1 * g, rtol=1e-5, atol=1e-6)


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
