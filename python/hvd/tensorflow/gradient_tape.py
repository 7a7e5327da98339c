"""DistributedGradientTape, PartialDistributedGradientTape and
DistributedOptimizer, as horovod.tensorflow's.

The tape is a tf.GradientTape (of the wrapped tape's own class) whose
gradient() allreduces the gradients (Average by default) over the process
set; a rank outside the set keeps its own.  DistributedOptimizer wraps a
TensorFlow 1 optimizer (tf.compat.v1.train.Optimizer: compute_gradients()
allreduces) or a Keras optimizer (hvd.tensorflow.keras_optimizer).
"""
import warnings

import tensorflow as tf

from hvd.common.process_sets import global_process_set
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradients import (LocalGradientAggregationHelper, _key,
                                      make_allreduce_grads_fn, reduce_with_locals)
from hvd.tensorflow.mpi_ops import Adasum, Average
from hvd.tensorflow.util import _executing_eagerly

__all__ = ["DistributedGradientTape", "PartialDistributedGradientTape", "DistributedOptimizer"]


def _check_settings(op, gradient_predivide_factor, num_groups, groups):
    """Horovod's checks of the arguments the tape and optimizers share;
    returns groups (num_groups, deprecated, when groups is not given)."""
    if op == Adasum:
        raise NotImplementedError("Adasum is not supported by hvd's TensorFlow tape and "
                                  "optimizers (docs/tensorflow.md)")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups`", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of "
                         "tf.Variable.")
    return groups


class _DistributedGradientTape(tf.GradientTape):
    """The methods DistributedGradientTape adds to the wrapped tape's class."""

    def _hvd_setup(self, reduce_fn, process_set, scale_local_gradients):
        self._allreduce_grads = reduce_fn
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_sources = set()

    def register_local_source(self, source):
        """A variable whose gradient stays local (not reduced; divided by
        the set's size when scale_local_gradients)."""
        self._local_sources.add(_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        grads = super().gradient(target, sources, output_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(grads, expand_composites=False)
        reduced = reduce_with_locals(self._allreduce_grads, flat_grads, flat_sources,
                                     self._local_sources, self.process_set,
                                     self.scale_local_gradients, use_generic_names)
        return tf.nest.pack_sequence_as(grads, reduced)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None,
                                       use_generic_names=False):
        """([(local source, its gradient)], [(other source, its reduced gradient)])."""
        grads = self.gradient(target, sources, output_gradients, use_generic_names)
        local, shared = [], []
        for s, g in zip(sources, grads):
            (local if _key(s) in self._local_sources else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """A tape like gradtape (same class, recording the same operations)
    whose gradient() reduces the gradients over process_set.

    Use as Horovod's: ``tape = hvd.DistributedGradientTape(tape)`` after
    recording, or ``with hvd.DistributedGradientTape(tf.GradientTape()) as
    tape``.  groups: a number of groups, or lists of variables, reduced as
    grouped allreduces."""
    groups = _check_settings(op, gradient_predivide_factor, num_groups, groups)
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls(gradtape._persistent, gradtape._watch_accessed_variables)
    tape._tape = gradtape._tape  # the operations recorded so far
    tape._hvd_setup(make_allreduce_grads_fn("DistributedGradientTape", compression,
                                            sparse_as_dense, op, gradient_predivide_factor,
                                            groups, process_set),
                    process_set, scale_local_gradients)
    return tape


def _layer_variables(local_layers):
    """The trainable variables of the Keras layers in local_layers (a
    layer or a list of them)."""
    if local_layers is None:
        return []
    if not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    for layer in local_layers:
        if not hasattr(layer, "trainable_weights"):
            raise ValueError("All local layers must be Keras layers (got %s)"
                             % type(layer).__name__)
    return [v for layer in local_layers for v in layer.trainable_weights]


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
    for var in _layer_variables(local_layers):
        tape.register_local_source(var)
    return tape


class _DistributedOptimizer(tf.compat.v1.train.Optimizer):
    """A TensorFlow 1 optimizer whose compute_gradients() reduces the
    gradients over the set (as Horovod's); apply_gradients() is the wrapped
    optimizer's, every backward_passes_per_step-th pass when aggregating."""

    def __init__(self, optimizer, name, use_locking, settings, backward_passes_per_step,
                 average_aggregated_gradients, process_set, scale_local_gradients):
        super().__init__(name=name or "Distributed%s" % type(optimizer).__name__,
                         use_locking=use_locking)
        self._optimizer = optimizer
        self._allreduce_grads = make_allreduce_grads_fn(self.get_name(), *settings, process_set)
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_vars = set()
        self._agg_helper = None
        if backward_passes_per_step > 1:
            if _executing_eagerly():
                raise ValueError("backward_passes_per_step > 1 is not yet supported for a "
                                 "tf.compat.v1.train.Optimizer with eager execution.")
            self._agg_helper = LocalGradientAggregationHelper(
                backward_passes_per_step, self._allreduce_grads, settings[1],
                average_aggregated_gradients, process_set, scale_local_gradients)

    def register_local_var(self, var):
        """A variable whose gradient stays local."""
        (self._agg_helper._local_vars if self._agg_helper else self._local_vars).add(_key(var))

    def compute_gradients(self, *args, **kwargs):
        grads, variables = zip(*self._optimizer.compute_gradients(*args, **kwargs))
        if self._agg_helper:
            grads = self._agg_helper.compute_gradients(grads, variables)
        else:
            grads = reduce_with_locals(self._allreduce_grads, grads, variables, self._local_vars,
                                       self.process_set, self.scale_local_gradients)
        return list(zip(grads, variables))

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)

        def apply():
            return self._optimizer.apply_gradients(grads_and_vars, global_step=global_step,
                                                   name=name)
        if not self._agg_helper:
            return apply()

        def count_pass():
            if global_step is not None:
                return tf.compat.v1.assign_add(global_step, 1)
            return None
        return self._agg_helper.apply_gradients([g for g, _ in grads_and_vars], apply,
                                                count_pass)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps an optimizer so that the gradients it applies are reduced
    over process_set first: a tf.compat.v1.train.Optimizer (its
    compute_gradients()), or a Keras optimizer (Keras 3 or tf-keras 2:
    hvd.tensorflow.keras_optimizer, which hvd.keras's is)."""
    groups = _check_settings(op, gradient_predivide_factor, num_groups, groups)
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        settings = (compression, sparse_as_dense, op, gradient_predivide_factor, groups)
        return _DistributedOptimizer(optimizer, name, use_locking, settings,
                                     backward_passes_per_step, average_aggregated_gradients,
                                     process_set, scale_local_gradients)
    from hvd.tensorflow.keras_optimizer import distributed_optimizer
    return distributed_optimizer(optimizer, name=name, compression=compression,
                                 sparse_as_dense=sparse_as_dense, op=op,
                                 gradient_predivide_factor=gradient_predivide_factor,
                                 backward_passes_per_step=backward_passes_per_step,
                                 average_aggregated_gradients=average_aggregated_gradients,
                                 groups=groups, process_set=process_set,
                                 scale_local_gradients=scale_local_gradients)
