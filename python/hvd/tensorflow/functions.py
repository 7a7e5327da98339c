"""Broadcasting variables and Python objects, as horovod.tensorflow.functions.

Objects travel pickled with cloudpickle (the standard pickle where it is
missing), as a uint8 tensor: its length first, then its bytes."""
import io

import numpy as np
import tensorflow as tf

try:
    import cloudpickle as _pickle
except ImportError:  # pragma: no cover
    import pickle as _pickle

from hvd.common.process_sets import global_process_set
from hvd.tensorflow.mpi_ops import _executing_eagerly, allgather, broadcast, rank

__all__ = ["broadcast_variables", "broadcast_object", "broadcast_object_fn", "allgather_object"]


@tf.function
def _broadcast_group(variables, root_rank, process_set):
    for var in variables:
        var.assign(broadcast(var, root_rank, process_set=process_set))


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to variables on every rank.  Eagerly, the
    broadcasts run as one tf.function, so they are in flight together (and
    fused) rather than one after another."""
    variables = list(variables)
    if not variables:
        return None
    if _executing_eagerly():
        return _broadcast_group(variables, root_rank, process_set)
    return tf.group(*[var.assign(broadcast(var, root_rank, process_set=process_set))
                      for var in variables])


def _to_tensor(obj):
    buf = io.BytesIO()
    _pickle.dump(obj, buf)
    return tf.constant(np.frombuffer(buf.getvalue(), dtype=np.uint8))


def _from_tensor(t):
    return _pickle.loads(t.numpy().tobytes())


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's obj on every rank (eager mode; session is TF1's and unused)."""
    name = name or type(obj).__name__
    if rank() == root_rank:
        payload = _to_tensor(obj)
        length = tf.constant([int(payload.shape[0])], tf.int64)
    else:
        length = tf.zeros([1], tf.int64)
    length = broadcast(length, root_rank, name=name + ".sz", process_set=process_set)
    if rank() != root_rank:
        payload = tf.zeros([int(length.numpy()[0])], tf.uint8)
    payload = broadcast(payload, root_rank, name=name + ".t", process_set=process_set)
    return obj if rank() == root_rank else _from_tensor(payload)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts its argument from root_rank (Horovod's)."""
    def _bcast(obj):
        return broadcast_object(obj, root_rank, session, name, process_set)
    return _bcast


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """The list of every rank's obj, in rank order."""
    name = name or type(obj).__name__
    payload = _to_tensor(obj)
    sizes = allgather(tf.constant([int(payload.shape[0])], tf.int64), name=name + ".sz",
                      process_set=process_set).numpy()
    gathered = allgather(payload, name=name + ".t", process_set=process_set).numpy()
    out, pos = [], 0
    for n in sizes:
        out.append(_pickle.loads(gathered[pos:pos + n].tobytes()))
        pos += n
    return out
