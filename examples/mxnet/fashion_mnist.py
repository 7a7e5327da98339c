#!/usr/bin/env python3
"""A Fashion-MNIST CNN in Gluon, made distributed with hvd.mxnet:

    hvdrun -np 2 ~/.cache/hvd/venv-mxnet/bin/python examples/mxnet/fashion_mnist.py --epochs 1

(the MXNet venv, scripts/venv-mxnet.sh; PYTHONPATH=build/python for a
build tree).  The Horovod steps are marked "Horovod:" below: init, (pinning
to a device: CPU here, nothing to pin), scaling the learning rate by the
number of processes, DistributedTrainer in place of gluon.Trainer, and
broadcasting the initial parameters from rank 0 -- here parameters whose
shapes Gluon learns at the first forward (deferred initialisation), which
broadcast_parameters broadcasts then.  Each rank trains on its shard of
the data, and only rank 0 reports.

The data come from Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist/*.gz, IDX files), read with NumPy;
nothing is downloaded.  Rank 0 prints the final line `test_accuracy=0.NNNN`.
"""
import argparse
import gzip
import os
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

import hvd.mxnet as hvd

SOURCE = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description="Gluon Fashion-MNIST example (hvd.mxnet)")
parser.add_argument("--batch-size", type=int, default=64, help="per rank (default: 64)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.01, help="SGD's, for one process")
parser.add_argument("--momentum", type=float, default=0.9)
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
    x = read_idx(path % ("images", 3)).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    y = read_idx(path % ("labels", 1)).astype(np.float32)
    x = (x - 0.2860) / 0.3530
    return (x[:limit], y[:limit]) if limit else (x, y)


def conv_net():
    """Horovod's MNIST CNN for Gluon; no input sizes: Gluon infers them."""
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(channels=20, kernel_size=5, activation="relu"),
            gluon.nn.MaxPool2D(pool_size=2, strides=2),
            gluon.nn.Conv2D(channels=50, kernel_size=5, activation="relu"),
            gluon.nn.MaxPool2D(pool_size=2, strides=2),
            gluon.nn.Flatten(),
            gluon.nn.Dense(512, activation="relu"),
            gluon.nn.Dense(10))
    return net


def correct(net, x, y, batch):
    """How many of x the net classifies right."""
    right = 0
    for i in range(0, len(x), batch):
        out = net(mx.nd.array(x[i:i + batch]))
        right += int((out.argmax(axis=1) == mx.nd.array(y[i:i + batch])).sum().asscalar())
    return right


def main():
    args = parser.parse_args()
    # Horovod: initialize the library.
    hvd.init()
    # Horovod: pin to a device by local_rank -- the CPU here.

    x_train, y_train = load(args.source_dir, "train", args.train_limit)
    x_test, y_test = load(args.source_dir, "t10k", args.test_limit)
    # Each rank trains on its own shard.
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]

    # Every rank starts from its own random parameters here on purpose:
    # the broadcast below is what makes them the same.
    mx.random.seed(args.seed + hvd.rank())
    net = conv_net()
    net.initialize(mx.init.Xavier(magnitude=2.24))
    net.hybridize()
    # Horovod: broadcast the initial parameters from rank 0 (their shapes
    # are known at the first forward: they are broadcast then).
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)

    # Horovod: scale the learning rate by the number of processes, and
    # average the gradients with DistributedTrainer.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": args.lr * hvd.size(),
                                                     "momentum": args.momentum},
                                     compression=compression)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    rng = np.random.default_rng(args.seed + hvd.rank())
    # Every rank takes the same number of steps (the shards may differ by one).
    steps = min(hvd.allgather_object(len(x_train))) // args.batch_size
    for epoch in range(args.epochs):
        start = time.time()
        order = rng.permutation(len(x_train))
        total = mx.nd.zeros((1,))
        for i in range(steps):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            data, label = mx.nd.array(x_train[idx]), mx.nd.array(y_train[idx])
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(args.batch_size)
            total += loss.mean()
        loss = hvd.allreduce(total / steps, name="epoch.loss").asscalar()
        if hvd.rank() == 0:
            print("epoch %d: loss %.4f (%.1f s)" % (epoch + 1, loss, time.time() - start),
                  flush=True)

    # Test accuracy over the whole test set, each rank scoring its shard.
    mine = correct(net, x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()],
                   256)
    right = hvd.allreduce(mx.nd.array([mine], dtype="int64"), op=hvd.Sum, name="test.correct")
    # Horovod: only rank 0 reports.
    if hvd.rank() == 0:
        print("test_accuracy=%.4f" % (int(right.asscalar()) / len(x_test)), flush=True)


if __name__ == "__main__":
    main()
