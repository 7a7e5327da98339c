"""Broadcasting and gathering Python objects, as horovod.mxnet.functions.

Objects travel pickled with cloudpickle (the standard pickle where it is
missing) as a uint8 NDArray, after their length."""
import io

import mxnet as mx
import numpy as np

try:
    import cloudpickle as _pickle
except ImportError:  # pragma: no cover
    import pickle as _pickle

from hvd.common.process_sets import global_process_set
from hvd.mxnet.mpi_ops import allgather, broadcast_, rank

__all__ = ["broadcast_object", "allgather_object"]


def _to_bytes(obj):
    buf = io.BytesIO()
    _pickle.dump(obj, buf)
    return mx.nd.array(np.frombuffer(buf.getvalue(), dtype=np.uint8), dtype="uint8")


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's obj on every rank of the set."""
    name = name or type(obj).__name__
    if rank() == root_rank:
        payload = _to_bytes(obj)
        length = mx.nd.array([payload.size], dtype="int64")
    else:
        length = mx.nd.zeros((1,), dtype="int64")
    broadcast_(length, root_rank, name + ".sz", process_set=process_set)
    if rank() != root_rank:
        payload = mx.nd.zeros((int(length.asnumpy()[0]),), dtype="uint8")
    broadcast_(payload, root_rank, name + ".t", process_set=process_set)
    if rank() == root_rank:
        return obj
    return _pickle.loads(payload.asnumpy().tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's obj (of the set), in rank order."""
    name = name or type(obj).__name__
    payload = _to_bytes(obj)
    sizes = allgather(mx.nd.array([payload.size], dtype="int64"), name=name + ".sz",
                      process_set=process_set).asnumpy()
    gathered = allgather(payload, name=name + ".t", process_set=process_set).asnumpy()
    out, pos = [], 0
    for n in sizes:
        out.append(_pickle.loads(gathered[pos:pos + n].tobytes()))
        pos += n
    return out
