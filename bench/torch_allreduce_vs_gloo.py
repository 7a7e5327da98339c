#!/usr/bin/env python3
"""hvd.torch allreduce vs torch.distributed's gloo backend, in one job.

Run under hvdrun (see bench/torch-allreduce-vs-gloo).  Both libraries live in
the same processes: torch.distributed is initialized from HOROVOD_RANK and
HOROVOD_SIZE (set by hvdrun) at 127.0.0.1 on a free port that rank 0 picks
and shares with hvd.broadcast_object.  For each size the two are timed
alternately (so drifts of this shared machine hit both), each call after a
barrier, in place, op sum.  A call's time is the slowest rank's; the table
shows medians (with --loop N, of N calls back to back, per call).  Rank 0
prints a Markdown table.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

from torch_bench_common import free_port, human

import hvd.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--min-bytes", type=int, default=4 << 10)
parser.add_argument("--max-bytes", type=int, default=64 << 20)
parser.add_argument("--reps", type=int, default=0, help="repetitions per size (0: by size)")
parser.add_argument("--loop", type=int, default=1,
                    help="calls back to back per timing (a loop of small calls, as metric "
                         "averaging makes); the time shown is per call")


def reps_for(nbytes):
    if nbytes <= 1 << 20:
        return 30
    if nbytes <= 4 << 20:
        return 12
    if nbytes <= 16 << 20:
        return 6
    return 4


def main():
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    size = int(os.environ.get("HOROVOD_SIZE", "1"))
    assert rank == hvd.rank() and size == hvd.size()
    port = hvd.broadcast_object(free_port() if rank == 0 else None, root_rank=0,
                                name="gloo.port")
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=size)

    def timed(fn):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.loop):
            fn()
        return (time.perf_counter() - t0) / args.loop

    rows = []
    nbytes = args.min_bytes
    while nbytes <= args.max_bytes:
        n = nbytes // 4
        a = torch.ones(n)
        b = torch.ones(n)
        name = "bench.%d" % nbytes
        # one untimed call of each (connections, buffers)
        hvd.allreduce_(a, op=hvd.Sum, name=name)
        dist.all_reduce(b)
        th, tg = [], []
        for _ in range(args.reps or reps_for(nbytes)):
            th.append(timed(lambda: hvd.allreduce_(a, op=hvd.Sum, name=name)))
            tg.append(timed(lambda: dist.all_reduce(b)))
        # the slowest rank's time for each call
        allh = hvd.allgather_object(th)
        allg = hvd.allgather_object(tg)
        th = [max(ts) for ts in zip(*allh)]
        tg = [max(ts) for ts in zip(*allg)]
        rows.append((nbytes, statistics.median(th), statistics.median(tg)))
        nbytes *= 4

    if rank == 0:
        print("np %d, float32, op sum, in place, %d cores, median of the slowest rank per call%s"
              % (size, os.cpu_count(),
                 ", %d calls back to back per timing" % args.loop if args.loop > 1 else ""))
        print()
        print("| size | hvd (ms) | gloo (ms) | hvd/gloo |")
        print("|---:|---:|---:|---:|")
        for nb, h, g in rows:
            print("| %s | %.3f | %.3f | %.2f |" % (human(nb), h * 1e3, g * 1e3, h / g))
        print(flush=True)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
