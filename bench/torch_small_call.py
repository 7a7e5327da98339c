"""Per-call microseconds of hvd.torch's allreduce forms on one small CPU
tensor (torch.ones(2)) at np 1, on the fast path (python/_C/fast.c) and
on the general path (mpi_ops._fast_enabled = False) in the same process,
and torch's add_ on the same tensor for scale (a build without the fast
path: its path only, as "before:").  Run by
bench/torch-small-call under hvdrun -np 1; prints "form,us_per_call"
lines: the median over BATCHES batches of CALLS calls, after one
untimed batch."""
import sys
import time

import torch

import hvd.torch as hvd
from hvd.torch import mpi_ops


def per_call_us(fn, calls, batches):
    def batch():
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls * 1e6
    batch()  # untimed
    return sorted(batch() for _ in range(batches))[batches // 2]


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    batches = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    torch.set_num_threads(1)
    hvd.init()
    t = torch.ones(2)
    forms = [("allreduce_", lambda: hvd.allreduce_(t)),
             ("allreduce", lambda: hvd.allreduce(t)),
             ("allreduce_async_+synchronize", lambda: hvd.synchronize(hvd.allreduce_async_(t)))]
    paths = (("fast", True), ("general", False))
    if not hasattr(mpi_ops, "_fast_enabled"):  # a build from before the fast path
        paths = (("before:", False),)
    for path, fast in paths:
        mpi_ops._fast_enabled = fast
        for form, fn in forms:
            print("%s %s,%.2f" % (path, form, per_call_us(fn, calls, batches)), flush=True)
    mpi_ops._fast_enabled = True
    if len(paths) == 1:
        return
    print("torch add_,%.2f" % per_call_us(lambda: t.add_(1), calls, batches), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
