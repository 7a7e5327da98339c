"""horovod.tensorflow.mpi_ops over hvd: the collectives as TensorFlow ops.

The ops live in _hvd_tf_ops.so (python/tensorflow/ops.c, TensorFlow's C
API), which calls hvd._C's engine through the table hvd._C._capi: this
module loads the library and hands it the table's address once.  The ops
keep Horovod's names and attributes (HorovodAllreduce with reduce_op,
prescale_factor, ...), and their gradients are registered here as
Horovod registers them.

Inside a graph (tf.function) an op is named from its input's name, as
Horovod names it, so ranks tracing the same function match their tensors
by name; eagerly run ops match by call order.  Failures raise
tf.errors: FailedPreconditionError when ranks disagree (shapes, types,
ops, roots) or hvd is not initialized, InvalidArgumentError for a bad
argument, UnknownError when the job broke (a lost peer, a deadline).
"""
import ctypes
import os
import re

import tensorflow as tf

from hvd import _C
from hvd.common import frameworks as _frameworks
from hvd.common import lifecycle as _lifecycle
from hvd.common import process_sets as _process_sets
from hvd.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built,  # noqa: F401
                               gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
                               nccl_built, rocm_built)
from hvd.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                     global_process_set, remove_process_set)

_LIB_PATH = os.path.join(os.path.dirname(__file__), "_hvd_tf_ops.so")


def _load_op_library():
    """The op library, bound now to this TensorFlow's C API (whose version
    hvd.tensorflow's import checked: hvd.common.frameworks)."""
    _frameworks.share_symbols("hvd.tensorflow", tf, os.path.join(tf.sysconfig.get_lib(),
                                                                "libtensorflow_framework.so.2"))
    try:
        return tf.load_op_library(_LIB_PATH)
    except (tf.errors.OpError, OSError) as e:
        raise _frameworks.load_error("hvd.tensorflow", tf, _LIB_PATH, e) from None


MPI_LIB = _load_op_library()
_native = ctypes.CDLL(_LIB_PATH)  # the same loaded object: dlopen() shares it


def _hand_over_capi():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    _native.hvd_tf_set_capi.argtypes = [ctypes.c_void_p]
    if _native.hvd_tf_set_capi(get(_C._capi, b"hvd._C._capi")) != 0:
        raise ImportError("hvd.tensorflow's op library does not match this hvd._C "
                          "(rebuild both from one tree)")


_hand_over_capi()

# ---- reduction ops (Horovod's values) ----
Average = _C.AVERAGE
Sum = _C.SUM
Adasum = _C.ADASUM
Min = _C.MIN
Max = _C.MAX
Product = _C.PRODUCT

# ---- life cycle and topology ----
init = _lifecycle.init
shutdown = _lifecycle.shutdown
_lifecycle.on_init(_native.hvd_tf_reset_names)
is_initialized = _C.is_initialized
size = _C.size
rank = _C.rank
local_size = _C.local_size
local_rank = _C.local_rank
cross_size = _C.cross_size
cross_rank = _C.cross_rank


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    """Starts recording hvd's timeline to file_path (see HOROVOD_TIMELINE)."""
    _C.start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    _C.stop_timeline()


def _executing_eagerly():
    return tf.executing_eagerly()


def _normalize_name(name):
    """A name usable as a TensorFlow op name (Horovod's rule)."""
    return re.sub("[^a-zA-Z0-9_]", "_", name)


_set_id = _process_sets.checked_id


def _op_name(kind, tensor, name):
    """The op's name: the caller's, or in a graph Horovod's from the input."""
    if name is None and not _executing_eagerly():
        name = "Horovod%s_%s" % (kind, _normalize_name(tensor.name))
    return name


def _temp_process_set(process_set_id):
    """A ProcessSet object for a gradient, from the op's attribute."""
    ps = ProcessSet([])
    ps.process_set_id = process_set_id
    return ps


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
               ignore_name_scope=False, process_set=global_process_set):
    """The HorovodAllreduce op itself (no compression, no sparse path)."""
    return MPI_LIB.horovod_allreduce(
        tensor, name=_op_name("Allreduce", tensor, name), reduce_op=op,
        prescale_factor=prescale_factor, postscale_factor=postscale_factor,
        ignore_name_scope=ignore_name_scope, process_set_id=_set_id(process_set))


@tf.RegisterGradient("HorovodAllreduce")
def _allreduce_grad(op, grad):
    """The gradient of an allreduce is the same allreduce of the gradient."""
    return _allreduce(grad, op=op.get_attr("reduce_op"),
                      prescale_factor=op.get_attr("prescale_factor"),
                      postscale_factor=op.get_attr("postscale_factor"),
                      ignore_name_scope=op.get_attr("ignore_name_scope"),
                      process_set=_temp_process_set(op.get_attr("process_set_id")))


def _grouped_allreduce(tensors, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0,
                       ignore_name_scope=False, process_set=global_process_set):
    if name is None and not _executing_eagerly():
        name = "HorovodGroupedAllreduce_%s_%d" % (_normalize_name(tensors[0].name), len(tensors))
    return MPI_LIB.horovod_grouped_allreduce(
        tensors, name=name, reduce_op=op, prescale_factor=prescale_factor,
        postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
        process_set_id=_set_id(process_set))


@tf.RegisterGradient("HorovodGroupedAllreduce")
def _grouped_allreduce_grad(op, *grads):
    return _grouped_allreduce(list(grads), op=op.get_attr("reduce_op"),
                              prescale_factor=op.get_attr("prescale_factor"),
                              postscale_factor=op.get_attr("postscale_factor"),
                              ignore_name_scope=op.get_attr("ignore_name_scope"),
                              process_set=_temp_process_set(op.get_attr("process_set_id")))


def _with_rows(out, tensor):
    """In a graph: the output's shape, the input's with the first dimension unknown."""
    if not _executing_eagerly() and tensor.shape.rank is not None:
        rest = tensor.shape[1:] if tensor.shape.rank > 0 else []
        out.set_shape([None] + list(rest))
    return out


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension, in rank
    order; the ranks' first dimensions may differ, the others must agree."""
    out = MPI_LIB.horovod_allgather(tensor, name=_op_name("Allgather", tensor, name),
                                    ignore_name_scope=ignore_name_scope,
                                    process_set_id=_set_id(process_set))
    return _with_rows(out, tensor)


_allgather = allgather


@tf.RegisterGradient("HorovodAllgather")
def _allgather_grad(op, grad):
    """Horovod's: the sum of the gradients over the set, this rank's rows."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    ignore = op.get_attr("ignore_name_scope")
    grad = _allreduce(grad, ignore_name_scope=ignore, process_set=ps)
    x = op.inputs[0]
    d = tf.reshape(tf.shape(x)[0] if x.shape.rank != 0 else tf.constant(1), [1])
    n = size_op(process_set_id=ps.process_set_id)
    d = tf.reshape(allgather(d, ignore_name_scope=ignore, process_set=ps), [n])
    splits = tf.split(grad, num_or_size_splits=d, axis=0)
    return tf.reshape(splits[_rank_in(ps)], tf.shape(x))


def _rank_in(ps):
    """This rank's index in process set ps."""
    return rank() if ps.process_set_id == 0 else _C.process_set_rank(ps.process_set_id)


def _group_name(kind, tensors, name):
    if name is None and not _executing_eagerly():
        name = "HorovodGrouped%s_%s_%d" % (kind, _normalize_name(tensors[0].name), len(tensors))
    return name


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather() of a list of tensors of one dtype, negotiated and run as
    one unit."""
    tensors = list(tensors)
    outs = MPI_LIB.horovod_grouped_allgather(
        tensors, name=_group_name("Allgather", tensors, name),
        ignore_name_scope=ignore_name_scope, process_set_id=_set_id(process_set))
    return [_with_rows(o, t) for o, t in zip(outs, tensors)]


def _my_rows(op, grads, reduced, ps, ignore):
    """This rank's rows of each reduced gradient: the allgather gradient's split."""
    n = size_op(process_set_id=ps.process_set_id)
    out = []
    for x, g in zip(op.inputs, reduced):
        d = tf.reshape(tf.shape(x)[0] if x.shape.rank != 0 else tf.constant(1), [1])
        d = tf.reshape(allgather(d, ignore_name_scope=ignore, process_set=ps), [n])
        out.append(tf.reshape(tf.split(g, num_or_size_splits=d, axis=0)[_rank_in(ps)],
                              tf.shape(x)))
    return out


@tf.RegisterGradient("HorovodGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    """Horovod's: a grouped allreduce (Sum) of the gradients, this rank's rows."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    ignore = op.get_attr("ignore_name_scope")
    reduced = _grouped_allreduce(list(grads), ignore_name_scope=ignore, process_set=ps)
    return _my_rows(op, grads, reduced, ps, ignore)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """root_rank's tensor (root_rank numbers the job's ranks, as Horovod's)."""
    root = _process_sets.rank_in_set(process_set, root_rank)
    return MPI_LIB.horovod_broadcast(tensor, name=_op_name("Broadcast", tensor, name),
                                     root_rank=root, ignore_name_scope=ignore_name_scope,
                                     process_set_id=_set_id(process_set))


@tf.RegisterGradient("HorovodBroadcast")
def _broadcast_grad(op, grad):
    """Horovod's: the root gets the sum of every rank's gradient, others zero."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    reduced = _allreduce(grad, ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=ps)
    return reduced if _rank_in(ps) == op.get_attr("root_rank") else reduced * 0


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[r] rows (first dimension) of tensor to rank r (equal
    parts when splits is None); returns (the rows received, in rank order,
    the number received from each rank)."""
    if splits is None:
        splits = tf.zeros([0], dtype=tf.int32)
    else:
        splits = tf.cast(tf.convert_to_tensor(splits), tf.int32)
    out, received = MPI_LIB.horovod_alltoall(tensor, splits,
                                             name=_op_name("Alltoall", tensor, name),
                                             ignore_name_scope=ignore_name_scope,
                                             process_set_id=_set_id(process_set))
    return _with_rows(out, tensor), received


@tf.RegisterGradient("HorovodAlltoall")
def _alltoall_grad(op, grad_wrt_output, grad_wrt_received_splits):
    """Horovod's: the gradient goes back the way the rows came."""
    recvsplits = op.outputs[1]
    grad, _ = alltoall(grad_wrt_output, splits=recvsplits,
                       ignore_name_scope=op.get_attr("ignore_name_scope"),
                       process_set=_temp_process_set(op.get_attr("process_set_id")))
    return [grad, None]


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False,
                   process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    out = MPI_LIB.horovod_reducescatter(
        tensor, name=_op_name("Reducescatter", tensor, name), reduce_op=op,
        ignore_name_scope=ignore_name_scope, process_set_id=_set_id(process_set),
        prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    return _with_rows(out, tensor)


@tf.RegisterGradient("HorovodReducescatter")
def _reducescatter_grad(op, grad):
    """Horovod's: the allgather of the gradient, times the set's size for
    Sum and the scale factors."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    if op.get_attr("reduce_op") == Sum:
        grad *= tf.cast(size_op(process_set_id=ps.process_set_id), grad.dtype)
    scale = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if scale != 1.0:
        grad *= scale
    return allgather(grad, ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=ps)


def _grouped_reducescatter(tensors, name=None, op=Sum, ignore_name_scope=False,
                           process_set=global_process_set, prescale_factor=1.0,
                           postscale_factor=1.0):
    tensors = list(tensors)
    outs = MPI_LIB.horovod_grouped_reducescatter(
        tensors, name=_group_name("Reducescatter", tensors, name), reduce_op=op,
        ignore_name_scope=ignore_name_scope, process_set_id=_set_id(process_set),
        prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    return [_with_rows(o, t) for o, t in zip(outs, tensors)]


@tf.RegisterGradient("HorovodGroupedReducescatter")
def _grouped_reducescatter_grad(op, *grads):
    """Horovod's: the grouped allgather of the gradients, scaled as reducescatter's."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    scale = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if op.get_attr("reduce_op") == Sum:
        n = tf.cast(size_op(process_set_id=ps.process_set_id), grads[0].dtype)
        grads = [g * n for g in grads]
    if scale != 1.0:
        grads = [g * scale for g in grads]
    return grouped_allgather(list(grads), ignore_name_scope=op.get_attr("ignore_name_scope"),
                             process_set=ps)


def join():
    """This rank has no more data; returns (once every rank joined) the
    rank that joined last."""
    return MPI_LIB.horovod_join()


def barrier(process_set=global_process_set):
    """Waits until every rank of the set arrives."""
    if _set_id(process_set) == 0:
        return MPI_LIB.horovod_barrier()
    # hvd's barrier is over the job; a set's is an allreduce among its ranks.
    return _allreduce(tf.zeros([1], tf.int32), process_set=process_set,
                      name=None if _executing_eagerly() else "HorovodBarrier")


def size_op(process_set_id=0, name=None):
    """The number of ranks (of the set), as a tensor computed when run."""
    if process_set_id == 0:
        return MPI_LIB.horovod_size(name=name)
    return tf.constant(_C.process_set_size(process_set_id), tf.int32)


def local_size_op(name=None):
    return MPI_LIB.horovod_local_size(name=name)


def rank_op(name=None):
    return MPI_LIB.horovod_rank(name=name)


def local_rank_op(name=None):
    return MPI_LIB.horovod_local_rank(name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 if this rank belongs to the set, else 0, as a tensor."""
    return MPI_LIB.horovod_process_set_included(process_set_id=process_set_id, name=name)
