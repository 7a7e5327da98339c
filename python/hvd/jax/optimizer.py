"""DistributedOptimizer for optax: wraps a GradientTransformation so that
its update first averages the gradients over the processes
(allreduce_gradients: one fused call), as horovod's DistributedOptimizer
wraps a framework optimizer.

With backward_passes_per_step = k > 1, update() is called after every
backward pass: the gradients are summed locally (averaged with
average_aggregated_gradients=True, as horovod.tensorflow's option) and
only every k-th call allreduces them and applies the wrapped optimizer;
the other calls return zero updates.  Every rank takes the same branch
(the count is the same everywhere), so the collective stays matched
under jit's lax.cond.
"""
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from hvd.common.process_sets import global_process_set
from hvd.jax.compression import Compression
from hvd.jax.functions import allreduce_gradients
from hvd.jax.mpi_ops import Adasum, Average, _name

__all__ = ["DistributedOptimizer", "DistributedOptimizerState"]


class DistributedOptimizerState(NamedTuple):
    inner: Any            # the wrapped optimizer's state
    accumulated: Any      # local gradient sums (None when k == 1)
    passes: jnp.ndarray   # backward passes accumulated since the last step


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, process_set=global_process_set,
                         name=None):
    """Returns an optax.GradientTransformation: optimizer's, applied to the
    gradients averaged over the processes of process_set.

    compression: Compression.fp16 sends floating gradients as float16.
    gradient_predivide_factor: with Average, gradients are divided by it
    before the sum and multiplied after (Horovod's split of the average).
    named_parameters is accepted for Horovod's signature (pytrees name
    their leaves by position)."""
    del named_parameters
    k = int(backward_passes_per_step)
    if k <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    if op == Adasum:
        raise NotImplementedError("hvd.jax.DistributedOptimizer: Adasum is not supported yet")
    if op != Average and gradient_predivide_factor != 1.0:
        raise ValueError("gradient_predivide_factor needs op=Average")
    pre, post = 1.0 / gradient_predivide_factor, gradient_predivide_factor
    base = name or _name(None, "DistributedOptimizer", process_set)

    def average(grads):
        return allreduce_gradients(grads, op=op, compression=compression, name=base,
                                   prescale_factor=pre, postscale_factor=post,
                                   process_set=process_set)

    def init(params):
        acc = jax.tree.map(jnp.zeros_like, params) if k > 1 else None
        return DistributedOptimizerState(optimizer.init(params), acc, jnp.zeros((), jnp.int32))

    def update(grads, state, params=None):
        if k == 1:
            updates, inner = optimizer.update(average(grads), state.inner, params)
            return updates, DistributedOptimizerState(inner, None, state.passes)
        acc = jax.tree.map(jnp.add, state.accumulated, grads)
        passes = state.passes + 1

        def step(_):
            total = jax.tree.map(lambda a: a / k, acc) if average_aggregated_gradients else acc
            updates, inner = optimizer.update(average(total), state.inner, params)
            return updates, inner, jax.tree.map(jnp.zeros_like, acc), jnp.zeros((), jnp.int32)

        def wait(_):
            return jax.tree.map(jnp.zeros_like, grads), state.inner, acc, passes

        updates, inner, acc, passes = jax.lax.cond(passes >= k, step, wait, None)
        return updates, DistributedOptimizerState(inner, acc, passes)

    return optax.GradientTransformation(init, update)
