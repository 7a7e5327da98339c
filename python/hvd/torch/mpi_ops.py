"""horovod.torch's collectives over hvd's engine (CPU tensors).

Every collective is enqueued asynchronously on hvd._C and tracked by an
integer handle, as in Horovod: ``poll(handle)`` and ``synchronize(handle)``
take it, and synchronize() returns the operation's output.  The blocking
forms (allreduce, allgather, broadcast, alltoall, reducescatter) are
autograd functions with Horovod's backward definitions.

Inputs that are not contiguous are reduced from a contiguous copy; the
in-place forms copy the result back.  Failures of the engine (ranks that
disagree, a lost peer, a deadline) raise HorovodInternalError with hvd's
message; invalid requests raise ValueError.
"""
import itertools
import warnings

import numpy as np
import torch

from hvd import _C
from hvd.common import process_sets as _process_sets
from hvd.common.exceptions import HorovodInternalError
from hvd.common.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
from hvd.torch.compression import Compression

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank",
    "cross_size", "cross_rank", "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "allgather", "allgather_async", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "alltoall", "alltoall_async", "reducescatter",
    "reducescatter_async", "sparse_allreduce_async", "join", "barrier", "poll", "synchronize",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "HorovodInternalError", "mpi_built", "gloo_built", "nccl_built", "ddl_built", "ccl_built",
    "cuda_built", "rocm_built",
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


def init(comm=None, process_sets=None):
    """Joins the job started by hvdrun (a job of one process without it).

    process_sets: ProcessSet objects to register now (every rank passes the
    same list), or "dynamic"/None.  comm must be None: hvd does not use MPI.
    Calling init() again is harmless."""
    if comm is not None:
        raise ValueError("hvd.init(comm=...) is not supported: hvd does not use MPI; "
                         "start the job with hvdrun")
    _C.init()
    _process_sets._setup(process_sets)


def shutdown():
    """Leaves the job; init() may be called again afterwards."""
    _C.shutdown()
    # Dropping the native handles collects operations the shutdown failed.
    _pending.clear()
    _process_sets._teardown()


# What hvd was built with, as horovod.torch reports it: none of these
# backends exists in hvd (its own TCP transport does the work).
def mpi_built():
    return False


def gloo_built():
    return False


def nccl_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


# ---- tensors as the native layer sees them ----
_DTYPES = {
    torch.uint8: _C.UINT8, torch.int8: _C.INT8, torch.int16: _C.INT16,
    torch.int32: _C.INT32, torch.int64: _C.INT64, torch.float16: _C.FLOAT16,
    torch.bfloat16: _C.BFLOAT16, torch.float32: _C.FLOAT32, torch.float64: _C.FLOAT64,
    torch.bool: _C.BOOL,
}
_DTYPE_OF_CODE = {code: dtype for dtype, code in _DTYPES.items()}


def _check_tensor(tensor, what):
    """Raises ValueError unless tensor is a dense CPU tensor of a dtype hvd
    supports; returns its hvd dtype code."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError("%s: expected a torch.Tensor, got %s" % (what, type(tensor).__name__))
    if tensor.device.type != "cpu":
        raise ValueError("%s: hvd.torch supports CPU tensors only, got a tensor on %s"
                         % (what, tensor.device))
    if tensor.layout != torch.strided:
        raise ValueError("%s: %s tensors are not supported (sparse gradients: see "
                         "sparse_allreduce_async)" % (what, tensor.layout))
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise ValueError("%s: tensor type %s is not supported by hvd" % (what, tensor.dtype))
    return code


def _native(tensor):
    """(address, element count, hvd dtype) of a checked contiguous tensor."""
    return tensor.data_ptr(), tensor.numel(), _DTYPES[tensor.dtype]


def _contiguous(tensor, what):
    _check_tensor(tensor, what)
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _set_id(process_set):
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet, got %s" % type(process_set).__name__)
    if process_set.process_set_id is None:
        raise ValueError("%s is not registered: add it with hvd.add_process_set() or "
                         "hvd.init(process_sets=[...])" % process_set)
    return process_set.process_set_id


def _name(name, kind, process_set):
    """The name to enqueue under: the caller's, hvd's generated one (None)
    on the global set, or the set's own generated one (see
    ProcessSet._auto_name)."""
    if name is not None or _set_id(process_set) == 0:
        return name
    return process_set._auto_name(kind)


def _set_size(process_set):
    return size() if _set_id(process_set) == 0 else process_set.size()


def _set_rank_of(process_set, root_rank):
    """root_rank (job numbering, as Horovod's) as a rank within the set."""
    if _set_id(process_set) == 0:
        return int(root_rank)
    try:
        return process_set.ranks.index(int(root_rank))
    except ValueError:
        raise ValueError("root_rank %d is not a member of %s" % (root_rank, process_set)) from None


def _global_ranks(process_set):
    """Set rank -> job rank, for error messages."""
    return process_set.ranks if _set_id(process_set) != 0 else list(range(size()))


# ---- handles ----
class _Pending:
    """What one integer handle stands for: the native handles to wait for
    (they keep the tensors they use alive) and a function turning their
    results into the operation's output."""

    __slots__ = ("natives", "finish", "error")

    def __init__(self, natives, finish):
        self.natives = list(natives)
        self.finish = finish
        self.error = None


_pending = {}
_handle_ids = itertools.count(1)


def _register(natives, finish):
    handle = next(_handle_ids)
    _pending[handle] = _Pending(natives, finish)
    return handle


def poll(handle):
    """True once the operation of handle has completed (then synchronize()
    does not block).  A failed operation counts as completed; synchronize()
    raises its error."""
    p = _pending.get(handle)
    if p is None:
        raise ValueError("unknown handle %r" % (handle,))
    for native in list(p.natives):
        try:
            if not native.poll():
                return False
        except HorovodInternalError as e:
            # The native handle is released by the failure: never wait on it.
            p.natives.remove(native)
            p.error = p.error or e
    return True


def synchronize(handle):
    """Waits for the operation of handle and returns its output (None for
    an unknown handle, as Horovod).  Raises HorovodInternalError with hvd's
    message if it failed."""
    p = _pending.pop(handle, None)
    if p is None:
        return None
    results, error = [], p.error
    for native in p.natives:
        try:
            results.append(native.wait())
        except HorovodInternalError as e:
            error = error or e
            results.append(None)
    if error is not None:
        raise error
    return p.finish(results)


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


def _allreduce_group(tensors, in_place, name, op, prescale_factor, postscale_factor,
                     process_set, grouped):
    """Enqueues an allreduce of tensors (one tensor unless grouped) and
    returns a handle whose output is the reduced tensor (or list).

    In place, results land in the tensors themselves (through a contiguous
    copy when one is not contiguous); otherwise in new tensors.  A grouped
    allreduce of several dtypes becomes one grouped call per dtype."""
    what = "grouped_allreduce" if grouped else "allreduce"
    set_id = _set_id(process_set)
    if op == Adasum:
        _check_adasum(process_set)
    srcs = [_contiguous(t, what) for t in tensors]
    dsts = srcs if in_place else [torch.empty_like(s, memory_format=torch.contiguous_format)
                                  for s in srcs]
    name = _name(name, what, process_set)
    pre, post = float(prescale_factor), float(postscale_factor)
    natives = []
    if not grouped:
        src, dst = srcs[0], dsts[0]
        addr, count, code = _native(src)
        natives.append(_C.allreduce_async(addr, dst.data_ptr(), count, code, op, name, set_id,
                                          pre, post, (src, dst)))
    else:
        by_dtype = {}
        for i, s in enumerate(srcs):
            by_dtype.setdefault(s.dtype, []).append(i)
        for dtype, idx in by_dtype.items():
            sub_name = name
            if name is not None and len(by_dtype) > 1:
                sub_name = "%s.%s" % (name, str(dtype).replace("torch.", ""))
            natives.append(_C.grouped_allreduce_async(
                [srcs[i].data_ptr() for i in idx], [dsts[i].data_ptr() for i in idx],
                [srcs[i].numel() for i in idx], _DTYPES[dtype], op, sub_name, set_id, pre, post,
                (tuple(srcs[i] for i in idx), tuple(dsts[i] for i in idx))))

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
    op = _resolve_op(op, average)
    return _allreduce_group([tensor], False, name, op, prescale_factor, postscale_factor,
                            process_set, grouped=False)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """allreduce_async() in place: the result replaces tensor's values."""
    op = _resolve_op(op, average)
    return _allreduce_group([tensor], True, name, op, prescale_factor, postscale_factor,
                            process_set, grouped=False)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor in place over the processes and returns it."""
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


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse COO tensor by allgathering its indices and values
    (Sum, or Average dividing the values by the set size).  Returns a
    handle whose output is a sparse tensor of the same size."""
    tensor = tensor.coalesce()
    # allgather concatenates along the first dimension, so the indices go
    # as (nnz, ndim) rows.
    indices, finish_indices = _start_allgather(
        tensor.indices().t().contiguous(), None if name is None else "%s.indices" % name,
        process_set)
    values, finish_values = _start_allgather(
        tensor.values(), None if name is None else "%s.values" % name, process_set)

    def finish(results):
        gathered_indices = finish_indices(results[0])[0]
        gathered_values = finish_values(results[1])[0]
        if op == Average:
            gathered_values = gathered_values / _set_size(process_set)
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, tensor.size())

    return _register([indices, values], finish)


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


def _check_frames(frames, what, name, process_set):
    """Raises HorovodInternalError (on every rank alike) unless all senders
    sent the same dtype and the same dimensions after the first."""
    ranks = _global_ranks(process_set)
    first = next(r for r, f in enumerate(frames) if f is not None)
    code0, shape0 = frames[first][0], frames[first][1]
    for r, frame in enumerate(frames):
        if frame is None:
            continue
        code, shape, _ = frame
        label = "%s '%s'" % (what, name) if name else what
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


def _gathered(native_result, native, what, name, process_set):
    """Fetches a completed allgather/alltoall and parses its frames."""
    counts = native_result
    raw = torch.empty(sum(counts), dtype=torch.uint8)
    native.fetch(raw.data_ptr())
    frames = _unframe(raw, counts)
    _check_frames(frames, what, name, process_set)
    return _assemble(frames)


def _as_rows(tensor):
    """allgather/alltoall work on the first dimension: a scalar is one row."""
    return tensor.reshape(1) if tensor.dim() == 0 else tensor


def _start_allgather(tensor, name, process_set):
    """Enqueues an allgather: (native handle, function of its result
    giving (tensor, first dims per rank))."""
    code = _check_tensor(tensor, "allgather")
    set_id = _set_id(process_set)
    name = _name(name, "allgather", process_set)
    payload = _frame(_as_rows(tensor), code)
    native = _C.allgather_async(payload.data_ptr(), payload.numel(), _C.UINT8, name, set_id,
                                (payload,))
    return native, lambda result: _gathered(result, native, "allgather", name, process_set)


def _allgather_async(tensor, name, process_set):
    """A handle whose output is (gathered tensor, first dims per rank)."""
    native, finish = _start_allgather(tensor, name, process_set)
    return _register([native], lambda results: finish(results[0]))


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating tensor with the other processes' along the
    first dimension (which may differ between ranks; the others must not).
    Returns a handle; its output is the concatenated tensor."""
    native, finish = _start_allgather(tensor, name, process_set)
    return _register([native], lambda results: finish(results[0])[0])


class HorovodAllgather(torch.autograd.Function):
    """allgather as an autograd function: the gradient is the average of
    the gradients over the set, narrowed to this rank's rows (Horovod's)."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.process_set = process_set
        ctx.input_shape = tensor.shape
        output, rows = synchronize(_allgather_async(tensor, name, process_set))
        my = process_set.rank() if _set_id(process_set) else rank()
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
        output, rows = _gathered(results[0], native, "alltoall", name, process_set)
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
    native = _C.broadcast_async(addr, count, code, root, name, set_id, (buf,))

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
def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing tensor over the processes and scattering the result
    along the first dimension: rank r of n gets dim0 // n rows, one more if
    r < dim0 % n (Horovod's split).  The handle's output is this rank's
    part."""
    if op not in _OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    src = _contiguous(tensor, "reducescatter")
    if src.dim() == 0:
        raise ValueError("reducescatter: the tensor needs at least one dimension")
    set_id = _set_id(process_set)
    n = _set_size(process_set)
    me = process_set.rank() if set_id else rank()
    dim0 = src.shape[0]
    rows = dim0 // n + (1 if me < dim0 % n else 0)
    if dim0 % n:
        # hvd splits elements, Horovod splits rows: give every rank a block
        # of ceil(dim0 / n) rows (zero-padded), then keep this rank's rows.
        block = -(-dim0 // n)
        padded = src.new_zeros((n * block,) + tuple(src.shape[1:]))
        start = 0
        for r in range(n):
            r_rows = dim0 // n + (1 if r < dim0 % n else 0)
            padded[r * block:r * block + r_rows] = src[start:start + r_rows]
            start += r_rows
        src, recv_rows = padded, block
    else:
        recv_rows = rows
    recv = src.new_empty((recv_rows,) + tuple(src.shape[1:]))
    addr, count, code = _native(src)
    name = _name(name, "reducescatter", process_set)
    native = _C.reducescatter_async(addr, recv.data_ptr(), count, code, op, name, set_id,
                                    float(prescale_factor), float(postscale_factor), (src, recv))
    return _register([native], lambda _: recv[:rows])


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter as an autograd function: the gradient is the allgather
    of the parts' gradients, scaled as the forward scaled its inputs."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = process_set
        ctx.scale = float(prescale_factor) * float(postscale_factor)
        if op == Average:
            ctx.scale /= _set_size(process_set)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allgather(grad_output, process_set=ctx.process_set)
        if ctx.scale != 1.0:
            grad = grad * ctx.scale
        return grad, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Returns this rank's part of tensor reduced over the processes and
    split along the first dimension; differentiable."""
    compressed, cctx = compression.compress(tensor)
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, cctx)


# ---- join and barrier ----
def join(device=-1):
    """Declares that this rank has no more data: until every rank has
    joined, it takes part in the others' collectives (contributing zeros to
    allreduce).  Returns the rank that joined last.  device is accepted for
    Horovod's signature; hvd works on the CPU."""
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
