"""horovod.tensorflow's public collectives over the ops of mpi_ops:
compression, the deprecated average=, tf.IndexedSlices (allgathered, as
Horovod does), grouping by dtype, and Average of reducescatter."""
import tensorflow as tf

from hvd.common.process_sets import global_process_set
from hvd.tensorflow import mpi_ops as _mpi_ops
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, _allreduce,
                                    _EagerTensor, _fast_allreduce,
                                    _grouped_allreduce, _grouped_reducescatter, _reducescatter,
                                    _set_size_of, allgather, grouped_allgather,
                                    handle_average_backwards_compatibility)

__all__ = ["allreduce", "grouped_allreduce", "reducescatter", "grouped_reducescatter"]


def _check_sparse(op, prescale_factor, postscale_factor):
    """Horovod's refusals for tf.IndexedSlices, made before anything runs."""
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction does not support sparse tensors "
                                  "(tf.IndexedSlices); pass sparse_as_dense=True")
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with "
                                  "tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")


def _sparse_result(slices, values, indices, op, process_set):
    """An allgathered tf.IndexedSlices, its values divided by the set's size
    for Average."""
    if op == Average:
        values = values / tf.cast(_set_size_of(process_set), values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces tensor over the ranks of process_set (op: Average by
    default, Sum, Min, Max, Product, Adasum).  A tf.IndexedSlices is
    allgathered (values and indices), as Horovod does."""
    op = handle_average_backwards_compatibility(op, average)
    if (type(tensor) is _EagerTensor and _mpi_ops._fast_enabled
            and compression is Compression.none and process_set is global_process_set):
        out = _fast_allreduce(tensor, op, prescale_factor, postscale_factor)
        if out is not None:
            return out
    if isinstance(tensor, tf.IndexedSlices):
        _check_sparse(op, prescale_factor, postscale_factor)
        values = allgather(tensor.values, ignore_name_scope=ignore_name_scope,
                           process_set=process_set)
        indices = allgather(tensor.indices, ignore_name_scope=ignore_name_scope,
                            process_set=process_set)
        return _sparse_result(tensor, values, indices, op, process_set)
    compressed, ctx = compression.compress(tensor)
    reduced = _allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                         process_set=process_set)
    return compression.decompress(reduced, ctx)


def _by_dtype(tensors, name, run):
    """run(tensors of one dtype, name) for each dtype among tensors, in
    order of first appearance; the results in the tensors' order.  The
    ops are grouped per dtype (each grouped op takes one); a name given
    is suffixed with the group's number when there are several."""
    groups = {}
    for i, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(i)
    out = [None] * len(tensors)
    for k, idx in enumerate(groups.values()):
        sub = None if name is None else (name if len(groups) == 1 else "%s.%d" % (name, k))
        for i, r in zip(idx, run([tensors[i] for i in idx], sub)):
            out[i] = r
    return out


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """allreduce() of a list of tensors as one unit (negotiated and fused
    together; one group per dtype).  tf.IndexedSlices among them are
    grouped-allgathered (values, then indices), as Horovod does."""
    op = handle_average_backwards_compatibility(op, average)
    tensors = list(tensors)
    if not tensors:
        return tensors
    out = [None] * len(tensors)
    sparse = [i for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if sparse:
        _check_sparse(op, prescale_factor, postscale_factor)

        def gather(ts, sub):
            return grouped_allgather(ts, name=sub, ignore_name_scope=ignore_name_scope,
                                     process_set=process_set)
        values = _by_dtype([tensors[i].values for i in sparse], None, gather)
        indices = _by_dtype([tensors[i].indices for i in sparse], None, gather)
        for i, v, x in zip(sparse, values, indices):
            out[i] = _sparse_result(tensors[i], v, x, op, process_set)
    if dense:
        pairs = [compression.compress(tensors[i]) for i in dense]

        def reduce(ts, sub):
            return _grouped_allreduce(ts, name=sub, op=op, prescale_factor=prescale_factor,
                                      postscale_factor=postscale_factor,
                                      ignore_name_scope=ignore_name_scope,
                                      process_set=process_set)
        reduced = _by_dtype([t for t, _ in pairs], name, reduce)
        for i, r, (_, ctx) in zip(dense, reduced, pairs):
            out[i] = compression.decompress(r, ctx)
    return out


def _check_scatter_op(op, what):
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("%s: op must be Average, Sum, Min, Max or Product" % what)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces tensor over the set and gives rank r its part of the first
    dimension: dim0 // n rows, one more when r < dim0 % n (Horovod's split)."""
    _check_scatter_op(op, "reducescatter")
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
    _check_scatter_op(op, "grouped_reducescatter")
    tensors = list(tensors)
    if not tensors:
        return tensors
    pairs = [compression.compress(t) for t in tensors]
    outs = _grouped_reducescatter([t for t, _ in pairs], name=name, op=op,
                                  ignore_name_scope=ignore_name_scope, process_set=process_set,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor)
    return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
