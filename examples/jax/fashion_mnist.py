#!/usr/bin/env python3
"""A Fashion-MNIST MLP in plain JAX + optax, made distributed with hvd.jax:

    hvdrun -np 2 /root/.cache/hvd/venv/bin/python examples/jax/fashion_mnist.py --epochs 1

The five Horovod steps are marked "Horovod:" below: init, (pinning to a
device: CPU here, nothing to pin), scaling the learning rate by the number
of processes, wrapping the optimizer in DistributedOptimizer, and
broadcasting the initial parameters from rank 0 (plus: each rank trains on
its shard of the data, and only rank 0 reports).

The data come from Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist/*.gz, IDX files), read with NumPy;
nothing is downloaded.  Rank 0 prints the final line `test_accuracy=0.NNNN`.
"""
import argparse
import gzip
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import hvd.jax as hvd

SOURCE = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description="JAX Fashion-MNIST example (hvd.jax)")
parser.add_argument("--batch-size", type=int, default=64, help="per rank (default: 64)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.001, help="Adam's, for one process")
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--fp16-allreduce", action="store_true", help="fp16 gradient compression")
parser.add_argument("--source-dir", default=SOURCE, help="the *.gz IDX files")
parser.add_argument("--train-limit", type=int, default=0, help="first N training samples")
parser.add_argument("--test-limit", type=int, default=0, help="first N test samples")


def read_idx(path):
    """An IDX file (gzip) as a NumPy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndims).reshape(dims)


def load(source, kind, limit):
    path = os.path.join(source, "%s-%%s-idx%%d-ubyte.gz" % kind)
    if not os.path.exists(path % ("images", 3)):
        raise SystemExit("missing %s (Debian's dataset-fashion-mnist)" % (path % ("images", 3)))
    x = read_idx(path % ("images", 3)).reshape(-1, 784).astype(np.float32) / 255.0
    y = read_idx(path % ("labels", 1)).astype(np.int32)
    x = (x - 0.2860) / 0.3530
    return (x[:limit], y[:limit]) if limit else (x, y)


def init_params(key, hidden):
    k1, k2 = jax.random.split(key)
    return {"fc1": {"w": jax.random.normal(k1, (784, hidden)) * np.sqrt(2.0 / 784),
                    "b": jnp.zeros(hidden)},
            "fc2": {"w": jax.random.normal(k2, (hidden, 10)) * np.sqrt(1.0 / hidden),
                    "b": jnp.zeros(10)}}


def logits(params, x):
    h = jax.nn.relu(x @ params["fc1"]["w"] + params["fc1"]["b"])
    return h @ params["fc2"]["w"] + params["fc2"]["b"]


def loss_fn(params, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(logits(params, x), y).mean()


def main():
    args = parser.parse_args()
    # Horovod: initialize the library.
    hvd.init()
    # Horovod: pin to a device by local_rank -- JAX runs on the CPU here.

    x_train, y_train = load(args.source_dir, "train", args.train_limit)
    x_test, y_test = load(args.source_dir, "t10k", args.test_limit)
    # Each rank trains on its own shard (as DistributedSampler does).
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]

    # Every rank starts from its own random parameters here on purpose:
    # the broadcast below is what makes them the same.
    params = init_params(jax.random.PRNGKey(args.seed + hvd.rank()), args.hidden)
    # Horovod: scale the learning rate by the number of processes.
    # Horovod: wrap the optimizer; its update averages the gradients first.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    opt = hvd.DistributedOptimizer(optax.adam(args.lr * hvd.size()), compression=compression)
    # Horovod: broadcast the initial parameters from rank 0.
    params = hvd.broadcast_parameters(params, root_rank=0)
    state = opt.init(params)

    @jax.jit
    def train_step(params, state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    @jax.jit
    def correct(params, x, y):
        return jnp.sum(jnp.argmax(logits(params, x), -1) == y)

    rng = np.random.default_rng(args.seed + hvd.rank())
    # Every rank takes the same number of steps (the shards may differ by one).
    steps = min(hvd.allgather_object(len(x_train))) // args.batch_size
    for epoch in range(args.epochs):
        start = time.time()
        order = rng.permutation(len(x_train))
        for i in range(steps):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            params, state, loss = train_step(params, state, x_train[idx], y_train[idx])
        loss = hvd.allreduce(loss, name="epoch.loss")
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f (%.1f s)" % (epoch + 1, float(loss), time.time() - start),
                  flush=True)

    # Test accuracy over the whole test set, each rank scoring its shard.
    mine = jnp.asarray([correct(params, x_test[hvd.rank()::hvd.size()],
                                y_test[hvd.rank()::hvd.size()])], jnp.int32)
    total = hvd.allreduce(mine, op=hvd.Sum, name="test.correct")
    # Horovod: only rank 0 reports.
    if hvd.rank() == 0:
        print("test_accuracy=%.4f" % (int(total[0]) / len(x_test)), flush=True)


if __name__ == "__main__":
    main()
