"""hvd.jax.elastic in a job whose membership does not change: JaxState's
commit, restore and sync of pytrees, and run's recovery through a new job
(hvd_elastic_reset under hvdrun), including from a failure XLA raised
inside a jitted step.  Real changes of membership are exercised for the
shared machinery (hvd.common.elastic) by tests/cluster and tests/launcher."""
import jax
import jax.numpy as jnp
import numpy as np

import hvd.jax as hvd
from hvd.common.exceptions import HorovodInternalError


def params_of(rank):
    return {"w": jnp.full((3, 2), float(rank)), "b": jnp.arange(2, dtype=jnp.int32) + rank}


def test_jax_state_sync_commit_restore():
    me = hvd.rank()
    state = hvd.elastic.JaxState(params=params_of(me), epoch=me)
    state.sync()
    assert state.epoch == 0
    for got, want in zip(jax.tree.leaves(state.params), jax.tree.leaves(params_of(0))):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    state.params = jax.tree.map(lambda x: x + 1, state.params)
    state.epoch = 1
    state.commit()
    committed = state.params
    state.params = jax.tree.map(lambda x: x * 0, state.params)
    state.epoch = 2
    state.restore()
    assert state.epoch == 1 and state.params is committed


def test_run_recovers_from_a_failure_raised_under_jit():
    """A jitted step fails (as when a worker is lost, XLA wraps hvd's
    error): the state goes back to the commit, the job is re-formed and
    the function runs again; collectives work afterwards."""
    me, n = hvd.rank(), hvd.size()
    state = hvd.elastic.JaxState(params={"w": jnp.zeros(2)}, step=0)
    calls, resets = [], []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    step = jax.jit(lambda w: hvd.allreduce(w + 1.0, op=hvd.Average, name="elastic.step"))

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        while state.step < 4:
            state.params = {"w": step(state.params["w"])}
            state.step += 1
            if state.step % 2 == 0:
                state.commit()
            if state.step == 3 and len(calls) == 1:
                raise jax.errors.JaxRuntimeError(
                    "INTERNAL: HorovodInternalError: hvd.jax.allreduce: peer lost (simulated)")
        return state.step

    assert train(state) == 4
    assert calls == [0, 2] and resets == [n]
    np.testing.assert_array_equal(np.asarray(state.params["w"]), np.full(2, 4.0))
    assert hvd.size() == n and hvd.rank() == me
    assert float(hvd.allreduce(jnp.ones(()), op=hvd.Sum, name="elastic.after")) == n


def test_hvd_errors_are_recognised_in_xla_errors():
    from hvd.jax import _ffi
    err = _ffi.error_of(jax.errors.JaxRuntimeError("INTERNAL: HorovodInternalError: boom 'x'"))
    assert isinstance(err, HorovodInternalError) and str(err) == "boom 'x'"
