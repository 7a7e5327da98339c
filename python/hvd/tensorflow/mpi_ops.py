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

import numpy as np
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
from hvd.tensorflow.util import _executing_eagerly  # noqa: F401

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


def _capi_table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(_C._capi, b"hvd._C._capi")


def _hand_over_capi():
    _native.hvd_tf_set_capi.argtypes = [ctypes.c_void_p]
    if _native.hvd_tf_set_capi(_capi_table()) != 0:
        raise ImportError("hvd.tensorflow's op library does not match this hvd._C "
                          "(rebuild both from one tree)")


_hand_over_capi()

_XLA_LIB_PATH = os.path.join(os.path.dirname(__file__), "_hvd_tf_xla.so")


def _xla_ops_enabled():
    return os.environ.get("HOROVOD_ENABLE_XLA_OPS", "").strip().lower() in ("1", "true")


def _load_xla_library():
    """Under HOROVOD_ENABLE_XLA_OPS=1 (Horovod's knob), the XLA kernels of
    allreduce, allgather and broadcast (_hvd_tf_xla.so, xla.cc): C++ against
    the TensorFlow it was built with, so refused, with ImportError, under
    another TensorFlow or where it was not built (the wheel has none)."""
    if not os.path.exists(_XLA_LIB_PATH):
        raise ImportError("hvd.tensorflow: HOROVOD_ENABLE_XLA_OPS=1, but this install has no "
                          "XLA library (%s): it is built from source against one TensorFlow "
                          "(docs/tensorflow.md); unset the variable to run without XLA ops"
                          % _XLA_LIB_PATH)
    lib_dir = tf.sysconfig.get_lib()
    _frameworks.share_symbols("hvd.tensorflow", tf, os.path.join(lib_dir, "libtensorflow_cc.so.2"))
    try:
        lib = ctypes.CDLL(_XLA_LIB_PATH)
    except OSError as e:
        raise _frameworks.load_error("hvd.tensorflow", tf, _XLA_LIB_PATH, e) from None
    lib.hvd_tf_xla_built_for.restype = ctypes.c_char_p
    built = lib.hvd_tf_xla_built_for().decode()
    if _frameworks.parse(built)[:2] != _frameworks.parse(tf.__version__)[:2]:
        raise ImportError("hvd.tensorflow: HOROVOD_ENABLE_XLA_OPS=1, but %s was built for "
                          "TensorFlow %s and this is %s: rebuild it, or unset the variable"
                          % (_XLA_LIB_PATH, built, tf.__version__))
    lib.hvd_tf_xla_load.argtypes = [ctypes.c_void_p]
    if lib.hvd_tf_xla_load(_capi_table()) != 0:
        raise ImportError("hvd.tensorflow: %s could not register its XLA kernels "
                          "(its reason is on stderr)" % _XLA_LIB_PATH)
    return lib


_XLA_LIB = _load_xla_library() if _xla_ops_enabled() else None

# ---- reduction ops (Horovod's values) ----
Average = _C.AVERAGE
Sum = _C.SUM
Adasum = _C.ADASUM
Min = _C.MIN
Max = _C.MAX
Product = _C.PRODUCT

def handle_average_backwards_compatibility(op, average):
    """The reduction Horovod's deprecated average= and op= together mean:
    op, else Average unless average is False."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of "
                             "them.")
        return op
    return Average if average is None or average else Sum


def check_num_rank_power_of_2(num_rank):
    """True if num_rank is a power of two (Adasum's condition)."""
    return num_rank > 0 and num_rank & (num_rank - 1) == 0


class _Basics:
    """What scripts reach of Horovod's HorovodBasics through mpi_ops._basics."""

    @staticmethod
    def _get_process_set_ids_and_ranks():
        return _process_sets.ids_and_ranks()


_basics = _Basics()

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


# ---- the fast path (python/_C/fast.c's eager_allreduce) ----
# allreduce() of one eager tf.Tensor on the CPU, run eagerly (no
# tf.function tracing, no tape or forward accumulator that could record
# it, no device scope, synchronous execution), on the global set without
# compression: the tensor's buffer, as numpy's zero-copy view, is reduced
# into a new array in one C call that enqueues and waits with the GIL
# released, and the result is wrapped as a tensor: a few us where the
# HorovodAllreduce op costs tens (issue 46).  The op it stands for is
# enqueued without a name (hvd numbers eager ops in call order, a given
# name is not the op's), its factors rounded to float32 as the op's
# attributes are, so the ranks of a job pair whichever path each takes,
# and the results are bit for bit the op's.  Failures raise the op's
# tf.errors types.  Anything else is declined (None), nothing enqueued,
# and the op runs.  _fast_enabled=False sends every call to the op.
_fast_enabled = True
_EagerTensor = None  # (a tensor made here would start TensorFlow's runtime at import)
_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
_NP_DTYPES = {np.dtype(np.uint8): _C.UINT8, np.dtype(np.int8): _C.INT8,
              np.dtype(np.uint16): _C.UINT16, np.dtype(np.int16): _C.INT16,
              np.dtype(np.int32): _C.INT32, np.dtype(np.int64): _C.INT64,
              np.dtype(np.float16): _C.FLOAT16, np.dtype(tf.bfloat16.as_numpy_dtype): _C.BFLOAT16,
              np.dtype(np.float32): _C.FLOAT32, np.dtype(np.float64): _C.FLOAT64,
              np.dtype(np.bool_): _C.BOOL}
_fast_parked = _C.eager_fast_setup(np.ndarray, _NP_DTYPES, np.empty_like)
_lifecycle.on_shutdown(_fast_parked.clear)
try:
    from tensorflow.python import pywrap_tfe as _tfe
    from tensorflow.python.eager import context as _context
    from tensorflow.python.framework.ops import EagerTensor as _EagerTensor
    from tensorflow.python.framework.errors_impl import exception_type_from_error_code
    _possible_gradient_types = _tfe.TFE_Py_TapeSetPossibleGradientTypes
    _get_executor, _executor_is_async, _delete_executor = (
        _tfe.TFE_ContextGetExecutorForThread, _tfe.TFE_ExecutorIsAsync, _tfe.TFE_DeleteExecutor)
except (ImportError, AttributeError):  # another TensorFlow's internals: the op only
    _fast_enabled = False

# hvd's codes as the tf.errors the op raises (ops.c's tf_code)
_TF_CODES = {_C.E_MISMATCH: tf.errors.FAILED_PRECONDITION,
             _C.E_NOT_INITIALIZED: tf.errors.FAILED_PRECONDITION,
             _C.E_INVALID: tf.errors.INVALID_ARGUMENT,
             _C.E_UNSUPPORTED: tf.errors.UNIMPLEMENTED,
             _C.E_NOMEM: tf.errors.RESOURCE_EXHAUSTED}


def _tf_error(code, msg):
    """The tf.errors exception the op raises for hvd's code."""
    error = exception_type_from_error_code(_TF_CODES.get(code, tf.errors.UNKNOWN))
    return error(None, None, msg)


def _thread_is_async(ctx):
    """ctx.is_async() without its Executor object, whose deletion waits."""
    executor = _get_executor(ctx._handle)
    try:
        return _executor_is_async(executor)
    finally:
        _delete_executor(executor)


def _fast_allreduce(tensor, op, prescale_factor, postscale_factor):
    """allreduce() of an EagerTensor on the fast path: the result, or None."""
    ctx = _context.context()
    if (not ctx.executing_eagerly() or ctx.device_name or tensor.device != _CPU
            or _possible_gradient_types([tensor]) or _thread_is_async(ctx)):
        return None
    a = tensor._numpy()  # the buffer (a copy, for a scalar: numpy's scalar)
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    out = _C.eager_allreduce(a, op, prescale_factor, postscale_factor, None, _tf_error,
                             _C.FAST_F32_FACTORS)
    return None if out is None else _EagerTensor(out, _CPU)


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


def _my_rows(op, grads, ps):
    """Horovod's allgather gradient, for each input x of op: the Average
    allreduce of its output's gradient over the set, this rank's rows:
    those at the sum of the ranks before it's first dimensions
    (allgathered).  A slice there rather than Horovod's split, whose sizes
    XLA would need as constants; the slice's size is x's own first
    dimension, which XLA knows."""
    ignore = op.get_attr("ignore_name_scope")
    me = _rank_in(ps)
    out = []
    for x, g in zip(op.inputs, grads):
        g = _allreduce(g, op=Average, ignore_name_scope=ignore, process_set=ps)
        rows = tf.shape(x)[:1] if x.shape.rank != 0 else tf.constant([1])
        firsts = allgather(rows, ignore_name_scope=ignore, process_set=ps)
        start = tf.reduce_sum(firsts[:me])
        rest = tf.shape(g)[1:]
        mine = tf.slice(g, tf.concat([[start], tf.zeros_like(rest)], 0),
                        tf.concat([rows, rest], 0))
        out.append(tf.reshape(mine, tf.shape(x)))
    return out


@tf.RegisterGradient("HorovodAllgather")
def _allgather_grad(op, grad):
    return _my_rows(op, [grad], _temp_process_set(op.get_attr("process_set_id")))[0]


def _rank_in(ps):
    """This rank's index in process set ps."""
    return rank() if ps.process_set_id == 0 else _C.process_set_rank(ps.process_set_id)


def _set_size_of(ps):
    """The number of ranks in process set ps."""
    return size() if ps.process_set_id == 0 else _C.process_set_size(ps.process_set_id)


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


@tf.RegisterGradient("HorovodGroupedAllgather")
def _grouped_allgather_grad(op, *grads):
    """Horovod's: each tensor's as allgather's (an allreduce per tensor,
    since TensorFlow may hand float32 zeros for an unused float64 output)."""
    return _my_rows(op, grads, _temp_process_set(op.get_attr("process_set_id")))


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """root_rank's tensor (root_rank numbers the job's ranks, as Horovod's)."""
    root = _process_sets.rank_in_set(process_set, root_rank)
    return MPI_LIB.horovod_broadcast(tensor, name=_op_name("Broadcast", tensor, name),
                                     root_rank=root, ignore_name_scope=ignore_name_scope,
                                     process_set_id=_set_id(process_set))


@tf.RegisterGradient("HorovodBroadcast")
def _broadcast_grad(op, grad):
    """Horovod's: the root gets the average of every rank's gradient, the
    others zeros."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    reduced = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr("ignore_name_scope"),
                         process_set=ps)
    return reduced if _rank_in(ps) == op.get_attr("root_rank") else reduced * 0


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[r] rows (first dimension) of tensor to rank r (equal
    parts when splits is None).  Returns the rows received, in rank order,
    and, as Horovod, when splits was given, also the number of rows
    received from each rank: (output, received_splits)."""
    given = splits is not None
    splits = (tf.cast(tf.convert_to_tensor(splits), tf.int32) if given
              else tf.zeros([0], dtype=tf.int32))
    out, received = MPI_LIB.horovod_alltoall(tensor, splits,
                                             name=_op_name("Alltoall", tensor, name),
                                             ignore_name_scope=ignore_name_scope,
                                             process_set_id=_set_id(process_set))
    out = _with_rows(out, tensor)
    return (out, received) if given else out


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


def _scattered_grads(op, grads):
    """Horovod's reducescatter gradient, for each output: its gradient
    times the set's size for Sum and the scale factors, allgathered (one
    allgather per tensor: the gradients' dtypes may differ)."""
    ps = _temp_process_set(op.get_attr("process_set_id"))
    scale = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if op.get_attr("reduce_op") == Sum:
        scale *= _set_size_of(ps)
    if scale != 1.0:
        grads = [g * tf.cast(scale, g.dtype) for g in grads]
    return [allgather(g, ignore_name_scope=op.get_attr("ignore_name_scope"), process_set=ps)
            for g in grads]


@tf.RegisterGradient("HorovodReducescatter")
def _reducescatter_grad(op, grad):
    return _scattered_grads(op, [grad])[0]


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
    return _scattered_grads(op, grads)


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
