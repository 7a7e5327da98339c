"""hvd.mxnet: horovod.mxnet's API over hvd (``import hvd.mxnet as hvd``),
MXNet 1.9 NDArrays on the CPU.

See mpi_ops (the collectives as operations of MXNet's engine), functions
(broadcasting objects), compression; here the training pieces:
DistributedOptimizer (an mx.optimizer wrapper), DistributedTrainer (a
gluon.Trainer) and broadcast_parameters.
"""
from hvd.common.frameworks import require as _require

_require("hvd.mxnet")  # the framework, in the range this binding serves, or ImportError
import ctypes
import types
import warnings
from collections import OrderedDict, defaultdict

import mxnet as mx
from mxnet.base import _LIB, check_call

from hvd.common.exceptions import HorovodInternalError  # noqa: F401
from hvd.mxnet.compression import Compression
from hvd.mxnet.functions import allgather_object, broadcast_object  # noqa: F401
from hvd.mxnet.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set, allgather, allreduce,
    allreduce_, alltoall, broadcast, broadcast_, ccl_built, cross_rank, cross_size, cuda_built,
    ddl_built, global_process_set, gloo_built, gloo_enabled, grouped_allgather,
    grouped_allreduce, grouped_allreduce_, grouped_reducescatter, init, is_homogeneous,
    is_initialized, local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
    nccl_built, rank, reducescatter, remove_process_set, rocm_built, shutdown, size,
    start_timeline, stop_timeline)


def _split(items, n):
    """items in n consecutive parts as even as can be (Horovod's
    num_groups split)."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)] for i in range(n)]


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps an mx.optimizer.Optimizer (for mx.mod.Module or a
    gluon.Trainer with kvstore=None): each update first averages the
    gradient over the process set in place.  gradient_predivide_factor f
    divides by f before the sum and multiplies by f / size after it;
    num_groups > 0 reduces the gradients of a multi-index update in that
    many grouped allreduces."""

    def __init__(self, optimizer, gradient_predivide_factor=1.0, num_groups=0,
                 process_set=global_process_set):
        self._optimizer = optimizer
        self._gradient_predivide_factor = gradient_predivide_factor
        self._num_groups = num_groups
        self._process_set = process_set

    def __getattr__(self, item):
        return getattr(self._optimizer, item)

    def __setattr__(self, name, value):
        # What a gluon.Trainer sets (rescale_grad at every step,
        # param_dict) belongs to the wrapped optimizer, which does the
        # update; Horovod's wrapper keeps it and the update misses it.
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._optimizer, name, value)

    def create_state(self, index, weight):
        return self._optimizer.create_state(index, weight)

    def create_state_multi_precision(self, index, weight):
        return self._optimizer.create_state_multi_precision(index, weight)

    def _reduce(self, grads, name, priority):
        grouped_allreduce_(grads, op=Average, name=name, priority=priority,
                           prescale_factor=1.0 / self._gradient_predivide_factor,
                           postscale_factor=self._gradient_predivide_factor,
                           process_set=self._process_set)

    def _do_allreduce(self, index, grad):
        if self._process_set.size() == 1:
            return
        if not isinstance(index, (tuple, list)):
            index, grad = [index], [grad]
        if self._num_groups > 0:
            parts = zip(_split(list(grad), self._num_groups), _split(list(index), self._num_groups))
            for i, (grads, indices) in enumerate(parts):
                if grads:
                    self._reduce(grads, "%s:%s" % (indices[0], indices[-1]), -i)
            return
        for i, (g, k) in enumerate(zip(grad, index)):
            allreduce_(g, op=Average, name=str(k), priority=-i,
                       prescale_factor=1.0 / self._gradient_predivide_factor,
                       postscale_factor=self._gradient_predivide_factor,
                       process_set=self._process_set)

    def update(self, index, weight, grad, state):
        if self._process_set.included():
            self._do_allreduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        if self._process_set.included():
            self._do_allreduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)

    def set_lr_mult(self, args_lr_mult):
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        self._optimizer.set_wd_mult(args_wd_mult)


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer whose step() averages the gradients over the process
    set with hvd (in place, before the update) instead of a kvstore.

    compression: Compression.none or .fp16 for the gradients on the wire;
    gradient_predivide_factor f: divide by f before the sum, multiply by
    f / size after; prefix: names this trainer's tensors (two trainers in
    one program need different prefixes); num_groups > 0: reduce the
    gradients in that many grouped allreduces (per dtype)."""

    def __init__(self, params, optimizer, optimizer_params=None, compression=Compression.none,
                 gradient_predivide_factor=1.0, prefix=None, num_groups=0,
                 process_set=global_process_set):
        self._compression = compression
        self._process_set = process_set
        if isinstance(optimizer, DistributedOptimizer):
            optimizer = optimizer._optimizer
            warnings.warn("DistributedTrainer does not take DistributedOptimizer as its "
                          "optimizer. We have unwrapped it for you.")
        # The same order of parameters on every rank (gluon sorts dicts by
        # name since 1.6; Horovod sorts lists too).
        if isinstance(params, dict):
            params = OrderedDict(params)
        elif isinstance(params, (list, tuple)):
            params = sorted(params, key=lambda p: p.name)
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        self._gradient_predivide_factor = gradient_predivide_factor
        assert prefix is None or isinstance(prefix, str)
        self._prefix = prefix if prefix else ""
        self._num_groups = num_groups

    def _scales(self):
        return dict(op=Average, prescale_factor=1.0 / self._gradient_predivide_factor,
                    postscale_factor=self._gradient_predivide_factor,
                    process_set=self._process_set)

    def _allreduce_grads(self):
        if self._process_set.size() == 1 or not self._process_set.included():
            return
        entries = []  # (name, compressed gradient, context, parameter)
        for i, param in enumerate(self._params):
            if param.grad_req != "null":
                grad, ctx = self._compression.compress(param.list_grad()[0])
                entries.append((self._prefix + str(i), grad, ctx, param))
        if self._num_groups > 0:
            self._reduce_groups(entries)
        else:
            for i, (name, grad, _, _) in enumerate(entries):
                allreduce_(grad, name=name, priority=-i, **self._scales())
        if self._compression is not Compression.none:
            for _, grad, ctx, param in entries:
                param.list_grad()[0][:] = self._compression.decompress(grad, ctx)

    def _reduce_groups(self, entries):
        for i, part in enumerate(_split(entries, self._num_groups)):
            by_dtype = defaultdict(list)
            for name, grad, _, _ in part:
                by_dtype[grad.dtype].append((name, grad))
            for group in by_dtype.values():
                names, grads = zip(*group)
                grouped_allreduce_(list(grads), name="%s:%s" % (names[0], names[-1]),
                                   priority=-i, **self._scales())


def _broadcast_after_init(param, root_rank, name):
    """Wraps a deferred-initialised Parameter's _init_impl so that its
    data is broadcast from root_rank as soon as it is initialised."""
    init_impl = param._init_impl

    def wrapped(self, *args, **kwargs):
        init_impl(*args, **kwargs)
        broadcast_(self.data(), root_rank=root_rank, name=name)
    return wrapped


def broadcast_parameters(params, root_rank=0, prefix=None):
    """Overwrites params with root_rank's, in place: a dict of NDArrays
    (Module.get_params()) or of Parameters, or a gluon ParameterDict
    (Block.collect_params()), in the order of their sorted names.  A
    Parameter whose initialisation is deferred (its shape is known only at
    the first forward) is broadcast when it is initialised, as Horovod
    does.  prefix names this call's tensors (two calls in one program need
    different prefixes)."""
    if not isinstance(params, (dict, mx.gluon.ParameterDict)):
        raise ValueError("invalid params of type: %s" % type(params))
    if size() == 1:
        return
    assert prefix is None or isinstance(prefix, str)
    prefix = prefix or ""
    tensors, names = [], []
    for name, p in sorted(params.items()):
        if not isinstance(p, mx.gluon.Parameter):
            tensors.append(p)
            names.append(prefix + str(name))
            continue
        try:
            tensors.append(p.data())
            names.append(prefix + str(name))
        except mx.gluon.parameter.DeferredInitializationError:
            p._init_impl = types.MethodType(_broadcast_after_init(p, root_rank, prefix + str(name)),
                                            p)
    _default_layout(tensors)
    for tensor, name in zip(tensors, names):
        broadcast_(tensor, root_rank, name=name)


def _default_layout(tensors):
    """Puts parameters that are in MKL-DNN's internal layout (a convolution's
    weight after an inference forward) back in the default layout, which
    the collectives read.  MKL-DNN's operators reorder a weight from MXNet's
    engine, after they ran, so first every pushed operation must be done
    (waitall); then MXNDArrayGetData reorders what needs it."""
    mx.nd.waitall()
    for tensor in tensors:
        check_call(_LIB.MXNDArrayGetData(tensor.handle, ctypes.byref(ctypes.c_void_p())))
