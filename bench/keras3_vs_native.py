#!/usr/bin/env python3
"""One side of bench/keras3-vs-native: a Keras 3 model trained on synthetic
data for --warmup steps (twice, in two fits), then timed for --steps steps, on every process of
a job; process 0 prints

    RESULT side=SIDE backend=BACKEND model=MODEL processes=N img_s=X

with X the total images per second over the timed steps (per-process batch
x processes x steps / seconds).  The backend is KERAS_BACKEND's.

--side hvd: hvd.keras, started by hvdrun (one rank per host):
    hvd.init(), hvd.DistributedOptimizer(keras.optimizers.SGD),
    model.compile / model.fit with BroadcastGlobalVariablesCallback(0).
    After training every rank allgathers a digest of its trainable weights
    and optimizer state and prints `digests_equal=1 digest=...` (rank 0), or
    `digests_equal=0` and exits 3 if any rank's differs.  (BatchNorm's moving
    statistics stay per rank, as in Horovod, so they are left out.)
--side native: the backend's own multi-process training, one process per
    host, started by the driver with --coordinator HOST:PORT
    --num-processes N --process-id I:
    jax:   jax.distributed.initialize (gloo CPU collectives), then
           keras.distribution.DataParallel over every process's CPU device;
           model.fit on each process's local batch.
    torch: torch.distributed (gloo) and DistributedDataParallel wrapping the
           Keras model (a torch.nn.Module on this backend) in a plain torch
           loop: forward, cross-entropy, backward (DDP's allreduce),
           torch.optim.SGD.
    tensorflow: none (keras-team/keras#20585: MultiWorkerMirroredStrategy
           does not work with Keras 3); the driver does not ask for it.

Both sides run one thread per process (the emulated hosts share the
machine's cores), the same model, per-process batch, learning rate, data
and step counts.  Models: cnn (examples/keras/fashion_mnist.py's, 28x28x1)
and resnet (a small ResNet: a stem and three residual blocks with
BatchNorm, 32x32x3).
"""
import argparse
import hashlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import keras  # noqa: E402
import numpy as np  # noqa: E402

parser = argparse.ArgumentParser(description="hvd.keras against the backend's own")
parser.add_argument("--side", choices=["hvd", "native"], required=True)
parser.add_argument("--model", choices=["cnn", "resnet"], default="cnn")
parser.add_argument("--batch-size", type=int, default=32, help="per process")
parser.add_argument("--warmup", type=int, default=3, help="steps before timing")
parser.add_argument("--steps", type=int, default=30, help="timed steps")
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--coordinator", help="native: HOST:PORT of process 0")
parser.add_argument("--num-processes", type=int, default=1, help="native")
parser.add_argument("--process-id", type=int, default=0, help="native")

SHAPES = {"cnn": (28, 28, 1), "resnet": (32, 32, 3)}


def build_cnn():
    """examples/keras/fashion_mnist.py's model."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def residual_block(x, filters, stride):
    shortcut = x
    y = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.ReLU()(y)
    y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
    y = keras.layers.BatchNormalization()(y)
    if stride != 1 or x.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=stride, use_bias=False)(x)
        shortcut = keras.layers.BatchNormalization()(shortcut)
    return keras.layers.ReLU()(keras.layers.Add()([y, shortcut]))


def build_resnet():
    """A small ResNet: 3x3 stem, blocks of 16, 32 (/2) and 64 (/2) filters."""
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        x = residual_block(x, filters, stride)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(10)(x))


def build_model(name):
    return build_cnn() if name == "cnn" else build_resnet()


def synthetic(model, batch, steps, rank):
    """Random images and labels, a fixed seed per process."""
    rng = np.random.default_rng(1000 + rank)
    x = rng.standard_normal((batch * steps,) + SHAPES[model]).astype(np.float32)
    y = rng.integers(0, 10, batch * steps).astype(np.int32)
    return x, y


def one_thread():
    backend = keras.backend.backend()
    if backend == "torch":
        import torch
        torch.set_num_threads(1)
    elif backend == "tensorflow":
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)


def report(args, processes, seconds):
    img_s = args.batch_size * processes * args.steps / seconds
    print("RESULT side=%s backend=%s model=%s processes=%d img_s=%.2f"
          % (args.side, keras.backend.backend(), args.model, processes, img_s), flush=True)


def fit_timed(model, args, rank, callbacks=()):
    """fit the warm-up steps twice (compiles; the callbacks' broadcast), then
    time a third fit of the timed steps; fit returns once its last step is
    done.  Twice: under keras.distribution the second fit compiles the step
    again (the first compiled it for the variables' initial layout, the
    second for the one the step leaves them in); timing that second fit cut
    DataParallel's img/s by up to 8x at 1 process."""
    x, y = synthetic(args.model, args.batch_size, args.warmup + args.steps, rank)
    split = args.batch_size * args.warmup
    for _ in range(2):
        model.fit(x[:split], y[:split], batch_size=args.batch_size, epochs=1, shuffle=False,
                  callbacks=list(callbacks), verbose=0)
    start = time.perf_counter()
    model.fit(x[split:], y[split:], batch_size=args.batch_size, epochs=1, shuffle=False,
              callbacks=list(callbacks), verbose=0)
    return time.perf_counter() - start


def compile_sgd(model, optimizer):
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def digest(model):
    """Trainable weights and optimizer state (BatchNorm statistics are per rank)."""
    h = hashlib.sha256()
    for v in model.trainable_variables + model.optimizer.variables:
        h.update(keras.ops.convert_to_numpy(v.value).tobytes())
    return h.hexdigest()


def run_hvd(args):
    import hvd.keras as hvd

    hvd.init()
    one_thread()
    keras.utils.set_random_seed(42 + hvd.rank())  # differs: the broadcast makes it one
    model = build_model(args.model)
    compile_sgd(model, hvd.DistributedOptimizer(keras.optimizers.SGD(args.lr)))
    # One callback object for both fits: it broadcasts once, before the first step.
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
    seconds = fit_timed(model, args, hvd.rank(), callbacks)
    digests = hvd.allgather_object(digest(model))
    same = all(d == digests[0] for d in digests)
    if hvd.rank() == 0:
        report(args, hvd.size(), seconds)
        print("digests_equal=%d digest=%s" % (same, digests[0][:16]), flush=True)
    if not same:
        print("rank %d: weights differ across ranks: %s" % (hvd.rank(), digests), flush=True)
        raise SystemExit(3)


def run_native_jax(args):
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=args.coordinator,
                               num_processes=args.num_processes, process_id=args.process_id)
    # Each process feeds its own batches (numpy): they are its shard already.
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=jax.devices(), auto_shard_dataset=False))
    keras.utils.set_random_seed(42)  # the same initial weights in every process
    model = build_model(args.model)
    compile_sgd(model, keras.optimizers.SGD(args.lr))
    seconds = fit_timed(model, args, args.process_id)
    if args.process_id == 0:
        report(args, jax.process_count(), seconds)
    jax.distributed.shutdown()


def run_native_torch(args):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://" + args.coordinator,
                            world_size=args.num_processes, rank=args.process_id)
    keras.utils.set_random_seed(42)
    model = build_model(args.model)
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters and buffers
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    x, y = synthetic(args.model, args.batch_size, args.warmup + args.steps, args.process_id)
    x, y = torch.from_numpy(x), torch.from_numpy(y).long()

    def step(i):
        lo = i * args.batch_size
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x[lo:lo + args.batch_size], training=True),
                               y[lo:lo + args.batch_size])
        loss.backward()
        opt.step()

    for i in range(args.warmup):
        step(i)
    start = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        step(i)
    seconds = time.perf_counter() - start
    if args.process_id == 0:
        report(args, dist.get_world_size(), seconds)
    dist.destroy_process_group()


def main():
    args = parser.parse_args()
    if args.side == "hvd":
        run_hvd(args)
    elif keras.backend.backend() == "jax":
        run_native_jax(args)
    elif keras.backend.backend() == "torch":
        run_native_torch(args)
    else:
        raise SystemExit("no Keras 3 multi-process peer on %s (keras-team/keras#20585)"
                         % keras.backend.backend())


if __name__ == "__main__":
    main()
