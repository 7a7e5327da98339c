"""hvd.keras on Keras 3, the same tests on every backend (KERAS_BACKEND):
training on n shards with the averaged gradients equals one process
training on the global batch; the model and the optimizer's state are
bitwise the same on every rank after the broadcast callback and after
every step; every option of DistributedOptimizer and every callback
against its formula; the collectives give the backend's tensors; a
saved model loads wrapped again; the elastic state commits, restores
and syncs.  Tiny models, each compiled once (JAX compiles slowly)."""
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

import hvd.keras as hvd
from keras_shards import B, STEPS, data, shard  # tests/keras_shards.py

BACKEND = keras.backend.backend()
LR = 0.1


def model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="tanh"),
                             keras.layers.Dense(2)])


def state(m):
    """The model's and its optimizer's variables as numpy arrays."""
    return [np.asarray(w) for w in m.get_weights()] + \
        [ops.convert_to_numpy(v.value) for v in m.optimizer.variables]


def wrapped(opt):
    """Whether opt is one of hvd's distributed optimizers (the backend's)."""
    return hvd._backend.unwrapped_class(type(opt)) is not type(opt)


def assert_same_on_every_rank(arrays):
    mine = [a.tobytes() for a in arrays]
    every = hvd.allgather_object(mine)
    assert all(e == mine for e in every), "state differs between ranks"


class SameEveryStep(keras.callbacks.Callback):
    """Checks after every step that the state is bitwise the same on every rank."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def on_train_batch_end(self, batch, logs=None):
        if hasattr(self.model, "jax_state_sync"):
            self.model.jax_state_sync()
        assert_same_on_every_rank(state(self.model))
        self.steps += 1


def test_the_backend_binding_and_no_tensorflow_beside_jax_and_torch():
    assert hvd._backend.BACKEND == BACKEND
    if BACKEND != "tensorflow":
        assert "tensorflow" not in sys.modules, "hvd.keras imported TensorFlow on " + BACKEND


def test_no_other_binding_after_the_elastic_state():
    """KerasState syncs its objects with the backend's own binding."""
    m = model(401)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR)), loss="mse")
    hvd.elastic.KerasState(m, epoch=0).sync()
    others = {"tensorflow": "hvd.torch", "jax": "hvd.torch", "torch": "hvd.jax"}
    assert others[BACKEND] not in sys.modules
    if BACKEND == "jax":
        assert "torch" not in sys.modules


def test_fit_on_shards_equals_the_global_batch_and_stays_the_same_everywhere():
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(100 + me)  # different on every rank: the callback makes them equal
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR)), loss="mse")
    same = SameEveryStep()
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=2, shuffle=False, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), same])
    assert same.steps == 2 * STEPS
    ref = model(100)  # rank 0's start
    ref.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    ref.fit(x, y, batch_size=n * B, epochs=2, shuffle=False, verbose=0)
    for got, want in zip(m.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def one_step(seed, **kwargs):
    """Each rank's weights after one fit step on its shard's first batch,
    from the same start, with DistributedOptimizer(SGD, **kwargs)."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(seed)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR), **kwargs),
              loss="mse")
    m.fit(shard(x, n, me)[:B], shard(y, n, me)[:B], batch_size=B, shuffle=False, verbose=0)
    return m


def reference_step(seed, lr, batch, first=0):
    """One SGD step of one process on x[first:first + batch] (the first
    global batch by default)."""
    x, y = data(hvd.size())
    ref = model(seed)
    ref.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    rows = slice(first, first + batch)
    ref.fit(x[rows], y[rows], batch_size=batch, shuffle=False, verbose=0)
    return ref.get_weights()


@pytest.mark.parametrize("kwargs,lr_scale,rtol", [
    (dict(op=hvd.Sum), "n", 2e-5),                       # the sum: n times the average's step
    (dict(gradient_predivide_factor=2.0), 1, 2e-5),      # the average, split around the sum
    (dict(compression=hvd.Compression.fp16), 1, 5e-3),   # the average, sent as float16
])
def test_optimizer_options_against_the_global_batch(kwargs, lr_scale, rtol):
    n = hvd.size()
    m = one_step(31, **kwargs)
    want = reference_step(31, LR * (n if lr_scale == "n" else 1), n * B)
    for got, w in zip(m.get_weights(), want):
        np.testing.assert_allclose(got, w, rtol=rtol, atol=rtol / 10)
    assert_same_on_every_rank(state(m))


def test_optimizer_over_a_process_set():
    """Averaged over a registered set (its own set id, in the engine and,
    on JAX, in the custom call): rank 0 alone in one, the other ranks in
    another, each rank's step the one of its set's batches together.  Every
    rank trains, so Keras's per-process names (layers, optimizers) stay
    alike on every rank.  (At size 1, rank 0 alone is the global set, which
    is not added again.)"""
    n, me = hvd.size(), hvd.rank()
    if n == 1:
        sets = [hvd.global_process_set]
    else:
        sets = [hvd.add_process_set([0]), hvd.add_process_set(list(range(1, n)))]
    try:
        ps = next(s for s in sets if me in s.ranks)
        m = one_step(32, process_set=ps)
        want = reference_step(32, LR, len(ps.ranks) * B, first=ps.ranks[0] * B)
        for got, w in zip(m.get_weights(), want):
            np.testing.assert_allclose(got, w, rtol=2e-5, atol=2e-6)
    finally:
        for s in sets:
            hvd.remove_process_set(s)


@pytest.mark.parametrize("average", [True, False])
def test_backward_passes_per_step_aggregates_before_the_allreduce(average):
    """Horovod's backward_passes_per_step=2: the first batch changes no
    weight, the second takes one SGD step on the two passes' gradients
    summed (averaged with average_aggregated_gradients) and averaged over
    the ranks: the global batch of both passes, at lr (2 * lr summed); the
    iteration count advances on both passes."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(21)
    start = m.get_weights()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(LR), backward_passes_per_step=2,
                                   average_aggregated_gradients=average)
    m.compile(optimizer=opt, loss="mse")
    # Rank me's two passes: its B samples of each of the first two global batches.
    xs, ys = shard(x, n, me)[:2 * B], shard(y, n, me)[:2 * B]
    seen = []

    class Weights(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if hasattr(self.model, "jax_state_sync"):
                self.model.jax_state_sync()
            seen.append(self.model.get_weights())
    m.fit(xs, ys, batch_size=B, epochs=1, shuffle=False, verbose=0, callbacks=[Weights()])
    for got, want in zip(seen[0], start):
        np.testing.assert_array_equal(got, want)
    want = reference_step(21, LR if average else 2 * LR, 2 * n * B)
    for got, w in zip(m.get_weights(), want):
        np.testing.assert_allclose(got, w, rtol=2e-5, atol=1e-6)
    assert int(ops.convert_to_numpy(opt.iterations)) == 2
    assert_same_on_every_rank(state(m))


def test_partial_distributed_optimizer_keeps_local_layers_local():
    """The local layer's gradients stay this rank's, divided by the size:
    its step equals this rank's own step at lr / n."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    xs, ys = shard(x, n, me)[:B], shard(y, n, me)[:B]
    m = model(22)
    m.compile(optimizer=hvd.PartialDistributedOptimizer(keras.optimizers.SGD(LR),
                                                        local_layers=m.layers[0]), loss="mse")
    m.fit(xs, ys, batch_size=B, shuffle=False, verbose=0)
    alone = model(22)
    alone.compile(optimizer=keras.optimizers.SGD(LR / n), loss="mse")
    alone.fit(xs, ys, batch_size=B, shuffle=False, verbose=0)
    averaged = reference_step(22, LR, n * B)
    got = m.get_weights()
    for i in range(2):
        np.testing.assert_allclose(got[i], alone.get_weights()[i], rtol=2e-5, atol=1e-6)
    for i in range(2, 4):
        np.testing.assert_allclose(got[i], averaged[i], rtol=2e-5, atol=1e-6)


def test_broadcast_callback_from_another_root_and_adam_stays_the_same():
    """Root n - 1's model everywhere, then Adam's state (built in the first
    step and broadcast after it, as Horovod) the same after every step."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(200 + me)
    root_start = model(200 + n - 1).get_weights()
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.0)), loss="mse")
    same = SameEveryStep()
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, shuffle=False, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(n - 1), same])
    for got, want in zip(m.get_weights(), root_start):  # lr 0: the root's start, bitwise
        np.testing.assert_array_equal(got, want)
    m.optimizer.learning_rate.assign(0.01)
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, shuffle=False, verbose=0,
          callbacks=[same])
    assert same.steps == 2 * STEPS


class Record(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses, self.lrs = [], []

    def on_train_batch_begin(self, batch, logs=None):
        if hasattr(self.model, "jax_state_sync"):
            self.model.jax_state_sync()
        self.lrs.append(float(ops.convert_to_numpy(self.model.optimizer.learning_rate)))

    def on_epoch_end(self, epoch, logs=None):
        self.losses.append(logs["loss"])


def test_metric_average_and_learning_rate_callbacks():
    """MetricAverageCallback averages the epoch's logs over the ranks;
    the warmup goes from lr / n to lr over 2 epochs batch by batch
    (Horovod's formula), then the schedule halves it from epoch 2; with
    momentum, each change from old to new scales the velocities by
    new / old."""
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(7)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=0.9)),
              loss="mse")
    local, lrs = Record(), Record()
    hist = m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=3, shuffle=False,
                 verbose=0,
                 callbacks=[local, hvd.callbacks.MetricAverageCallback(),
                            hvd.callbacks.LearningRateWarmupCallback(LR, warmup_epochs=2,
                                                                     steps_per_epoch=STEPS),
                            hvd.callbacks.LearningRateScheduleCallback(LR, 0.5, start_epoch=2),
                            lrs])
    every = hvd.allgather_object(local.losses)
    np.testing.assert_allclose(hist.history["loss"], np.mean(every, axis=0), rtol=1e-6)
    want = [LR / n * ((e + b / STEPS) * (n - 1) / 2 + 1) for e in range(2) for b in range(STEPS)]
    want += [LR / 2] * STEPS
    np.testing.assert_allclose(lrs.lrs, want, rtol=1e-6)
    # logs["lr"]: the lr of the epoch's last batch
    np.testing.assert_allclose(hist.history["lr"], want[STEPS - 1::STEPS], rtol=1e-6)
    assert_same_on_every_rank(state(m))


def test_momentum_correction_scales_the_velocities():
    m = model(8)
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.2, momentum=0.9))
    m.compile(optimizer=opt, loss="mse")
    opt.build(m.trainable_variables)
    for v in opt.momentums:
        v.assign(ops.ones(v.shape))
    cb = hvd.callbacks.LearningRateScheduleCallback(0.2, 0.5)
    cb.set_model(m)
    cb.on_epoch_begin(0)
    assert float(ops.convert_to_numpy(opt.learning_rate)) == pytest.approx(0.1)
    for v in opt.momentums:
        np.testing.assert_allclose(ops.convert_to_numpy(v.value), 0.5)


def native_type():
    if BACKEND == "tensorflow":
        import tensorflow as tf
        return tf.Tensor
    if BACKEND == "jax":
        import jax
        return jax.Array
    import torch
    return torch.Tensor


def test_collectives_give_the_backends_tensors():
    n, me = hvd.size(), hvd.rank()
    kind = native_type()
    s = hvd.allreduce(np.array([me, 1.0], np.float32))
    assert isinstance(s, kind)
    np.testing.assert_allclose(ops.convert_to_numpy(s), [(n - 1) / 2, 1.0])
    total = hvd.allreduce(np.float32(me), op=hvd.Sum)
    assert float(ops.convert_to_numpy(total)) == n * (n - 1) / 2
    g = hvd.allgather(np.array([[me, me]], np.int32))
    assert isinstance(g, kind)
    np.testing.assert_array_equal(ops.convert_to_numpy(g), [[r, r] for r in range(n)])
    b = hvd.broadcast(np.array([me, 2 * me], np.float32), n - 1)
    assert isinstance(b, kind)
    np.testing.assert_array_equal(ops.convert_to_numpy(b), [n - 1, 2 * (n - 1)])
    rows = np.arange(2 * n, dtype=np.float32) * (me + 1)
    rs = hvd.reducescatter(rows)  # Average; rank me's 2 rows
    assert isinstance(rs, kind)
    np.testing.assert_allclose(ops.convert_to_numpy(rs),
                               np.arange(2 * me, 2 * me + 2) * (n + 1) / 2)
    m = model(300 + me)
    hvd.broadcast_global_variables(0, model=m)
    assert_same_on_every_rank([np.asarray(w) for w in m.get_weights()])
    np.testing.assert_array_equal(m.get_weights()[0], model(300).get_weights()[0])
    with pytest.raises(ValueError, match="pass model="):
        hvd.broadcast_global_variables(0)


def test_load_model_wraps_the_optimizer(tmp_path):
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(3)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=1, verbose=0)
    path = str(tmp_path / "m.keras")
    m.save(path)
    loaded = hvd.load_model(path)
    assert wrapped(loaded.optimizer)
    assert type(loaded.optimizer).__name__ == "Adam"
    # the class below hvd's: the one Keras makes for keras.optimizers.Adam here
    assert hvd._backend.unwrapped_class(type(loaded.optimizer)) is type(
        keras.optimizers.Adam(0.01))
    for got, want in zip(loaded.get_weights(), m.get_weights()):
        np.testing.assert_array_equal(got, want)
    assert not wrapped(keras.models.load_model(path).optimizer)
    loaded.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=1, verbose=0)
    assert_same_on_every_rank(state(loaded))
    with pytest.raises(ValueError, match="Average and Sum"):
        hvd.DistributedOptimizer(keras.optimizers.SGD(), op=hvd.Max)


def test_elastic_state_commits_restores_and_syncs():
    n, me = hvd.size(), hvd.rank()
    m = model(400 + me)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=0.9)),
              loss="mse")
    st = hvd.elastic.KerasState(m, epoch=me, batch=0)
    st.sync()  # rank 0's model and objects everywhere
    assert st.epoch == 0
    assert_same_on_every_rank(state(m))
    np.testing.assert_array_equal(m.get_weights()[0], model(400).get_weights()[0])
    committed = state(m)
    st.commit()
    m.layers[0].kernel.assign(ops.zeros(m.layers[0].kernel.shape))
    st.epoch = 5
    st.restore()
    assert st.epoch == 0
    for got, want in zip(state(m), committed):
        np.testing.assert_array_equal(got, want)
    # The callbacks in fit: a commit after every batch (mid-epoch on JAX,
    # where the trainer holds the state) and the counters.
    x, y = data(n)
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=1, shuffle=False, verbose=0,
          callbacks=[hvd.elastic.CommitStateCallback(st), hvd.elastic.UpdateBatchStateCallback(st),
                     hvd.elastic.UpdateEpochStateCallback(st)])
    assert (st.epoch, st.batch) == (1, 0)
    trained = state(m)
    m.layers[0].kernel.assign(ops.zeros(m.layers[0].kernel.shape))
    st.restore()
    for got, want in zip(state(m), trained):
        np.testing.assert_array_equal(got, want)
    assert_same_on_every_rank(trained)


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's jit-compiled train step")
def test_jax_reduces_inside_the_compiled_train_step(monkeypatch):
    """On JAX the gradients' allreduce is hvd.jax's XLA custom call in the
    train step Keras compiles: hvd.jax makes the call when the step is
    traced, once, not on every step (a host round trip would)."""
    from hvd.jax import _ffi
    calls = []
    real = _ffi.call

    def counting(kind, *args, **kwargs):
        calls.append(kind)
        return real(kind, *args, **kwargs)
    monkeypatch.setattr(_ffi, "call", counting)
    n, me = hvd.size(), hvd.rank()
    x, y = data(n)
    m = model(9)
    m.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR)), loss="mse")
    assert m.jit_compile
    m.fit(shard(x, n, me), shard(y, n, me), batch_size=B, epochs=2, shuffle=False, verbose=0)
    assert calls.count("allreduce") == (1 if n > 1 else 0), calls


@pytest.mark.skipif(BACKEND != "jax", reason="one backend is enough (the others import TF)")
def test_clear_errors_for_an_unknown_backend_and_a_missing_binding():
    if hvd.rank() != 0:
        pytest.skip("a subprocess of rank 0's")
    env = dict(os.environ, KERAS_BACKEND="numpy")
    env.pop("HOROVOD_RANK", None)
    p = subprocess.run([sys.executable, "-c", "import hvd.keras"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "Keras's backend is 'numpy'" in p.stderr and "jax, tensorflow, torch" in p.stderr
    env["KERAS_BACKEND"] = "jax"
    p = subprocess.run([sys.executable, "-c", "import sys; sys.modules['hvd.jax'] = None; "
                        "import hvd.keras"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0
    assert "hvd.keras on Keras's jax backend needs hvd.jax, which does not import" in p.stderr
