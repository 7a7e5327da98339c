#!/usr/bin/env python3
"""The synthetic benchmark's model, batch and loop under TensorFlow's own
tf.distribute.MultiWorkerMirroredStrategy (collective ops over gRPC, ring),
to compare with examples/tensorflow/synthetic_benchmark.py in the same run.

Start one process per worker with TF_CONFIG set, e.g. for two on this host:

    TF_CONFIG='{"cluster":{"worker":["localhost:12345","localhost:12346"]},
                "task":{"type":"worker","index":0}}' python mwms_benchmark.py &
    TF_CONFIG='...,"index":1}}' python mwms_benchmark.py

Worker 0 prints the same lines as the hvd benchmark (img/sec per worker
and in total, with a 95% confidence interval).  --batch-size is per worker.
"""
import argparse
import json
import os
import sys
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synthetic_benchmark import small_model  # noqa: E402

parser = argparse.ArgumentParser(description="MultiWorkerMirroredStrategy synthetic benchmark")
parser.add_argument("--model", default="small")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--image-size", type=int, default=0)
parser.add_argument("--num-warmup-batches", type=int, default=3)
parser.add_argument("--num-batches-per-iter", type=int, default=5)
parser.add_argument("--num-iters", type=int, default=5)
parser.add_argument("--num-threads", type=int, default=1)
parser.add_argument("--xla", action="store_true", default=False,
                    help="compile each replica's forward and backward pass with XLA (the "
                    "strategy's all-reduce stays outside: it does not compile on the CPU)")


def main():
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.num_threads)
    ring = tf.distribute.experimental.CommunicationImplementation.RING
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=ring))
    workers = strategy.num_replicas_in_sync
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    side = args.image_size or (64 if args.model == "small" else 224)
    with strategy.scope():
        model = small_model(side) if args.model == "small" else \
            getattr(tf.keras.applications, args.model)(weights=None, input_shape=(side, side, 3))
        opt = tf.keras.optimizers.SGD(0.01)
    data = tf.random.uniform([args.batch_size, side, side, 3])
    target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)
    # Per-example losses, averaged here: tf-keras 2 refuses a loss that
    # reduces itself inside a tf.distribute strategy.
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function(jit_compile=args.xla)
    def gradients():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(loss_fn(target, model(data, training=True))) / workers
        return tape.gradient(loss, model.trainable_variables)

    def replica_step():
        opt.apply_gradients(zip(gradients(), model.trainable_variables))

    @tf.function
    def benchmark_step():
        strategy.run(replica_step)

    def log(s):
        if index == 0:
            print(s, flush=True)

    log("Model: %s, batch size: %d, image %dx%d (MultiWorkerMirroredStrategy, ring)"
        % (args.model, args.batch_size, side, side))
    log("Number of workers: %d" % workers)
    benchmark_step()
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log("Iter #%d: %.1f img/sec per CPU" % (x, img_sec))
        img_secs.append(img_sec)
    mean, conf = np.mean(img_secs), 1.96 * np.std(img_secs)
    log("Img/sec per CPU: %.1f +-%.1f" % (mean, conf))
    log("Total img/sec on %d CPU(s): %.1f +-%.1f" % (workers, workers * mean, workers * conf))


if __name__ == "__main__":
    main()
