"""Horovod's collectives for JAX arrays, eagerly and under jax.jit.

Each collective is one XLA custom call (python/_jax) that enqueues its
tensors on hvd's engine and waits for them, so it runs the same in an
eager script and inside a jitted, differentiated training step.  Arrays
have static shapes under XLA, so under jit allgather and alltoall take
equal shapes on every rank; eagerly they exchange the shapes first and
take Horovod's unequal ones (see docs/jax.md).

Names match tensors across ranks, as in every binding: a call without a
name gets "jax.<op>.<n>" from a counter advanced when the call is traced
(once per jit compilation, every eager call), so ranks that run the same
program name their collectives alike.  allreduce and broadcast take a
pytree: its leaves are enqueued together (fused by the engine) and named
"<name>.<i>".
"""
import functools
import itertools
import os

import jax
import jax.numpy as jnp
import numpy as np

from hvd import _C
from hvd.common import lifecycle as _lifecycle
from hvd.common.basics import (ccl_built, cuda_built, ddl_built, gloo_built,  # noqa: F401
                               gloo_enabled, mpi_built, mpi_enabled, mpi_threads_supported,
                               nccl_built, rocm_built)
from hvd.common.exceptions import HorovodInternalError  # noqa: F401
from hvd.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401
                                     global_process_set, remove_process_set)
from hvd.jax import _ffi

# ---- reduction ops (Horovod's values) ----
Average = _C.AVERAGE
Sum = _C.SUM
Adasum = _C.ADASUM
Min = _C.MIN
Max = _C.MAX
Product = _C.PRODUCT
_OPS = (Average, Sum, Adasum, Min, Max, Product)

# ---- life cycle and topology ----
is_initialized = _C.is_initialized
size = _C.size
rank = _C.rank
local_size = _C.local_size
local_rank = _C.local_rank
cross_size = _C.cross_size
cross_rank = _C.cross_rank

def init(comm=None, process_sets=None):
    """Joins the job its launcher started (hvdrun, mpirun, srun; alone
    without one), as hvd.torch.init: comm is None, a list of ranks or an
    mpi4py communicator; process_sets a list of ProcessSet to register.
    shutdown() runs at exit."""
    _lifecycle.init(comm, process_sets)


shutdown = _lifecycle.shutdown


def join():
    """Horovod's join: this rank has no more data; returns the rank that
    joined last."""
    return _C.join()


def start_timeline(file_path, mark_cycles=False):
    """Records a timeline of hvd's activity (see hvd.torch.start_timeline)."""
    _C.start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    _C.stop_timeline()


# ---- names, sets, shapes ----
_unnamed = itertools.count()


_set_id = _lifecycle.set_id
_set_size = _lifecycle.set_size
_set_rank = _lifecycle.set_rank
_set_rank_of = _lifecycle.set_rank_of


def _name(name, kind, process_set):
    """The caller's name, or one from a counter advanced at trace time (a
    non-global set's own counter, which only its members advance)."""
    if name is not None:
        return str(name)
    if _set_id(process_set) != 0:
        return "jax." + process_set._auto_name(kind)
    return "jax.%s.%d" % (kind, next(_unnamed))


def _spec(x):
    return jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x))


def _arrays(leaves):
    return [x if isinstance(x, (jax.Array, jax.core.Tracer)) else jnp.asarray(x)
            for x in leaves]


def _is_float(x):
    return jnp.issubdtype(jnp.result_type(x), jnp.inexact)


def _zero_cotangent(x):
    """The cotangent of an integer input (JAX's float0)."""
    return np.zeros(jnp.shape(x), dtype=jax.dtypes.float0)


def _eager_or(differentiable, x, spec):
    """differentiable(x, spec), a custom_vjp function, or its primal
    directly when nothing traces x: an eager call then skips tracing the
    custom_vjp (milliseconds per call)."""
    if _ffi.is_traced(jax.tree.leaves(x)):
        return differentiable(x, spec)
    return differentiable.fun(x, spec)


# ---- allreduce ----
def _allreduce_call(leaves, name, op, pre, post, set_id, grouped):
    return tuple(_ffi.call("allreduce", [_spec(x) for x in leaves], list(leaves), name=name,
                           op=np.int32(op), prescale=float(pre), postscale=float(post),
                           process_set=np.int32(set_id), grouped=np.int32(grouped)))


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _allreduce_p(leaves, spec):
    return _allreduce_call(leaves, *spec)


def _allreduce_fwd(leaves, spec):
    return _allreduce_p(leaves, spec), tuple(_spec(x) for x in leaves)


def _allreduce_bwd(spec, shapes, grads):
    """Horovod's gradient: the same allreduce of the output gradients
    (exactly the gradient of the sum of every rank's loss)."""
    name, op, pre, post, set_id, grouped = spec
    if op not in (Average, Sum):
        raise NotImplementedError("hvd.jax: allreduce '%s' with op %s has no gradient "
                                  "(Average and Sum do)" % (name, op))
    idx = [i for i, s in enumerate(shapes) if jnp.issubdtype(s.dtype, jnp.inexact)]
    out = [_zero_cotangent(s) for s in shapes]
    if idx:
        reduced = _allreduce_call([grads[i] for i in idx], name + ".grad", op, pre, post,
                                  set_id, grouped)
        for i, g in zip(idx, reduced):
            out[i] = g
    return (tuple(out),)


_allreduce_p.defvjp(_allreduce_fwd, _allreduce_bwd)


def _allreduce_tree(tree, name, op, prescale_factor, postscale_factor, process_set, grouped,
                    kind):
    if op is None:
        op = Average
    if op not in _OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    leaves, treedef = jax.tree.flatten(tree)
    if not leaves:
        return tree
    set_id = _set_id(process_set)
    spec = (_name(name, kind, process_set), int(op), float(prescale_factor),
            float(postscale_factor), set_id, int(grouped))
    return jax.tree.unflatten(treedef, list(_eager_or(_allreduce_p, tuple(_arrays(leaves)),
                                                      spec)))


# ---- the fast path (python/_C/fast.c's eager_allreduce) ----
# allreduce() of one concrete array on the CPU (one device, not traced:
# outside jit, grad, vmap...), on the global set without compression:
# its buffer, as numpy's zero-copy view, is reduced into a new array in
# one C call that enqueues and waits with the GIL released, and the result
# is put on the array's device (committed as the array is; not under a
# transfer guard, which would see these transfers): a few us where
# the custom call's eager dispatch costs hundreds (issue 46).  Its name is
# the general path's (_name(): the same counter, advanced once), so the
# ranks of a job pair whichever path each takes, and the results are bit
# for bit the custom call's; failures raise HorovodInternalError as it
# does.  Anything else is declined, nothing enqueued, and the general path
# runs under the name already drawn.  _fast_enabled=False sends every call
# the general way (tests compare the two; benchmarks).
_fast_enabled = True
_NP_DTYPES = {np.dtype(t): c for t, c in (
    (jnp.uint8, _C.UINT8), (jnp.int8, _C.INT8), (jnp.uint16, _C.UINT16), (jnp.int16, _C.INT16),
    (jnp.int32, _C.INT32), (jnp.int64, _C.INT64), (jnp.float16, _C.FLOAT16),
    (jnp.bfloat16, _C.BFLOAT16), (jnp.float32, _C.FLOAT32), (jnp.float64, _C.FLOAT64),
    (jnp.bool_, _C.BOOL))}
_fast_parked = _C.eager_fast_setup(np.ndarray, _NP_DTYPES, np.empty_like)
_lifecycle.on_shutdown(_fast_parked.clear)
try:
    from jax._src.array import ArrayImpl as _ArrayImpl
    from jax._src.core import trace_state_clean as _trace_state_clean
    from jax._src import config as _jax_config
    from jax._src.lib import xla_client as _xc
    _device_put = _xc.batched_device_put
    # the view and the put are transfers, which a guard would see (and, set
    # to disallow, refuse after the collective): under one, the general path
    _d2h_guard = _jax_config.transfer_guard_device_to_host
    _h2d_guard = _jax_config.transfer_guard_host_to_device
except (ImportError, AttributeError):  # another JAX's internals: the general path only
    _fast_enabled = False
    _ArrayImpl = None
_cpu = None  # (device, its sharding): CPU device 0, once an array exists


def _fast_error(code, msg):
    return HorovodInternalError("hvd.jax.allreduce: %s" % msg)


def _fast_allreduce(x, name, op, prescale_factor, postscale_factor):
    """allreduce() of a jax.Array on the fast path: the result, or None
    (the general path then runs under the name returned second)."""
    global _cpu
    if _cpu is None:
        device = jax.devices("cpu")[0]
        _cpu = (device, jax.sharding.SingleDeviceSharding(device))
    sharding = x.sharding
    if (not _trace_state_clean() or x.is_deleted() or not (sharding is _cpu[1] or
                                                           sharding == _cpu[1])
            or jax.config.jax_default_device is not None
            or _d2h_guard.value not in (None, "allow")
            or _h2d_guard.value not in (None, "allow")):
        return None, name
    name = _name(name, "allreduce", global_process_set)
    if len(name.encode()) > _ffi.NAME_MAX:  # the general path's ValueError
        return None, name
    out = _C.eager_allreduce(np.asarray(x), op, prescale_factor, postscale_factor, name,
                             _fast_error, 0)
    if out is None:
        return None, name
    aval = x.aval
    if aval.weak_type:
        aval = aval.update(weak_type=False)
    return _device_put(aval, sharding, [out], [_cpu[0]], x.committed), name


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor (an array or a pytree of arrays of any dtypes) over
    the processes with op (Average by default; average=True/False is
    Horovod's old spelling), multiplying the inputs by prescale_factor and
    the result by postscale_factor.  A pytree's leaves are enqueued
    together, so the engine fuses them.  compression: a
    hvd.jax.Compression (none by default).  Differentiable."""
    if average is not None:
        if op is not None:
            raise ValueError("allreduce: give op or average, not both")
        op = Average if average else Sum
    if (type(tensor) is _ArrayImpl and _fast_enabled and compression is None
            and process_set is global_process_set and (op is None or op in _OPS)):
        out, name = _fast_allreduce(tensor, name, op, prescale_factor, postscale_factor)
        if out is not None:
            return out
    if compression is not None:
        return _compressed(tree_of=tensor, compression=compression,
                           reduce=lambda t: _allreduce_tree(t, name, op, prescale_factor,
                                                            postscale_factor, process_set,
                                                            False, "allreduce"))
    return _allreduce_tree(tensor, name, op, prescale_factor, postscale_factor, process_set,
                           False, "allreduce")


def _compressed(tree_of, compression, reduce):
    leaves, treedef = jax.tree.flatten(tree_of)
    packed = [compression.compress(x) for x in leaves]
    reduced = jax.tree.leaves(reduce([p[0] for p in packed]))
    return jax.tree.unflatten(treedef, [compression.decompress(r, p[1])
                                        for r, p in zip(reduced, packed)])


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """allreduce of a list (or pytree) of arrays as one unit: each dtype's
    arrays are one hvd group, negotiated and fused together whatever the
    fusion threshold (Horovod's grouped_allreduce).  Differentiable."""
    if average is not None:
        op = Average if average else Sum
    reduce = functools.partial(_allreduce_tree, name=name, op=op,
                               prescale_factor=prescale_factor,
                               postscale_factor=postscale_factor, process_set=process_set,
                               grouped=True, kind="grouped_allreduce")
    if compression is not None:
        return _compressed(tensors, compression, reduce)
    return reduce(tensors)


# ---- allgather and reducescatter (each other's gradients) ----
def _gather_call(x, name, set_id, n, rows=None):
    """x gathered: n equal blocks, or (rows given) blocks adding up to rows."""
    shape = jnp.shape(x)
    out = jax.ShapeDtypeStruct((n * shape[0] if rows is None else rows,) + tuple(shape[1:]),
                               jnp.result_type(x))
    return _ffi.call("allgather", [out], [x], name=name, process_set=np.int32(set_id),
                     ragged=np.int32(rows is not None))[0]


def _ragged_rows(x, name, set_id, n):
    """Eagerly, before gathering x: every rank's shape, gathered.  Returns
    the total of rows when the ranks' first dimensions differ (None when
    they agree); raises, naming the tensor, when other dimensions do."""
    shape = np.asarray(jnp.shape(x), np.int64)
    shapes = np.asarray(_gather_call(jnp.asarray(shape, jnp.int32), name + ".shapes", set_id,
                                     n)).reshape(n, -1)
    if (shapes[:, 1:] != shape[1:]).any():
        raise HorovodInternalError(
            "allgather '%s': ranks' shapes differ beyond the first dimension: %s"
            % (name, [tuple(int(d) for d in s) for s in shapes]))
    return None if (shapes[:, 0] == shape[0]).all() else int(shapes[:, 0].sum())


def _scatter_rows(dim0, n):
    """Horovod's split of dim0 rows over n ranks."""
    return [dim0 // n + (1 if r < dim0 % n else 0) for r in range(n)]


def _scatter_call(x, name, op, pre, post, set_id, n, me):
    """This rank's rows of x reduced: x is padded with zero rows to n
    equal blocks (Horovod's uneven split), the block reduced, then cut."""
    dim0 = jnp.shape(x)[0]
    rows = _scatter_rows(dim0, n)
    block = -(-dim0 // n)
    if dim0 % n:
        parts, at = [], 0
        pad = jnp.zeros((1,) + tuple(jnp.shape(x)[1:]), jnp.result_type(x))
        for r in rows:
            parts.append(x[at:at + r])
            parts.extend([pad] * (block - r))
            at += r
        x = jnp.concatenate(parts)
    out = jax.ShapeDtypeStruct((block,) + tuple(jnp.shape(x)[1:]), jnp.result_type(x))
    y = _ffi.call("reducescatter", [out], [x], name=name, op=np.int32(op), prescale=float(pre),
                  postscale=float(post), process_set=np.int32(set_id))[0]
    return y[:rows[me]]


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _allgather_p(x, spec):
    name, set_id, n, me = spec
    return _gather_call(x, name, set_id, n)


def _allgather_fwd(x, spec):
    return _allgather_p(x, spec), _spec(x)


def _allgather_bwd(spec, shape, g):
    """Horovod's gradient: the output gradient averaged over the ranks,
    this rank's rows (a reducescatter with Average)."""
    name, set_id, n, me = spec
    if not jnp.issubdtype(shape.dtype, jnp.inexact):
        return (_zero_cotangent(shape),)
    return (_scatter_call(g, name + ".grad", Average, 1.0, 1.0, set_id, n, me)
            .reshape(shape.shape),)


_allgather_p.defvjp(_allgather_fwd, _allgather_bwd)


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates tensor over the processes of the set along the first
    dimension.  Eagerly, ranks may give different first dimensions (their
    shapes are gathered first).  Under jit or a transformation every rank
    must give the same shape (XLA's static shapes; a rank that differs
    makes the call fail on every rank, naming the tensor and the counts).
    A 0-d array is gathered as shape (1,).  Differentiable."""
    x = _arrays([tensor])[0]
    if jnp.ndim(x) == 0:
        x = x.reshape(1)
    spec = (_name(name, "allgather", process_set), _set_id(process_set),
            _set_size(process_set), _set_rank(process_set))
    if _ffi.is_traced([x]):
        return _allgather_p(x, spec)
    rows = _ragged_rows(x, *spec[:3])
    return _gather_call(x, *spec[:3], rows=rows)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _reducescatter_p(x, spec):
    name, op, pre, post, set_id, n, me = spec
    return _scatter_call(x, name, op, pre, post, set_id, n, me)


def _reducescatter_fwd(x, spec):
    return _reducescatter_p(x, spec), _spec(x)


def _reducescatter_bwd(spec, shape, g):
    """Horovod's gradient: the output gradients gathered, times the set's
    size for Sum and times the scale factors."""
    name, op, pre, post, set_id, n, me = spec
    if op not in (Average, Sum):
        raise NotImplementedError("hvd.jax: reducescatter '%s' with op %s has no gradient"
                                  % (name, op))
    if not jnp.issubdtype(shape.dtype, jnp.inexact):
        return (_zero_cotangent(shape),)
    scale = pre * post * (n if op == Sum else 1)
    dim0 = shape.shape[0]
    rows = _scatter_rows(dim0, n)
    block = -(-dim0 // n)
    gp = g if rows[me] == block else jnp.concatenate(
        [g, jnp.zeros((block - rows[me],) + tuple(g.shape[1:]), g.dtype)])
    full = _gather_call(gp, name + ".grad", set_id, n)
    if dim0 % n:
        full = jnp.concatenate([full[r * block:r * block + rows[r]] for r in range(n)])
    return (full * jnp.asarray(scale, g.dtype),)


_reducescatter_p.defvjp(_reducescatter_fwd, _reducescatter_bwd)


def reducescatter(tensor, name=None, compression=None, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces tensor over the processes and returns this rank's rows of
    the result: rank r of n gets dim0 // n rows, one more if r < dim0 % n
    (Horovod's split).  Differentiable."""
    if op not in _OPS:
        raise ValueError("unknown reduction op %r" % (op,))
    x = _arrays([tensor])[0]
    name = _name(name, "reducescatter", process_set)
    if jnp.ndim(x) == 0:
        raise HorovodInternalError("reducescatter '%s': a scalar (0-d array) cannot be "
                                   "scattered" % name)
    spec = (name, int(op), float(prescale_factor), float(postscale_factor),
            _set_id(process_set), _set_size(process_set), _set_rank(process_set))
    if compression is not None:
        return _compressed(x, compression, lambda t: [_reducescatter_p(t[0], spec)])
    return _eager_or(_reducescatter_p, x, spec)


# ---- broadcast, alltoall, barrier ----
def _broadcast_call(leaves, name, root, set_id):
    return tuple(_ffi.call("broadcast", [_spec(x) for x in leaves], list(leaves), name=name,
                           root=np.int32(root), process_set=np.int32(set_id)))


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _broadcast_p(leaves, spec):
    return _broadcast_call(leaves, *spec[:3])


def _broadcast_fwd(leaves, spec):
    return _broadcast_p(leaves, spec), tuple(_spec(x) for x in leaves)


def _broadcast_bwd(spec, shapes, grads):
    """Horovod's gradient: the output gradients averaged over the ranks on
    the root, zero elsewhere."""
    name, root, set_id, me = spec
    idx = [i for i, s in enumerate(shapes) if jnp.issubdtype(s.dtype, jnp.inexact)]
    out = [_zero_cotangent(s) for s in shapes]
    if idx:
        reduced = _allreduce_call([grads[i] for i in idx], name + ".grad", Average, 1.0, 1.0,
                                  set_id, 0)
        for i, g in zip(idx, reduced):
            out[i] = g if me == root else jnp.zeros_like(g)
    return (tuple(out),)


_broadcast_p.defvjp(_broadcast_fwd, _broadcast_bwd)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor (an array or a pytree of arrays) on every
    rank of the set; the leaves are enqueued together.  root_rank is a rank
    of the job, as in Horovod.  Differentiable."""
    leaves, treedef = jax.tree.flatten(tensor)
    if not leaves:
        return tensor
    spec = (_name(name, "broadcast", process_set), _set_rank_of(process_set, root_rank),
            _set_id(process_set), _set_rank(process_set))
    return jax.tree.unflatten(treedef, list(_eager_or(_broadcast_p, tuple(_arrays(leaves)),
                                                      spec)))


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _alltoall_p(x, spec):
    name, set_id = spec
    return _ffi.call("alltoall", [_spec(x)], [x], name=name, process_set=np.int32(set_id))[0]


def _alltoall_fwd(x, spec):
    return _alltoall_p(x, spec), _spec(x)


def _alltoall_bwd(spec, shape, g):
    """The gradient of an alltoall with equal splits is the alltoall of
    the output gradient."""
    if not jnp.issubdtype(shape.dtype, jnp.inexact):
        return (_zero_cotangent(shape),)
    return (_alltoall_p(g, (spec[0] + ".grad", spec[1])),)


_alltoall_p.defvjp(_alltoall_fwd, _alltoall_bwd)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of tensor (in order) to rank r of the set and
    returns the rows received, in rank order; without splits, dim0 must be
    a multiple of the set's size and the rows split equally.  Under jit or
    a transformation splits must be equal (XLA's shapes are static);
    eagerly they may differ, as in Horovod (the ranks' splits are
    exchanged first).  With splits given also returns the received splits
    (int32), as Horovod.  Differentiable (equal splits)."""
    x = _arrays([tensor])[0]
    name = _name(name, "alltoall", process_set)
    n, set_id = _set_size(process_set), _set_id(process_set)
    dim0 = jnp.shape(x)[0] if jnp.ndim(x) else 0
    equal = [dim0 // n] * n
    if splits is not None:
        splits = [int(s) for s in np.asarray(splits).reshape(-1)]
        if len(splits) != n or sum(splits) != dim0 or min(splits) < 0:
            raise ValueError("alltoall '%s': splits %s must be %d counts adding up to the %d "
                             "rows" % (name, splits, n, dim0))
        if splits != equal:
            return _alltoall_ragged(x, splits, name, set_id)
    if jnp.ndim(x) == 0 or dim0 % n:
        raise ValueError("alltoall '%s': %d rows do not split equally over %d ranks (give "
                         "splits, eagerly)" % (name, dim0, n))
    out = _eager_or(_alltoall_p, x, (name, set_id))
    return out if splits is None else (out, jnp.asarray(splits, jnp.int32))


def _alltoall_ragged(x, splits, name, set_id):
    """An eager alltoall of unequal splits: the splits first (one row to
    each rank), then the rows, into a result sized by what arrives."""
    if _ffi.is_traced([x]):
        raise NotImplementedError("alltoall '%s': unequal splits %s inside jit or a "
                                  "transformation (XLA's shapes are static); give equal ones"
                                  % (name, splits))
    mine = np.asarray(splits, np.int32)
    received = _ffi.call("alltoall", [_spec(mine)], [mine], name=name + ".splits",
                         process_set=np.int32(set_id))[0]
    rows = int(np.asarray(received).sum())
    out = jax.ShapeDtypeStruct((rows,) + tuple(jnp.shape(x)[1:]), jnp.result_type(x))
    return _ffi.call("alltoall", [out], [x, mine], name=name,
                     process_set=np.int32(set_id))[0], received


def barrier(process_set=global_process_set):
    """Returns once every rank of the set has called it (under jit: once
    every rank's program has reached it)."""
    if _set_id(process_set) == 0:
        _ffi.call("barrier", [jax.ShapeDtypeStruct((), jnp.int32)], [])
        return
    allreduce(jnp.zeros((), jnp.int32), name=_name(None, "barrier", process_set), op=Sum,
              process_set=process_set)
