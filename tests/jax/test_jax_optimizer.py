"""broadcast_parameters, allreduce_gradients (one fused call),
DistributedOptimizer over optax (backward_passes_per_step, fp16
compression), broadcast_object / allgather_object."""
import jax
import jax.numpy as jnp
import numpy as np
import optax

import hvd.jax as hvd
from rank_data import rank_input


def tree(rank, seed):
    return {"w": jnp.asarray(rank_input((3, 2), np.float32, rank, seed)),
            "b": jnp.asarray(rank_input((2,), np.float64, rank, seed + 1)),
            "step": jnp.asarray(rank_input((), np.int32, rank, seed + 2))}


def test_broadcast_parameters_gives_every_rank_the_roots():
    root = hvd.size() - 1
    got = hvd.broadcast_parameters(tree(hvd.rank(), 51), root_rank=root)
    want = tree(root, 51)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_allreduce_gradients_is_one_custom_call_and_averages():
    n = hvd.size()
    grads = {k: v for k, v in tree(hvd.rank(), 53).items() if k != "step"}
    step = jax.jit(lambda g: hvd.allreduce_gradients(g, name="grads.fused"))
    hlo = step.lower(grads).as_text()
    assert hlo.count("hvd_jax_allreduce") == 1, hlo
    got = step(grads)
    for key in grads:
        ref = sum(np.asarray(tree(r, 53)[key]) for r in range(n)) / n
        np.testing.assert_allclose(np.asarray(got[key]), ref, rtol=1e-7)


def test_fp16_compression_keeps_dtypes():
    n = hvd.size()
    grads = {"w": tree(hvd.rank(), 55)["w"]}
    got = hvd.allreduce_gradients(grads, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got["w"].dtype == jnp.float32
    ref = sum(np.asarray(tree(r, 55)["w"]) for r in range(n))
    np.testing.assert_array_equal(np.asarray(got["w"]), ref)  # small integers: exact in fp16


def _sgd_case(seed):
    n, me = hvd.size(), hvd.rank()
    params = {"w": jnp.ones((4,), jnp.float32)}
    grads = [{"w": jnp.asarray(rank_input((4,), np.float32, me, seed + i))} for i in range(2)]
    means = [sum(rank_input((4,), np.float32, r, seed + i) for r in range(n)) / n
             for i in range(2)]
    return params, grads, means


def test_distributed_optimizer_applies_the_averaged_gradient():
    params, grads, means = _sgd_case(61)
    opt = hvd.DistributedOptimizer(optax.sgd(0.5))
    state = opt.init(params)
    step = jax.jit(lambda p, s, g: opt.update(g, s, p))
    updates, state = step(params, state, grads[0])
    np.testing.assert_allclose(np.asarray(updates["w"]), -0.5 * means[0], rtol=1e-6)


def test_backward_passes_per_step_accumulates_then_steps():
    params, grads, means = _sgd_case(63)
    opt = hvd.DistributedOptimizer(optax.sgd(1.0), backward_passes_per_step=2,
                                   compression=hvd.Compression.fp16)
    state = opt.init(params)
    step = jax.jit(lambda p, s, g: opt.update(g, s, p))
    first, state = step(params, state, grads[0])
    np.testing.assert_array_equal(np.asarray(first["w"]), np.zeros(4, np.float32))
    second, state = step(params, state, grads[1])
    np.testing.assert_allclose(np.asarray(second["w"]), -(means[0] + means[1]), rtol=1e-3)
    assert int(state.passes) == 0


def test_objects():
    me = hvd.rank()
    assert hvd.broadcast_object({"rank": me, "x": [1, 2]}, root_rank=0) == {"rank": 0,
                                                                          "x": [1, 2]}
    assert hvd.allgather_object("r%d" % me * (me + 1)) == [
        "r%d" % r * (r + 1) for r in range(hvd.size())]
