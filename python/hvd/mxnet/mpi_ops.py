"""horovod.mxnet.mpi_ops over hvd: the collectives as operations of
MXNet's engine.

The operations live in _hvd_mx.so (python/_mxnet, C over MXNet's C API),
which calls hvd._C's engine through the table hvd._C._capi: this module
loads the library and hands it the table's address once.  A call pushes
one asynchronous MXNet operation that reads its input NDArrays and writes
its outputs, and returns at once, as Horovod's do: MXNet runs it after the
inputs' earlier writers, and the outputs' readers wait for it.  A
collective that fails (ranks disagree, a peer is lost) fails its MXNet
operation: reading an output (wait_to_read(), asnumpy()) raises MXNetError
with hvd's message, on every rank concerned.  An error the call itself
finds (hvd not initialized, a bad argument) raises MXNetError or
ValueError at once.

allgather and alltoall wait for their operation before they return, as
Horovod's do (their outputs' sizes depend on every rank).
"""
import ctypes
import os
import warnings

import mxnet as mx
import numpy as np
from mxnet.base import MXNetError, c_handle_array

from hvd import _C
from hvd.common import frameworks as _frameworks
from hvd.common import lifecycle as _lifecycle
from hvd.common import process_sets as _process_sets
from hvd.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built,  # noqa: F401
                               gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
                               nccl_built, rocm_built)
from hvd.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                     global_process_set, remove_process_set)

_LIB_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hvd_mx.so")


def _load():
    if not os.path.exists(_LIB_PATH):
        raise ImportError("hvd.mxnet: %s is missing: build hvd with HVD_MXNET_PYTHON pointing "
                          "at a Python that has mxnet (scripts/venv-mxnet.sh)" % _LIB_PATH)
    _frameworks.share_symbols("hvd.mxnet", mx, mx.base._LIB._name)
    try:
        lib = ctypes.CDLL(_LIB_PATH)
    except OSError as e:
        raise _frameworks.load_error("hvd.mxnet", mx, _LIB_PATH, e) from None
    lib.hvd_mx_set_capi.argtypes = [ctypes.c_void_p]
    if lib.hvd_mx_set_capi(_lifecycle.capi_address()) != 0:
        raise ImportError("hvd.mxnet's library does not match this hvd._C (rebuild both from "
                          "one tree)")
    lib.hvd_mx_last_error.restype = ctypes.c_char_p
    lib.hvd_mx_result_rows.restype = ctypes.c_int64
    for fn in ("allreduce", "reducescatter"):
        getattr(lib, "hvd_mx_" + fn).argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
            ctypes.c_double, ctypes.c_double, ctypes.c_int, ctypes.c_int]
    return lib


_LIB = _load()

# ---- reduction ops (Horovod's values) ----
Average = _C.AVERAGE
Sum = _C.SUM
Adasum = _C.ADASUM
Min = _C.MIN
Max = _C.MAX
Product = _C.PRODUCT


def _drain():
    """Before hvd leaves the job: let MXNet's pushed collectives finish."""
    try:
        mx.nd.waitall()
    except MXNetError:
        pass  # a failed collective's error belongs to whoever reads its output


# ---- life cycle and topology ----
init = _lifecycle.init
shutdown = _lifecycle.shutdown
_lifecycle.on_shutdown(_drain)
is_initialized = _C.is_initialized
size = _C.size
rank = _C.rank
local_size = _C.local_size
local_rank = _C.local_rank
cross_size = _C.cross_size
cross_rank = _C.cross_rank
is_homogeneous = _lifecycle.is_homogeneous
start_timeline = _lifecycle.start_timeline
stop_timeline = _lifecycle.stop_timeline


# ---- the calls into the library ----

def _check(rc):
    if rc != 0:
        raise MXNetError(_LIB.hvd_mx_last_error().decode("utf-8", "replace"))


def _name(kind, name, process_set):
    """The tensor's name, after its kind as Horovod's ("allreduce.<name>",
    so that a broadcast and an allgather of one name may be in flight
    together); unnamed calls numbered in call order per process set (here,
    at the call: MXNet may run the operations of different ranks in
    different orders)."""
    if name is None:
        return process_set._auto_name(kind).encode()
    return ("%s.%s" % (kind, name)).encode()


def _resolve_op(op, average):
    """Horovod's average= (deprecated) and op= together; Average by default."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of "
                             "them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed in "
                      "v1.0", DeprecationWarning)
        return Average if average else Sum
    return Average


def _like(tensor, shape=None):
    return mx.nd.empty(tensor.shape if shape is None else shape, ctx=tensor.context,
                       dtype=tensor.dtype)


def _distinct(tensors):
    """In-place groups take each NDArray once (MXNet's engine would wait on
    an operation that writes one twice for itself)."""
    if len({id(t) for t in tensors}) != len(tensors):
        raise ValueError("the same NDArray is given more than once")


def _by_dtype(tensors, name):
    """The indices of tensors per dtype, with each group's name: hvd
    groups one dtype at a time."""
    groups = {}
    for i, t in enumerate(tensors):
        groups.setdefault(np.dtype(t.dtype), []).append(i)
    many = len(groups) > 1
    return [(idx, name if name is None or not many else "%s.%d" % (name, k))
            for k, idx in enumerate(groups.values())]


def _allreduce(ins, outs, name, op, priority, prescale_factor, postscale_factor, process_set):
    set_id = _process_sets.checked_id(process_set)
    for idx, sub in _by_dtype(ins, name):
        _check(_LIB.hvd_mx_allreduce(
            c_handle_array([ins[i] for i in idx]), c_handle_array([outs[i] for i in idx]),
            len(idx), _name("allreduce", sub, process_set), int(op), float(prescale_factor),
            float(postscale_factor), set_id, int(priority)))


def allreduce(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set, op=None):
    """A new NDArray: tensor reduced over the ranks of process_set (op:
    Average by default, Sum, Min, Max, Product, Adasum), inputs multiplied
    by prescale_factor first and the result by postscale_factor."""
    output = _like(tensor)
    _allreduce([tensor], [output], name, _resolve_op(op, average), priority, prescale_factor,
               postscale_factor, process_set)
    return output


def allreduce_(tensor, average=None, name=None, priority=0, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce() into tensor itself; returns tensor."""
    _allreduce([tensor], [tensor], name, _resolve_op(op, average), priority, prescale_factor,
               postscale_factor, process_set)
    return tensor


def grouped_allreduce(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set, op=None):
    """allreduce() of a list of NDArrays as one unit (negotiated and fused
    together; one group per dtype); returns new NDArrays."""
    tensors = list(tensors)
    if not tensors:
        return tensors
    outputs = [_like(t) for t in tensors]
    _allreduce(tensors, outputs, name, _resolve_op(op, average), priority, prescale_factor,
               postscale_factor, process_set)
    return outputs


def grouped_allreduce_(tensors, average=None, name=None, priority=0, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set, op=None):
    """grouped_allreduce() in place; returns tensors."""
    tensors = list(tensors)
    if not tensors:
        return tensors
    _distinct(tensors)
    _allreduce(tensors, tensors, name, _resolve_op(op, average), priority, prescale_factor,
               postscale_factor, process_set)
    return tensors


def _broadcast(tensor, output, root_rank, name, priority, process_set):
    set_id = _process_sets.checked_id(process_set)
    root = _process_sets.rank_in_set(process_set, root_rank)
    _check(_LIB.hvd_mx_broadcast(tensor.handle, output.handle, _name("broadcast", name,
                                                                     process_set),
                                 ctypes.c_int(root), ctypes.c_int(set_id),
                                 ctypes.c_int(int(priority))))
    return output


def broadcast(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """A new NDArray holding root_rank's tensor (root_rank numbers the
    job's ranks, as Horovod's)."""
    return _broadcast(tensor, _like(tensor), root_rank, name, priority, process_set)


def broadcast_(tensor, root_rank, name=None, priority=0, process_set=global_process_set):
    """broadcast() into tensor itself; returns tensor."""
    return _broadcast(tensor, tensor, root_rank, name, priority, process_set)


# ---- allgather and alltoall: outputs sized from every rank's answer ----

def _gathered(tensors, push, after=None):
    """Pushes a gather (push(holder, result)), waits for it, and returns
    its outputs and after(result) (what else the caller reads of it)."""
    holder = mx.nd.empty((1,), dtype=tensors[0].dtype)
    result = ctypes.c_void_p()
    _check(push(holder, ctypes.byref(result)))
    try:
        holder.wait_to_read()
        outputs = []
        for i, t in enumerate(tensors):
            rows = _LIB.hvd_mx_result_rows(result, i)
            out = _like(t, (rows,) + tuple(t.shape[1:]))
            _check(_LIB.hvd_mx_result_copy(result, i, out.handle))
            outputs.append(out)
        return outputs, after(result) if after else None
    finally:
        _LIB.hvd_mx_result_free(result)


def _allgather(tensors, name, priority, process_set):
    for t in tensors:
        if not isinstance(t, mx.nd.NDArray):
            raise ValueError("allgather takes MXNet NDArrays, not %s" % type(t).__name__)
    set_id = _process_sets.checked_id(process_set)
    name = _name("allgather", name, process_set)

    def push(holder, result):
        return _LIB.hvd_mx_allgather(c_handle_array(tensors), len(tensors), holder.handle,
                                     name, set_id, int(priority), result)
    return _gathered(tensors, push)[0]


def allgather(tensor, name=None, priority=0, process_set=global_process_set):
    """Every rank's tensor concatenated along the first dimension, in rank
    order (the first dimensions may differ, the others must agree)."""
    return _allgather([tensor], name, priority, process_set)[0]


def grouped_allgather(tensors, name=None, priority=0, process_set=global_process_set):
    """allgather() of a list of NDArrays of one dtype, negotiated and run
    as one unit."""
    tensors = list(tensors)
    return _allgather(tensors, name, priority, process_set) if tensors else []


def alltoall(tensor, splits=None, name=None, priority=0, process_set=global_process_set):
    """Sends splits[r] rows (first dimension) of tensor to rank r of the
    set (equal parts when splits is None) and returns the rows received,
    in rank order; with splits, also the rows received from each rank (an
    int32 NDArray)."""
    if not isinstance(tensor, mx.nd.NDArray):
        raise ValueError("alltoall takes an MXNet NDArray, not %s" % type(tensor).__name__)
    with_splits = splits is not None
    if splits is None:
        splits = mx.nd.array([], dtype="int32")
    elif not isinstance(splits, mx.nd.NDArray):
        splits = mx.nd.array(splits, dtype="int32")
    set_id = _process_sets.checked_id(process_set)
    n = process_set.size()
    name = _name("alltoall", name, process_set)

    def push(holder, result):
        return _LIB.hvd_mx_alltoall(tensor.handle, splits.handle, holder.handle, name, set_id,
                                    int(priority), result)

    def received(result):
        counts = np.zeros(n, dtype=np.int32)
        _LIB.hvd_mx_result_splits(result, counts.ctypes.data_as(ctypes.c_void_p))
        return counts
    outputs, counts = _gathered([tensor], push, received)
    if with_splits:
        return outputs[0], mx.nd.array(counts, dtype="int32")
    return outputs[0]


# ---- reducescatter: this rank's part of the first dimension ----

def _scatter_shape(tensor, process_set):
    if tensor.shape == ():
        raise ValueError("reducescatter does not support scalar inputs")
    n, r = process_set.size(), process_set.rank()
    dim0 = tensor.shape[0]
    return (dim0 // n + (1 if r < dim0 % n else 0),) + tuple(tensor.shape[1:])


def _reducescatter(tensors, op, name, priority, process_set, prescale_factor,
                   postscale_factor):
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("reducescatter: op must be Average, Sum, Min, Max or Product")
    set_id = _process_sets.checked_id(process_set)
    outputs = [_like(t, _scatter_shape(t, process_set)) for t in tensors]
    for idx, sub in _by_dtype(tensors, name):
        _check(_LIB.hvd_mx_reducescatter(
            c_handle_array([tensors[i] for i in idx]), c_handle_array([outputs[i] for i in idx]),
            len(idx), _name("reducescatter", sub, process_set), int(op), float(prescale_factor),
            float(postscale_factor), set_id, int(priority)))
    return outputs


def reducescatter(tensor, op=Average, name=None, priority=0, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """tensor reduced over the set; rank r keeps its part of the first
    dimension: dim0 // n rows, one more when r < dim0 % n (Horovod's split)."""
    return _reducescatter([tensor], op, name, priority, process_set, prescale_factor,
                          postscale_factor)[0]


def grouped_reducescatter(tensors, op=Average, name=None, priority=0,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter() of a list of NDArrays as one unit."""
    tensors = list(tensors)
    if not tensors:
        return []
    return _reducescatter(tensors, op, name, priority, process_set, prescale_factor,
                          postscale_factor)
