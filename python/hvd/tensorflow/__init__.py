"""hvd.tensorflow: horovod.tensorflow's API over hvd
(``import hvd.tensorflow as hvd``), TensorFlow 2, CPU tensors.

See mpi_ops (the ops and their gradients), functions (broadcasting
variables and objects), compression, gradient_tape
(DistributedGradientTape, DistributedOptimizer) and hvd.tensorflow.keras.
"""
from hvd.common.frameworks import require as _require

_require("hvd.tensorflow")  # the framework, in the range this binding serves, or ImportError
import tensorflow as tf

from hvd.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
from hvd.tensorflow.compression import Compression  # noqa: F401
from hvd.tensorflow.functions import (allgather_object, broadcast_object,  # noqa: F401
                                      broadcast_object_fn, broadcast_variables)
from hvd.tensorflow.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, _allreduce, _grouped_allreduce,
    _grouped_reducescatter, _reducescatter, _set_id, add_process_set, allgather, alltoall, barrier, broadcast, ccl_built,
    cross_rank, cross_size, cuda_built, ddl_built, grouped_allgather, global_process_set, gloo_built, gloo_enabled,
    init, is_homogeneous, is_initialized, join, local_rank, local_rank_op, local_size,
    local_size_op, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built,
    process_set_included_op, rank, rank_op, remove_process_set, rocm_built, shutdown, size,
    size_op, start_timeline, stop_timeline)


def _resolve_op(op, average):
    """Horovod's average= (deprecated) and op= together."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is None:
        return Average if average is None or average else Sum
    return op


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces tensor over the ranks of process_set (op: Average by
    default, Sum, Min, Max, Product, Adasum).  A tf.IndexedSlices is
    allgathered (values and indices), as Horovod does."""
    op = _resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise NotImplementedError("sparse (IndexedSlices) allreduce supports Average and "
                                      "Sum only")
        values = allgather(tensor.values, ignore_name_scope=ignore_name_scope,
                           process_set=process_set)
        indices = allgather(tensor.indices, ignore_name_scope=ignore_name_scope,
                            process_set=process_set)
        if op == Average:
            n = process_set.size() if _set_id(process_set) else size()
            values = tf.math.divide(values, tf.cast(n, values.dtype))
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    compressed, ctx = compression.compress(tensor)
    reduced = _allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                         process_set=process_set)
    return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """allreduce() of a list of tensors as one unit (negotiated and fused
    together); tensors of several types go as one group per type."""
    op = _resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    pairs = [compression.compress(t) for t in tensors]
    by_type = {}
    for i, (t, _) in enumerate(pairs):
        by_type.setdefault(t.dtype, []).append(i)
    out = [None] * len(tensors)
    for k, (dtype, idx) in enumerate(sorted(by_type.items(), key=lambda kv: kv[1][0])):
        sub = None if name is None else (name if len(by_type) == 1 else "%s.%d" % (name, k))
        reduced = _grouped_allreduce([pairs[i][0] for i in idx], name=sub, op=op,
                                     prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor,
                                     ignore_name_scope=ignore_name_scope,
                                     process_set=process_set)
        for i, r in zip(idx, reduced):
            out[i] = compression.decompress(r, pairs[i][1])
    return out


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces tensor over the set and gives rank r its part of the first
    dimension: dim0 // n rows, one more when r < dim0 % n (Horovod's split)."""
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("reducescatter: op must be Average, Sum, Min, Max or Product")
    compressed, ctx = compression.compress(tensor)
    out = _reducescatter(compressed, name=name, op=op, ignore_name_scope=ignore_name_scope,
                         process_set=process_set, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          process_set=global_process_set, ignore_name_scope=False,
                          prescale_factor=1.0, postscale_factor=1.0, name=None):
    """reducescatter() of a list of tensors of one dtype, negotiated and
    run as one unit."""
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("grouped_reducescatter: op must be Average, Sum, Min, Max or Product")
    pairs = [compression.compress(t) for t in tensors]
    outs = _grouped_reducescatter([t for t, _ in pairs], name=name, op=op,
                                  ignore_name_scope=ignore_name_scope, process_set=process_set,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor)
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]


from hvd.tensorflow.gradient_tape import (DistributedGradientTape,  # noqa: F401,E402
                                          DistributedOptimizer, PartialDistributedGradientTape)
from hvd.tensorflow import elastic  # noqa: F401,E402  (hvd.elastic.run, TensorFlowKerasState)
