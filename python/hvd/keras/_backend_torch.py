"""hvd.keras's seam (hvd.keras._backend) on Keras 3's PyTorch backend,
over hvd.torch: Keras's torch trainer applies the gradients eagerly, and
they are reduced by one grouped allreduce; the value collectives take
and give torch tensors."""
import torch

import hvd.torch as _hvd
from hvd.common.lifecycle import is_homogeneous  # noqa: F401
from hvd.torch import (Adasum, Average, Compression, Max, Min, Product,  # noqa: F401
                       ProcessSet, Sum, add_process_set, allgather_object, barrier,
                       broadcast_object, ccl_built, cross_rank, cross_size, cuda_built,
                       ddl_built, global_process_set, gloo_built, gloo_enabled, init,
                       is_initialized, join, local_rank, local_size, mpi_built, mpi_enabled,
                       mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
                       shutdown, size, start_timeline, stop_timeline)
from hvd.torch.elastic import ObjectState, run  # noqa: F401
from hvd.keras._keras3 import (Binding, as_native, build_optimizer,  # noqa: F401
                               default_settings, keras_state_class, optimizer_built,
                               optimizer_variables, scalar_value)


def _reduce_grads(grads, name, op, prescale, postscale, compression, process_set):
    """One grouped allreduce for every gradient."""
    return _hvd.grouped_allreduce([g.contiguous() for g in grads], name=name, op=op,
                                  compression=compression, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=process_set)


_binding = Binding(_reduce_grads)
unwrapped_class = _binding.unwrapped_class


def distributed_class(base, settings):
    """The distributed subclass of base, or of the torch-specialised class
    Keras makes for it (keras.optimizers.Adam -> its torch Adam, which
    TorchOptimizer.__new__ picks for a plain instance): what load_model
    wraps is then what the user's own optimizer was."""
    return _binding.distributed_class(type(base.__new__(base)), settings)


distributed_optimizer = _binding.distributed_optimizer


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Overwrites the Keras variables' tensors with root_rank's, in place."""
    _hvd.broadcast_parameters([v.value.data for v in variables], root_rank,
                              process_set=process_set)


def _tensor(value):
    return value.detach() if isinstance(value, torch.Tensor) else torch.as_tensor(value)


def allreduce(value, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
              compression=Compression.none):
    return _hvd.allreduce(_tensor(value), name=name, op=op, compression=compression,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor)


def allgather(value, name=None):
    return _hvd.allgather(_tensor(value), name=name)


def broadcast(value, root_rank, name=None):
    return _hvd.broadcast(_tensor(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    return _hvd.reducescatter(_tensor(value), name=name, op=op)


KerasState = keras_state_class(ObjectState, broadcast_variables, broadcast_object)
