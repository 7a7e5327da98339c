#!/usr/bin/env python3
"""Horovod's PyTorch synthetic benchmark, with hvd, on CPU.

    hvdrun -np 2 /usr/bin/python3 examples/torch/synthetic_benchmark.py \
        --model resnet18 --batch-size 8 --num-iters 5

Trains a torchvision model on random data and prints images per second per
worker and in total, each with a 95% confidence interval (1.96 standard
deviations over the iterations), as Horovod's pytorch_synthetic_benchmark.py.
"""
import argparse
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import hvd.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark (hvd)",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--powersgd-rank", type=int, default=0,
                    help="hvd.PowerSGD compression at this rank (0: off)")
parser.add_argument("--start-powersgd-iter", type=int, default=0,
                    help="with --powersgd-rank: plain allreduce for this many steps first")
parser.add_argument("--min-compression-rate", type=float, default=2.0,
                    help="with --powersgd-rank: compress only weights that gain this much")
parser.add_argument("--model", type=str, default="resnet50", help="model to benchmark")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--num-warmup-batches", type=int, default=10,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
parser.add_argument("--num-threads", type=int, default=1,
                    help="torch CPU threads per worker")
parser.add_argument("--use-adasum", action="store_true", default=False,
                    help="use adasum algorithm to do reduction")


def main():
    args = parser.parse_args()

    hvd.init()
    torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)

    # Set up standard model.
    model = getattr(models, args.model)()

    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size() if not args.use_adasum else 1
    optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    if args.powersgd_rank:  # hvd's addition (docs/compression.md)
        compression = hvd.PowerSGD(args.powersgd_rank, args.min_compression_rate,
                                   start_powerSGD_iter=args.start_powersgd_iter)

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Set up fixed fake data
    data = torch.randn(args.batch_size, 3, 224, 224)
    target = torch.LongTensor(args.batch_size).random_() % 1000

    def benchmark_step():
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

    def log(s, nl=True):
        if hvd.rank() != 0:
            return
        print(s, end="\n" if nl else "", flush=True)

    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    log("Number of CPUs: %d" % hvd.size())

    # Warm-up
    log("Running warmup...")
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    # Benchmark
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log("Iter #%d: %.1f img/sec per CPU" % (x, img_sec))
        img_secs.append(img_sec)

    # Results
    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per CPU: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d CPU(s): %.1f +-%.1f" %
        (hvd.size(), hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))
    hvd.shutdown()


if __name__ == "__main__":
    main()
