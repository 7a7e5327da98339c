#!/usr/bin/env python3
"""Horovod's Keras recipe (tensorflow2_keras_mnist.py) on Fashion-MNIST, with hvd.

Written as a horovod.tensorflow.keras script with only its import changed:

    hvdrun -np 2 /root/.cache/hvd/venv/bin/python examples/tensorflow/keras_fashion_mnist.py

The five steps: init, pin (one CPU thread pool per rank here: there is no
GPU), scale the learning rate by size(), wrap the optimizer in
DistributedOptimizer, broadcast the initial state with
BroadcastGlobalVariablesCallback.  The data are Debian's
/usr/share/datasets/fashion-mnist (*.gz IDX files), read with numpy;
nothing is downloaded.  Each rank trains on its shard (every size()-th
sample); rank 0 prints the final line `test_accuracy=0.NNNN`.
"""
import argparse
import gzip
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvd.tensorflow.keras as hvd  # noqa: E402  (was: import horovod.tensorflow.keras as hvd)

SOURCE = "/usr/share/datasets/fashion-mnist"

parser = argparse.ArgumentParser(description="Keras Fashion-MNIST Example (hvd)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64, help="per rank")
parser.add_argument("--lr", type=float, default=0.001, help="before scaling by size()")
parser.add_argument("--warmup-epochs", type=float, default=1)
parser.add_argument("--train-limit", type=int, default=0, help="first N samples (0: all)")
parser.add_argument("--test-limit", type=int, default=0, help="first N samples (0: all)")
parser.add_argument("--source-dir", default=SOURCE)
parser.add_argument("--threads", type=int, default=1, help="TensorFlow threads per rank")


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
        labels.astype(np.int64)


def build_model():
    return tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])


def main():
    args = parser.parse_args()
    # Horovod: initialize Horovod.
    hvd.init()
    # Horovod: pin the rank to its share of the machine (CPU: few threads).
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.keras.utils.set_random_seed(42 + hvd.rank())

    x, y = load(args.source_dir, "train", args.train_limit)
    # Every rank the same number of samples, so every rank takes the same steps.
    per_rank = len(x) // hvd.size()
    x, y = x[hvd.rank()::hvd.size()][:per_rank], y[hvd.rank()::hvd.size()][:per_rank]
    x_test, y_test = load(args.source_dir, "test", args.test_limit)

    model = build_model()
    # Horovod: scale the learning rate by the number of workers.
    scaled_lr = args.lr * hvd.size()
    # Horovod: add the Horovod DistributedOptimizer.
    opt = hvd.DistributedOptimizer(tf.keras.optimizers.Adam(scaled_lr))
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
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
    if hvd.rank() == 0:
        print("test_accuracy=%.4f" % acc)


if __name__ == "__main__":
    main()
