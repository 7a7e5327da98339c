"""Gradients through hvd.jax's collectives against jax.grad of the
single-process equivalent: one function of every rank's input (stacked),
whose gradient at rank r's slot is what Horovod's rule gives rank r.

Horovod's rules: allreduce's gradient is the same allreduce of the output
gradients (the gradient of the sum of every rank's loss); allgather's is
the output gradients averaged over the ranks (of the mean of the losses);
reducescatter's is the output gradients gathered, times the set's size for
Sum (of n times the sum of the losses)."""
import jax
import jax.numpy as jnp
import numpy as np

import hvd.jax as hvd
from rank_data import rank_float


def inputs(shape, seed):
    """Every rank's input and weight, stacked; and this rank's."""
    n, me = hvd.size(), hvd.rank()
    xs = jnp.asarray(np.stack([rank_float(shape, r, seed) for r in range(n)]))
    cs = jnp.asarray(np.stack([rank_float(shape[-1:], r, seed + 1000) for r in range(n)]))
    return xs, cs, xs[me], cs[me]


def loss(c, y):
    return jnp.sum(c * jnp.sin(y) * y)


def test_allreduce_gradient_is_the_gradient_of_the_summed_losses():
    n = hvd.size()
    xs, cs, x, c = inputs((3, 4), 41)
    for op, pre, post in ((hvd.Average, 1.0, 1.0), (hvd.Sum, 0.5, 2.0)):
        mine = jax.jit(jax.grad(lambda x: loss(c, hvd.allreduce(
            x, op=op, prescale_factor=pre, postscale_factor=post))))(x)

        def everyone(xs):
            reduced = post * jnp.sum(pre * xs, 0) / (n if op == hvd.Average else 1)
            return sum(loss(cs[k], reduced) for k in range(n))

        ref = jax.grad(everyone)(xs)[hvd.rank()]
        np.testing.assert_allclose(np.asarray(mine), np.asarray(ref), rtol=1e-5, atol=1e-6)


def test_allgather_gradient_is_the_gradient_of_the_mean_loss():
    n = hvd.size()
    xs, cs, x, c = inputs((2, 3), 43)
    mine = jax.grad(lambda x: loss(c, hvd.allgather(x)))(x)  # eager: custom_vjp, no jit
    ref = jax.grad(lambda xs: sum(loss(cs[k], xs.reshape(-1, 3)) for k in range(n)) / n)(xs)
    np.testing.assert_allclose(np.asarray(mine), np.asarray(ref[hvd.rank()]), rtol=1e-5,
                               atol=1e-6)


def test_reducescatter_gradient_with_uneven_rows():
    n, me = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    xs, cs, x, c = inputs((rows, 3), 47)
    split = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    starts = np.cumsum([0] + split)
    mine = jax.jit(jax.grad(lambda x: loss(c, hvd.reducescatter(x, op=hvd.Sum))))(x)

    def everyone(xs):
        total = jnp.sum(xs, 0)
        return n * sum(loss(cs[k], total[starts[k]:starts[k + 1]]) for k in range(n))

    np.testing.assert_allclose(np.asarray(mine), np.asarray(jax.grad(everyone)(xs)[me]),
                               rtol=1e-5, atol=1e-6)


def test_gradient_of_a_pytree_of_mixed_dtypes():
    """Integer leaves of a reduced pytree get JAX's float0 gradient."""
    n = hvd.size()
    x = jnp.full((3,), 1.0 + hvd.rank(), jnp.float32)
    steps = jnp.asarray([hvd.rank()], jnp.int32)

    def f(x):
        out = hvd.allreduce({"x": x, "steps": steps}, op=hvd.Sum)
        return jnp.sum(out["x"] ** 2) + out["steps"][0].astype(jnp.float32)

    g = jax.grad(f)(x)
    total = sum(1.0 + r for r in range(n))
    np.testing.assert_allclose(np.asarray(g), np.full((3,), 2 * total * n, np.float32))
