"""One binding's smoke test, run by every rank of `hvdrun -np N python smoke.py BINDING`
from an installed wheel (scripts/wheel-matrix.sh): init, then an allreduce
(sum and average), a broadcast and an allgather whose results are checked
against values computed here, and for the frameworks with a training API
one step of it.  Prints "smoke BINDING ok rank R of N <framework version>"
on success; any failure is an exception (exit 1).

BINDING: torch, tensorflow, keras, jax, mxnet, or run (hvd.run from a
plain Python: run it alone, it starts its own ranks).
"""
import sys


def expect(got, want, what):
    if [float(v) for v in got] != [float(v) for v in want]:
        raise AssertionError("%s: got %s, want %s" % (what, list(got), list(want)))


def torch_smoke():
    import torch
    import hvd.torch as hvd
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    expect(hvd.allreduce(torch.full((3,), r + 1.0), op=hvd.Sum).tolist(),
           [n * (n + 1) / 2] * 3, "allreduce")
    expect(hvd.broadcast(torch.full((2,), float(r)), root_rank=n - 1).tolist(), [n - 1.0] * 2,
           "broadcast")
    expect(hvd.allgather(torch.tensor([float(r)])).tolist(), range(n), "allgather")
    model = torch.nn.Linear(2, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.full((4, 2), float(r))).sum().backward()
    opt.step()
    w = hvd.allgather(model.weight.detach().reshape(1, -1))
    expect(w[0].tolist(), w[-1].tolist(), "weights after a step")
    return hvd, torch.__version__


def tensorflow_smoke():
    import tensorflow as tf
    import hvd.tensorflow as hvd
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    expect(hvd.allreduce(tf.fill([3], r + 1.0), op=hvd.Sum).numpy(), [n * (n + 1) / 2] * 3,
           "allreduce")
    expect(hvd.broadcast(tf.fill([2], float(r)), root_rank=n - 1).numpy(), [n - 1.0] * 2,
           "broadcast")
    expect(hvd.allgather(tf.constant([float(r)])).numpy(), range(n), "allgather")
    average = tf.function(lambda x: hvd.allreduce(x, op=hvd.Average))
    expect(average(tf.fill([2], float(r))).numpy(), [(n - 1) / 2] * 2, "allreduce in tf.function")
    return hvd, tf.__version__


def keras_smoke():
    import numpy as np
    import hvd.keras as hvd
    from hvd.keras._keras import keras
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    x = np.full((4, 2), float(r), np.float32)
    model.fit(x, np.ones((4, 1), np.float32), epochs=1, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    w = np.concatenate([v.reshape(-1) for v in model.get_weights()])
    expect(hvd.allgather_object(w.tolist())[-1], w.tolist(), "weights after a step")
    return hvd, keras.__version__


def jax_smoke():
    import jax
    import jax.numpy as jnp
    import hvd.jax as hvd
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    expect(hvd.allreduce(jnp.full((3,), r + 1.0), op=hvd.Sum), [n * (n + 1) / 2] * 3,
           "allreduce")
    expect(hvd.broadcast(jnp.full((2,), float(r)), root_rank=n - 1), [n - 1.0] * 2, "broadcast")
    expect(hvd.allgather(jnp.array([float(r)])), range(n), "allgather")
    average = jax.jit(lambda x: hvd.allreduce(x, op=hvd.Average, name="smoke.jit"))
    expect(average(jnp.full((2,), float(r))), [(n - 1) / 2] * 2, "allreduce under jit")
    return hvd, jax.__version__


def mxnet_smoke():
    import mxnet as mx
    import hvd.mxnet as hvd
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    expect(hvd.allreduce(mx.nd.full((3,), r + 1.0), average=False).asnumpy(),
           [n * (n + 1) / 2] * 3, "allreduce")
    expect(hvd.broadcast(mx.nd.full((2,), float(r)), root_rank=n - 1).asnumpy(), [n - 1.0] * 2,
           "broadcast")
    expect(hvd.allgather(mx.nd.array([float(r)])).asnumpy(), range(n), "allgather")
    return hvd, mx.__version__


def rank_and_size():
    from hvd import _C
    _C.init()
    return _C.rank(), _C.size()


def run_smoke():
    import hvd
    got = hvd.run(rank_and_size, np=2)
    if got != [(0, 2), (1, 2)]:
        raise AssertionError("hvd.run: got %s" % (got,))
    print("smoke run ok %s" % sys.version.split()[0])


def main():
    binding = sys.argv[1]
    if binding == "run":
        return run_smoke()
    hvd, version = globals()[binding + "_smoke"]()
    print("smoke %s ok rank %d of %d %s" % (binding, hvd.rank(), hvd.size(), version), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
