"""hvd.keras: horovod.keras's API for Keras 3 on the TensorFlow backend
(``import hvd.keras as hvd``; hvd.tensorflow.keras is the same module).

DistributedOptimizer wraps a Keras optimizer so that apply() (which
model.fit's train step and apply_gradients() call) averages the
gradients over the ranks first; callbacks has Horovod's callbacks;
load_model() loads a model saved with a wrapped optimizer and wraps it
again.  Horovod itself never supported Keras 3.
"""
import keras
import tensorflow as tf

from hvd.tensorflow import (Adasum, Average, Compression, Max, Min, Product,  # noqa: F401
                            ProcessSet, Sum, add_process_set, allgather_object, barrier,
                            broadcast_object, cross_rank, cross_size, global_process_set, init,
                            is_initialized, join, local_rank, local_size, mpi_built,
                            mpi_enabled, mpi_threads_supported, rank, remove_process_set,
                            shutdown, size, start_timeline, stop_timeline)
import hvd.tensorflow as _hvd
from hvd.tensorflow.gradient_tape import _make_allreduce_grads_fn
from hvd.keras import callbacks  # noqa: F401,E402


class _DistributedMixin:
    """Placed before the Keras optimizer's class: apply() allreduces."""

    _hvd_settings = None  # class attribute: (compression, sparse_as_dense, op, predivide, set)

    def apply(self, grads, trainable_variables=None):
        if not hasattr(self, "_hvd_allreduce"):
            self._hvd_allreduce = _make_allreduce_grads_fn("DistributedOptimizer",
                                                           *self._hvd_settings)
        grads = list(grads)
        if _hvd.size() > 1 or self._hvd_settings[-1].process_set_id != 0:
            grads = self._hvd_allreduce(grads)
        return super().apply(grads, trainable_variables)


def _distributed_class(base, settings):
    """A subclass of base that allreduces; named and placed as base, so a
    saved model records the plain optimizer (load_model wraps it again)."""
    cls = type(base.__name__, (_DistributedMixin, base), {"_hvd_settings": settings})
    cls.__module__ = base.__module__
    return cls


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A copy of the Keras optimizer (from its config) whose apply()
    averages the gradients over process_set first.

    backward_passes_per_step > 1 is not supported yet (Keras 3 has its own
    gradient_accumulation_steps, which accumulates before apply() and so
    before the allreduce: pass it to the optimizer instead)."""
    if backward_passes_per_step != 1:
        raise NotImplementedError(
            "hvd.keras: backward_passes_per_step > 1 is not supported yet; give the Keras 3 "
            "optimizer gradient_accumulation_steps=%d instead" % backward_passes_per_step)
    if op == Adasum:
        raise NotImplementedError("hvd.keras: Adasum is not supported")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    settings = (compression, sparse_as_dense, op, gradient_predivide_factor, process_set)
    base = optimizer.__class__
    if isinstance(optimizer, _DistributedMixin):
        base = base.__mro__[2]
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    return _distributed_class(base, settings).from_config(config)


def broadcast_global_variables(root_rank, model=None):
    """Broadcasts the model's variables (and its optimizer's) from root_rank."""
    if model is None:
        raise ValueError("hvd.keras: Keras 3 has no global variables; pass model=")
    _hvd.broadcast_variables(_variables(model), root_rank)


def _variables(model):
    """The model's and its optimizer's (built) variables, as tf.Variables."""
    vs = list(model.variables)
    opt = getattr(model, "optimizer", None)
    if opt is not None and getattr(opt, "built", False):
        vs += list(opt.variables)
    return [getattr(v, "value", v) for v in vs]


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
