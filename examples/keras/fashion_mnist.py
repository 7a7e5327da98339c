#!/usr/bin/env python3
"""Horovod's five-step Keras recipe on Fashion-MNIST with Keras 3, the same
script on every backend; only KERAS_BACKEND changes:

    KERAS_BACKEND=jax hvdrun -np 2 python examples/keras/fashion_mnist.py
    KERAS_BACKEND=torch hvdrun -np 2 python examples/keras/fashion_mnist.py
    KERAS_BACKEND=tensorflow hvdrun -np 2 python examples/keras/fashion_mnist.py

The five steps: init, pin (here: one CPU thread per rank; there is no
GPU), scale the learning rate by size(), wrap the optimizer in
DistributedOptimizer, broadcast the initial state with
BroadcastGlobalVariablesCallback.  The data are Debian's
/usr/share/datasets/fashion-mnist (*.gz IDX files), read with numpy;
nothing is downloaded.  Each rank trains on its shard (every size()-th
sample).  Rank 0 prints `test_accuracy=0.NNNN`; every rank prints
`weights_sha256=...`, a digest of its model and optimizer state at the
end (the same on every rank).
"""
import argparse
import gzip
import hashlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import hvd.keras as hvd  # noqa: E402

SOURCE = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description="Keras 3 Fashion-MNIST Example (hvd)")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=64, help="per rank")
parser.add_argument("--lr", type=float, default=0.001, help="before scaling by size()")
parser.add_argument("--warmup-epochs", type=float, default=1)
parser.add_argument("--train-limit", type=int, default=0, help="first N samples (0: all)")
parser.add_argument("--test-limit", type=int, default=0, help="first N samples (0: all)")
parser.add_argument("--source-dir", default=SOURCE)


def read_idx(path):
    """An IDX file (Fashion-MNIST's format) as a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(source, kind, limit):
    prefix = "train" if kind == "train" else "t10k"
    images = read_idx(os.path.join(source, "%s-images-idx3-ubyte.gz" % prefix))
    labels = read_idx(os.path.join(source, "%s-labels-idx1-ubyte.gz" % prefix))
    if limit:
        images, labels = images[:limit], labels[:limit]
    return ((images.astype(np.float32) / 255.0 - 0.2860) / 0.3530)[..., None], \
        labels.astype(np.int32)


def pin_one_thread():
    """Each rank's share of a CPU machine: one thread for its framework."""
    if keras.backend.backend() == "torch":
        import torch
        torch.set_num_threads(1)
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)


def build_model():
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def digest(model):
    """A digest of the model's and its optimizer's variables."""
    h = hashlib.sha256()
    for v in model.variables + model.optimizer.variables:
        h.update(keras.ops.convert_to_numpy(v.value).tobytes())
    return h.hexdigest()


def main():
    args = parser.parse_args()
    # Horovod: initialize Horovod.
    hvd.init()
    # Horovod: pin the rank to its share of the machine (CPU: one thread).
    pin_one_thread()
    keras.utils.set_random_seed(42 + hvd.rank())

    x, y = load(args.source_dir, "train", args.train_limit)
    # Every rank the same number of samples, so every rank takes the same steps.
    per_rank = len(x) // hvd.size()
    x, y = x[hvd.rank()::hvd.size()][:per_rank], y[hvd.rank()::hvd.size()][:per_rank]
    x_test, y_test = load(args.source_dir, "test", args.test_limit)

    model = build_model()
    # Horovod: scale the learning rate by the number of workers.
    scaled_lr = args.lr * hvd.size()
    # Horovod: add the Horovod DistributedOptimizer.
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr))
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=opt, metrics=["accuracy"])
    steps = -(-len(x) // args.batch_size)  # fit's batches per epoch
    callbacks = [
        # Horovod: broadcast the initial variables from rank 0 to all other processes.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        # Horovod: average the metrics among workers at the end of every epoch.
        hvd.callbacks.MetricAverageCallback(),
        # Horovod: start with lr / size() and reach the scaled lr after the warmup.
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr,
                                                 warmup_epochs=args.warmup_epochs,
                                                 steps_per_epoch=steps),
    ]
    model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, shuffle=True,
              callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)
    # Every rank evaluates its share of the test set; the accuracy is averaged.
    _, acc = model.evaluate(x_test[hvd.rank()::hvd.size()], y_test[hvd.rank()::hvd.size()],
                            verbose=0)
    acc = hvd.allreduce(acc, name="test_accuracy")
    print("weights_sha256=%s" % digest(model))
    if hvd.rank() == 0:
        print("test_accuracy=%.4f" % float(keras.ops.convert_to_numpy(acc)))


if __name__ == "__main__":
    main()
