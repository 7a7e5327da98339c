#!/usr/bin/env python3
"""Horovod's TensorFlow 2 synthetic benchmark (tensorflow2_synthetic_benchmark.py),
with hvd, on CPU.

    hvdrun -np 2 /root/.cache/hvd/venv/bin/python examples/tensorflow/synthetic_benchmark.py \
        --model ResNet50 --batch-size 8 --num-iters 5

Trains a keras.applications model (or --model small: a small resnet-like
network that fits these CPUs) on random data with DistributedGradientTape
and prints images per second per worker and in total, each with a 95%
confidence interval (1.96 standard deviations over the iterations), as
Horovod's script does.  Only the import differs from Horovod's, and
--xla: the step compiled by XLA, allreduce included
(HOROVOD_ENABLE_XLA_OPS=1).  tf.keras is Keras 3, or tf-keras 2 under
TF_USE_LEGACY_KERAS=1.
"""
import argparse
import os
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvd.tensorflow as hvd  # noqa: E402  (was: import horovod.tensorflow as hvd)

parser = argparse.ArgumentParser(description="TensorFlow Synthetic Benchmark (hvd)",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="small",
                    help="'small' (resnet-like) or a keras.applications model, e.g. ResNet50")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--image-size", type=int, default=0,
                    help="image side (default: 64 for small, 224 otherwise)")
parser.add_argument("--num-warmup-batches", type=int, default=3,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=5,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=5, help="number of benchmark iterations")
parser.add_argument("--num-threads", type=int, default=1, help="TensorFlow threads per worker")
parser.add_argument("--xla", action="store_true", default=False,
                    help="compile the step with XLA (tf.function(jit_compile=True); the "
                    "allreduce inside it needs HOROVOD_ENABLE_XLA_OPS=1)")


def small_model(side):
    """A few residual blocks: a resnet's shape at a size these CPUs train."""
    inputs = tf.keras.Input((side, side, 3))
    x = tf.keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(inputs)
    for width in (32, 64, 128):
        shortcut = tf.keras.layers.Conv2D(width, 1, strides=2, padding="same")(x)
        x = tf.keras.layers.Conv2D(width, 3, strides=2, padding="same", activation="relu")(x)
        x = tf.keras.layers.Conv2D(width, 3, padding="same")(x)
        x = tf.keras.layers.ReLU()(x + shortcut)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    return tf.keras.Model(inputs, tf.keras.layers.Dense(1000)(x))


def main():
    args = parser.parse_args()
    hvd.init()
    tf.config.threading.set_intra_op_parallelism_threads(args.num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.num_threads)
    side = args.image_size or (64 if args.model == "small" else 224)
    model = small_model(side) if args.model == "small" else \
        getattr(tf.keras.applications, args.model)(weights=None, input_shape=(side, side, 3))
    opt = tf.keras.optimizers.SGD(0.01)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    data = tf.random.uniform([args.batch_size, side, side, 3])
    target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=args.xla)
    def train_step():
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(data, training=True))
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    def benchmark_step(first_batch):
        train_step()
        # Horovod: broadcast the initial variables after the first step,
        # once the optimizer's have been created.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables() if callable(opt.variables)
                                    else opt.variables, root_rank=0)

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    log("Model: %s, batch size: %d, image %dx%d" % (args.model, args.batch_size, side, side))
    log("Number of CPUs: %d" % hvd.size())
    benchmark_step(first_batch=True)
    timeit.timeit(lambda: benchmark_step(first_batch=False), number=args.num_warmup_batches)
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(lambda: benchmark_step(first_batch=False),
                             number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log("Iter #%d: %.1f img/sec per CPU" % (x, img_sec))
        img_secs.append(img_sec)
    img_sec_mean, img_sec_conf = np.mean(img_secs), 1.96 * np.std(img_secs)
    log("Img/sec per CPU: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d CPU(s): %.1f +-%.1f" % (hvd.size(), hvd.size() * img_sec_mean,
                                                    hvd.size() * img_sec_conf))


if __name__ == "__main__":
    main()
