"""hvd.keras: horovod.keras's API (``import hvd.keras as hvd``;
hvd.tensorflow.keras is the same module) for Keras 3 and, under
TF_USE_LEGACY_KERAS=1, for tf-keras 2 (hvd.keras._keras chooses).

DistributedOptimizer wraps a Keras optimizer so that the gradients it
applies are averaged over the ranks first; PartialDistributedOptimizer
keeps some layers' gradients local; callbacks has Horovod's callbacks;
load_model() loads a model saved with a wrapped optimizer and wraps it
again.  Horovod itself never supported Keras 3.

Keras 3 runs on TensorFlow, JAX or PyTorch (KERAS_BACKEND): the same
script runs on each.  Everything hvd.keras needs of the framework's
binding comes through one seam, hvd.keras._backend, which takes it from
hvd.tensorflow, hvd.jax or hvd.torch as the backend is (docs/keras.md).
"""
from hvd.keras import _backend
from hvd.keras._backend import (Adasum, Average, Compression, Max, Min, Product,  # noqa: F401
                                ProcessSet, Sum, add_process_set, allgather_object, barrier,
                                broadcast_object, ccl_built, cross_rank, cross_size, cuda_built,
                                ddl_built, global_process_set, gloo_built, gloo_enabled, init,
                                is_homogeneous, is_initialized, join, local_rank, local_size,
                                mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank,
                                remove_process_set, rocm_built, shutdown, size, start_timeline,
                                stop_timeline)
from hvd.keras._keras import keras
from hvd.keras import callbacks, elastic  # noqa: F401,E402


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A copy of the Keras optimizer (from its config) that averages (or
    sums) its gradients over process_set before applying them.

    backward_passes_per_step: the gradients of that many passes are summed
    locally and reduced and applied on the last (divided by the count when
    average_aggregated_gradients), as Horovod does; the optimizer's
    iteration count advances on every pass.  groups: a number of groups or
    lists of variables, reduced as grouped allreduces."""
    if num_groups != 0 and groups is None:
        groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of "
                         "tf.Variable.")
    return _backend.distributed_optimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """A DistributedOptimizer whose local_layers' (a Keras layer or a list
    of them) trainable variables keep their local gradients (divided by
    the set's size when scale_local_gradients), as Horovod's."""
    opt = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression,
                               sparse_as_dense, gradient_predivide_factor, op,
                               backward_passes_per_step, average_aggregated_gradients,
                               groups=groups, process_set=process_set,
                               scale_local_gradients=scale_local_gradients)
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of keras.layers.Layer type.")
    for layer in local_layers:
        for var in layer.trainable_weights:
            opt.register_local_var(var)
    return opt


def model_variables(model, local_keys=()):
    """The model's and its optimizer's (once built) variables as the
    binding's variables, without those whose key is in local_keys."""
    vs = [v for v in model.variables if _key(v) not in local_keys]
    opt = getattr(model, "optimizer", None)
    if opt is not None and _backend.optimizer_built(opt):
        vs += _backend.optimizer_variables(opt)
    return [_backend.as_native(v) for v in vs]


def _key(var):
    return var.ref() if hasattr(var, "ref") else id(var)


def broadcast_global_variables(root_rank, model=None):
    """Broadcasts the model's variables (and its optimizer's) from
    root_rank.  Keras has no global variables to find: pass model= (hvd
    differs from Horovod here, docs/tensorflow.md)."""
    if model is None:
        raise ValueError("hvd.keras: Keras has no global variables; pass model=")
    _backend.broadcast_variables(model_variables(model), root_rank)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none):
    """Reduces a tensor-compatible value over the ranks (Average unless op
    or average= say otherwise); a tensor."""
    if op is None:
        op = Average if average is None or average else Sum
    elif average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    return _backend.allreduce(value, name=name, op=op, prescale_factor=prescale_factor,
                              postscale_factor=postscale_factor, compression=compression)


def allgather(value, name=None):
    """Concatenates every rank's value along the first dimension; a tensor."""
    return _backend.allgather(value, name)


def broadcast(value, root_rank, name=None):
    """root_rank's value on every rank; a tensor."""
    return _backend.broadcast(value, root_rank, name)


def reducescatter(value, name=None, op=Average):
    """Reduces value and gives each rank its part of the first dimension; a tensor."""
    return _backend.reducescatter(value, name, op)


def _optimizer_classes(legacy_opts):
    """Every optimizer class the Keras in use offers (tf-keras 2's legacy
    OptimizerV2s with legacy_opts)."""
    module = keras.optimizers.legacy if legacy_opts else keras.optimizers
    base = module.Optimizer
    return [c for c in vars(module).values() if isinstance(c, type) and issubclass(c, base)]


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """keras.models.load_model() with the model's optimizer wrapped in
    DistributedOptimizer again: every optimizer of keras.optimizers (or
    keras.optimizers.legacy with legacy_opts, tf-keras 2), and
    custom_optimizers."""
    settings = _backend.default_settings(compression)
    objects = {}
    for cls in _optimizer_classes(legacy_opts):
        wrapped = _backend.distributed_class(cls, settings)
        objects[cls.__name__] = objects[cls.__name__.lower()] = wrapped
    for cls in custom_optimizers or []:
        objects[cls.__name__] = _backend.distributed_class(cls, settings)
    objects.update(custom_objects or {})
    return keras.models.load_model(filepath, custom_objects=objects)
