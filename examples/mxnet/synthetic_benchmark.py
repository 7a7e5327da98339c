#!/usr/bin/env python3
"""Horovod's MXNet synthetic benchmark, with hvd, on CPU.

    hvdrun -np 2 ~/.cache/hvd/venv-mxnet/bin/python examples/mxnet/synthetic_benchmark.py \\
        --model resnet18_v1 --batch-size 8 --num-iters 5

Trains a Gluon model-zoo model (no pretrained weights) on random data with
DistributedTrainer and prints images per second per worker and in total,
each with a 95% confidence interval (1.96 standard deviations over the
iterations), as Horovod's synthetic benchmarks do.  bench/mxnet-kvstore
runs the same loop (benchmark() below) under MXNet's own dist_sync
kvstore for comparison.
"""
import argparse
import timeit

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision

parser = argparse.ArgumentParser(description="MXNet Synthetic Benchmark (hvd)",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="resnet50_v1",
                    help="a gluon.model_zoo.vision model")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--image-size", type=int, default=224, help="input height and width")
parser.add_argument("--num-warmup-batches", type=int, default=10,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")


def model(args):
    """The model, initialised, hybridized, with its parameters' shapes known."""
    net = vision.get_model(args.model, pretrained=False, classes=1000)
    net.initialize(mx.init.Xavier(magnitude=2))
    net.hybridize(static_alloc=True, static_shape=True)
    net(mx.nd.zeros((1, 3, args.image_size, args.image_size)))
    return net


def benchmark(net, trainer, args, rank, size, device="CPU"):
    """The timed loop: rank 0 prints img/sec per worker and in total."""
    data = mx.nd.random.uniform(shape=(args.batch_size, 3, args.image_size, args.image_size))
    label = mx.nd.array(np.random.randint(0, 1000, args.batch_size))
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step():
        for _ in range(args.num_batches_per_iter):
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(args.batch_size)
        mx.nd.waitall()

    def log(s):
        if rank == 0:
            print(s, flush=True)

    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    log("Number of %ss: %d" % (device, size))
    log("Running warmup...")
    for _ in range(max(1, args.num_warmup_batches // args.num_batches_per_iter)):
        step()
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(step, number=1)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per %s" % (x, img_sec, device))
        img_secs.append(img_sec)
    mean, conf = np.mean(img_secs), 1.96 * np.std(img_secs)
    log("Img/sec per %s: %.1f +-%.1f" % (device, mean, conf))
    log("Total img/sec on %d %s(s): %.1f +-%.1f" % (size, device, size * mean, size * conf))


def main():
    import hvd.mxnet as hvd

    args = parser.parse_args()
    hvd.init()
    mx.random.seed(hvd.rank())
    np.random.seed(hvd.rank())
    net = model(args)
    params = net.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.01 * hvd.size(),
                                                     "momentum": 0.9},
                                     compression=compression)
    benchmark(net, trainer, args, hvd.rank(), hvd.size())


if __name__ == "__main__":
    main()
