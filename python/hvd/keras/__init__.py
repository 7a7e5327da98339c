"""hvd.keras: horovod.keras's API for Keras 3 on the TensorFlow backend
(``import hvd.keras as hvd``; hvd.tensorflow.keras is the same module).

DistributedOptimizer wraps a Keras optimizer so that apply() (which
model.fit's train step and apply_gradients() call) averages the
gradients over the ranks first; callbacks has Horovod's callbacks;
load_model() loads a model saved with a wrapped optimizer and wraps it
again.  Horovod itself never supported Keras 3.  Under
TF_USE_LEGACY_KERAS=1 it works with tf-keras 2 instead (tf.keras then),
hvd.keras._keras.
"""
from hvd.common.frameworks import require as _require

_require("hvd.keras")  # the framework, in the range this binding serves, or ImportError
import tensorflow as tf

from hvd.tensorflow import (Adasum, Average, Compression, Max, Min, Product,  # noqa: F401
                            ProcessSet, Sum, add_process_set, allgather_object, barrier,
                            broadcast_object, cross_rank, cross_size, global_process_set, init,
                            is_initialized, join, local_rank, local_size, mpi_built,
                            mpi_enabled, mpi_threads_supported, rank, remove_process_set,
                            shutdown, size, start_timeline, stop_timeline)
import hvd.tensorflow as _hvd
from hvd.tensorflow._keras_optimizer import as_tf_variable, optimizer_built, optimizer_variables
from hvd.tensorflow.gradient_tape import _make_allreduce_grads_fn
from hvd.keras._keras import keras
from hvd.keras import callbacks, elastic  # noqa: F401,E402


class _Reducing:
    """The allreduce of a distributed optimizer's gradients."""

    # Class attributes: (compression, sparse_as_dense, op, predivide, set)
    # and (backward_passes_per_step, average_aggregated_gradients).
    _hvd_settings = None
    _hvd_aggregation = (1, False)

    def _hvd_reduce(self, grads):
        """grads averaged over the set; None (a variable the loss does not
        reach) stays None, as Horovod leaves it."""
        if not hasattr(self, "_hvd_allreduce"):
            self._hvd_allreduce = _make_allreduce_grads_fn("DistributedOptimizer",
                                                           *self._hvd_settings)
        if _hvd.size() == 1 and self._hvd_settings[-1].process_set_id == 0:
            return list(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        reduced = self._hvd_allreduce([grads[i] for i in present])
        out = list(grads)
        for i, g in zip(present, reduced):
            out[i] = g
        return out


class _TfKerasMixin(_Reducing):
    """Placed before a tf-keras 2 optimizer's class (its optimizer or a
    legacy OptimizerV2): apply_gradients(), which minimize() and
    model.fit's train step call, allreduces first; get_gradients() (graph
    mode Keras) does too, as Horovod's."""

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        grads = self._hvd_reduce([g for g, _ in grads_and_vars])
        return super().apply_gradients(list(zip(grads, [v for _, v in grads_and_vars])),
                                       *args, **kwargs)

    def get_gradients(self, loss, params):
        return self._hvd_reduce(super().get_gradients(loss, params))


class _DistributedMixin(_Reducing):
    """Placed before the Keras 3 optimizer's class: apply() allreduces."""

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if self._hvd_aggregation[0] == 1:
            return super().apply(self._hvd_reduce(grads), trainable_variables)
        return self._hvd_aggregate(grads, trainable_variables)

    def _hvd_aggregate(self, grads, variables):
        """Horovod's backward_passes_per_step: sums the gradients locally
        and allreduces and applies them every N-th call (the counter is the
        same on every rank, so all take the branch together)."""
        passes, average = self._hvd_aggregation
        if variables is None:
            variables = self._trainable_variables
        if not self.built:
            self.build(variables)
        if not hasattr(self, "_hvd_sums"):
            with tf.init_scope():
                self._hvd_sums = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False)
                                  for v in variables]
                self._hvd_passes = tf.Variable(0, dtype=tf.int64, trainable=False)
        for total, g in zip(self._hvd_sums, grads):
            total.assign_add(tf.convert_to_tensor(g))
        self._hvd_passes.assign_add(1)
        base_apply = super().apply

        def flush():
            sums = [t.read_value() for t in self._hvd_sums]
            if average:
                sums = [t / passes for t in sums]
            base_apply(self._hvd_reduce(sums), variables)
            for t in self._hvd_sums:
                t.assign(tf.zeros_like(t))
            return tf.constant(True)
        return tf.cond(self._hvd_passes % passes == 0, flush, lambda: tf.constant(False))


def _is_keras3(cls):
    """A Keras 3 optimizer class, not one of tf-keras 2's."""
    return hasattr(cls, "stateless_apply")


def _distributed_class(base, settings, aggregation=(1, False)):
    """A subclass of base that allreduces; named and placed as base, so a
    saved model records the plain optimizer (load_model wraps it again)."""
    mixin = _DistributedMixin if _is_keras3(base) else _TfKerasMixin
    cls = type(base.__name__, (mixin, base),
               {"_hvd_settings": settings, "_hvd_aggregation": aggregation})
    cls.__module__ = base.__module__
    return cls


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A copy of the Keras optimizer (from its config) whose apply()
    averages the gradients over process_set first.

    backward_passes_per_step: sum the gradients of that many apply() calls
    locally and allreduce and apply them on the last (divided by the
    count when average_aggregated_gradients), as Horovod does."""
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be >= 1")
    if op == Adasum:
        raise NotImplementedError("hvd.keras: Adasum is not supported")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    settings = (compression, sparse_as_dense, op, gradient_predivide_factor, process_set)
    base = optimizer.__class__
    if isinstance(optimizer, _Reducing):  # wrapped already: wrap its base anew
        base = next(c for c in base.__mro__ if not issubclass(c, _Reducing))
    if backward_passes_per_step != 1 and not _is_keras3(base):
        raise NotImplementedError("hvd.keras: backward_passes_per_step > 1 needs a Keras 3 "
                                  "optimizer (%s is tf-keras 2's)" % base.__name__)
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    aggregation = (int(backward_passes_per_step), bool(average_aggregated_gradients))
    return _distributed_class(base, settings, aggregation).from_config(config)


def broadcast_global_variables(root_rank, model=None):
    """Broadcasts the model's variables (and its optimizer's) from root_rank."""
    if model is None:
        raise ValueError("hvd.keras: Keras 3 has no global variables; pass model=")
    _hvd.broadcast_variables(_variables(model), root_rank)


def _variables(model):
    """The model's and its optimizer's (built) variables, as tf.Variables."""
    vs = list(model.variables)
    opt = getattr(model, "optimizer", None)
    if opt is not None and optimizer_built(opt):
        vs += optimizer_variables(opt)
    return [as_tf_variable(v) for v in vs]


def allreduce(value, name=None, average=True, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """Reduces a tensor-compatible value over the ranks; returns numpy."""
    if op is None:
        op = Average if average else Sum
    return _hvd.allreduce(tf.constant(value), name=name, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, compression=compression).numpy()


def allgather(value, name=None):
    return _hvd.allgather(tf.constant(value), name=name).numpy()


def broadcast(value, root_rank, name=None):
    return _hvd.broadcast(tf.constant(value), root_rank, name=name).numpy()


def reducescatter(value, name=None, op=Average):
    return _hvd.reducescatter(tf.constant(value), name=name, op=op).numpy()


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """keras.models.load_model() with the optimizer wrapped in
    DistributedOptimizer again (every Keras optimizer, and
    custom_optimizers)."""
    settings = (compression, False, Average, 1.0, global_process_set)
    classes = [c for c in vars(keras.optimizers).values()
               if isinstance(c, type) and issubclass(c, keras.optimizers.Optimizer)]
    classes += list(custom_optimizers or [])
    objects = {c.__name__: _distributed_class(c, settings) for c in classes}
    objects.update(custom_objects or {})
    return keras.models.load_model(filepath, custom_objects=objects)
