"""hvd.keras's seam (hvd.keras._backend) on Keras 3's JAX backend, over
hvd.jax: the gradients are reduced by hvd.jax's XLA custom call inside
the train step Keras jit-compiles (no host round trip), and the value
collectives take and give JAX arrays."""
import jax.numpy as jnp

import hvd.jax as _hvd
from hvd.common.lifecycle import is_homogeneous  # noqa: F401
from hvd.jax import (Adasum, Average, Compression, Max, Min, Product,  # noqa: F401
                     ProcessSet, Sum, add_process_set, allgather_object, barrier,
                     broadcast_object, ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                     global_process_set, gloo_built, gloo_enabled, init, is_initialized, join,
                     local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                     nccl_built, rank, remove_process_set, rocm_built, shutdown, size,
                     start_timeline, stop_timeline)
from hvd.jax.elastic import ObjectState, run  # noqa: F401
from hvd.keras._keras3 import (Binding, as_native, build_optimizer,  # noqa: F401
                               default_settings, keras_state_class, optimizer_built,
                               optimizer_variables, scalar_value)


def _reduce_grads(grads, name, op, prescale, postscale, compression, process_set):
    """One custom call for every gradient (the engine fuses them)."""
    return _hvd.allreduce_gradients(list(grads), op=op, compression=compression, name=name,
                                    prescale_factor=prescale, postscale_factor=postscale,
                                    process_set=process_set)


_binding = Binding(_reduce_grads)
distributed_class = _binding.distributed_class
unwrapped_class = _binding.unwrapped_class
distributed_optimizer = _binding.distributed_optimizer


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Assigns root_rank's values to the Keras variables, in one call."""
    variables = list(variables)
    if not variables:
        return
    values = _hvd.broadcast([v.value for v in variables], root_rank, process_set=process_set)
    for v, value in zip(variables, values):
        v.assign(value)


def allreduce(value, name=None, op=Average, prescale_factor=1.0, postscale_factor=1.0,
              compression=Compression.none):
    return _hvd.allreduce(jnp.asarray(value), name=name, op=op, compression=compression,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor)


def allgather(value, name=None):
    return _hvd.allgather(jnp.asarray(value), name=name)


def broadcast(value, root_rank, name=None):
    return _hvd.broadcast(jnp.asarray(value), root_rank, name=name)


def reducescatter(value, name=None, op=Average):
    return _hvd.reducescatter(jnp.asarray(value), name=name, op=op)


KerasState = keras_state_class(ObjectState, broadcast_variables, broadcast_object)
