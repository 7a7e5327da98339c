"""DistributedGradientTape, PartialDistributedGradientTape and
DistributedOptimizer (TF2) as horovod.tensorflow's.

The tape computes the local gradients and allreduces them (Average by
default).  Eagerly, the allreduces run inside one tf.function so that
they are in flight together and the engine fuses them.
"""
import tensorflow as tf

from hvd.common.process_sets import global_process_set
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.mpi_ops import Adasum, Average, Sum, _executing_eagerly, size


def _reduce_one(grad, compression, sparse_as_dense, op, predivide, process_set):
    from hvd.tensorflow import allreduce

    if grad is None:
        return None
    if sparse_as_dense and isinstance(grad, tf.IndexedSlices):
        grad = tf.convert_to_tensor(grad)
    pre, post = 1.0, 1.0
    if op == Average and predivide != 1.0:
        pre, post = 1.0 / predivide, predivide
    return allreduce(grad, compression=compression, op=op, prescale_factor=pre,
                     postscale_factor=post, process_set=process_set)


def _make_allreduce_grads_fn(name, compression, sparse_as_dense, op, predivide, process_set):
    def allreduce_grads(grads):
        with tf.name_scope(name + "_Allreduce"):
            return [_reduce_one(g, compression, sparse_as_dense, op, predivide, process_set)
                    for g in grads]

    compiled = tf.function(allreduce_grads)

    def run(grads):
        # IndexedSlices go through the graph path only as dense tensors.
        if _executing_eagerly() and not any(isinstance(g, tf.IndexedSlices) for g in grads):
            return compiled(grads)
        return allreduce_grads(grads)
    return run


def _key(var):
    """A hashable identity of a tf.Variable or a Keras 3 Variable (no ref())."""
    return var.ref() if hasattr(var, "ref") else id(var)


class DistributedGradientTape:
    """Wraps a tf.GradientTape: gradient() returns the allreduced gradients.

    Use as Horovod's: ``tape = hvd.DistributedGradientTape(tape)`` after
    recording, or ``with hvd.DistributedGradientTape(tf.GradientTape()) as
    tape``.  Everything else is the wrapped tape's."""

    def __init__(self, gradtape, device_dense="", device_sparse="",
                 compression=Compression.none, sparse_as_dense=False, op=Average,
                 gradient_predivide_factor=1.0, num_groups=0, groups=None,
                 process_set=global_process_set, scale_local_gradients=True):
        if op == Adasum:
            raise NotImplementedError("Adasum is not supported by hvd's DistributedGradientTape")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        self._tape = gradtape
        self._process_set = process_set
        self._allreduce_grads = _make_allreduce_grads_fn(
            "DistributedGradientTape", compression, sparse_as_dense, op,
            gradient_predivide_factor, process_set)
        self._local_sources = set()

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def __getattr__(self, attr):
        return getattr(self._tape, attr)

    def register_local_source(self, source):
        """A variable whose gradient stays local (PartialDistributedGradientTape)."""
        self._local_sources.add(_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        grads = self._tape.gradient(target, sources, output_gradients)
        flat = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads, expand_composites=False)
        shared = [i for i, s in enumerate(flat) if _key(s) not in self._local_sources]
        if size() > 1 or self._process_set.process_set_id != 0:
            reduced = self._allreduce_grads([flat_grads[i] for i in shared])
            for i, r in zip(shared, reduced):
                flat_grads[i] = r
        return tf.nest.pack_sequence_as(grads, flat_grads)


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """A DistributedGradientTape whose local_layers' (Keras layers)
    variables keep their local gradients."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in local_layers or []:
        for var in layer.trainable_weights:
            tape.register_local_source(var)
    return tape


class _DistributedOptimizer:
    """A TF2 optimizer whose apply_gradients() averages the gradients first."""

    def __init__(self, optimizer, compression, sparse_as_dense, op, predivide, process_set,
                 backward_passes_per_step=1, average_aggregated_gradients=False):
        self._optimizer = optimizer
        self._allreduce_grads = _make_allreduce_grads_fn(
            "DistributedOptimizer", compression, sparse_as_dense, op, predivide, process_set)

    def __getattr__(self, attr):
        return getattr(self._optimizer, attr)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        grads = self._allreduce_grads([g for g, _ in grads_and_vars])
        return self._optimizer.apply_gradients(
            list(zip(grads, [v for _, v in grads_and_vars])), *args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set):
    """Wraps a TF optimizer so apply_gradients() applies the averaged
    gradients.  A Keras optimizer gets hvd.keras's DistributedOptimizer."""
    try:
        import keras
        if isinstance(optimizer, keras.optimizers.Optimizer):
            from hvd.keras import DistributedOptimizer as keras_distributed
            return keras_distributed(optimizer, name=name, compression=compression,
                                     sparse_as_dense=sparse_as_dense,
                                     backward_passes_per_step=backward_passes_per_step, op=op,
                                     gradient_predivide_factor=gradient_predivide_factor,
                                     average_aggregated_gradients=average_aggregated_gradients,
                                     process_set=process_set)
    except ImportError:  # pragma: no cover
        pass
    if backward_passes_per_step != 1:
        raise NotImplementedError("backward_passes_per_step > 1 needs a Keras optimizer "
                                  "(hvd.keras.DistributedOptimizer)")
    return _DistributedOptimizer(optimizer, compression, sparse_as_dense, op,
                                 gradient_predivide_factor, process_set, backward_passes_per_step,
                                 average_aggregated_gradients)


__all__ = ["DistributedGradientTape", "PartialDistributedGradientTape", "DistributedOptimizer",
           "Sum"]
