#!/usr/bin/env python3
"""examples/torch/synthetic_benchmark.py's loop with torch's own
DistributedDataParallel (gloo) instead of hvd: the peer of hvd.torch in
bench/torch-cluster.  Same model, batch, data, warm-up and timing, same
output lines ("Img/sec per CPU", "Total img/sec on N CPU(s)").

Run under hvdrun, which starts it and says who is who (HOROVOD_RANK,
HOROVOD_SIZE); rank 0 listens for torch.distributed on the address of its
interface towards hvdrun's rendezvous and hands that to the others with
hvd.broadcast_object (hvd does nothing else here).
"""
import argparse
import os
import socket
import timeit

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import hvd.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark (DDP, gloo)")
parser.add_argument("--model", type=str, default="resnet50")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-warmup-batches", type=int, default=10)
parser.add_argument("--num-batches-per-iter", type=int, default=10)
parser.add_argument("--num-iters", type=int, default=10)
parser.add_argument("--num-threads", type=int, default=1)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="compress gradients to float16 on the wire (DDP's fp16_compress_hook)")
parser.add_argument("--powersgd-rank", type=int, default=0,
                    help="torch's PowerSGD hook at this matrix_approximation_rank (0: off)")
parser.add_argument("--start-powersgd-iter", type=int, default=2,
                    help="with --powersgd-rank: the hook's start_powerSGD_iter (>= 2)")
parser.add_argument("--min-compression-rate", type=float, default=2.0,
                    help="with --powersgd-rank: the hook's min_compression_rate")


def own_address():
    """This host's address on the way to hvdrun (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((os.environ["HOROVOD_GLOO_RENDEZVOUS_ADDR"], 9))
        return s.getsockname()[0]


def free_port(addr):
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def main():
    args = parser.parse_args()
    hvd.init()
    torch.set_num_threads(args.num_threads)
    torch.manual_seed(0)
    rank, size = hvd.rank(), hvd.size()
    if rank == 0:
        addr = own_address()
        where = (addr, free_port(addr))
    else:
        where = None
    addr, port = hvd.broadcast_object(where, root_rank=0, name="ddp.address")
    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (addr, port), rank=rank,
                            world_size=size)

    # torch's PowerSGD hook chains each bucket's P allreduce, Q allreduce and
    # decompression through futures; over gloo with several buckets in flight
    # those chains ran in different orders on different ranks (a collective
    # mismatch: "Received data size doesn't match expected size").  One bucket
    # (an explicit cap sizes the first bucket too) keeps them in order.
    buckets = {"bucket_cap_mb": 1024} if args.powersgd_rank else {}
    model = torch.nn.parallel.DistributedDataParallel(getattr(models, args.model)(), **buckets)
    if args.fp16_allreduce:  # DDP's counterpart of hvd.Compression.fp16
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    if args.powersgd_rank:  # the peer of hvd.PowerSGD, with the same settings
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
        state = powerSGD_hook.PowerSGDState(
            process_group=None, matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.start_powersgd_iter,
            min_compression_rate=args.min_compression_rate)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    optimizer = optim.SGD(model.parameters(), lr=0.01 * size)
    data = torch.randn(args.batch_size, 3, 224, 224)
    target = torch.LongTensor(args.batch_size).random_() % 1000

    def benchmark_step():
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()

    def log(s):
        if rank == 0:
            print(s, flush=True)

    log("Model: %s (DistributedDataParallel, gloo)" % args.model)
    log("Batch size: %d" % args.batch_size)
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_secs.append(args.batch_size * args.num_batches_per_iter / time)
        log("Iter #%d: %.1f img/sec per CPU" % (x, img_secs[-1]))
    mean, conf = np.mean(img_secs), 1.96 * np.std(img_secs)
    log("Img/sec per CPU: %.1f +-%.1f" % (mean, conf))
    log("Total img/sec on %d CPU(s): %.1f +-%.1f" % (size, size * mean, size * conf))
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
