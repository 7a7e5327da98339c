"""Elastic training with JAX (hvd.jax.elastic), as horovod's elastic API:

    import hvd.jax as hvd
    hvd.init()
    state = hvd.elastic.JaxState(params=params, opt_state=opt_state, epoch=0, batch=0)
    state.register_reset_callbacks([on_new_size])

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches):
                state.params, state.opt_state = step(state.params, state.opt_state, ...)
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0

    train(state)

run under `hvdrun -np N --min-np MIN --max-np MAX --host-discovery-script S`.
A collective that fails inside a jitted step (a lost worker) surfaces from
XLA as a JaxRuntimeError carrying hvd's HorovodInternalError message; run
treats it as the HorovodInternalError it stands for.
"""
import functools

import jax

from hvd import _C
from hvd.common import process_sets as _process_sets
from hvd.common.elastic import ObjectState, run_fn
from hvd.jax import _ffi
from hvd.jax.functions import allgather_object, broadcast_object, broadcast_parameters

__all__ = ["run", "JaxState", "ObjectState"]


def _reset():
    """Leaves the job and joins the next one."""
    _C.elastic_reset()
    _process_sets._after_elastic_reset()


def _hvd_errors(func):
    """func with XLA's wrapping of hvd's failures taken off."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except jax.errors.JaxRuntimeError as e:
            raise _ffi.error_of(e) from None
    return wrapper


def run(func):
    """Decorator for a training function func(state, ...): syncs the state
    from rank 0, calls func, and when a worker is lost
    (HorovodInternalError) or hosts change (HostsUpdatedInterrupt)
    re-forms the job and calls it again from the last commit.  Needs
    hvd.init() first."""
    return run_fn(_hvd_errors(func), _reset)


def _is_arrays(value):
    """A pytree with at least one leaf, every leaf an array."""
    leaves = jax.tree.leaves(value)
    return bool(leaves) and all(isinstance(x, jax.Array) for x in leaves)


class JaxState(ObjectState):
    """State of a JAX training process: keyword arguments that are pytrees
    of JAX arrays (parameters, optax states) are saved by reference (JAX
    arrays are immutable, so a commit copies nothing) and synced with
    broadcast_parameters, in one call per pytree; the others are plain
    objects (ObjectState, synced with broadcast_object).  Each is an
    attribute of the state (state.params, state.epoch)."""

    def __init__(self, **kwargs):
        arrays = {k: v for k, v in kwargs.items() if _is_arrays(v)}
        plain = {k: v for k, v in kwargs.items() if k not in arrays}
        object.__setattr__(self, "_arrays", dict(arrays))
        object.__setattr__(self, "_saved_arrays", dict(arrays))
        for key, value in arrays.items():
            object.__setattr__(self, key, value)
        super().__init__(bcast_object=broadcast_object, **plain)

    def _allreduce_max(self, values, name):
        gathered = allgather_object([int(v) for v in values], name=name)
        return [max(column) for column in zip(*gathered)]

    def save(self):
        self._saved_arrays = {key: getattr(self, key) for key in self._arrays}
        super().save()

    def restore(self):
        for key, value in self._saved_arrays.items():
            object.__setattr__(self, key, value)
        super().restore()

    def _sync(self):
        for key in sorted(self._arrays):
            object.__setattr__(self, key, broadcast_parameters(
                getattr(self, key), root_rank=0, name="hvd.elastic.jax.%s" % key))
        super()._sync()
