"""hvd.tensorflow's collectives compiled by XLA: tf.function(jit_compile=True)
with HOROVOD_ENABLE_XLA_OPS=1 (conftest sets it before the op library
loads): allreduce, allgather and broadcast, their gradients, within a
process set, the errors on every rank, and a Keras model whose train step
XLA compiles (compile(jit_compile=True)).  The HLO is checked to hold
hvd's custom calls, so nothing passes by running outside XLA."""
import re

import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd


def compiled(fn, *args):
    """fn jit-compiled and run; its results as numpy, and its HLO text."""
    f = tf.function(fn, jit_compile=True)
    out = f(*args)
    hlo = f.experimental_get_compiler_ir(*args)(stage="hlo")
    return tf.nest.map_structure(lambda t: t.numpy(), out), hlo


def test_collectives_compile_to_hvds_custom_calls():
    n, me = hvd.size(), hvd.rank()
    x = np.full([2, 3], me + 1.0, np.float32)

    def fn(x):
        return (hvd.allreduce(x, op=hvd.Sum), hvd.allreduce(x, prescale_factor=2.0,
                                                            postscale_factor=0.5),
                hvd.allreduce(tf.cast(x, tf.int32), op=hvd.Max), hvd.allgather(x),
                hvd.broadcast(tf.cast(x, tf.float64), n - 1))
    (total, avg, mx, gathered, bcast), hlo = compiled(fn, x)
    for target in ("hvd_tf_xla_allreduce", "hvd_tf_xla_allgather", "hvd_tf_xla_broadcast"):
        assert 'custom_call_target="%s"' % target in hlo
    s = n * (n + 1) / 2
    np.testing.assert_array_equal(total, np.full([2, 3], s))
    np.testing.assert_allclose(avg, np.full([2, 3], s / n), rtol=1e-6)
    np.testing.assert_array_equal(mx, np.full([2, 3], n))
    np.testing.assert_array_equal(gathered, np.repeat(np.arange(1.0, n + 1), 2)[:, None]
                                  * np.ones([1, 3]))
    assert bcast.dtype == np.float64
    np.testing.assert_array_equal(bcast, np.full([2, 3], float(n)))


def test_gradients_under_xla():
    """Horovod's gradients (test_tf_gradients.py), compiled: Sum's weights
    summed, allgather's averaged (this rank's rows), broadcast's averaged at
    the root only."""
    n, me = hvd.size(), hvd.rank()
    w, total, mean = me + 1.0, n * (n + 1) / 2, (n + 1) / 2

    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = (tf.reduce_sum(hvd.allreduce(x, op=hvd.Sum)) * w
                    + tf.reduce_sum(hvd.allgather(x)) * w
                    + tf.reduce_sum(hvd.broadcast(x, 0)) * w)
        return tape.gradient(loss, x)
    g, _ = compiled(grad, np.ones([2, 2], np.float32))
    np.testing.assert_allclose(g, np.full([2, 2], total + mean + (mean if me == 0 else 0.0)))


def test_a_process_set_under_xla():
    n, me = hvd.size(), hvd.rank()
    # [0] at size 1: the global set, not added again
    evens = hvd.add_process_set(list(range(0, n, 2))) if n > 1 else hvd.global_process_set
    try:
        if me % 2 == 0:
            (got, gathered), _ = compiled(
                lambda x: (hvd.allreduce(x, op=hvd.Sum, process_set=evens),
                           hvd.allgather(x, process_set=evens)),
                np.full([2], float(me), np.float32))
            np.testing.assert_array_equal(got, [float(sum(evens.ranks))] * 2)
            np.testing.assert_array_equal(gathered, np.repeat(evens.ranks, 2))
    finally:
        hvd.remove_process_set(evens)


def test_errors_reach_every_rank_under_xla():
    n, me = hvd.size(), hvd.rank()
    if n == 1:
        pytest.skip("ranks must disagree")
    with pytest.raises(tf.errors.FailedPreconditionError, match="Mismatched allreduce"):
        compiled(lambda x: hvd.allreduce(x), np.ones([2 + me % 2], np.float32))
    # Under XLA an allgather's shapes are fixed: unequal first dimensions fail.
    with pytest.raises(tf.errors.FailedPreconditionError, match="element counts"):
        compiled(lambda x: hvd.allgather(x), np.ones([1 + me % 2, 2], np.float32))
    got, _ = compiled(lambda x: hvd.allreduce(x, op=hvd.Sum), np.ones([1], np.float32))
    assert got.tolist() == [float(n)]  # the job goes on


def test_keras_fit_compiled_by_xla():
    """A Keras model whose train step XLA compiles (the gradients'
    allreduce inside it) trains as one process on the global batch."""
    from hvd.keras._keras import keras
    import hvd.keras as hvdk
    n, me = hvd.size(), hvd.rank()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4 * n, 3)).astype(np.float32)
    y = rng.normal(size=(4 * n, 1)).astype(np.float32)

    def model():
        keras.utils.set_random_seed(5)
        return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    m = model()
    m.compile(optimizer=hvdk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse",
              jit_compile=True)
    m.fit(x[me::n], y[me::n], batch_size=4, epochs=2, shuffle=False, verbose=0)
    ref = model()
    ref.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    order = np.concatenate([np.arange(r, 4 * n, n) for r in range(n)])
    ref.fit(x[order], y[order], batch_size=4 * n, epochs=2, shuffle=False, verbose=0)
    for got, want in zip(m.get_weights(), ref.get_weights()):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


def test_xla_library_refused_where_it_does_not_fit(monkeypatch):
    """_hvd_tf_xla.so is C++ bound to the TensorFlow it was built with: under
    another one, or where the install has none (the wheel), the import with
    HOROVOD_ENABLE_XLA_OPS=1 is an ImportError that says so."""
    from hvd.tensorflow import mpi_ops
    assert mpi_ops._XLA_LIB is not None  # conftest set the knob: it loaded
    built = mpi_ops._XLA_LIB.hvd_tf_xla_built_for().decode()
    other = "2.16.1" if not built.startswith("2.16.") else "2.21.0"
    monkeypatch.setattr(tf, "__version__", other)
    with pytest.raises(ImportError, match="built for TensorFlow %s and this is %s"
                       % (re.escape(built), re.escape(other))):
        mpi_ops._load_xla_library()
    monkeypatch.setattr(mpi_ops, "_XLA_LIB_PATH", "/nonexistent/_hvd_tf_xla.so")
    with pytest.raises(ImportError, match="this install has no XLA library"):
        mpi_ops._load_xla_library()
