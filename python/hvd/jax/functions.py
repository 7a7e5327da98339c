"""Whole-model helpers: broadcast_parameters (a pytree from a root rank),
allreduce_gradients (a pytree of gradients averaged, fused), and
broadcast_object / allgather_object for picklable Python objects."""
import pickle

import jax
import jax.numpy as jnp
import numpy as np

from hvd.common.process_sets import global_process_set
from hvd.jax.compression import Compression
from hvd.jax.mpi_ops import Average, _name, allgather, allreduce, broadcast, rank

__all__ = ["broadcast_parameters", "allreduce_gradients", "broadcast_object",
           "allgather_object"]


def broadcast_parameters(params, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's params (any pytree of arrays: a model's
    parameters, an optax optimizer state) on every rank: one custom call
    whose leaves are enqueued together.  JAX arrays are immutable, so use
    the result: params = hvd.broadcast_parameters(params, 0)."""
    return broadcast(params, root_rank, name=name or _name(None, "broadcast_parameters",
                                                         process_set),
                     process_set=process_set)


broadcast_optimizer_state = broadcast_parameters


def allreduce_gradients(grads, op=Average, compression=Compression.none, name=None,
                        prescale_factor=1.0, postscale_factor=1.0,
                        process_set=global_process_set):
    """Averages (op) a pytree of gradients over the processes.  The leaves
    go into one custom call that enqueues them all before it waits, so the
    engine fuses them into as few allreduces as HOROVOD_FUSION_THRESHOLD
    allows, as for the tensors of one backward pass in Horovod.
    compression: Compression.fp16 sends floating leaves as float16."""
    if compression is Compression.none:
        compression = None
    return allreduce(grads, name=name or _name(None, "allreduce_gradients", process_set),
                     compression=compression, op=op, prescale_factor=prescale_factor,
                     postscale_factor=postscale_factor, process_set=process_set)


def _bytes_of(obj):
    return jnp.asarray(np.frombuffer(pickle.dumps(obj), np.uint8))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's picklable obj on every rank (eager only)."""
    name = name or _name(None, "broadcast_object", process_set)
    data = _bytes_of(obj) if rank() == root_rank else jnp.zeros((0,), jnp.uint8)
    length = broadcast(jnp.asarray([data.shape[0]], jnp.int32), root_rank, name=name + ".len",
                       process_set=process_set)
    if rank() != root_rank:
        data = jnp.zeros((int(length[0]),), jnp.uint8)
    data = broadcast(data, root_rank, name=name + ".data", process_set=process_set)
    return pickle.loads(np.asarray(data).tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's picklable obj, in rank order (eager
    only)."""
    name = name or _name(None, "allgather_object", process_set)
    data = _bytes_of(obj)
    lengths = [int(n) for n in allgather(jnp.asarray([data.shape[0]], jnp.int32),
                                         name=name + ".len", process_set=process_set)]
    longest = max(lengths)
    padded = jnp.zeros((longest,), jnp.uint8).at[:data.shape[0]].set(data)
    gathered = np.asarray(allgather(padded, name=name + ".data", process_set=process_set))
    return [pickle.loads(gathered[i * longest:i * longest + n].tobytes())
            for i, n in enumerate(lengths)]
