#!/usr/bin/env python3
"""One peer's allreduce (float32 sum, in place) from torch, for bench/peers.

Run under hvdrun (HOROVOD_RANK, HOROVOD_SIZE), one peer per job:
  hvd        hvd.torch's allreduce_
  gloo       torch.distributed's gloo backend
  deepspeed  deepspeed.comm's CPU shared-memory allreduce (inference_all_reduce,
             the deepspeed_shm_comm op; gloo beside it for the rest)
(oneCCL's torch binding, oneccl_bind_pt, is not on PyPI: bench/oneccl_allreduce.cpp
times oneCCL itself.)

Timed exactly as hvd-bench and bench/mpi_allreduce.c time theirs
(bench/timing.h, read here): first BENCH_SETTLE_S of untimed 4-byte
allreduces; per size 2 warm-up runs, then 5 batches of bench_iters(bytes)
runs, each run refilled before and checked after, untimed; a batch's time is
the slowest rank's mean per run, the median over batches is printed (the
sizes are --sizes, not every power of two: Python's peers are slow).  Rank 0
prints CSV lines op,bytes,time_us,algbw_GBps,busbw_GBps as they do.
The torch.distributed peers meet at 127.0.0.1:$MASTER_PORT (bench/peers picks it).
"""
import argparse
import os
import re
import statistics
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
BATCHES, WARMUP = 5, 2


def timing_h():
    """BENCH_SETTLE_S and bench_iters' bytes per batch and cap, from timing.h."""
    text = open(os.path.join(HERE, "timing.h")).read()
    settle = float(re.search(r"#define BENCH_SETTLE_S ([0-9.]+)", text).group(1))
    per_batch = re.search(r"size_t k = \((\d+)u << (\d+)\)", text)
    cap = int(re.search(r"k > (\d+) \? \d+", text).group(1))
    return settle, int(per_batch.group(1)) << int(per_batch.group(2)), cap


SETTLE_S, BATCH_BYTES, MAX_ITERS = timing_h()


def bench_iters(nbytes):
    return max(1, min(MAX_ITERS, BATCH_BYTES // max(nbytes, 1)))


def torch_env(rank, size):
    """What torch.distributed's env:// rendezvous reads (MASTER_PORT: bench/peers)."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank))


def init_torch_dist(backend, rank, size):
    torch_env(rank, size)
    dist.init_process_group(backend, rank=rank, world_size=size)


def torch_max(x):
    t = torch.tensor([x], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def peer_hvd(rank, size):
    import hvd.torch as hvd
    hvd.init()
    assert hvd.rank() == rank and hvd.size() == size

    def allreduce(t):
        hvd.allreduce_(t, op=hvd.Sum, name="peers.%d" % t.numel())

    def max_(x):
        return hvd.allreduce(torch.tensor([x], dtype=torch.float64), op=hvd.Max,
                             name="peers.max").item()
    return allreduce, max_, hvd.shutdown


def peer_gloo(rank, size):
    init_torch_dist("gloo", rank, size)
    return dist.all_reduce, torch_max, dist.destroy_process_group


def peer_deepspeed(rank, size):
    import deepspeed
    import deepspeed.comm as dscomm
    # deepspeed's shm op takes every rank to be on this host only when told
    os.environ["LOCAL_SIZE"] = str(size)
    torch_env(rank, size)
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
    backend = dscomm.comm.cdb
    assert backend.shm_comm_op is not None, "deepspeed's shm op did not build"
    assert backend.shm_vector_kernel_level >= 1, "deepspeed's shm fp32 kernel needs avx2"

    def allreduce(t):
        dscomm.inference_all_reduce(t)
    return allreduce, torch_max, dist.destroy_process_group


PEERS = {"hvd": peer_hvd, "gloo": peer_gloo, "deepspeed": peer_deepspeed}


def pattern(n):
    """i % 5 for i < n, as float32: each rank's input is this + rank + 1."""
    return torch.arange(n, dtype=torch.int32).remainder_(5).to(torch.float32)


def runs(allreduce, t, base, rank, want, count):
    """Seconds spent in `count` checked allreduces of t; raises on a wrong sum."""
    spent = 0.0
    for _ in range(count):
        torch.add(base, rank + 1, out=t)
        t0 = time.perf_counter()
        allreduce(t)
        spent += time.perf_counter() - t0
        if not torch.equal(t, want):
            raise SystemExit("peers_allreduce: wrong result at %d bytes" % (4 * t.numel()))
    return spent


def settle(allreduce, max_):
    t0, one = time.perf_counter(), torch.zeros(1)
    while True:
        allreduce(one)
        if max_(float(time.perf_counter() - t0 >= SETTLE_S)):
            return


def main():
    p = argparse.ArgumentParser()
    p.add_argument("peer", choices=sorted(PEERS))
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 4096, 1 << 20, 64 << 20],
                   help="message sizes in bytes")
    args = p.parse_args()
    torch.set_num_threads(1)
    rank, size = int(os.environ["HOROVOD_RANK"]), int(os.environ["HOROVOD_SIZE"])
    allreduce, max_, close = PEERS[args.peer](rank, size)
    settle(allreduce, max_)
    if rank == 0:
        print("op,bytes,time_us,algbw_GBps,busbw_GBps", flush=True)
    for nbytes in args.sizes:
        t, base = torch.empty(nbytes // 4), pattern(nbytes // 4)
        want = base * size + size * (size + 1) // 2
        iters = bench_iters(nbytes)
        runs(allreduce, t, base, rank, want, WARMUP)
        batch = [max_(runs(allreduce, t, base, rank, want, iters) / iters)
                 for _ in range(BATCHES)]
        s = statistics.median(batch)
        algbw = nbytes / s / 1e9
        if rank == 0:
            print("allreduce,%d,%.2f,%.4f,%.4f" % (nbytes, s * 1e6, algbw,
                                                   algbw * 2 * (size - 1) / size), flush=True)
    close()


if __name__ == "__main__":
    main()
