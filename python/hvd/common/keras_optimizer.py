"""What every backend's Keras DistributedOptimizer shares, framework-free
(no TensorFlow, JAX, PyTorch or Keras is imported here): Horovod's
settings and their checks, and the wrapped optimizer class.

The wrapped optimizer is a copy (from its config) of a subclass of the
optimizer's own class, named and placed as it, so a saved model records
the plain optimizer and load_model wraps it again.  The subclass puts a
backend's mixin (hvd.tensorflow.keras_optimizer on TensorFlow,
hvd.keras._optimizer on JAX and PyTorch) before the optimizer's class;
the mixin reads the settings from the class attribute _hvd_settings.
"""
from hvd import _C
from hvd.common.compression import NoneCompressor
from hvd.common.process_sets import global_process_set

__all__ = ["SETTINGS", "settings", "default_settings", "wrap", "unwrapped_class"]

SETTINGS = ("compression", "sparse_as_dense", "op", "gradient_predivide_factor", "groups",
            "process_set", "scale_local_gradients", "backward_passes_per_step",
            "average_aggregated_gradients", "name")


def settings(name=None, compression=None, sparse_as_dense=False, op=None,
             gradient_predivide_factor=1.0, backward_passes_per_step=1,
             average_aggregated_gradients=False, groups=None, process_set=None,
             scale_local_gradients=True):
    """The settings dict of a DistributedOptimizer, checked as Horovod's
    keras DistributedOptimizer checks them (ValueError)."""
    op = _C.AVERAGE if op is None else op
    if op not in (_C.AVERAGE, _C.SUM):
        raise ValueError("op currently only supports Average and Sum")
    if gradient_predivide_factor != 1.0 and op != _C.AVERAGE:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be >= 1")
    return dict(compression=compression or NoneCompressor, sparse_as_dense=sparse_as_dense,
                op=op, gradient_predivide_factor=gradient_predivide_factor, groups=groups,
                process_set=process_set or global_process_set,
                scale_local_gradients=scale_local_gradients,
                backward_passes_per_step=int(backward_passes_per_step),
                average_aggregated_gradients=bool(average_aggregated_gradients), name=name)


def default_settings(compression=None):
    """The settings load_model wraps optimizers with (Horovod's defaults)."""
    return settings(compression=compression)


def wrap(base, mixin, settings):
    """The subclass of the Keras optimizer class base, mixin first, that
    reduces with settings (a dict of SETTINGS)."""
    cls = type(base.__name__, (mixin, base), {"_hvd_settings": dict(settings)})
    cls.__module__ = base.__module__
    return cls


def unwrapped_class(cls, mixin):
    """The Keras class below hvd's subclasses (those deriving from mixin)."""
    return next(c for c in cls.__mro__ if not issubclass(c, mixin))
