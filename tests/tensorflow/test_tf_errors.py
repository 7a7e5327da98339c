"""Errors of hvd.tensorflow's ops, raised on EVERY rank (this file runs in
each rank and asserts on each), eagerly, in tf.function and in a graph,
with the tf.errors types Horovod's ops raise: FailedPreconditionError when
the ranks disagree (shape, dtype, root, an allgather's or alltoall's
dimensions after the first), InvalidArgumentError for a bad argument
(alltoall's splits, a scalar to reducescatter), NotImplementedError for
what Horovod refuses on tf.IndexedSlices.  After each, the next collective
works: a mismatch is decided before any data moves."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as hvd
from tf_modes import MODES, run


@pytest.fixture
def ranks_disagree():
    if hvd.size() == 1:
        pytest.skip("ranks must disagree")


def raises_on_every_rank(mode, error, match, fn, *args):
    with pytest.raises(error, match=match):
        run(mode, fn, *args)
    # The job goes on.
    got = run("eager", lambda: hvd.allreduce(tf.ones([2]), op=hvd.Sum))
    np.testing.assert_array_equal(got, [hvd.size()] * 2)


def odd():
    return hvd.rank() % 2 == 1


@pytest.mark.parametrize("mode", MODES)
def test_shape_mismatches(mode, ranks_disagree):
    shape = [3, 2] if odd() else [2, 3]
    # A graph's op is named (eagerly TensorFlow drops names: hvd numbers it).
    named = "bad.allreduce" if mode != "eager" else "allreduce.noname"
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError,
                         r"shapes for '%s.*': ranks? 0\S* sent \[2, 3\], ranks? 1\S* sent "
                         r"\[3, 2\]" % named,
                         lambda: hvd.allreduce(tf.ones(shape), name="bad.allreduce"))
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError, "shapes",
                         lambda: hvd.broadcast(tf.ones(shape), 0))
    # (reducescatter pads an uneven first dimension: the counts differ first)
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError, "Mismatched reducescatter",
                         lambda: hvd.reducescatter(tf.ones(shape)))


@pytest.mark.parametrize("mode", MODES)
def test_dtype_mismatches(mode, ranks_disagree):
    dtype = tf.int32 if odd() else tf.float32
    for fn in (lambda: hvd.allreduce(tf.ones([4], dtype)),
               lambda: hvd.allgather(tf.ones([4], dtype)),
               lambda: hvd.broadcast(tf.ones([4], dtype), 0),
               lambda: hvd.alltoall(tf.ones([2 * hvd.size()], dtype)),
               lambda: hvd.reducescatter(tf.ones([4], dtype))):
        raises_on_every_rank(mode, tf.errors.FailedPreconditionError, "dtypes", fn)


@pytest.mark.parametrize("mode", MODES)
def test_dimensions_after_the_first_mismatch(mode, ranks_disagree):
    n = hvd.size()
    width = 10 * (hvd.rank() + 1)
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError,
                         r"dimensions after the first for .*\[\*, 10, 3\]",
                         lambda: hvd.allgather(tf.ones([2, width, 3]), name="bad.gather"))
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError, "dimensions after the first",
                         lambda: hvd.alltoall(tf.ones([2 * n, width])))
    rank3 = [2, 3, 1] if odd() else [2, 3]  # a different number of dimensions
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError, "dimensions after the first",
                         lambda: hvd.allgather(tf.ones(rank3)))


@pytest.mark.parametrize("mode", MODES)
def test_broadcast_root_mismatch(mode, ranks_disagree):
    root = 1 if odd() else 0
    raises_on_every_rank(mode, tf.errors.FailedPreconditionError, "root ranks",
                         lambda: hvd.broadcast(tf.ones([3]), root))


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_are_invalid_argument(mode, ranks_disagree):
    n = hvd.size()
    raises_on_every_rank(mode, tf.errors.InvalidArgumentError, "divisible",
                         lambda: hvd.alltoall(tf.ones([n + 1])))
    raises_on_every_rank(mode, tf.errors.InvalidArgumentError, "splits",
                         lambda: hvd.alltoall(tf.ones([n - 1]), splits=[1] * n))
    raises_on_every_rank(mode, tf.errors.InvalidArgumentError, "splits has",
                         lambda: hvd.alltoall(tf.ones([n + 1]), splits=[1] * (n + 1)))
    raises_on_every_rank(mode, tf.errors.InvalidArgumentError, "scalar",
                         lambda: hvd.reducescatter(tf.constant(1.0)))
    raises_on_every_rank(mode, tf.errors.InvalidArgumentError, "scalar",
                         lambda: hvd.grouped_reducescatter([tf.constant(1.0)]))


def test_indexed_slices_refusals_before_anything_runs():
    sl = tf.IndexedSlices(tf.ones([1, 2]), tf.constant([0]), tf.constant([2, 2]))
    with pytest.raises(NotImplementedError, match="Sum and Average"):
        hvd.allreduce(sl, op=hvd.Min)
    with pytest.raises(NotImplementedError, match="Pre/postscale"):
        hvd.allreduce(sl, op=hvd.Sum, prescale_factor=2.0)
    with pytest.raises(NotImplementedError, match="Pre/postscale"):
        hvd.grouped_allreduce([sl], postscale_factor=2.0)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(sl, op=hvd.Adasum)
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(tf.ones([1]), average=True, op=hvd.Sum)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(tf.ones([1]), process_set=hvd.ProcessSet([0]))
