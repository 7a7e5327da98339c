#!/usr/bin/env python3
"""hvd's allreduce of CUDA tensors against torch.distributed, in one job.

Run under hvdrun, every rank on the one GPU (see bench/torch-cuda-allreduce).

np 2 and up: hvd.torch's allreduce_ (float32, Sum, in place) of a CUDA
tensor, which runs the engine's staged path (pinned host memory, the CPU
collective), against torch.distributed's gloo backend on the same kind of
CUDA tensor (gloo stages through host memory itself).  Both live in the
same processes: torch.distributed starts from HOROVOD_RANK and HOROVOD_SIZE
(set by hvdrun) at 127.0.0.1 on a free port that rank 0 picks and shares
with hvd.broadcast_object.  For each size the two alternate (so a drift of
the machine hits both), each call after a barrier and timed until the
device is idle again; a call's time is the slowest rank's, the table shows
the median of those.  busbw = 2 (n - 1) / n * bytes / time.

np 1: the ceilings: a device-to-device copy of the same size
(Tensor.copy_), the round trip through pinned host memory that the staged
path's copies make (device to host and back, the tensor's bytes over the
time of both: what staging cannot beat however well it overlaps),
torch.distributed's NCCL backend at world size 1, and hvd.torch with
HOROVOD_GPU_OPERATIONS=NCCL (where hvd refuses that, the column says so).
At one rank busbw is 0, so this table shows algbw = bytes / time; an
in-place allreduce of one rank has nothing to move, so the NCCL columns
show the cost of a call, not a bandwidth.

--cpu runs the same code on CPU tensors of a few KiB (gloo in place of
NCCL at np 1): a check that the script works, not a measurement.
Rank 0 prints Markdown tables, with the card, PyTorch and the load average.
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from torch_bench_common import free_port, human

MIB = 1 << 20
GPU_SIZES = [1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB]
CPU_SIZES = [4 << 10, 16 << 10]

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--cpu", action="store_true",
                    help="CPU tensors of a few KiB: check the script, measure nothing")
parser.add_argument("--reps", type=int, default=0, help="timed calls per size (0: by size)")


def reps_for(nbytes):
    """Few calls for the big sizes: the whole run stays well under 3
    minutes on one GPU at np 1, 2 and 4."""
    if nbytes <= 4 * MIB:
        return 10
    if nbytes <= 16 * MIB:
        return 6
    if nbytes <= 64 * MIB:
        return 4
    return 3


def choose_gpu_path(size):
    """The knob that picks hvd's path for device tensors, set before
    hvd.init: at np 1 NCCL (the path measured there); above it the staged
    path (GLOO: NCCL takes one GPU per rank, and every rank here shares
    one).  HOROVOD_GPU_ALLREDUCE would override it for allreduces."""
    os.environ.pop("HOROVOD_GPU_ALLREDUCE", None)
    os.environ["HOROVOD_GPU_OPERATIONS"] = "NCCL" if size == 1 else "GLOO"
    return os.environ["HOROVOD_GPU_OPERATIONS"]


def why_not(exc):
    """A column's text for a path that raised exc: hvd's refusal of a path
    it does not have, or the error's first line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "not supported yet" in text:
        return "not supported yet"
    return "failed: %s" % text[:160]


class Bench:
    def __init__(self, hvd, device, reps):
        self.hvd = hvd
        self.device = device
        self.reps = reps
        self.cuda = device.type == "cuda"

    def idle(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def tensor(self, nbytes, value=1.0):
        return torch.full((nbytes // 4,), value, dtype=torch.float32, device=self.device)

    def timed(self, fn, barrier):
        """One call's seconds on this rank: from a common start (barrier)
        until the device has finished what it queued."""
        self.idle()
        barrier()
        t0 = time.perf_counter()
        fn()
        self.idle()
        return time.perf_counter() - t0

    def slowest(self, times):
        """Per call, the slowest rank's time (lists of equal length on every
        rank)."""
        return [max(ts) for ts in zip(*self.hvd.allgather_object(times))]

    def agree(self, why):
        """{column: why it cannot run on this rank, or None} -> the same on
        every rank: a column that failed anywhere runs nowhere (a rank
        going on alone would wait for the others forever)."""
        every = self.hvd.allgather_object(why)
        return {col: next((w[col] for w in every if w[col]), None) for col in why}

    def run(self, nbytes, calls, barrier):
        """calls: {column: (warm-up check, timed call)}.  The warm-up runs
        once and checks the result (a path that runs but computes nonsense
        must not be timed); then the columns alternate.  Returns {column:
        median seconds, or why there is none}."""
        start = time.perf_counter()
        why = {}
        for col, (check, _) in calls.items():
            try:
                check()
                why[col] = None
            except (RuntimeError, ValueError) as e:  # HorovodInternalError is a RuntimeError
                why[col] = why_not(e)
        why = self.agree(why)
        times = {col: [] for col in calls if not why[col]}
        for _ in range(self.reps or reps_for(nbytes)):
            for col in times:
                times[col].append(self.timed(calls[col][1], barrier))
        out = dict(why)
        for col in times:
            out[col] = statistics.median(self.slowest(times[col]))
        if self.hvd.rank() == 0:  # progress, for a run that is cut off
            print("torch_cuda_allreduce: np %d, %s done in %.1f s"
                  % (self.hvd.size(), human(nbytes), time.perf_counter() - start),
                  file=sys.stderr, flush=True)
        return out


def gbps(nbytes, t, factor=1.0):
    return factor * nbytes / t / 1e9


def ms(t):
    return t if isinstance(t, str) else "%.3f" % (t * 1e3)


def cell(nbytes, t, factor=1.0):
    return t if isinstance(t, str) else "%.2f" % gbps(nbytes, t, factor)


def ratio(a, b):
    """a / b as rates from times: b's time over a's."""
    if isinstance(a, str) or isinstance(b, str):
        return "-"
    return "%.2f" % (b / a)


def allreduce_check(fn, t, expect):
    """fn(t) in place, then t must hold expect everywhere (small integers:
    exact in float32)."""
    def check():
        fn(t)
        if not bool((t == expect).all()):
            raise RuntimeError("wrong result: %s, expected %s everywhere"
                               % (t.flatten()[:4].tolist(), expect))
    return check


def staged_table(bench, sizes, hvd, size):
    """np 2 and up: hvd's staged allreduce against gloo's, both on the
    device's tensors."""
    rank = hvd.rank()
    expect = float(size * (size + 1) // 2)
    factor = 2.0 * (size - 1) / size
    rows = []
    for nbytes in sizes:
        a = bench.tensor(nbytes, rank + 1)
        b = bench.tensor(nbytes, rank + 1)
        name = "bench.cuda.%d" % nbytes

        def hvd_ar(t, name=name):
            hvd.allreduce_(t, op=hvd.Sum, name=name)

        calls = {
            "hvd": (allreduce_check(hvd_ar, a, expect), lambda: hvd_ar(a)),
            "gloo": (allreduce_check(dist.all_reduce, b, expect), lambda: dist.all_reduce(b)),
        }
        rows.append((nbytes, bench.run(nbytes, calls, dist.barrier)))
        del a, b
    if rank != 0:
        return
    print("| size | hvd (ms) | gloo (ms) | hvd busbw (GB/s) | gloo busbw (GB/s) | hvd/gloo |")
    print("|---:|---:|---:|---:|---:|---:|")
    for nbytes, r in rows:
        h, g = r["hvd"], r["gloo"]
        print("| %s | %s | %s | %s | %s | %s |" % (
            human(nbytes), ms(h), ms(g), cell(nbytes, h, factor), cell(nbytes, g, factor),
            ratio(h, g)))


def ceiling_table(bench, sizes, hvd, backend):
    """np 1: a device-to-device copy, torch.distributed (NCCL; gloo with
    --cpu) and hvd with HOROVOD_GPU_OPERATIONS=NCCL, as algbw."""
    rows = []
    for nbytes in sizes:
        src = bench.tensor(nbytes, 1.0)
        dst = bench.tensor(nbytes, 0.0)
        c = bench.tensor(nbytes, 1.0)
        h = bench.tensor(nbytes, 1.0)
        host = torch.empty(nbytes // 4, dtype=torch.float32, pin_memory=bench.cuda)
        name = "bench.nccl.%d" % nbytes

        def round_trip():
            host.copy_(src, non_blocking=True)
            dst.copy_(host, non_blocking=True)

        def round_trip_check():
            dst.fill_(0.0)
            round_trip()
            copy_check()

        def copy_check():
            dst.copy_(src)
            if not bool((dst == 1.0).all()):
                raise RuntimeError("wrong copy")

        def hvd_ar(t, name=name):
            hvd.allreduce_(t, op=hvd.Sum, name=name)

        calls = {
            "copy": (copy_check, lambda: dst.copy_(src)),
            "host": (round_trip_check, round_trip),
            "torch": (allreduce_check(dist.all_reduce, c, 1.0), lambda: dist.all_reduce(c)),
            "hvd": (allreduce_check(hvd_ar, h, 1.0), lambda: hvd_ar(h)),
        }
        rows.append((nbytes, bench.run(nbytes, calls, lambda: None)))
        del src, dst, c, h, host
    print("| size | copy (ms) | copy (GB/s) | via host (GB/s) | torch %s (GB/s) "
          "| hvd NCCL (GB/s) | torch %s/copy | hvd NCCL/copy |" % (backend, backend))
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nbytes, r in rows:
        cp, t, h = r["copy"], r["torch"], r["hvd"]
        print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            human(nbytes), ms(cp), cell(nbytes, cp), cell(nbytes, r["host"]), cell(nbytes, t),
            cell(nbytes, h), ratio(t, cp), ratio(h, cp)))


def describe(device, size, path, cpu):
    if cpu:
        what = "CPU tensors (--cpu: a check of the script, not a GPU measurement)"
    else:
        what = "%s (%d GPU(s) visible, every rank on cuda:%d)" % (
            torch.cuda.get_device_name(device), torch.cuda.device_count(), device.index)
    return ("np %d, %s; PyTorch %s, CUDA %s; HOROVOD_GPU_OPERATIONS=%s; float32, op sum, "
            "in place; %d cores; median of the slowest rank per call"
            % (size, what, torch.__version__, torch.version.cuda, path, os.cpu_count()))


def main():
    args = parser.parse_args()
    size = int(os.environ.get("HOROVOD_SIZE", "1"))
    rank = int(os.environ.get("HOROVOD_RANK", "0"))
    if not args.cpu and not torch.cuda.is_available():
        raise SystemExit("torch_cuda_allreduce.py: no CUDA device (PyTorch %s, CUDA %s); "
                         "--cpu runs the script on CPU tensors" % (torch.__version__,
                                                                   torch.version.cuda))
    path = choose_gpu_path(size)
    import hvd.torch as hvd  # after the knob: hvd may read it at init

    torch.set_num_threads(1)
    load_before = os.getloadavg()
    hvd.init()
    assert (rank, size) == (hvd.rank(), hvd.size()), "HOROVOD_RANK/SIZE disagree with hvd"
    if args.cpu:
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    bench = Bench(hvd, device, args.reps)
    sizes = CPU_SIZES if args.cpu else GPU_SIZES

    # a hung collective fails in a minute, not torch's default half hour
    timeout = datetime.timedelta(seconds=60)
    if size == 1:
        backend = "gloo" if args.cpu else "nccl"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                timeout=timeout)
    else:
        port = hvd.broadcast_object(free_port() if rank == 0 else None, root_rank=0,
                                    name="gloo.port")
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                                rank=rank, world_size=size, timeout=timeout)
    if rank == 0:
        print(describe(device, size, path, args.cpu), flush=True)
        print()
    if size == 1:
        ceiling_table(bench, sizes, hvd, backend)
    else:
        staged_table(bench, sizes, hvd, size)
    if rank == 0:
        print()
        print("load average (1, 5, 15 min): %s before, %s after" % (
            " ".join("%.2f" % x for x in load_before),
            " ".join("%.2f" % x for x in os.getloadavg())))
        print(flush=True)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
