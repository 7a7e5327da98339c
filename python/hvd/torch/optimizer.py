"""DistributedOptimizer: Horovod's data-parallel optimizer wrapper.

DistributedOptimizer(opt) returns an optimizer of a new class derived from
opt's class (so isinstance() and the update rule are opt's), whose
gradients are averaged over the processes.  A hook on each parameter's
gradient accumulator hands the gradient to hvd's engine as soon as
backward has produced it, so communication overlaps the rest of backward;
step() (or synchronize()) waits for the results and writes them into
p.grad before the update.
"""
import warnings
from contextlib import contextmanager

import torch

from hvd.common.process_sets import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import (Adasum, Average, allreduce_async_, grouped_allreduce_async_,
                               size, sparse_allreduce_async, synchronize)

__all__ = ["DistributedOptimizer"]


def _named_parameters(optimizer_groups, named_parameters):
    """Validates named_parameters (Horovod's rules) and returns {param: name}.

    Without names, parameters are named by their position in the groups,
    which matches across ranks that build the same model."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [("allreduce.noname.%d.%d" % (i, j), p)
                             for i, group in enumerate(optimizer_groups)
                             for j, p in enumerate(group["params"])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    names = [name for name, _ in named_parameters]
    dups = sorted({name for name in names if names.count(name) > 1})
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. "
                         "Found duplicates: %s" % ", ".join(dups))
    all_ids = {id(p) for group in optimizer_groups for p in group["params"]}
    unnamed = all_ids - {id(p) for _, p in named_parameters}
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters "
                         "were not named. Python object ids: %s"
                         % ", ".join(str(i) for i in unnamed))
    return {p: name for name, p in sorted(named_parameters, key=lambda x: x[0])}


def _register_grad_hooks(optimizer, make_hook):
    """Hooks every trainable parameter's gradient accumulator: it runs once
    backward has accumulated the parameter's gradient."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                optimizer._requires_update.add(p)
                # expand_as gives a view whose grad_fn leads to p's
                # AccumulateGrad node; keep it alive, or its hook goes.
                grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                grad_acc.register_hook(make_hook(p))
                optimizer._grad_accs.append(grad_acc)


_ZERO_GRAD_ERROR = ("optimizer.zero_grad() was called after loss.backward() but before "
                    "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                    "cause a race condition.")
_TOO_MANY_PASSES = ("Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally.")


def _count_pass(opt, p):
    """A backward pass produced p's gradient: checks the pass count and
    returns True when this is the pass whose gradient must be reduced
    (the last of backward_passes_per_step)."""
    if p in opt._handles and opt._handles[p][0] is not None and opt._allreduce_delay[p] <= 0:
        raise AssertionError(_TOO_MANY_PASSES)
    assert not p.grad.requires_grad
    assert opt._allreduce_delay[p] > 0
    opt._allreduce_delay[p] -= 1
    return opt._allreduce_delay[p] == 0


class _DistributedMixin:
    """The methods of a DistributedOptimizer (before the wrapped class in
    the MRO, so super() reaches the wrapped optimizer's methods)."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None, sparse_as_dense=False,
                 process_set=global_process_set):
        super().__init__(params)
        self._compression = compression
        self._parameter_names = _named_parameters(self.param_groups, named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in self._parameter_names}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        # param (or tuple of a group's params) -> (handle or None, ctx)
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._groups = _check_groups(groups)
        self._p_to_group = {}
        self._group_counts = {}
        if self.process_set.included() and size() > 1:
            self._build_groups()
            _register_grad_hooks(self, self._make_hook)

    # -- groups --
    def _build_groups(self):
        """Splits the trainable parameters into the groups reduced together:
        num groups of consecutive names, or the given lists (parameters in
        none of them each form their own group)."""
        if self._groups is None:
            return
        params = sorted((p for g in self.param_groups for p in g["params"] if p.requires_grad),
                        key=lambda p: self._parameter_names[p])
        if isinstance(self._groups, int):
            n = min(self._groups, len(params))
            bounds = [len(params) * i // n for i in range(n + 1)] if n else [0]
            p_groups = [params[bounds[i]:bounds[i + 1]] for i in range(n)]
        else:
            ids = {id(p) for p in params}
            p_groups = [[p for p in g if id(p) in ids] for g in self._groups]
            grouped = {id(p) for g in p_groups for p in g}
            p_groups += [[p] for p in params if id(p) not in grouped]
        for group in p_groups:
            if not group:
                continue
            group = tuple(sorted(group, key=lambda p: self._parameter_names[p]))
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    # -- scaling --
    def _scale_factors(self):
        """Average with a predivide factor f: inputs scaled by 1/f, the
        average by f (Horovod's split of the division)."""
        if self.op == Average:
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    # -- communication --
    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # No gradient here this step (a branch the forward skipped), but
            # other ranks may have one: take part with zeros.
            p.grad = torch.zeros_like(p)
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        lossy = getattr(self._compression, "reduce_async", None)  # PowerSGD, TopK
        handle = lossy(tensor, name, self.process_set) if lossy else None
        if handle is not None:
            return handle, None
        compressed, ctx = self._compression.compress(tensor)
        pre, post = self._scale_factors()
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=pre,
                                  postscale_factor=post, process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        for p in group:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [p.grad.to_dense() if p.grad.is_sparse else p.grad for p in group]
        compressed, ctxs = zip(*[self._compression.compress(g) for g in grads])
        pre, post = self._scale_factors()
        handle = grouped_allreduce_async_(list(compressed), name=self._parameter_names[group[0]],
                                          op=self.op, prescale_factor=pre,
                                          postscale_factor=post, process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*unused):
            handle, ctx = None, None
            if _count_pass(self, p):
                group = self._p_to_group.get(p)
                if group is not None:
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        # The group's last gradient: reduce the group.
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce and writes the results into
        p.grad; starts the allreduces that backward did not (parameters
        without a gradient, groups not complete, fewer passes than
        backward_passes_per_step)."""
        if not self.process_set.included():
            self._synchronized = True
            return
        if size() > 1:
            self._start_missing()
        for handle, _ in self._handles.values():
            if hasattr(handle, "advance"):  # PowerSGD: every Q's allreduce in flight at once
                handle.advance()
        for key, (handle, ctx) in self._handles.items():
            if isinstance(key, tuple):
                outputs = synchronize(handle)
                for p, output, pctx in zip(key, outputs, ctx):
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    self._set_grad(p, self._compression.decompress(output, pctx))
            else:
                output = handle.wait() if hasattr(handle, "wait") else synchronize(handle)
                self._allreduce_delay[key] = self.backward_passes_per_step
                if not (key.grad.is_sparse and not self.sparse_as_dense):
                    # (the sparse path allgathers: it was not compressed)
                    output = self._compression.decompress(output, ctx)
                self._set_grad(key, output)
        self._handles.clear()
        self._synchronized = True

    def _start_missing(self):
        """Enqueues what backward left out, in name order on every rank."""
        done = set()
        for key in self._handles:
            done.update(key if isinstance(key, tuple) else (key,))
        started_groups = set()
        pending = [p for p in self._requires_update if p not in done]
        pending += [p for p, (h, _) in self._handles.items()
                    if not isinstance(p, tuple) and h is None]
        for p in sorted(set(pending), key=lambda q: self._parameter_names[q]):
            group = self._p_to_group.get(p)
            if group is None:
                self._handles[p] = self._allreduce_grad_async(p)
            elif group not in started_groups:
                # An incomplete group is still reduced as a whole, under the
                # same name as on the ranks where it completed.
                started_groups.add(group)
                for gp in group:
                    self._handles.pop(gp, None)
                self._handles[group] = self._grouped_allreduce_grad_async(group)
                self._group_counts[group] = 0

    @staticmethod
    def _set_grad(p, reduced):
        if p.grad.is_sparse:
            if not reduced.is_sparse:
                reduced = reduced.to_sparse()
            # sparse tensors do not support set_()
            p.grad.zero_().add_(reduced)
        elif reduced.data_ptr() != p.grad.data_ptr():
            p.grad.copy_(reduced)

    @contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize: call synchronize() first
        yourself (to clip or unscale gradients between the two)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(_ZERO_GRAD_ERROR)
        return super().zero_grad(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        """The wrapped optimizer's, plus the compressor's state (PowerSGD's
        Q and error) under "hvd.compression" when it has one."""
        saved = super().state_dict(*args, **kwargs)
        if hasattr(self._compression, "state_dict"):
            saved["hvd.compression"] = self._compression.state_dict()
        return saved

    def load_state_dict(self, state_dict, *args, **kwargs):
        compression = state_dict.get("hvd.compression")
        if compression is not None:
            if not hasattr(self._compression, "load_state_dict"):
                raise ValueError("DistributedOptimizer.load_state_dict: the state holds "
                                 "compression state, but this optimizer's compression %r "
                                 "has none" % (self._compression,))
            state_dict = {k: v for k, v in state_dict.items() if k != "hvd.compression"}
            self._compression.load_state_dict(compression)
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        return super().load_state_dict(state_dict, *args, **kwargs)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes


def _check_groups(groups):
    if groups is None:
        return None
    if isinstance(groups, list):
        seen = set()
        for group in groups:
            for p in group:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor.")
                if id(p) in seen:
                    raise ValueError("A parameter can only appear once in groups.")
                seen.add(id(p))
        return groups
    if isinstance(groups, int) and groups > 0:
        return groups
    raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")


class _DistributedAdasumMixin:
    """Adasum as Horovod's torch optimizer applies it: to each parameter's
    optimizer delta.  As soon as backward has a parameter's gradient, the
    hook steps the wrapped optimizer on that parameter alone from a zero
    start, so the parameter holds its update delta; the deltas are combined
    with Adasum over the ranks; step() adds the combined delta to the
    parameter's value before the step."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super().__init__(params)
        self._compression = compression
        self._parameter_names = _named_parameters(self.param_groups, named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in self._parameter_names}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for p in self._parameter_names}
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        _register_grad_hooks(self, self._make_hook)

    def _allreduce_grad_async(self, p):
        # With start = p's value: step() computes start - a*f(g), so
        # p - start is the delta -a*f(g).  Step only p: hide the others.
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            start.copy_(p.detach())
            super().step()
        finally:
            for group, params in zip(self.param_groups, stashed):
                group["params"] = params
        with torch.no_grad():
            p.sub_(start)
        compressed, ctx = self._compression.compress(p.detach())
        handle = allreduce_async_(compressed, name=self._parameter_names.get(p), op=Adasum)
        return handle, ctx

    def _make_hook(self, p):
        def hook(*unused):
            handle, ctx = None, None
            if _count_pass(self, p):
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Nothing to do: step() combines the deltas."""

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")
        yield  # pragma: no cover

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        pending = [p for p in self._requires_update if p not in self._handles]
        pending += [p for p, (h, _) in self._handles.items() if h is None]
        for p in sorted(set(pending), key=lambda q: self._parameter_names[q]):
            self._handles[p] = self._allreduce_grad_async(p)
        with torch.no_grad():
            for p, (handle, ctx) in self._handles.items():
                delta = self._compression.decompress(synchronize(handle), ctx)
                start = self._starting_models[p]
                start.add_(delta)
                p.copy_(start)
                self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(_ZERO_GRAD_ERROR)
        return super().zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps optimizer so that gradients are reduced over the processes
    (op: Average, Sum or Adasum) before each update.

    named_parameters: (name, parameter) pairs, model.named_parameters(),
    naming the allreduces.  compression: Compression.none or .fp16, or
    PowerSGD(...) / TopK(...) instances (docs/compression.md).
    backward_passes_per_step: backward passes accumulated locally before
    the gradients are reduced.  gradient_predivide_factor: with Average,
    gradients are scaled by 1/f before the sum and by f/size after.
    num_groups (deprecated) / groups: reduce parameters in groups, fused
    (an int: that many groups; or lists of parameters).  sparse_as_dense:
    reduce sparse gradients as dense tensors.  process_set: the ranks that
    train together."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if hasattr(compression, "reduce_async") and (op != Average or gradient_predivide_factor != 1.0
                                                 or groups or num_groups):
        raise ValueError("%s compression averages gradients one by one: it takes op=Average "
                         "without gradient_predivide_factor or groups"
                         % type(compression).__name__)
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    base = optimizer.__class__
    if op != Adasum or size() == 1:
        cls = type(base.__name__, (_DistributedMixin, base), {})
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step, op, gradient_predivide_factor, groups,
                   sparse_as_dense, process_set)
    if process_set is not global_process_set:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    cls = type(base.__name__, (_DistributedAdasumMixin, base), {})
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
