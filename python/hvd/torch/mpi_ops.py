"""horovod.torch's collectives over hvd's engine (CPU and CUDA tensors).

Every collective is enqueued asynchronously on hvd._C and tracked by an
integer handle, as in Horovod: ``poll(handle)`` and ``synchronize(handle)``
take it, and synchronize() returns the operation's output.  The blocking
forms (allreduce, allgather, broadcast, alltoall, reducescatter and the
grouped ones) are autograd functions with Horovod's backward definitions.

Inputs that are not contiguous are reduced from a contiguous copy; the
in-place forms copy the result back.  Exceptions are horovod.torch's:
HorovodInternalError (a RuntimeError) for a collective that fails or that
hvd refuses (ranks that disagree, a lost peer, a deadline, an op a
collective does not support), ValueError for an invalid argument
(a tensor hvd cannot take, a name already in flight, a process set this
rank is not in), NotImplementedError for Adasum over a number of ranks
that is not a power of two or on CUDA tensors.  Ctrl-C in the main
thread interrupts a wait (KeyboardInterrupt); the operation goes on and
its handle stays valid.

The allreduce of one plain contiguous CPU tensor (allreduce_, allreduce,
allreduce_async(_), in the common case) goes through a fast path: one
hvd._C call (python/_C/fast.c), with the same results, names and errors
as the general path; see "the fast path" below for when it applies.

CUDA tensors (docs/gpu.md): allreduce, broadcast and reducescatter pass
the tensor's device memory to the engine with its device ordinal
(hvd_opts.device), which stages it through pinned host memory;
allgather and alltoall go through a host copy (tensor.cpu(), the
collective, the result back on the tensor's device); Adasum is refused.
The engine's copies of a CUDA tensor wait, on the device, for the work
queued on the device's current stream before the call (an event hvd
records there: _stream); neither this thread nor that stream blocks.
"""
import itertools
import os
import warnings

import numpy as np
import torch

from hvd import _C
from hvd.common import lifecycle as _lifecycle
from hvd.common import process_sets as _process_sets
from hvd.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built,  # noqa: F401
                               gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
                               nccl_built, rocm_built)
from hvd.common.exceptions import HorovodInternalError
from hvd.common.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
from hvd.torch.compression import Compression
from hvd.common.compression import NoneCompressor as _NoneCompressor

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank",
    "cross_size", "cross_rank", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "allgather", "allgather_async", "grouped_allgather",
    "grouped_allgather_async", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "alltoall", "alltoall_async", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async", "sparse_allreduce_async", "join",
    "barrier", "poll", "synchronize", "start_timeline", "stop_timeline",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "HorovodInternalError", "mpi_threads_supported", "mpi_enabled", "mpi_built",
    "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built",
    "rocm_built",
]

# ---- reduction ops (the same values as Horovod's) ----
Average = _C.AVERAGE
Sum = _C.SUM
Adasum = _C.ADASUM
Min = _C.MIN
Max = _C.MAX
Product = _C.PRODUCT
_OPS = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
        Product: "Product"}

# ---- life cycle and topology ----
is_initialized = _C.is_initialized
size = _C.size
rank = _C.rank
local_size = _C.local_size
local_rank = _C.local_rank
cross_size = _C.cross_size
cross_rank = _C.cross_rank


init = _lifecycle.init
shutdown = _lifecycle.shutdown
# Dropping the native handles collects the operations the shutdown failed.
_lifecycle.after_shutdown(lambda: _drop_handles())


def start_timeline(file_path, mark_cycles=False):
    """Starts recording a timeline (Chrome trace JSON) of hvd's activity to
    file_path, as HOROVOD_TIMELINE does for a whole run, with its forms:
    rank 0 writes a plain path; with "%r" in it (replaced by the rank) or a
    directory (DIR/rank.N.json) every rank writes its own.  Call it on
    every rank.  A timeline already being recorded is closed
    first.  mark_cycles: also mark the engine's cycles."""
    _C.start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    """Stops recording the timeline and closes its file (valid JSON)."""
    _C.stop_timeline()


# ---- tensors as the native layer sees them ----
_DTYPES = {
    torch.uint8: _C.UINT8, torch.int8: _C.INT8, torch.int16: _C.INT16,
    torch.int32: _C.INT32, torch.int64: _C.INT64, torch.float16: _C.FLOAT16,
    torch.bfloat16: _C.BFLOAT16, torch.float32: _C.FLOAT32, torch.float64: _C.FLOAT64,
    torch.bool: _C.BOOL,
}
_DTYPE_OF_CODE = {code: dtype for dtype, code in _DTYPES.items()}


def _check_tensor(tensor, what):
    """Raises ValueError unless tensor is a dense CPU or CUDA tensor of a
    dtype hvd supports; returns its hvd dtype code."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError("%s: hvd.torch supports CPU and CUDA tensors only, got a tensor on %s"
                         % (what, tensor.device))
    if tensor.layout != torch.strided:
        raise ValueError("%s: %s tensors are not supported (sparse gradients: see "
                         "sparse_allreduce_async)" % (what, tensor.layout))
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise ValueError("%s: tensor type %s is not supported by hvd" % (what, tensor.dtype))
    return code


def _device(tensors, what):
    """The hvd_opts.device of one call on tensors: HVD_DEVICE_CPU (-1) for
    CPU tensors, the CUDA device's ordinal for CUDA tensors.  ValueError
    when they are not all on one device (the engine takes one per call)."""
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ValueError("%s: tensors on %s: one call takes tensors of one device"
                         % (what, ", ".join(sorted(str(d) for d in devices))))
    device = next(iter(devices))
    return _C.DEVICE_CPU if device.type == "cpu" else device.index


def _stream(device):
    """hvd_opts.stream of a call on device: the device's current stream,
    whose queued work (the kernels that produced the tensors, the copies
    this module queued there) the engine's copies wait for on the device
    (an event recorded at the call), as Horovod's ready events do.  0 for
    CPU tensors (unread)."""
    if device == _C.DEVICE_CPU:
        return 0
    return torch.cuda.current_stream(device).cuda_stream


def _refuse_adasum_on_cuda(op, device, what):
    if op == Adasum and device != _C.DEVICE_CPU:
        raise NotImplementedError(
            "%s: Adasum is not supported on CUDA tensors yet (move them to the CPU, or use "
            "Average or Sum; docs/gpu.md)" % what)


def _to_host(tensors):
    """allgather/alltoall of CUDA tensors go through host memory (the engine
    has no device result for them yet): the tensors on the CPU (a copy
    that waits for the current stream), and the device of the results."""
    device = tensors[0].device
    return [t.cpu() for t in tensors], device


def _native(tensor):
    """(address, element count, hvd dtype) of a checked contiguous tensor."""
    return tensor.data_ptr(), tensor.numel(), _DTYPES[tensor.dtype]


def _contiguous(tensor, what):
    _check_tensor(tensor, what)
    return tensor if tensor.is_contiguous() else tensor.contiguous()


# The process-set checks every binding shares (hvd.common.process_sets).
_set_id = _process_sets.checked_id
_set_rank_of = _process_sets.rank_in_set


def _name(name, kind, process_set):
    """The name to enqueue under: the caller's, hvd's generated one (None)
    on the global set, or the set's own generated one (see
    ProcessSet._auto_name)."""
    if name is not None or _set_id(process_set) == 0:
        return name
    return process_set._auto_name(kind)


def _set_size(process_set):
    return size() if _set_id(process_set) == 0 else process_set.size()


def _global_ranks(process_set):
    """Set rank -> job rank, for error messages."""
    return process_set.ranks if _set_id(process_set) != 0 else list(range(size()))


# ---- handles ----
class _Pending:
    """What one integer handle stands for: the native handles to wait for
    (they keep the tensors they use alive), what their waits returned so
    far, and a function turning those results into the operation's
    output."""

    __slots__ = ("natives", "results", "finish", "error")

    def __init__(self, natives, finish):
        self.natives = list(natives)
        self.results = []
        self.finish = finish
        self.error = None

    def poll(self):
        return all(native.poll() for native in self.natives[len(self.results):])

    def wait(self):
        """Waits for the natives not waited yet, in order.  A failure is
        kept for the end (the others must still be waited); Ctrl-C leaves
        the rest for the next wait()."""
        while len(self.results) < len(self.natives):
            native = self.natives[len(self.results)]
            try:
                result = native.wait()
            except HorovodInternalError as e:
                self.error = self.error or e
                result = None
            self.results.append(result)


_pending = {}
_handle_ids = itertools.count(1)


def _register(natives, finish):
    handle = next(_handle_ids)
    _pending[handle] = _Pending(natives, finish)
    return handle


def _drop_handles():
    """At shutdown and elastic reset: the operations of the old job failed
    with it; dropping their handles collects them."""
    _pending.clear()
    _parked.clear()


# ---- the fast path (python/_C/fast.c) ----
# allreduce_, allreduce, allreduce_async(_) of one plain contiguous CPU
# tensor (not requiring grad when out of place), an op other than Adasum,
# int or float scale factors, the global or a registered set, no
# compression: hvd._C checks, enqueues and (blocking forms) waits in one
# call, with no _Pending.  It declines (None) anything else, enqueueing
# nothing, and the general path below runs the call.  _fast_enabled=False
# sends every call the general way (tests compare the two; benchmarks).
_fast = _C.torch_allreduce
_fast_enabled = True
_FAST_IN_PLACE, _FAST_WAIT = _C.FAST_IN_PLACE, _C.FAST_WAIT
# The handles of blocking fast calls that Ctrl-C interrupted (the
# operation goes on: they keep its tensors), as _pending keeps the general
# path's.
_parked = _C.torch_fast_setup((torch.Tensor, torch.nn.Parameter), _DTYPES, torch.strided,
                              global_process_set, _process_sets._registered)
_Native = _C.Handle


def _fast_async(tensor, mode, name, op, prescale_factor, postscale_factor, process_set):
    """An integer handle for a fast asynchronous allreduce, or None."""
    native = _fast(tensor, mode, name, op, prescale_factor, postscale_factor, process_set)
    if native is None:
        return None
    handle = next(_handle_ids)
    _pending[handle] = native
    return handle


def _synchronize_native(handle, native):
    """synchronize() of a fast handle: its wait() returns the output."""
    try:
        output = native.wait()
    except HorovodInternalError:
        del _pending[handle]
        raise
    del _pending[handle]
    return output


class _SparseHandle:
    """What sparse_allreduce_async() returns: as in horovod.torch, calling
    it waits and returns the reduced sparse tensor; poll() and
    synchronize() take it as well."""

    __slots__ = ("_handle", "_finish", "_result")

    def __init__(self, handle, finish):
        self._handle = handle
        self._finish = finish
        self._result = None

    def poll(self):
        return self._result is not None or poll(self._handle)

    def __call__(self):
        if self._result is None:
            self._result = self._finish(synchronize(self._handle))
        return self._result


def poll(handle):
    """True once the operation of handle has completed (then synchronize()
    does not block).  A failed operation counts as completed; synchronize()
    raises its error."""
    if isinstance(handle, _SparseHandle):
        return handle.poll()
    p = _pending.get(handle)
    if p is None:
        raise ValueError("unknown handle %r" % (handle,))
    return p.poll()


def synchronize(handle):
    """Waits for the operation of handle and returns its output (None for
    an unknown handle, as Horovod).  Raises HorovodInternalError with hvd's
    message if it failed.  Ctrl-C raises KeyboardInterrupt and leaves the
    handle pending: synchronize() may be called on it again."""
    if isinstance(handle, _SparseHandle):
        return handle()
    p = _pending.get(handle)
    if p is None:
        return None
    if p.__class__ is _Native:
        return _synchronize_native(handle, p)
    p.wait()
    del _pending[handle]
    if p.error is not None:
        raise p.error
    return p.finish(p.results)


# ---- allreduce ----
def _resolve_op(op, average):
    """Horovod's op/average arguments: op wins, average is deprecated."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning)
        return Average if average else Sum
    if op is None:
        return Average
    if op not in _OPS:
        raise ValueError("unknown reduction op %r (use hvd.Average, Sum, Adasum, Min, Max or "
                         "Product)" % (op,))
    return op


def _check_adasum(process_set):
    n = _set_size(process_set)
    if n & (n - 1):
        raise NotImplementedError("Running Adasum with non-power of 2 ranks is not supported yet.")


def _by_dtype(tensors, name):
    """A grouped call takes one dtype: (name, indices) of each dtype's
    tensors, in order of first appearance (named "<name>.<dtype>" when
    there are several)."""
    by_dtype = {}
    for i, t in enumerate(tensors):
        by_dtype.setdefault(t.dtype, []).append(i)
    for dtype, idx in by_dtype.items():
        sub_name = name
        if name is not None and len(by_dtype) > 1:
            sub_name = "%s.%s" % (name, str(dtype).replace("torch.", ""))
        yield sub_name, idx


def _allreduce_group(tensors, in_place, name, op, prescale_factor, postscale_factor,
                     process_set, grouped):
    """Enqueues an allreduce of tensors (one tensor unless grouped) and
    returns a handle whose output is the reduced tensor (or list).

    In place, results land in the tensors themselves (through a contiguous
    copy when one is not contiguous); otherwise in new tensors.  A grouped
    allreduce of several dtypes becomes one grouped call per dtype."""
    what = "grouped_allreduce" if grouped else "allreduce"
    set_id = _set_id(process_set)
    srcs = [_contiguous(t, what) for t in tensors]
    device = _device(srcs, what)
    _refuse_adasum_on_cuda(op, device, what)
    if op == Adasum:
        _check_adasum(process_set)
    dsts = srcs if in_place else [torch.empty_like(s, memory_format=torch.contiguous_format)
                                  for s in srcs]
    name = _name(name, what, process_set)
    pre, post = float(prescale_factor), float(postscale_factor)
    stream = _stream(device)
    natives = []
    if not grouped:
        src, dst = srcs[0], dsts[0]
        addr, count, code = _native(src)
        natives.append(_C.allreduce_async(addr, dst.data_ptr(), count, tuple(src.shape), code,
                                          op, name, set_id, pre, post, (src, dst), device, stream))
    else:
        for sub_name, idx in _by_dtype(srcs, name):
            natives.append(_C.grouped_allreduce_async(
                [srcs[i].data_ptr() for i in idx], [dsts[i].data_ptr() for i in idx],
                [srcs[i].numel() for i in idx], _DTYPES[srcs[idx[0]].dtype], op, sub_name,
                set_id, pre, post, (tuple(srcs[i] for i in idx), tuple(dsts[i] for i in idx)),
                device, stream))

    def finish(_):
        outputs = dsts
        if in_place:
            for t, s in zip(tensors, srcs):
                if s is not t:
                    t.copy_(s)
            outputs = list(tensors)
        return outputs if grouped else outputs[0]

    return _register(natives, finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing tensor over the processes (op defaults to Average);
    the input is not modified.  Returns a handle for poll()/synchronize(),
    whose output is a new tensor."""
    if _fast_enabled and average is None:
        handle = _fast_async(tensor, 0, name, op, prescale_factor, postscale_factor, process_set)
        if handle is not None:
            return handle
    op = _resolve_op(op, average)
    return _allreduce_group([tensor], False, name, op, prescale_factor, postscale_factor,
                            process_set, grouped=False)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """allreduce_async() in place: the result replaces tensor's values."""
    if _fast_enabled and average is None:
        handle = _fast_async(tensor, _FAST_IN_PLACE, name, op, prescale_factor, postscale_factor,
                             process_set)
        if handle is not None:
            return handle
    op = _resolve_op(op, average)
    return _allreduce_group([tensor], True, name, op, prescale_factor, postscale_factor,
                            process_set, grouped=False)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor in place over the processes and returns it."""
    if _fast_enabled and average is None:
        output = _fast(tensor, _FAST_IN_PLACE | _FAST_WAIT, name, op, prescale_factor,
                       postscale_factor, process_set)
        if output is not None:
            return output
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


class HorovodAllreduce(torch.autograd.Function):
    """allreduce as an autograd function: the gradient is the allreduce of
    the gradient with the same op and scaling."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Returns tensor reduced over the processes (op defaults to Average),
    sent through compression; differentiable."""
    if _fast_enabled and average is None and compression is _NoneCompressor:
        output = _fast(tensor, _FAST_WAIT, name, op, prescale_factor, postscale_factor,
                       process_set)
        if output is not None:
            return output
    op = _resolve_op(op, average)
    compressed, cctx = compression.compress(tensor)
    reduced = HorovodAllreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                                     process_set)
    return compression.decompress(reduced, cctx)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Starts reducing a list of tensors as one unit (negotiated and fused
    together); the output is a list of new tensors."""
    op = _resolve_op(op, average)
    return _allreduce_group(list(tensors), False, name, op, prescale_factor, postscale_factor,
                            process_set, grouped=True)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """grouped_allreduce_async() in place."""
    op = _resolve_op(op, average)
    return _allreduce_group(list(tensors), True, name, op, prescale_factor, postscale_factor,
                            process_set, grouped=True)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors in place as one unit; returns them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class HorovodGroupedAllreduce(torch.autograd.Function):
    """grouped_allreduce as an autograd function."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(
            list(tensors), None, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Returns the list of tensors reduced as one unit; differentiable."""
    op = _resolve_op(op, average)
    tensors = list(tensors)
    if not tensors:
        return []
    compressed, cctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = HorovodGroupedAllreduce.apply(name, op, prescale_factor, postscale_factor,
                                            process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, cctxs)]


def _divide(values, n):
    """values / n, integers rounded toward zero as hvd's Average."""
    if values.is_floating_point():
        return values / n
    return torch.div(values, n, rounding_mode="trunc")


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts reducing a sparse COO tensor over the processes: every rank's
    indices and values are gathered (one grouped allgather), and the
    entries are summed where indices repeat (coalesced); Average then
    divides by the set's size.  Returns a handle: call it (as in
    horovod.torch), or pass it to synchronize(), for the sparse result.
    op: Sum or Average (Horovod treats any other op as Sum)."""
    if op not in (Sum, Average):
        raise ValueError("sparse_allreduce_async: op must be Sum or Average, got %s"
                         % _OPS.get(op, op))
    tensor = tensor.coalesce()
    # Gathering concatenates along the first dimension: the indices go as
    # (nnz, ndim) rows.
    indices = tensor.indices().t().contiguous()
    handle = _grouped_allgather_async([indices, tensor.values()], name, process_set,
                                      "sparse_allreduce")

    def finish(gathered):
        (indices, _), (values, _) = gathered
        result = torch.sparse_coo_tensor(indices.t(), values, tensor.size()).coalesce()
        if op == Sum:
            return result
        n = _set_size(process_set)
        return torch.sparse_coo_tensor(result.indices(), _divide(result.values(), n),
                                       result.size()).coalesce()

    return _SparseHandle(handle, finish)


# ---- allgather and alltoall: framed payloads ----
# hvd's engine checks only element counts, and allgather/alltoall counts
# legitimately differ between ranks.  So each rank sends its tensor as
# bytes behind a small header -- dtype code, number of dimensions, shape,
# as int64 -- padded to 8 bytes.  Every rank receives every sender's header
# (alltoall: each destination gets the sender's header), so all ranks see
# the same dtypes and trailing dimensions, and all raise the same error
# when they differ, as Horovod reports mismatched shapes and types.  This
# costs one collective, plus one copy on each side.
_FRAME_ALIGN = 8


def _frame(tensor, code):
    """A uint8 tensor: the header of tensor, its bytes, padding."""
    header = torch.tensor([code, tensor.dim(), *tensor.shape], dtype=torch.int64)
    data = tensor.contiguous().view(-1).view(torch.uint8)
    pad = -(header.numel() * 8 + data.numel()) % _FRAME_ALIGN
    return torch.cat([header.view(torch.uint8), data, torch.zeros(pad, dtype=torch.uint8)])


def _unframe(raw, counts):
    """Splits received bytes into per-sender (code, shape, data bytes); None
    for a sender that sent nothing (a rank that has joined)."""
    arr = raw.numpy()
    frames, pos = [], 0
    for count in counts:
        if count == 0:
            frames.append(None)
            continue
        code, ndim = (int(v) for v in np.frombuffer(arr, np.int64, 2, pos))
        shape = tuple(int(v) for v in np.frombuffer(arr, np.int64, ndim, pos + 16))
        start = pos + 16 + 8 * ndim
        frames.append((code, shape, raw[start:pos + count]))
        pos += count
    return frames


def _label(what, name, index=None):
    """How errors name a gathered tensor: "allgather 'x'", or tensor i of
    a group "grouped_allgather 'x.1'" (hvd's name for it)."""
    if name is None:
        return what if index is None else "%s tensor %d" % (what, index)
    return "%s '%s'" % (what, name if index is None else "%s.%d" % (name, index))


def _check_frames(frames, label, ranks):
    """Raises HorovodInternalError (on every rank alike) unless all senders
    sent the same dtype and the same dimensions after the first."""
    first = next(r for r, f in enumerate(frames) if f is not None)
    code0, shape0 = frames[first][0], frames[first][1]
    for r, frame in enumerate(frames):
        if frame is None:
            continue
        code, shape, _ = frame
        if code != code0:
            raise HorovodInternalError(
                "%s: mismatched data types: rank %d sent %s, rank %d sent %s"
                % (label, ranks[first], _DTYPE_OF_CODE[code0], ranks[r], _DTYPE_OF_CODE[code]))
        if len(shape) != len(shape0) or shape[1:] != shape0[1:]:
            raise HorovodInternalError(
                "%s: mismatched tensor shapes: rank %d sent %s, rank %d sent %s (all "
                "dimensions but the first must match)"
                % (label, ranks[first], list(shape0), ranks[r], list(shape)))


def _assemble(frames):
    """Concatenates the senders' tensors along the first dimension (a joined
    rank contributes no rows)."""
    code, shape0 = next(f for f in frames if f is not None)[:2]
    rows = [0 if f is None else f[1][0] for f in frames]
    out = torch.empty((sum(rows),) + tuple(shape0[1:]), dtype=_DTYPE_OF_CODE[code])
    out_bytes = out.view(-1).view(torch.uint8)
    pos = 0
    for _, shape, data in (f for f in frames if f is not None):
        nbytes = int(np.prod(shape, dtype=np.int64)) * out.element_size()
        out_bytes[pos:pos + nbytes].copy_(data[:nbytes])
        pos += nbytes
    return out, rows


def _gathered(native, index, counts, label, process_set):
    """Fetches output index of a completed allgather/alltoall and parses
    its frames: (tensor, first dims per sender)."""
    raw = torch.empty(sum(counts), dtype=torch.uint8)
    native.fetch(index, raw.data_ptr())
    frames = _unframe(raw, counts)
    _check_frames(frames, label, _global_ranks(process_set))
    return _assemble(frames)


def _as_rows(tensor):
    """allgather/alltoall work on the first dimension: a scalar is one row."""
    return tensor.reshape(1) if tensor.dim() == 0 else tensor


def _start_allgather(tensors, name, process_set, what, grouped):
    """Enqueues one allgather of tensors, a grouped one if grouped (all
    negotiated and run together).  Returns (native handle, function of its
    result giving a (tensor, first dims per rank) per tensor)."""
    codes = [_check_tensor(t, what) for t in tensors]
    device = None
    if _device(tensors, what) != _C.DEVICE_CPU:
        tensors, device = _to_host(tensors)
    set_id = _set_id(process_set)
    name = _name(name, what, process_set)
    payloads = tuple(_frame(_as_rows(t), code) for t, code in zip(tensors, codes))
    if grouped:
        native = _C.grouped_allgather_async([p.data_ptr() for p in payloads],
                                            [p.numel() for p in payloads], _C.UINT8, name,
                                            set_id, payloads)
    else:
        native = _C.allgather_async(payloads[0].data_ptr(), payloads[0].numel(), _C.UINT8, name,
                                    set_id, payloads)

    def finish(counts_per_tensor):
        gathered = [_gathered(native, i, counts, _label(what, name, i if grouped else None),
                              process_set)
                    for i, counts in enumerate(counts_per_tensor)]
        return gathered if device is None else [(t.to(device), rows) for t, rows in gathered]

    return native, finish


def _allgather_async(tensor, name, process_set):
    """A handle whose output is (gathered tensor, first dims per rank)."""
    native, finish = _start_allgather([tensor], name, process_set, "allgather", False)
    return _register([native], lambda results: finish(results[0])[0])


def _grouped_allgather_async(tensors, name, process_set, what="grouped_allgather"):
    """A handle whose output is a (gathered tensor, first dims per rank)
    per tensor."""
    native, finish = _start_allgather(list(tensors), name, process_set, what, True)
    return _register([native], lambda results: finish(results[0]))


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating tensor with the other processes' along the
    first dimension (which may differ between ranks; the others must not).
    Returns a handle; its output is the concatenated tensor."""
    native, finish = _start_allgather([tensor], name, process_set, "allgather", False)
    return _register([native], lambda results: finish(results[0])[0][0])


def _set_rank(process_set):
    return process_set.rank() if _set_id(process_set) else rank()


class HorovodAllgather(torch.autograd.Function):
    """allgather as an autograd function: the gradient is the average of
    the gradients over the set, narrowed to this rank's rows (Horovod's)."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.process_set = process_set
        ctx.input_shape = tensor.shape
        output, rows = synchronize(_allgather_async(tensor, name, process_set))
        my = _set_rank(process_set)
        ctx.offset, ctx.rows = sum(rows[:my]), rows[my]
        return output

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        return grad.narrow(0, ctx.offset, ctx.rows).reshape(ctx.input_shape), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Returns tensor concatenated with the other processes' along the
    first dimension; differentiable."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts gathering a list of tensors as one unit (negotiated and run
    together), each as allgather_async() gathers it (first dimensions may
    differ between ranks; dtypes between tensors).  The handle's output is
    the list of gathered tensors."""
    native, finish = _start_allgather(list(tensors), name, process_set, "grouped_allgather",
                                      True)
    return _register([native], lambda results: [t for t, _ in finish(results[0])])


class HorovodGroupedAllgather(torch.autograd.Function):
    """grouped_allgather as an autograd function: each tensor's gradient is
    what allgather's would be, the average of the gradients over the set
    narrowed to this rank's rows (one grouped allreduce)."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.process_set = process_set
        ctx.input_shapes = [t.shape for t in tensors]
        gathered = synchronize(_grouped_allgather_async(tensors, name, process_set))
        my = _set_rank(process_set)
        ctx.spans = [(sum(rows[:my]), rows[my]) for _, rows in gathered]
        return tuple(t for t, _ in gathered)

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        return (None, None, *[g.narrow(0, start, rows).reshape(shape)
                              for g, (start, rows), shape
                              in zip(grads, ctx.spans, ctx.input_shapes)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Returns the list of tensors each concatenated with the other
    processes' along the first dimension, gathered as one unit;
    differentiable."""
    tensors = list(tensors)
    if not tensors:
        return []
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


def _splits_list(splits, rows, n):
    """alltoall's splits (rows to send to each rank) as a list of ints."""
    if splits is None:
        if rows % n:
            raise ValueError("alltoall: the first dimension (%d) must be divisible by the number "
                             "of processes (%d) when splits is not given" % (rows, n))
        return [rows // n] * n
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    splits = [int(s) for s in splits]
    if len(splits) != n:
        raise ValueError("alltoall: splits has %d entries for %d processes" % (len(splits), n))
    if any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError("alltoall: splits %s must be non-negative and sum to the first "
                         "dimension (%d)" % (splits, rows))
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts sending splits[r] rows of tensor (the first dimension; equal
    parts without splits) to each rank r and receiving theirs.  The
    handle's output is (received tensor, received splits as int32)."""
    code = _check_tensor(tensor, "alltoall")
    device = None
    if tensor.device.type == "cuda":
        (tensor,), device = _to_host([tensor])
    set_id = _set_id(process_set)
    tensor = _as_rows(tensor)
    n = _set_size(process_set)
    splits = _splits_list(splits, tensor.shape[0], n)
    name = _name(name, "alltoall", process_set)
    frames = [_frame(part, code) for part in torch.split(tensor, splits)]
    payload = torch.cat(frames)
    native = _C.alltoall_async(payload.data_ptr(), [f.numel() for f in frames], _C.UINT8, name,
                               set_id, (payload,))

    def finish(results):
        output, rows = _gathered(native, 0, results[0][0], _label("alltoall", name), process_set)
        if device is not None:
            output = output.to(device)
        return output, torch.tensor(rows, dtype=torch.int32)

    return _register([native], finish)


class HorovodAlltoall(torch.autograd.Function):
    """alltoall as an autograd function: the gradient goes back with an
    alltoall using the received splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received_splits = received_splits
        ctx.input_shape = tensor.shape
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output, splits=ctx.received_splits, process_set=ctx.process_set)
        return grad.reshape(ctx.input_shape), None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters rows of tensor to the processes and gathers theirs;
    differentiable.  Returns the received tensor, and with splits given
    also the received splits (int32), as Horovod."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# ---- broadcast ----
def _broadcast_async(tensor, in_place, root_rank, name, process_set):
    _check_tensor(tensor, "broadcast")
    set_id = _set_id(process_set)
    root = _set_rank_of(process_set, root_rank)
    name = _name(name, "broadcast", process_set)
    if in_place:
        buf = tensor if tensor.is_contiguous() else tensor.contiguous()
    else:
        buf = tensor.clone(memory_format=torch.contiguous_format)
    addr, count, code = _native(buf)
    device = _device([buf], "broadcast")
    stream = _stream(device)
    native = _C.broadcast_async(addr, count, tuple(buf.shape), code, root, name, set_id, (buf,),
                                device, stream)

    def finish(_):
        if in_place and buf is not tensor:
            tensor.copy_(buf)
            return tensor
        return buf

    return _register([native], finish)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting root_rank's tensor (root_rank in the job's
    numbering); the input is not modified.  The handle's output is a new
    tensor."""
    return _broadcast_async(tensor, False, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast_async() in place."""
    return _broadcast_async(tensor, True, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites tensor with root_rank's and returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class HorovodBroadcast(torch.autograd.Function):
    """broadcast as an autograd function: the gradient is the average of the
    gradients over the set on the root, zero elsewhere (Horovod's)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor on every process; differentiable."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


# ---- reducescatter ----
# hvd splits a reducescatter's elements, Horovod splits rows: rank r of n
# gets dim0 // n rows, one more if r < dim0 % n.  Rows that do not divide
# evenly are padded with zero rows so that every rank's block has
# ceil(dim0 / n) rows, of which each rank keeps its own.
def _scatter_input(src, n, what, name):
    """(what to send, rows hvd leaves on each rank) for tensor src."""
    if src.dim() == 0:
        raise HorovodInternalError("%s: a scalar (zero-dimensional tensor) cannot be scattered"
                                   % _label(what, name))
    dim0 = src.shape[0]
    if dim0 % n == 0:
        return src, dim0 // n
    block = -(-dim0 // n)
    padded = src.new_zeros((n * block,) + tuple(src.shape[1:]))
    for r, part in enumerate(torch.split(src, _scatter_rows(dim0, n))):
        padded[r * block:r * block + part.shape[0]] = part
    return padded, block


def _scatter_rows(dim0, n):
    """Horovod's split of dim0 rows over n ranks."""
    return [dim0 // n + (1 if r < dim0 % n else 0) for r in range(n)]


def _reducescatter_group(tensors, name, op, process_set, prescale_factor, postscale_factor,
                         grouped):
    """Enqueues a reducescatter of tensors (one tensor unless grouped: then
    one grouped call per dtype) and returns a handle whose output is this
    rank's part (or the list of them)."""
    what = "grouped_reducescatter" if grouped else "reducescatter"
    if op not in _OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    set_id = _set_id(process_set)
    n = _set_size(process_set)
    me = _set_rank(process_set)
    name = _name(name, what, process_set)
    pre, post = float(prescale_factor), float(postscale_factor)
    srcs, blocks = zip(*[_scatter_input(_contiguous(t, what), n, what, name) for t in tensors])
    recvs = [s.new_empty((b,) + tuple(s.shape[1:])) for s, b in zip(srcs, blocks)]
    device = _device(srcs, what)
    stream = _stream(device)
    natives = []
    if not grouped:
        src, recv = srcs[0], recvs[0]
        addr, count, code = _native(src)
        natives.append(_C.reducescatter_async(addr, recv.data_ptr(), count, tuple(src.shape),
                                              code, op, name, set_id, pre, post, (src, recv),
                                              device, stream))
    else:
        for sub_name, idx in _by_dtype(srcs, name):
            natives.append(_C.grouped_reducescatter_async(
                [srcs[i].data_ptr() for i in idx], [recvs[i].data_ptr() for i in idx],
                [srcs[i].numel() for i in idx], _DTYPES[srcs[idx[0]].dtype], op, sub_name,
                set_id, pre, post, (tuple(srcs[i] for i in idx), tuple(recvs[i] for i in idx)),
                device, stream))
    mine = [recv[:_scatter_rows(t.shape[0], n)[me]] for t, recv in zip(tensors, recvs)]
    return _register(natives, lambda _: mine if grouped else mine[0])


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing tensor over the processes and scattering the result
    along the first dimension: rank r of n gets dim0 // n rows, one more if
    r < dim0 % n (Horovod's split).  The handle's output is this rank's
    part."""
    return _reducescatter_group([tensor], name, op, process_set, prescale_factor,
                                postscale_factor, grouped=False)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducescatter_async() of a list of tensors as one unit
    (negotiated and run together); the output is the list of this rank's
    parts."""
    return _reducescatter_group(list(tensors), name, op, process_set, prescale_factor,
                                postscale_factor, grouped=True)


def _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor):
    """What Horovod multiplies a reducescatter's output gradient by before
    allgathering it: the set's size for Sum (1 for Average), and the scale
    factors."""
    scale = float(prescale_factor) * float(postscale_factor)
    return scale * _set_size(process_set) if op == Sum else scale


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter as an autograd function, with Horovod's gradient: the
    allgather of the output gradient, multiplied by the set's size for Sum
    and by the scale factors."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = process_set
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.scale != 1.0:
            grad_output = grad_output * ctx.scale
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Returns this rank's part of tensor reduced over the processes and
    split along the first dimension; differentiable."""
    compressed, cctx = compression.compress(tensor)
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, cctx)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """grouped_reducescatter as an autograd function: each gradient is what
    reducescatter's would be (one grouped allgather)."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.process_set = process_set
        ctx.scale = _reducescatter_grad_scale(op, process_set, prescale_factor, postscale_factor)
        return tuple(synchronize(grouped_reducescatter_async(
            tensors, name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        if ctx.scale != 1.0:
            grad_outputs = [g * ctx.scale for g in grad_outputs]
        grads = grouped_allgather(grad_outputs, process_set=ctx.process_set)
        return (None, None, None, None, None, *grads)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Returns the list of this rank's parts of tensors reduced and
    scattered as one unit; differentiable."""
    tensors = list(tensors)
    if not tensors:
        return []
    compressed, cctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, cctxs)]


# ---- join and barrier ----
def join(device=-1):
    """Declares that this rank has no more data: until every rank has
    joined, it takes part in the others' collectives (contributing zeros to
    allreduce).  Returns the rank that joined last.  device is accepted for
    Horovod's signature and not needed: a joined rank stands in with host
    memory, which the engine does not do yet for CUDA tensors (their
    collectives fail while a rank has joined; docs/gpu.md)."""
    del device
    return _C.join()


def barrier(process_set=global_process_set):
    """Returns once every rank of process_set has called it."""
    if _set_id(process_set) == 0:
        _C.barrier()
        return
    token = torch.zeros(1, dtype=torch.int32)
    synchronize(allreduce_async_(token, name=_name(None, "barrier", process_set), op=Sum,
                                 process_set=process_set))
